//! Where the rows of the queries, keys and values are in memory: each operand is a view of a
//! parameter (permutes, broadcasts, reshapes of the batch axes and slices, as
//! [`tcc_ir::attention::GpuAttention`] requires), so the row `r` of batch entry `b` starts at
//! `base(b) + r * ld` elements of the parameter, with the head dimension contiguous. `base` and
//! `ld` are computed once per tile by following the views ([`address`]); grouped-query heads thus
//! read the K/V head of their group without any copy.

use tcc_ir::{NodeId, Op};

use crate::ptx::error::PtxError;
use crate::ptx::expr::Em;

/// An operand's rows for one batch entry: the parameter's pointer, the element offset of row 0
/// and the elements between rows (both i64 values).
pub(crate) struct Rows {
    /// `%in{i}`.
    pub(crate) ptr: String,
    /// Offset of row 0.
    pub(crate) base: String,
    /// Row stride.
    pub(crate) ld: String,
}

/// How an operand's `[position, head]` element is indexed in its node: queries and values
/// `[.., position, head]`, the keys as the scores read them (`kᵀ`) `[.., head, position]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Orientation {
    /// Positions along the second-to-last axis.
    Rows,
    /// Positions along the last axis.
    Columns,
}

/// The rows of operand `n` for the batch entry whose multi-index over the scores' batch axes is
/// `batch` (values of the index type, broadcast to `n`'s batch axes as a product does).
pub(crate) fn rows(em: &mut Em, n: NodeId, orientation: Orientation, batch: &[String]) -> Result<Rows, PtxError> {
    let dims = em.dims(n).to_vec();
    let r = dims.len();
    let own = r - 2;
    let skip = batch.len().saturating_sub(own);
    let mut multi: Vec<String> = (0..own)
        .map(|k| if dims[k] == 1 { "0".to_string() } else { batch.get(skip + k).cloned().unwrap_or("0".into()) })
        .collect();
    let at = |multi: &mut Vec<String>, position: &str| {
        let mut m = multi.clone();
        match orientation {
            Orientation::Rows => m.extend([position.to_string(), "0".to_string()]),
            Orientation::Columns => m.extend(["0".to_string(), position.to_string()]),
        }
        m
    };
    let (param, first) = address(em, n, at(&mut multi, "0"))?;
    let (_, second) = address(em, n, at(&mut multi, "1"))?;
    let base = to_i64(em, &first);
    let next = to_i64(em, &second);
    let ld = em.f.v(format!("sub i64 {next}, {base}"));
    Ok(Rows { ptr: format!("%in{param}"), base, ld })
}

fn to_i64(em: &mut Em, v: &str) -> String {
    if em.ix == "i64" { v.to_string() } else { em.f.v(format!("zext i32 {v} to i64")) }
}

/// The parameter and flat element offset (index type) of element `multi` of the view `n`.
fn address(em: &mut Em, mut n: NodeId, mut multi: Vec<String>) -> Result<(usize, String), PtxError> {
    let g = em.g;
    loop {
        let dims = em.dims(n).to_vec();
        match &g.nodes[n.index()].op {
            Op::Input { index } => return Ok((*index, em.linearize(&multi, &dims))),
            Op::Permute { input, perm } => {
                let mut im = vec!["0".to_string(); multi.len()];
                for (i, &p) in perm.iter().enumerate() {
                    if let (Some(slot), Some(v)) = (im.get_mut(p), multi.get(i)) {
                        *slot = v.clone();
                    }
                }
                (n, multi) = (*input, im);
            }
            Op::Broadcast(a) => {
                let ad = em.dims(*a).to_vec();
                let off = dims.len().saturating_sub(ad.len());
                let am = ad
                    .iter()
                    .enumerate()
                    .map(|(i, &d)| if d == 1 { "0".to_string() } else { multi[off + i].clone() })
                    .collect();
                (n, multi) = (*a, am);
            }
            Op::Reshape(a) => {
                let flat = em.linearize(&multi, &dims);
                let ad = em.dims(*a).to_vec();
                (n, multi) = (*a, em.delinearize(&flat, &ad));
            }
            Op::Slice { input, axis, start, .. } => {
                if let Some(at) = multi.get_mut(*axis) {
                    let ix = em.ix;
                    *at = em.f.v(format!("add {ix} {at}, {start}"));
                }
                n = *input;
            }
            other => {
                return Err(PtxError::InvalidGraph {
                    kernel: g.name.clone(),
                    reason: format!("attention operand {n} is a {}, not a view of a parameter", other.kind_name()),
                });
            }
        }
    }
}
