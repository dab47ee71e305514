//! f32 transcendentals for any lane count: Cephes-style range reduction plus polynomials (the
//! same approximations as the cranelift tier, constants in `cpu::approx`, so both tiers
//! share their measured error bounds).

use crate::cpu::approx::{
    EXP_MAX, EXP_MIN, EXP_POLY, GELU_CUBIC, LN2_HI, LN2_LO, LOG_POLY, SQRT_2_OVER_PI, TANH_POLY, TANH_SMALL,
};
use crate::llvm_text::{Elem, FPred, TypedFunc, V};

/// `e^x`: exact 0 below the subnormal range, inf above `ln(f32::MAX)`, NaN kept.
pub fn exp(f: &mut TypedFunc, x: &V) -> V {
    let n = x.ty.lanes;
    let lo = f.fc(n, EXP_MIN);
    let hi = f.fc(n, EXP_MAX);
    // Clamp by compare and select: NaN stays NaN.
    let below = f.fcmp(FPred::Olt, x, &lo);
    let x = f.select(&below, &lo, x);
    let above = f.fcmp(FPred::Ogt, &x, &hi);
    let x = f.select(&above, &hi, &x);
    let t = f.fmul(&x, &f.fc(n, std::f32::consts::LOG2_E));
    let k = f.intr("roundeven", t.ty, &[&t]);
    let neg_k = f.fneg(&k);
    let r = f.mul_add_c(&neg_k, LN2_HI, &x);
    let r = f.mul_add_c(&neg_k, LN2_LO, &r);
    let p = f.horner(&r, &EXP_POLY);
    let r2 = f.fmul(&r, &r);
    let y = f.mul_add(&p, &r2, &r);
    let y = f.fadd(&y, &f.fc(n, 1.0));
    // Scale by 2^k in two steps so that both factors are normal numbers (k is in [-150, 128]).
    // A NaN `k` (then `y` is NaN too) becomes 0 first: `fptosi` of NaN would be poison.
    let is_nan = f.fcmp(FPred::Uno, &k, &k);
    let k = f.select(&is_nan, &f.fc(n, 0.0), &k);
    let ki = f.conv("fptosi", &k, k.ty.with(Elem::I32));
    let k1 = f.ashr(&ki, 1);
    let k2 = f.sub(&ki, &k1);
    let s1 = pow2i(f, &k1);
    let s2 = pow2i(f, &k2);
    let y = f.fmul(&y, &s1);
    f.fmul(&y, &s2)
}

/// `2^k` for integer lanes `k` in the normal exponent range.
fn pow2i(f: &mut TypedFunc, k: &V) -> V {
    let e = f.add(k, &f.ic(Elem::I32, k.ty.lanes, 127));
    let bits = f.shl(&e, 23);
    f.bitcast(&bits, Elem::F32)
}

/// Natural logarithm: NaN below 0 and for NaN, -inf at ±0, inf at inf; subnormals handled.
pub fn log(f: &mut TypedFunc, x: &V) -> V {
    let n = x.ty.lanes;
    let ic = |f: &TypedFunc, v: i64| f.ic(Elem::I32, n, v);
    let is_sub = f.fcmp(FPred::Olt, x, &f.fc(n, f32::MIN_POSITIVE));
    let scaled = f.fmul(x, &f.fc(n, 8_388_608.0));
    let xs = f.select(&is_sub, &scaled, x);
    let u = f.bitcast(&xs, Elem::I32);
    let e = f.lshr(&u, 23);
    let e = f.and(&e, &ic(f, 0xff));
    let e = f.sub(&e, &ic(f, 126));
    let adj = f.select(&is_sub, &ic(f, 23), &ic(f, 0));
    let e = f.sub(&e, &adj);
    let m = f.and(&u, &ic(f, 0x007f_ffff));
    let m = f.or(&m, &ic(f, 0x3f00_0000));
    let m = f.bitcast(&m, Elem::F32);
    let small = f.fcmp(FPred::Olt, &m, &f.fc(n, std::f32::consts::FRAC_1_SQRT_2));
    let dec = f.select(&small, &ic(f, 1), &ic(f, 0));
    let e = f.sub(&e, &dec);
    let m2 = f.fadd(&m, &m);
    let m = f.select(&small, &m2, &m);
    let m = f.fsub(&m, &f.fc(n, 1.0));
    let ef = f.conv("sitofp", &e, e.ty.with(Elem::F32));
    let z = f.fmul(&m, &m);
    let p = f.horner(&m, &LOG_POLY);
    let mz = f.fmul(&m, &z);
    let y = f.fmul(&mz, &p);
    let y = f.mul_add_c(&ef, LN2_LO, &y);
    let y = f.mul_add_c(&z, -0.5, &y);
    let r = f.fadd(&m, &y);
    let r = f.mul_add_c(&ef, LN2_HI, &r);
    let inf = f.fc(n, f32::INFINITY);
    let is_inf = f.fcmp(FPred::Oeq, x, &inf);
    let r = f.select(&is_inf, &inf, &r);
    let zero = f.fc(n, 0.0);
    let is_zero = f.fcmp(FPred::Oeq, x, &zero);
    let r = f.select(&is_zero, &f.fc(n, f32::NEG_INFINITY), &r);
    let bad = f.fcmp(FPred::Ult, x, &zero);
    f.select(&bad, &f.fc(n, f32::NAN), &r)
}

/// Hyperbolic tangent: a polynomial below |x| = 0.625, `1 - 2 / (e^2|x| + 1)` above, with the
/// sign of x (so `tanh(-0) = -0`).
pub fn tanh(f: &mut TypedFunc, x: &V) -> V {
    let n = x.ty.lanes;
    let z = f.fmul(x, x);
    let p = f.horner(&z, &TANH_POLY);
    let pz = f.fmul(&p, &z);
    let small = f.mul_add(&pz, x, x);
    let ax = f.intr("fabs", x.ty, &[x]);
    let two_ax = f.fadd(&ax, &ax);
    let e = exp(f, &two_ax);
    let e1 = f.fadd(&e, &f.fc(n, 1.0));
    let q = f.fdiv(&f.fc(n, 2.0), &e1);
    let big = f.fsub(&f.fc(n, 1.0), &q);
    let is_small = f.fcmp(FPred::Olt, &ax, &f.fc(n, TANH_SMALL));
    let r = f.select(&is_small, &small, &big);
    // The sign of x on either range: the polynomial alone turns -0 into +0 (`-0·-0 + -0`).
    f.intr("copysign", x.ty, &[&r, x])
}

/// `1 / (1 + e^-x)`, as `e^x / (1 + e^x)` for negative `x` so that no `exp` overflows.
pub fn sigmoid(f: &mut TypedFunc, x: &V) -> V {
    let n = x.ty.lanes;
    let ax = f.intr("fabs", x.ty, &[x]);
    let nax = f.fneg(&ax);
    let e = exp(f, &nax);
    let one = f.fc(n, 1.0);
    let d = f.fadd(&e, &one);
    let pos = f.fdiv(&one, &d);
    let neg = f.fmul(&e, &pos);
    let is_neg = f.fcmp(FPred::Olt, x, &f.fc(n, 0.0));
    f.select(&is_neg, &neg, &pos)
}

/// GELU (tanh form) as `x * sigmoid(2u)`, `u = sqrt(2/pi) (x + 0.044715 x^3)`: the same function
/// as `0.5 x (1 + tanh(u))` without its cancellation for negative `x`; `gelu(-inf) = -0`.
pub fn gelu(f: &mut TypedFunc, x: &V) -> V {
    let n = x.ty.lanes;
    let x2 = f.fmul(x, x);
    let x3 = f.fmul(&x2, x);
    let inner = f.mul_add_c(&x3, GELU_CUBIC, x);
    let t = f.fmul(&inner, &f.fc(n, 2.0 * SQRT_2_OVER_PI));
    let sg = sigmoid(f, &t);
    let r = f.fmul(x, &sg);
    let is_neg_inf = f.fcmp(FPred::Oeq, x, &f.fc(n, f32::NEG_INFINITY));
    f.select(&is_neg_inf, &f.fc(n, -0.0), &r)
}
