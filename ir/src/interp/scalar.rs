//! The value of each elementwise op on one element (contract §5). Results are exact f64 values; the
//! caller rounds them to the node's dtype. `int` selects the i32 semantics (wrapping arithmetic,
//! truncating division with `x / 0 = 0`).

use crate::op::{BinaryOp, CompareOp, UnaryOp};

/// `sqrt(2 / pi)`, the constant of the tanh form of GELU.
const GELU_C: f64 = 0.797_884_560_802_865_4;

/// Converts an element of an i32 tensor (an exact integer in range) to `i32`.
fn to_i32(x: f64) -> i32 {
    // Saturating and exact for every value an i32 tensor holds.
    x as i32
}

/// Maximum propagating NaN.
pub(crate) fn max_nan(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if b > a {
        b
    } else {
        a
    }
}

/// Minimum propagating NaN.
pub(crate) fn min_nan(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if b < a {
        b
    } else {
        a
    }
}

/// One step of a max reduction: [`max_nan`], except that +0 counts as larger than -0 (IEEE
/// 754-2019 `maximum`). With it a reduction's result does not depend on the order of its
/// elements, so a backend may reduce in any order (contract §5).
pub(crate) fn reduce_max(a: f64, b: f64) -> f64 {
    if a == b && a.is_sign_negative() { b } else { max_nan(a, b) }
}

/// One step of a min reduction: [`min_nan`], except that -0 counts as smaller than +0.
pub(crate) fn reduce_min(a: f64, b: f64) -> f64 {
    if a == b && a.is_sign_positive() { b } else { min_nan(a, b) }
}

/// The tanh-form GELU, `0.5 x (1 + tanh(u))` with `u = sqrt(2/pi) (x + 0.044715 x^3)`, computed
/// as `x / (1 + exp(-2u))` (the same function): the tanh form cancels to exactly 0 in f64 for
/// `x` below about -5, where the true value is a tiny negative number (`gelu(-8)` is about
/// -3.1e-21, which f32 holds), and the compiled tiers, which use the sigmoid form, disagreed
/// downstream (`rsqrt` of it is NaN, not inf). Limits: `gelu(-inf) = -0`, `gelu(inf) = inf`.
pub(crate) fn gelu(x: f64) -> f64 {
    if x == f64::NEG_INFINITY {
        return -0.0;
    }
    x / (1.0 + (-2.0 * GELU_C * (x + 0.044_715 * x * x * x)).exp())
}

/// One element of a unary op.
pub(crate) fn unary(op: UnaryOp, int: bool, x: f64) -> f64 {
    if int {
        let v = to_i32(x);
        return f64::from(match op {
            UnaryOp::Neg => v.wrapping_neg(),
            UnaryOp::Abs => v.wrapping_abs(),
            UnaryOp::Relu => v.max(0),
            // The type rules reject the other ops on i32; compute them as floats if asked.
            _ => return unary(op, false, x),
        });
    }
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Rsqrt => 1.0 / x.sqrt(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnaryOp::Relu => {
            if x.is_nan() || x > 0.0 {
                x
            } else {
                0.0
            }
        }
        UnaryOp::Gelu => gelu(x),
    }
}

/// One element of a binary op.
pub(crate) fn binary(op: BinaryOp, int: bool, a: f64, b: f64) -> f64 {
    if int {
        let (x, y) = (to_i32(a), to_i32(b));
        return f64::from(match op {
            BinaryOp::Add => x.wrapping_add(y),
            BinaryOp::Sub => x.wrapping_sub(y),
            BinaryOp::Mul => x.wrapping_mul(y),
            BinaryOp::Div => {
                if y == 0 {
                    0
                } else {
                    x.wrapping_div(y)
                }
            }
            BinaryOp::Max => x.max(y),
            BinaryOp::Min => x.min(y),
            // The type rules reject pow on i32; compute it as floats if asked.
            BinaryOp::Pow => return binary(op, false, a, b),
        });
    }
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Max => max_nan(a, b),
        BinaryOp::Min => min_nan(a, b),
        BinaryOp::Pow => a.powf(b),
    }
}

/// One element of a comparison, as 0.0 or 1.0 (IEEE: false with NaN, except `ne`).
pub(crate) fn compare(op: CompareOp, a: f64, b: f64) -> f64 {
    let r = match op {
        CompareOp::Eq => a == b,
        CompareOp::Ne => a != b,
        CompareOp::Lt => a < b,
        CompareOp::Le => a <= b,
        CompareOp::Gt => a > b,
        CompareOp::Ge => a >= b,
    };
    if r { 1.0 } else { 0.0 }
}
