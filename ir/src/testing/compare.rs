//! Comparing a backend's outputs with the interpreter's, within per-dtype tolerances.

use crate::dtype::DType;
use crate::interp::Tensor;

/// How far one value may be from the expected one: `|actual - expected| <= atol + rtol * |expected|`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bound {
    /// Relative tolerance.
    pub rtol: f64,
    /// Absolute tolerance.
    pub atol: f64,
}

impl Bound {
    /// Exact equality.
    pub const EXACT: Bound = Bound { rtol: 0.0, atol: 0.0 };

    /// True if `actual` is close enough to `expected`: NaN matches NaN, an infinity matches only the
    /// same infinity, and finite values must be within the bound.
    pub fn accepts(&self, expected: f64, actual: f64) -> bool {
        if expected.is_nan() || actual.is_nan() {
            return expected.is_nan() && actual.is_nan();
        }
        if expected.is_infinite() || actual.is_infinite() {
            return expected == actual;
        }
        (actual - expected).abs() <= self.atol + self.rtol * expected.abs()
    }
}

/// Tolerances of every dtype, and how many values of one output may fall outside them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    /// For f32 outputs.
    pub f32: Bound,
    /// For f16 outputs.
    pub f16: Bound,
    /// For bf16 outputs.
    pub bf16: Bound,
    /// For i32 outputs.
    pub i32: Bound,
    /// For bool outputs.
    pub bool: Bound,
    /// Fraction of an output's values allowed outside the bound (0 by default). A backend that
    /// computes differently (fused f32 intermediates, approximate exp) can flip a comparison whose
    /// operands nearly tie; this lets such tests pass without loosening the bounds.
    pub outlier_fraction: f64,
}

impl Tolerance {
    /// The default bound of `dtype`: a few units in the last place of f32 and a few of f16/bf16
    /// (allowing f32 intermediates inside fused kernels), exact for i32 and bool.
    pub fn default_for(dtype: DType) -> Bound {
        match dtype {
            DType::F32 => Bound { rtol: 1e-4, atol: 1e-5 },
            DType::F16 => Bound { rtol: 1e-2, atol: 1e-3 },
            DType::BF16 => Bound { rtol: 5e-2, atol: 1e-2 },
            DType::I32 | DType::Bool => Bound::EXACT,
        }
    }

    /// Exact equality for every dtype (NaN still matches NaN).
    pub fn exact() -> Tolerance {
        Tolerance {
            f32: Bound::EXACT,
            f16: Bound::EXACT,
            bf16: Bound::EXACT,
            i32: Bound::EXACT,
            bool: Bound::EXACT,
            outlier_fraction: 0.0,
        }
    }

    /// The bound for `dtype`.
    pub fn bound(&self, dtype: DType) -> Bound {
        match dtype {
            DType::F32 => self.f32,
            DType::F16 => self.f16,
            DType::BF16 => self.bf16,
            DType::I32 => self.i32,
            DType::Bool => self.bool,
        }
    }

    /// A copy whose float bounds also allow the f32 accumulation error of sums of `terms` terms
    /// ([`crate::accuracy::accumulation_allowance`]): for kernels with long matmuls or reductions.
    pub fn with_accumulation(&self, terms: u64) -> Tolerance {
        let extra = crate::accuracy::accumulation_allowance(terms);
        let s = |b: Bound| Bound { atol: b.atol + extra, ..b };
        Tolerance { f32: s(self.f32), f16: s(self.f16), bf16: s(self.bf16), ..*self }
    }

    /// A copy with every float bound multiplied by `factor` (for long chains or fused kernels).
    pub fn scaled(&self, factor: f64) -> Tolerance {
        let s = |b: Bound| Bound { rtol: b.rtol * factor, atol: b.atol * factor };
        Tolerance { f32: s(self.f32), f16: s(self.f16), bf16: s(self.bf16), ..*self }
    }
}

impl Default for Tolerance {
    fn default() -> Tolerance {
        Tolerance {
            f32: Tolerance::default_for(DType::F32),
            f16: Tolerance::default_for(DType::F16),
            bf16: Tolerance::default_for(DType::BF16),
            i32: Tolerance::default_for(DType::I32),
            bool: Tolerance::default_for(DType::Bool),
            outlier_fraction: 0.0,
        }
    }
}

/// The first difference [`compare_outputs`] found.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Mismatch {
    /// The number of outputs differs.
    #[error("expected {expected} outputs, got {actual}")]
    Count {
        /// Expected count.
        expected: usize,
        /// Actual count.
        actual: usize,
    },
    /// An output's dtype or shape differs.
    #[error("output {output}: expected {expected_dtype}{expected_shape:?}, got {actual_dtype}{actual_shape:?}")]
    Type {
        /// Output index.
        output: usize,
        /// Expected dtype.
        expected_dtype: DType,
        /// Expected shape.
        expected_shape: Vec<usize>,
        /// Actual dtype.
        actual_dtype: DType,
        /// Actual shape.
        actual_shape: Vec<usize>,
    },
    /// An output holds a value outside the tolerance.
    #[error(
        "output {output} ({dtype}) element {index}: expected {expected}, got {actual} (bound rtol {} atol {}; {bad} of {total} elements outside it)",
        bound.rtol, bound.atol
    )]
    Value {
        /// Output index.
        output: usize,
        /// The output's dtype.
        dtype: DType,
        /// Flat (row-major) index of the first bad element.
        index: usize,
        /// Expected value.
        expected: f64,
        /// Actual value.
        actual: f64,
        /// The bound applied.
        bound: Bound,
        /// How many elements of this output are outside the bound.
        bad: usize,
        /// Element count of this output.
        total: usize,
    },
}

/// Checks `actual` against `expected` (the interpreter's outputs): same count, dtypes and shapes,
/// and every value within `tol`'s bound for its dtype (NaN equals NaN, infinities must match),
/// except at most `tol.outlier_fraction` of each output's values.
pub fn compare_outputs(expected: &[Tensor], actual: &[Tensor], tol: &Tolerance) -> Result<(), Mismatch> {
    if expected.len() != actual.len() {
        return Err(Mismatch::Count { expected: expected.len(), actual: actual.len() });
    }
    for (output, (e, a)) in expected.iter().zip(actual).enumerate() {
        if e.dtype != a.dtype || e.shape != a.shape || e.data.len() != a.data.len() {
            return Err(Mismatch::Type {
                output,
                expected_dtype: e.dtype,
                expected_shape: e.shape.clone(),
                actual_dtype: a.dtype,
                actual_shape: a.shape.clone(),
            });
        }
        let bound = tol.bound(e.dtype);
        let mut first = None;
        let mut bad = 0usize;
        for (index, (&x, &y)) in e.data.iter().zip(&a.data).enumerate() {
            if !bound.accepts(x, y) {
                bad += 1;
                first.get_or_insert((index, x, y));
            }
        }
        let total = e.data.len();
        // Exact for any realistic element count (below 2^53).
        let allowed = (tol.outlier_fraction.clamp(0.0, 1.0) * total as f64).floor() as usize;
        if let Some((index, expected, actual)) = first
            && bad > allowed
        {
            return Err(Mismatch::Value { output, dtype: e.dtype, index, expected, actual, bound, bad, total });
        }
    }
    Ok(())
}
