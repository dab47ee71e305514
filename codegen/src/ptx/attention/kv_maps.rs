//! The tensor maps of a producer that copies the key and value blocks by TMA. Each operand is
//! described as a 3-D tensor of its parameter, innermost first `[head, rows, slabs]`: the head
//! dimension contiguous, the rows (positions) `ld` elements apart, and the first row of every
//! batch entry at a multiple of one slab stride. The form is found by evaluating the operand's
//! views ([`super::operands`]) at every batch entry with constants; an operand whose entries do
//! not all fit it has no map, and the producer then copies by `cp.async`.

use tcc_ir::{DType, Graph, NodeId, Op};

use super::operands::Orientation;
use crate::ptx::{TensorMapSpec, TmaBuffer};

/// The columns of one box: 64 16-bit elements, the 128-byte swizzle's width.
pub(crate) const BOX_COLS: u32 = 64;

/// One operand's tensor map and the slab stride that turns a batch entry's first-row offset into
/// its slab coordinate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KvMap {
    /// What the runtime encodes.
    pub(crate) spec: TensorMapSpec,
    /// Elements between slabs.
    pub(crate) slab_stride: u64,
}

/// The map of operand `n` (positions along `orientation`), read in boxes of [`BOX_COLS`] head
/// columns by `box_rows` positions: `None` when its layout is not of the form above, its strides
/// are not multiples of 16 bytes or its head dimension is not a multiple of [`BOX_COLS`].
// Reason: the operand, the graph's dims, the scores' batch, its extents and the box.
#[allow(clippy::too_many_arguments)]
pub(crate) fn kv_map(
    g: &Graph,
    dims: &[Vec<u64>],
    n: NodeId,
    orientation: Orientation,
    batch_dims: &[u64],
    (head, rows): (u64, u64),
    box_rows: u32,
    dtype: DType,
) -> Option<KvMap> {
    if head == 0 || !head.is_multiple_of(u64::from(BOX_COLS)) || rows == 0 {
        return None;
    }
    let own_dims = dims.get(n.index())?;
    let own = own_dims.len().checked_sub(2)?;
    let skip = batch_dims.len().saturating_sub(own);
    let entries: u64 = batch_dims.iter().product();
    let element = |batch: &[u64], position: u64, column: u64| -> Option<(usize, u64)> {
        let mut multi: Vec<u64> =
            (0..own).map(|k| if own_dims[k] == 1 { 0 } else { batch.get(skip + k).copied().unwrap_or(0) }).collect();
        match orientation {
            Orientation::Rows => multi.extend([position, column]),
            Orientation::Columns => multi.extend([column, position]),
        }
        const_address(g, dims, n, multi)
    };
    let (mut param, mut ld, mut bases) = (None, None, Vec::new());
    for b in 0..entries {
        let batch = delinearize(b, batch_dims);
        let (p, first) = element(&batch, 0, 0)?;
        let (p1, second) = element(&batch, rows.min(2) - 1, 0)?;
        let (p2, next_column) = element(&batch, 0, 1)?;
        let step = if rows > 1 { second.checked_sub(first)? } else { head };
        if p1 != p
            || p2 != p
            || next_column != first + 1
            || *param.get_or_insert(p) != p
            || *ld.get_or_insert(step) != step
        {
            return None;
        }
        bases.push(first);
    }
    let (param, ld) = (param?, ld?);
    let slab_stride = bases.iter().fold(0, |acc, &b| gcd(acc, b));
    let slab_stride = if slab_stride == 0 { rows * ld } else { slab_stride };
    let slabs = bases.iter().max().copied().unwrap_or(0) / slab_stride + 1;
    let bytes = dtype.size_bytes() as u64;
    if !(ld * bytes).is_multiple_of(16) || !(slab_stride * bytes).is_multiple_of(16) || slabs >= 1 << 31 {
        return None;
    }
    let spec = TensorMapSpec {
        buffer: TmaBuffer::Input(param),
        dtype,
        dims: vec![head, rows, slabs],
        strides: vec![ld * bytes, slab_stride * bytes],
        box_dims: vec![BOX_COLS, box_rows, 1],
    };
    Some(KvMap { spec, slab_stride })
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn delinearize(mut flat: u64, dims: &[u64]) -> Vec<u64> {
    let mut out = vec![0; dims.len()];
    for (k, &d) in dims.iter().enumerate().rev() {
        out[k] = flat % d.max(1);
        flat /= d.max(1);
    }
    out
}

fn linearize(multi: &[u64], dims: &[u64]) -> u64 {
    multi.iter().zip(dims).fold(0, |acc, (&i, &d)| acc * d + i)
}

/// The parameter and flat element offset of element `multi` of the view `n` (constants): the
/// views [`super::operands`] follows, evaluated; `None` for any other node.
fn const_address(g: &Graph, dims: &[Vec<u64>], mut n: NodeId, mut multi: Vec<u64>) -> Option<(usize, u64)> {
    loop {
        let own = dims.get(n.index())?;
        match &g.nodes.get(n.index())?.op {
            Op::Input { index } => return Some((*index, linearize(&multi, own))),
            Op::Permute { input, perm } => {
                let mut im = vec![0; multi.len()];
                for (i, &p) in perm.iter().enumerate() {
                    if let (Some(slot), Some(&v)) = (im.get_mut(p), multi.get(i)) {
                        *slot = v;
                    }
                }
                (n, multi) = (*input, im);
            }
            Op::Broadcast(a) => {
                let ad = dims.get(a.index())?;
                let off = own.len().saturating_sub(ad.len());
                let am = ad.iter().enumerate().map(|(i, &d)| if d == 1 { 0 } else { multi[off + i] }).collect();
                (n, multi) = (*a, am);
            }
            Op::Reshape(a) => {
                let flat = linearize(&multi, own);
                (n, multi) = (*a, delinearize(flat, dims.get(a.index())?));
            }
            Op::Slice { input, axis, start, .. } => {
                *multi.get_mut(*axis)? += start;
                n = *input;
            }
            _ => return None,
        }
    }
}
