//! Grouped-query heads as the operands' views show them: along the scores' last batch axis (the
//! query heads), `group` consecutive heads read the same key and value rows (the K/V head of their
//! group, written with `reshape`/`broadcast_to`), and their query rows lie at one constant stride
//! from each other. A kernel may then pack a group's queries as the rows of one block and read each
//! block of keys and values once for the whole group (flash-decoding's packing).
//!
//! Decided on concrete element offsets: every view (permute, broadcast, reshape) of a parameter is
//! followed for every batch entry, so reshapes that are not affine in the head cannot mislead it.

use crate::graph::Graph;
use crate::op::{NodeId, Op};
use crate::shape::Shape;

/// Batch entries beyond which no group is looked for (the check visits each).
const MAX_ENTRIES: u64 = 1 << 16;

/// The largest `group` (dividing the last batch axis of `domain`, the scores' shape) such that
/// the heads of each aligned group of `group` read the same key and value rows and their query
/// rows are at one stride from the group's first; 1 when there is none or a shape is not constant.
pub(super) fn head_group(g: &Graph, domain: &Shape, (queries, keys, values): (NodeId, NodeId, NodeId)) -> u32 {
    let Some(dims) = consts(domain) else { return 1 };
    let rank = dims.len();
    if rank < 3 {
        return 1;
    }
    let batch = &dims[..rank - 2];
    let heads = batch[batch.len() - 1];
    let entries: u64 = batch.iter().product();
    if entries == 0 || entries > MAX_ENTRIES || heads > u64::from(u32::MAX) {
        return 1;
    }
    (2..=heads)
        .rev()
        .filter(|k| heads.is_multiple_of(*k))
        .find(|&k| groups_hold(g, batch, k, (queries, keys, values)))
        .map_or(1, |k| k as u32)
}

/// Whether every aligned group of `group` heads shares its K/V rows and strides its query rows.
fn groups_hold(g: &Graph, batch: &[u64], group: u64, (queries, keys, values): (NodeId, NodeId, NodeId)) -> bool {
    let entries: u64 = batch.iter().product();
    let last = batch.len() - 1;
    for e in 0..entries {
        let multi = delinearize(e, batch);
        let h = multi[last];
        let mut first = multi.clone();
        first[last] = h - h % group;
        let mut second = first.clone();
        second[last] += 1;
        let at = |n: NodeId, m: &[u64], columns: bool, pos: u64| operand_offset(g, n, m, columns, pos);
        // Rows 0 and 1 (the row stride), or row 0 alone when the operand has one row.
        let rows = |n: NodeId, columns: bool| if positions(g, n, columns) > 1 { 2 } else { 1 };
        for (n, columns) in [(keys, true), (values, false)] {
            for pos in 0..rows(n, columns) {
                if at(n, &multi, columns, pos).is_none() || at(n, &multi, columns, pos) != at(n, &first, columns, pos) {
                    return false;
                }
            }
        }
        let (Some(q), Some(q0), Some(q1)) =
            (at(queries, &multi, false, 0), at(queries, &first, false, 0), at(queries, &second, false, 0))
        else {
            return false;
        };
        let same_param = q.0 == q0.0 && q.0 == q1.0;
        let stride = q1.1 as i128 - q0.1 as i128;
        let strided = q.1 as i128 - q0.1 as i128 == (h % group) as i128 * stride;
        let same_ld = rows(queries, false) == 1
            || match (at(queries, &multi, false, 1), at(queries, &first, false, 1)) {
                (Some(r1), Some(r0)) => r1.1 as i128 - q.1 as i128 == r0.1 as i128 - q0.1 as i128,
                _ => false,
            };
        if !(same_param && strided && same_ld) {
            return false;
        }
    }
    true
}

/// The positions of operand `n`: its last axis when `columns`, else its second-to-last (0 when
/// not constant).
fn positions(g: &Graph, n: NodeId, columns: bool) -> u64 {
    let dims = g.ty(n).and_then(|t| consts(&t.shape)).unwrap_or_default();
    let axis = if columns { dims.len().checked_sub(1) } else { dims.len().checked_sub(2) };
    axis.and_then(|a| dims.get(a).copied()).unwrap_or(0)
}

/// The parameter and element offset of row `pos` (column 0) of operand `n` for the batch entry
/// `batch` of the scores (broadcast to `n`'s batch axes as a product does): positions along the
/// last axis when `columns` (the keys as the scores read them), else the second-to-last.
fn operand_offset(g: &Graph, n: NodeId, batch: &[u64], columns: bool, pos: u64) -> Option<(usize, u64)> {
    let dims = consts(&g.ty(n)?.shape)?;
    let own = dims.len().checked_sub(2)?;
    let skip = batch.len().saturating_sub(own);
    let mut multi: Vec<u64> =
        (0..own).map(|k| if dims[k] == 1 { 0 } else { batch.get(skip + k).copied().unwrap_or(0) }).collect();
    if columns {
        multi.extend([0, pos]);
    } else {
        multi.extend([pos, 0]);
    }
    view_offset(g, n, multi)
}

/// The parameter and flat element offset of element `multi` of the view `n` of a parameter.
fn view_offset(g: &Graph, mut n: NodeId, mut multi: Vec<u64>) -> Option<(usize, u64)> {
    loop {
        let node = g.node(n)?;
        let dims = consts(&node.ty.shape)?;
        if multi.len() != dims.len() || multi.iter().zip(&dims).any(|(i, d)| i >= d) {
            return None;
        }
        match &node.op {
            Op::Input { index } => return Some((*index, linearize(&multi, &dims))),
            Op::Permute { input, perm } => {
                let mut im = vec![0; multi.len()];
                for (i, &p) in perm.iter().enumerate() {
                    *im.get_mut(p)? = multi[i];
                }
                (n, multi) = (*input, im);
            }
            Op::Broadcast(a) => {
                let ad = consts(&g.ty(*a)?.shape)?;
                let off = dims.len().checked_sub(ad.len())?;
                let am = ad.iter().enumerate().map(|(i, &d)| if d == 1 { 0 } else { multi[off + i] }).collect();
                (n, multi) = (*a, am);
            }
            Op::Reshape(a) => {
                let ad = consts(&g.ty(*a)?.shape)?;
                (n, multi) = (*a, delinearize(linearize(&multi, &dims), &ad));
            }
            Op::Slice { input, axis, start, .. } => {
                *multi.get_mut(*axis)? += start;
                n = *input;
            }
            _ => return None,
        }
    }
}

fn consts(s: &Shape) -> Option<Vec<u64>> {
    s.dims().iter().map(|d| d.as_const()).collect()
}

fn linearize(multi: &[u64], dims: &[u64]) -> u64 {
    multi.iter().zip(dims).fold(0, |acc, (i, d)| acc * d + i)
}

fn delinearize(mut flat: u64, dims: &[u64]) -> Vec<u64> {
    let mut out = vec![0; dims.len()];
    for k in (0..dims.len()).rev() {
        let d = dims[k].max(1);
        out[k] = flat % d;
        flat /= d;
    }
    out
}

// Reason: a test module (clippy does not see `cfg(all(test, ..))` as one).
#[cfg(all(test, feature = "testing"))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use crate::attention::GpuAttention;
    use crate::dtype::DType;
    use crate::testing::attention::AttentionCase;

    fn group_of(c: &AttentionCase) -> u32 {
        GpuAttention::find(&c.graph().unwrap()).expect("a GPU attention").group
    }

    #[test]
    fn grouped_heads_are_found_through_their_views() {
        let base = AttentionCase { dtype: DType::F16, ..AttentionCase::grouped_heads(3, 70, 64) };
        assert_eq!(group_of(&base), 2);
        // One query (decoding) and one key: no row stride to compare.
        assert_eq!(group_of(&AttentionCase { q_len: 1, ..base.clone() }), 2);
        assert_eq!(group_of(&AttentionCase { q_len: 1, kv_len: 1, heads: 8, ..base.clone() }), 4);
        assert_eq!(group_of(&AttentionCase { heads: 8, kv_heads: 2, ..base.clone() }), 4);
        assert_eq!(group_of(&AttentionCase { heads: 4, kv_heads: 1, batch: vec![], ..base.clone() }), 4);
        // Without grouping, each head reads its own K/V.
        assert_eq!(group_of(&AttentionCase { heads: 4, kv_heads: 4, ..base.clone() }), 1);
    }

    #[test]
    fn token_major_keys_and_values_are_rows_in_memory_and_grouped() {
        // K and V as projections write them, [.., T, kv_heads * d], read as [.., kv_heads, T, d].
        let base = AttentionCase { dtype: DType::BF16, token_major: true, ..AttentionCase::grouped_heads(3, 70, 64) };
        assert_eq!(group_of(&base), 2);
        assert_eq!(group_of(&AttentionCase { heads: 8, kv_heads: 2, batch: vec![], ..base.clone() }), 4);
        assert_eq!(group_of(&AttentionCase { heads: 4, kv_heads: 4, ..base.clone() }), 1);
        assert_eq!(group_of(&AttentionCase { q_len: 1, kv_len: 1, ..base.clone() }), 2);
        // Llama-3-8B's layer: 32 query heads over 8 K/V heads of 128.
        let llama = AttentionCase { heads: 32, kv_heads: 8, batch: vec![], head_dim: 128, value_dim: 128, ..base };
        assert_eq!(group_of(&llama), 4);
    }
}
