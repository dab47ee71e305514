//! Vectorizable f32 transcendentals: Cephes-style range reduction plus polynomials (their
//! constants in `cpu::approx`), written once for one lane or four. Their error against f64 is
//! measured by the `math` tests (max relative error over the whole f32 range, including inf, NaN
//! and large negatives).

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{InstBuilder, Value, types};

use super::simd::Simd;
use crate::cpu::approx::{
    EXP_MAX, EXP_MIN, EXP_POLY, GELU_CUBIC, LN2_HI, LN2_LO, LOG_POLY, SQRT_2_OVER_PI, TANH_POLY, TANH_SMALL,
};

/// `e^x`: exact 0 below the subnormal range, inf above `ln(f32::MAX)`, NaN kept.
pub fn exp(s: &mut Simd, x: Value) -> Value {
    // Clamp by compare and select (NaN stays NaN); cranelift's NaN-propagating fmax/fmin cost
    // several instructions each on x86.
    let lo = s.fc(EXP_MIN);
    let hi = s.fc(EXP_MAX);
    let below = s.fcmp(FloatCC::LessThan, x, lo);
    let x = s.sel(below, lo, x);
    let above = s.fcmp(FloatCC::GreaterThan, x, hi);
    let x = s.sel(above, hi, x);
    let log2e = s.fc(std::f32::consts::LOG2_E);
    let t = s.b.ins().fmul(x, log2e);
    let n = s.b.ins().nearest(t);
    let neg_n = s.b.ins().fneg(n);
    let r = s.mul_add_c(neg_n, LN2_HI, x);
    let r = s.mul_add_c(neg_n, LN2_LO, r);
    let p = s.horner(r, &EXP_POLY);
    let r2 = s.b.ins().fmul(r, r);
    let y = s.mul_add(p, r2, r);
    let one = s.fc(1.0);
    let y = s.b.ins().fadd(y, one);
    // Scale by 2^n in two steps so that both factors are normal numbers (n is in [-150, 128]).
    // `n` is integral and within [-150, 128], or NaN (then `y` is NaN and the scale does not
    // matter): the plain truncating conversion suffices for vectors.
    let ni = if s.vector { s.b.ins().x86_cvtt2dq(types::I32X4, n) } else { s.b.ins().fcvt_to_sint_sat(types::I32, n) };
    let n1 = s.sshr(ni, 1);
    let n2 = s.b.ins().isub(ni, n1);
    let s1 = pow2i(s, n1);
    let s2 = pow2i(s, n2);
    let y = s.b.ins().fmul(y, s1);
    s.b.ins().fmul(y, s2)
}

/// `2^n` for integer lanes `n` in the normal exponent range.
fn pow2i(s: &mut Simd, n: Value) -> Value {
    let bias = s.ic(127);
    let e = s.b.ins().iadd(n, bias);
    let bits = s.shl(e, 23);
    s.as_float(bits)
}

/// Natural logarithm: NaN below 0 and for NaN, -inf at ±0, inf at inf; subnormals handled.
pub fn log(s: &mut Simd, x: Value) -> Value {
    let min_normal = s.fc(f32::MIN_POSITIVE);
    let is_sub = s.fcmp(FloatCC::LessThan, x, min_normal);
    let scale = s.fc(8_388_608.0);
    let scaled = s.b.ins().fmul(x, scale);
    let xs = s.sel(is_sub, scaled, x);
    let u = s.as_int(xs);
    let e = s.ushr(u, 23);
    let byte = s.ic(0xff);
    let e = s.b.ins().band(e, byte);
    let bias = s.ic(126);
    let e = s.b.ins().isub(e, bias);
    let (sub_adj, zero) = (s.ic(23), s.ic(0));
    let adj = s.sel(is_sub, sub_adj, zero);
    let e = s.b.ins().isub(e, adj);
    let mant_mask = s.ic(0x007f_ffff);
    let m = s.b.ins().band(u, mant_mask);
    let half_bits = s.ic(0x3f00_0000);
    let m = s.b.ins().bor(m, half_bits);
    let m = s.as_float(m);
    let sqrt_half = s.fc(std::f32::consts::FRAC_1_SQRT_2);
    let small = s.fcmp(FloatCC::LessThan, m, sqrt_half);
    let one_i = s.ic(1);
    let dec = s.sel(small, one_i, zero);
    let e = s.b.ins().isub(e, dec);
    let m2 = s.b.ins().fadd(m, m);
    let m = s.sel(small, m2, m);
    let one = s.fc(1.0);
    let m = s.b.ins().fsub(m, one);
    let fty = s.fty();
    let ef = s.b.ins().fcvt_from_sint(fty, e);
    let z = s.b.ins().fmul(m, m);
    let p = s.horner(m, &LOG_POLY);
    let mz = s.b.ins().fmul(m, z);
    let y = s.b.ins().fmul(mz, p);
    let y = s.mul_add_c(ef, LN2_LO, y);
    let y = s.mul_add_c(z, -0.5, y);
    let r = s.b.ins().fadd(m, y);
    let r = s.mul_add_c(ef, LN2_HI, r);
    let inf = s.fc(f32::INFINITY);
    let is_inf = s.fcmp(FloatCC::Equal, x, inf);
    let r = s.sel(is_inf, inf, r);
    let fzero = s.fc(0.0);
    let is_zero = s.fcmp(FloatCC::Equal, x, fzero);
    let neg_inf = s.fc(f32::NEG_INFINITY);
    let r = s.sel(is_zero, neg_inf, r);
    let bad = s.fcmp(FloatCC::UnorderedOrLessThan, x, fzero);
    let nan = s.fc(f32::NAN);
    s.sel(bad, nan, r)
}

/// Hyperbolic tangent: a polynomial below |x| = 0.625, `1 - 2 / (e^2|x| + 1)` above, with the
/// sign of x (so `tanh(-0) = -0`).
pub fn tanh(s: &mut Simd, x: Value) -> Value {
    let z = s.b.ins().fmul(x, x);
    let p = s.horner(z, &TANH_POLY);
    let pz = s.b.ins().fmul(p, z);
    let small = s.mul_add(pz, x, x);
    let ax = s.b.ins().fabs(x);
    let two_ax = s.b.ins().fadd(ax, ax);
    let e = exp(s, two_ax);
    let one = s.fc(1.0);
    let two = s.fc(2.0);
    let e1 = s.b.ins().fadd(e, one);
    let q = s.b.ins().fdiv(two, e1);
    let big = s.b.ins().fsub(one, q);
    let limit = s.fc(TANH_SMALL);
    let is_small = s.fcmp(FloatCC::LessThan, ax, limit);
    let r = s.sel(is_small, small, big);
    // The sign of x on either range, by bits (cranelift has no vector `fcopysign` on x86): the
    // polynomial alone turns -0 into +0 (`-0·-0 + -0`), which a later division or rsqrt would
    // make an infinity of the wrong sign.
    let magnitude = s.b.ins().fabs(r);
    let r_bits = s.as_int(magnitude);
    let x_bits = s.as_int(x);
    let sign_mask = s.ic(i32::MIN);
    let sign = s.b.ins().band(x_bits, sign_mask);
    let r_bits = s.b.ins().bor(r_bits, sign);
    s.as_float(r_bits)
}

/// `1 / (1 + e^-x)`, as `e^x / (1 + e^x)` for negative `x` so that no `exp` overflows.
pub fn sigmoid(s: &mut Simd, x: Value) -> Value {
    let ax = s.b.ins().fabs(x);
    let nax = s.b.ins().fneg(ax);
    let e = exp(s, nax);
    let one = s.fc(1.0);
    let d = s.b.ins().fadd(e, one);
    let pos = s.b.ins().fdiv(one, d);
    let neg = s.b.ins().fmul(e, pos);
    let zero = s.fc(0.0);
    let is_neg = s.fcmp(FloatCC::LessThan, x, zero);
    s.sel(is_neg, neg, pos)
}

/// GELU (tanh form) as `x * sigmoid(2u)`, `u = sqrt(2/pi) (x + 0.044715 x^3)`: the same function
/// as `0.5 x (1 + tanh(u))` without its cancellation for negative `x`; `gelu(-inf) = -0`.
pub fn gelu(s: &mut Simd, x: Value) -> Value {
    let x2 = s.b.ins().fmul(x, x);
    let x3 = s.b.ins().fmul(x2, x);
    let inner = s.mul_add_c(x3, GELU_CUBIC, x);
    let k = s.fc(2.0 * SQRT_2_OVER_PI);
    let t = s.b.ins().fmul(inner, k);
    let sg = sigmoid(s, t);
    let r = s.b.ins().fmul(x, sg);
    let neg_inf = s.fc(f32::NEG_INFINITY);
    let is_neg_inf = s.fcmp(FloatCC::Equal, x, neg_inf);
    let neg_zero = s.fc(-0.0);
    s.sel(is_neg_inf, neg_zero, r)
}

/// `x` with its integer lanes compared to zero: used by callers that need `x != 0`.
pub fn nonzero_int(s: &mut Simd, x: Value) -> Value {
    let zero = s.ic(0);
    s.icmp(IntCC::NotEqual, x, zero)
}
