//! Per-dtype tolerances of the differential driver (derived in RELIABILITY.md) and the statistics
//! that show how much of each bound the backends actually use.

use std::collections::BTreeMap;

use tcc_ir::interp::Tensor;
use tcc_ir::testing::{Bound, Tolerance};
use tcc_ir::{BinaryOp, DType, Graph, NodeId, Op, UnaryOp};

/// Fraction of an output's elements allowed outside the bound when the program holds a
/// discontinuity (see [`has_discontinuity`]); 0 otherwise.
pub const OUTLIER_FRACTION: f64 = 0.02;

/// How much looser than [`Tolerance::default`] compiled backends are: they keep f32 inside fused
/// kernels, use polynomial transcendentals and sum in another order.
pub const BACKEND_SCALE: f64 = 4.0;

/// The bounds for the interpreter after the optimizer: the rewrites may reorder f64 arithmetic and
/// move roundings (for example, fold a cast pair), so [`Tolerance::default`].
pub fn interp_optimized(g: &Graph) -> Tolerance {
    with_outliers(Tolerance::default(), g)
}

/// The bounds for a compiled backend (CPU or GPU).
pub fn backend(g: &Graph) -> Tolerance {
    with_outliers(Tolerance::default().scaled(BACKEND_SCALE), g)
}

fn with_outliers(t: Tolerance, g: &Graph) -> Tolerance {
    Tolerance { outlier_fraction: if has_discontinuity(g) { OUTLIER_FRACTION } else { 0.0 }, ..t }
}

/// True if a last-place difference in a float value can change a result by more than any bound:
/// a comparison (a near tie flips the bool), a cast from a float to i32 or bool (rounding to the
/// nearest integer or testing for zero), or an op outside the generator's domain guards, which it
/// leaves off in one step in eight when special values are on: `log`/`sqrt`/`rsqrt` of a value
/// that may be near 0 or negative (-tiny gives NaN where +tiny gives a number or inf), `div` by
/// such a value (-inf against +inf), `pow` of a possibly negative base (NaN unless the exponent is
/// an integer: 0.99999994 against 1.0 decides), `exp` without the `min(x, 3)` bound (inf against
/// the largest finite value). Programs without one are compared with no outliers at all.
pub fn has_discontinuity(g: &Graph) -> bool {
    let node = |id: NodeId| g.nodes.get(id.index());
    // `abs(x) + c`: the generator's guard that keeps a value positive.
    let positive = |id: NodeId| {
        matches!(node(id).map(|n| &n.op), Some(Op::Binary(BinaryOp::Add, a, c))
            if matches!(node(*a).map(|n| &n.op), Some(Op::Unary(UnaryOp::Abs, _)))
                && matches!(node(*c).map(|n| &n.op), Some(Op::Constant { .. })))
    };
    // `min(x, c)`: the guard that bounds `exp`'s argument.
    let bounded = |id: NodeId| {
        matches!(node(id).map(|n| &n.op), Some(Op::Binary(BinaryOp::Min, _, c))
            if matches!(node(*c).map(|n| &n.op), Some(Op::Constant { .. })))
    };
    g.nodes.iter().any(|n| match &n.op {
        Op::Compare(..) => true,
        Op::Cast(a) => node(*a).is_some_and(|x| x.ty.dtype.is_float()) && !n.ty.dtype.is_float(),
        Op::Unary(UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt, a) => !positive(*a),
        Op::Unary(UnaryOp::Exp, a) => !bounded(*a),
        Op::Binary(BinaryOp::Div, _, b) => n.ty.dtype.is_float() && !positive(*b),
        Op::Binary(BinaryOp::Pow, a, _) => !positive(*a),
        _ => false,
    })
}

/// How many values of an output of `total` elements may be outside the bound in a program with a
/// discontinuity: [`OUTLIER_FRACTION`] of them, and at least one (a flipped comparison usually
/// changes one element, which a reduction may pass on to a small output).
pub fn allowed_outliers(total: usize) -> usize {
    // Exact for any realistic element count (below 2^53).
    ((OUTLIER_FRACTION * total as f64).floor() as usize).max(1)
}

/// The largest `|actual - expected| / (atol + rtol * |expected|)` seen per dtype, over finite pairs
/// of values, and how many values were outside their bound (allowed outliers included).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ErrorStats {
    /// Worst ratio per dtype (1.0 = exactly at the bound).
    pub worst: BTreeMap<DType, f64>,
    /// Values outside the bound per dtype.
    pub outside: BTreeMap<DType, u64>,
    /// Values compared per dtype.
    pub compared: BTreeMap<DType, u64>,
}

impl ErrorStats {
    /// Adds one comparison of `actual` against `expected` under `tol`.
    pub fn add(&mut self, expected: &[Tensor], actual: &[Tensor], tol: &Tolerance) {
        for (e, a) in expected.iter().zip(actual) {
            if e.dtype != a.dtype || e.data.len() != a.data.len() {
                continue;
            }
            let bound = tol.bound(e.dtype);
            let worst = self.worst.entry(e.dtype).or_insert(0.0);
            let outside = self.outside.entry(e.dtype).or_insert(0);
            *self.compared.entry(e.dtype).or_insert(0) += e.data.len() as u64;
            for (&x, &y) in e.data.iter().zip(&a.data) {
                if !bound.accepts(x, y) {
                    *outside += 1;
                } else if x.is_finite() && y.is_finite() {
                    *worst = worst.max(ratio(bound, x, y));
                }
            }
        }
    }

    /// Merges another set of statistics into this one.
    pub fn merge(&mut self, other: &ErrorStats) {
        for (d, w) in &other.worst {
            let e = self.worst.entry(*d).or_insert(0.0);
            *e = e.max(*w);
        }
        for (d, n) in &other.outside {
            *self.outside.entry(*d).or_insert(0) += n;
        }
        for (d, n) in &other.compared {
            *self.compared.entry(*d).or_insert(0) += n;
        }
    }
}

/// How much of `bound` the difference uses (0 for exact bounds that hold).
fn ratio(bound: Bound, expected: f64, actual: f64) -> f64 {
    let allowed = bound.atol + bound.rtol * expected.abs();
    let diff = (actual - expected).abs();
    if allowed > 0.0 {
        diff / allowed
    } else if diff == 0.0 {
        0.0
    } else {
        f64::INFINITY
    }
}
