//! Strided iteration: walking an output shape in row-major order while tracking, for each operand,
//! the offset of the element that lands there (broadcast axes have stride 0).

use super::tensor::contiguous_strides;

/// Walks every multi-index of `shape` in row-major order, keeping one strided offset per operand.
///
/// Use: `for _ in 0..numel { let offs = w.offsets(); ...; w.advance(); }`.
pub(crate) struct Walker {
    shape: Vec<usize>,
    strides: Vec<Vec<usize>>,
    index: Vec<usize>,
    offsets: Vec<usize>,
}

impl Walker {
    /// A walker over `shape`; operand `i` starts at `bases[i]` and moves by `strides[i][axis]`.
    pub(crate) fn new(shape: &[usize], strides: Vec<Vec<usize>>, bases: Vec<usize>) -> Walker {
        Walker { shape: shape.to_vec(), strides, index: vec![0; shape.len()], offsets: bases }
    }

    /// The current offset of every operand.
    pub(crate) fn offsets(&self) -> &[usize] {
        &self.offsets
    }

    /// Moves to the next multi-index (wrapping to the start after the last one).
    pub(crate) fn advance(&mut self) {
        for ax in (0..self.shape.len()).rev() {
            let size = self.shape[ax];
            if self.index[ax] + 1 < size {
                self.index[ax] += 1;
                for (off, st) in self.offsets.iter_mut().zip(&self.strides) {
                    *off += st[ax];
                }
                return;
            }
            let back = size.saturating_sub(1);
            for (off, st) in self.offsets.iter_mut().zip(&self.strides) {
                *off -= st[ax] * back;
            }
            self.index[ax] = 0;
        }
    }
}

/// Strides that read a contiguous tensor of shape `from` at each index of `to` under numpy
/// broadcasting (axes aligned on the right, size-1 and missing axes read with stride 0); `None` if
/// `from` does not broadcast to `to`.
pub(crate) fn broadcast_strides(from: &[usize], to: &[usize]) -> Option<Vec<usize>> {
    broadcast_strides_with(from, &contiguous_strides(from), to)
}

/// Like [`broadcast_strides`], for an operand whose own strides are `from_strides`.
pub(crate) fn broadcast_strides_with(from: &[usize], from_strides: &[usize], to: &[usize]) -> Option<Vec<usize>> {
    let offset = to.len().checked_sub(from.len())?;
    let mut out = vec![0usize; to.len()];
    for (i, (&d, &s)) in from.iter().zip(from_strides).enumerate() {
        let t = *to.get(offset + i)?;
        if d == t && d != 1 {
            out[offset + i] = s;
        } else if d != 1 && d != t {
            return None;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walker_visits_broadcast_offsets_in_row_major_order() {
        let to = [2, 3];
        let s = broadcast_strides(&[3], &to).unwrap();
        let c = broadcast_strides(&[2, 1], &to).unwrap();
        let mut w = Walker::new(&to, vec![s, c], vec![0, 0]);
        let mut seen = Vec::new();
        for _ in 0..6 {
            seen.push(w.offsets().to_vec());
            w.advance();
        }
        assert_eq!(seen, vec![vec![0, 0], vec![1, 0], vec![2, 0], vec![0, 1], vec![1, 1], vec![2, 1]]);
        assert_eq!(w.offsets(), &[0, 0]);
    }

    #[test]
    fn incompatible_shapes_have_no_broadcast_strides() {
        assert_eq!(broadcast_strides(&[3], &[2, 4]), None);
        assert_eq!(broadcast_strides(&[1, 2, 3], &[2, 3]), None);
        assert_eq!(broadcast_strides(&[], &[2, 3]), Some(vec![0, 0]));
    }
}
