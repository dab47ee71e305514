//! Concrete tensors: the values the interpreter reads, computes and returns.

use crate::dtype::DType;
use crate::limits;

use super::InterpError;

/// A concrete tensor: row-major `f64` values, each representable in `dtype` (bool is 0.0 or 1.0).
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// Element type.
    pub dtype: DType,
    /// Concrete dimensions.
    pub shape: Vec<usize>,
    /// Values in row-major order; `data.len()` is the product of `shape`.
    pub data: Vec<f64>,
}

impl Tensor {
    /// A tensor of `shape` holding `data` rounded to `dtype`; fails if the lengths disagree.
    pub fn new(dtype: DType, shape: Vec<usize>, mut data: Vec<f64>) -> Result<Tensor, InterpError> {
        let expected = numel_of(&shape, "tensor")?;
        if data.len() != expected {
            return Err(InterpError::DataLength { what: "tensor".into(), shape, expected, got: data.len() });
        }
        for v in &mut data {
            *v = dtype.round(*v);
        }
        Ok(Tensor { dtype, shape, data })
    }

    /// A scalar (rank 0) holding `value` rounded to `dtype`.
    pub fn scalar(dtype: DType, value: f64) -> Tensor {
        Tensor { dtype, shape: Vec::new(), data: vec![dtype.round(value)] }
    }

    /// A tensor of `shape` with every element `value` rounded to `dtype`.
    pub fn full(dtype: DType, shape: Vec<usize>, value: f64) -> Result<Tensor, InterpError> {
        let n = numel_of(&shape, "tensor")?;
        Ok(Tensor { dtype, shape, data: vec![dtype.round(value); n] })
    }

    /// Number of elements (the product of the shape; 1 for a scalar).
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Number of axes.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The element at a multi-index, or `None` if the index is out of range.
    pub fn get(&self, index: &[usize]) -> Option<f64> {
        if index.len() != self.shape.len() {
            return None;
        }
        let mut flat = 0usize;
        for (&i, &d) in index.iter().zip(&self.shape) {
            if i >= d {
                return None;
            }
            flat = flat * d + i;
        }
        self.data.get(flat).copied()
    }
}

/// The element count of `shape`, or an error naming `what` if it reaches the element limit.
pub(crate) fn numel_of(shape: &[usize], what: &str) -> Result<usize, InterpError> {
    let too_many = || InterpError::TooManyElements { what: what.to_string(), shape: shape.to_vec() };
    if shape.contains(&0) {
        return Ok(0);
    }
    let mut n: u64 = 1;
    for &d in shape {
        let d = u64::try_from(d).map_err(|_| too_many())?;
        n = n.checked_mul(d).ok_or_else(too_many)?;
    }
    if n >= limits::MAX_ELEMENTS {
        return Err(too_many());
    }
    usize::try_from(n).map_err(|_| too_many())
}

/// Row-major (contiguous) strides of `shape`, in elements.
pub(crate) fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![0usize; shape.len()];
    let mut acc = 1usize;
    for (s, &d) in strides.iter_mut().zip(shape).rev() {
        *s = acc;
        acc = acc.saturating_mul(d);
    }
    strides
}
