//! Scalar semantics (contract §5) as LLVM IR: every elementwise op, cast, comparison and reduction
//! step on one element.
//!
//! Values are computed in three register kinds: `float` for f32/f16/bf16 (an f16/bf16 value is an
//! f32 holding a value representable in its dtype; each op's result is rounded to nearest even),
//! `i32` (wrapping) and `i1` (bool). f32 add, sub, mul, div and sqrt are IEEE correctly rounded,
//! so they equal the interpreter's f64 result rounded once; for f16/bf16 the f32 result rounded
//! again equals it too (f32 has more than twice their precision plus two bits).
//!
//! Transcendentals use no libdevice. Error bounds, for f32 results (f16/bf16 round further):
//! - `exp`: `ex2.approx.f32` (PTX ISA: at most 2 ulp) of `x·log2(e)` split in two parts with an
//!   FMA, the small part applied to first order: at most about 3 ulp (relative 2^-21). For f16 and
//!   bf16 results the product is not split (relative error below 2^-15, see `exp_half`).
//! - `log`: `lg2.approx.f32 · ln 2`: absolute error at most about 2^-22 for x in [0.5, 2], relative
//!   error about 3 ulp elsewhere.
//! - `tanh`: Cephes `tanhf`'s ranges (odd polynomial for |x| < 0.625, `1 - 2/(e^{2|x|}+1)` above
//!   with `ex2.approx.ftz` of the product rounded once and `rcp.approx.ftz.f32`, e^{2|x|} clamped
//!   at e^40): 3.6 ulp at most, see [`tanh`].
//! - `sigmoid`, `gelu`: built from `exp` with correctly rounded division: a few ulp. For f16/bf16
//!   results gelu multiplies by `rcp.approx.ftz.f32` (1 ulp), see [`gelu`].
//! - `pow(a, b) = 2^(b·log2|a|)` with IEEE special cases: relative error about
//!   `(2 + |b·log2|a||)·2^-22`, so it grows with the size of the result's exponent.

use tcc_ir::{BinaryOp, CompareOp, DType, ReduceOp, UnaryOp};

use super::arch::{CapsExt, Feature, GpuCaps};
use super::error::PtxError;
use crate::llvm_text::Func;

/// An f32 constant in LLVM's exact hexadecimal form.
pub(crate) fn fc(v: f32) -> String {
    format!("0x{:016X}", f64::from(v).to_bits())
}

/// The register type values of `dtype` are computed in.
pub(crate) fn ctype(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 | DType::F16 | DType::BF16 => "float",
        DType::I32 => "i32",
        DType::Bool => "i1",
    }
}

/// The type values of `dtype` are stored as in memory.
pub(crate) fn stype(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "float",
        DType::F16 => "half",
        DType::BF16 => "bfloat",
        DType::I32 => "i32",
        DType::Bool => "i8",
    }
}

/// A constant of `dtype` (the value is representable in it).
pub(crate) fn constant(dtype: DType, value: f64) -> String {
    match dtype {
        DType::F32 | DType::F16 | DType::BF16 => fc(value as f32),
        // Saturating; the value is an exact i32 already.
        DType::I32 => format!("{}", value as i32),
        DType::Bool => (if value != 0.0 && !value.is_nan() { "true" } else { "false" }).to_string(),
    }
}

/// Converts a loaded value of `dtype` (storage type) to its register kind.
pub(crate) fn from_storage(f: &mut Func, caps: &GpuCaps, dtype: DType, v: &str) -> Result<String, PtxError> {
    Ok(match dtype {
        DType::F16 => f.v(format!("fpext half {v} to float")),
        DType::BF16 => {
            caps.require(Feature::Bf16Convert, "bf16 values")?;
            f.v(format!("fpext bfloat {v} to float"))
        }
        DType::Bool => f.v(format!("icmp ne i8 {v}, 0")),
        DType::F32 | DType::I32 => v.to_string(),
    })
}

/// Converts a register value of `dtype` to its storage type.
pub(crate) fn to_storage(f: &mut Func, caps: &GpuCaps, dtype: DType, v: &str) -> Result<String, PtxError> {
    Ok(match dtype {
        DType::F16 => f.v(format!("fptrunc float {v} to half")),
        DType::BF16 => {
            caps.require(Feature::Bf16Convert, "bf16 values")?;
            f.v(format!("fptrunc float {v} to bfloat"))
        }
        DType::Bool => f.v(format!("zext i1 {v} to i8")),
        DType::F32 | DType::I32 => v.to_string(),
    })
}

/// Rounds an f32 register value to `dtype` (round to nearest even), keeping it in f32.
pub(crate) fn round(f: &mut Func, caps: &GpuCaps, dtype: DType, v: &str) -> Result<String, PtxError> {
    Ok(match dtype {
        DType::F16 | DType::BF16 => {
            let s = to_storage(f, caps, dtype, v)?;
            from_storage(f, caps, dtype, &s)?
        }
        _ => v.to_string(),
    })
}

fn fabs(f: &mut Func, x: &str) -> String {
    f.call("float", "llvm.fabs.f32", &[("float", x)])
}

fn fma(f: &mut Func, a: &str, b: &str, c: &str) -> String {
    f.call("float", "llvm.fma.f32", &[("float", a), ("float", b), ("float", c)])
}

fn sel(f: &mut Func, c: &str, ty: &str, a: &str, b: &str) -> String {
    f.v(format!("select i1 {c}, {ty} {a}, {ty} {b}"))
}

/// `2^x` (`ex2.approx.f32`, non-flushing: at most 2 ulp per the PTX ISA).
fn exp2(f: &mut Func, x: &str) -> String {
    f.call("float", "llvm.nvvm.ex2.approx.f", &[("float", x)])
}

/// `log2(x)` (`lg2.approx.f32`, non-flushing).
fn log2(f: &mut Func, x: &str) -> String {
    f.call("float", "llvm.nvvm.lg2.approx.f", &[("float", x)])
}

/// `e^x`: `2^(x·log2 e)` with the product split as `hi + lo` by an FMA and `2^lo ≈ 1 + lo·ln 2`.
pub(crate) fn exp(f: &mut Func, x: &str) -> String {
    let l2e_hi = std::f32::consts::LOG2_E;
    let l2e_lo = (std::f64::consts::LOG2_E - f64::from(l2e_hi)) as f32;
    let hi = f.v(format!("fmul float {x}, {}", fc(l2e_hi)));
    let neg_hi = f.v(format!("fneg float {hi}"));
    let err = fma(f, x, &fc(l2e_hi), &neg_hi);
    let lo = fma(f, x, &fc(l2e_lo), &err);
    let e = exp2(f, &hi);
    let lo_ln2 = f.v(format!("fmul float {lo}, {}", fc(std::f32::consts::LN_2)));
    let corrected = fma(f, &e, &lo_ln2, &e);
    let ahi = fabs(f, &hi);
    let small = f.v(format!("fcmp olt float {ahi}, {}", fc(120.0)));
    sel(f, &small, "float", &corrected, &e)
}

/// `e^x` for results rounded to f16 or bf16: `2^(x·log2 e)` with the product rounded once. Its
/// relative error, about `(|x·log2 e| + 2)·2^-23` over the range where those results are
/// neither 0 nor inf (|x| < 112), stays far below their rounding (2^-11, 2^-8).
/// Flushing subnormals (one instruction instead of four) changes nothing after that rounding:
/// `2^t` for subnormal `t` is 1 either way, and results below 2^-126 are 0 in f16 and within
/// bf16's tolerance of it.
fn exp_half(f: &mut Func, x: &str) -> String {
    let t = f.v(format!("fmul float {x}, {}", fc(std::f32::consts::LOG2_E)));
    f.call("float", "llvm.nvvm.ex2.approx.ftz.f", &[("float", &t)])
}

/// The f32 value of an operand that is a constant of [`fc`]'s form.
fn constant_value(operand: &str) -> Option<f32> {
    let hex = operand.strip_prefix("0x").filter(|h| h.len() == 16)?;
    let v = f64::from_bits(u64::from_str_radix(hex, 16).ok()?);
    #[allow(clippy::cast_possible_truncation)]
    let v32 = v as f32;
    (f64::from(v32) == v).then_some(v32)
}

/// The correctly rounded f32 reciprocal of `b`, where `b` and it are both normal numbers (else
/// the quotient by `b` is left to `div.rn.f32`). `1/b` in f64 is within
/// 2^-53 of the true reciprocal, and of the three f32 numbers around it the one whose product with
/// `b` is nearest 1 is the correctly rounded one (the products are exact in f64).
fn reciprocal(b: f32) -> Option<f32> {
    if !b.is_normal() {
        return None;
    }
    #[allow(clippy::cast_possible_truncation)]
    let near = (1.0 / f64::from(b)) as f32;
    if !near.is_normal() {
        return None;
    }
    let miss = |y: f32| (f64::from(y) * f64::from(b) - 1.0).abs();
    let y = [near.next_down(), near, near.next_up()].into_iter().min_by(|x, y| miss(*x).total_cmp(&miss(*y)))?;
    y.is_normal().then_some(y)
}

/// `a / b` for a constant `b` with a correctly rounded reciprocal `y` (both normal; `None`
/// otherwise): `q = a·y`, the remainder `r = a - q·b` (exact, by an FMA), then `q + r·y`, which is the
/// correctly rounded quotient (Markstein's theorem; `tests::dividing_by_a_constant_is_correctly_rounded`
/// checks every significand of `a` for a set of divisors). Where `q` is 0, infinite or NaN the
/// result is `q` itself (`a·y` carries the quotient's sign, infinity or NaN; the correction would
/// turn infinities into NaN and -0 into +0). Eight instructions without a MUFU, against
/// `div.rn.f32`'s subroutine with a reciprocal: the soft-capped attention's `s / 30` per score
/// took 2.35 of its 7.2 ms on an H100 (BENCHMARKS.md, session 18).
fn divide_by_constant(f: &mut Func, a: &str, b: f32) -> Option<String> {
    let (b, y) = (fc(b), fc(reciprocal(b)?));
    let q = f.v(format!("fmul float {a}, {y}"));
    let nq = f.v(format!("fneg float {q}"));
    let r = fma(f, &nq, &b, a);
    let corrected = fma(f, &r, &y, &q);
    let aq = fabs(f, &q);
    let nonzero = f.v(format!("fcmp ogt float {aq}, {}", fc(0.0)));
    let finite = f.v(format!("fcmp olt float {aq}, {}", fc(f32::INFINITY)));
    let normal = f.v(format!("and i1 {nonzero}, {finite}"));
    Some(sel(f, &normal, "float", &corrected, &q))
}

/// `ln x`.
fn log(f: &mut Func, x: &str) -> String {
    let l = log2(f, x);
    f.v(format!("fmul float {l}, {}", fc(std::f32::consts::LN_2)))
}

/// The bound of [`tanh`]'s exponent `2|x|·log2 e`: 40·log2 e (`e^40`).
const TANH_T_MAX: f32 = 57.707_8;

/// `tanh x`, Cephes `tanhf`'s two ranges: an odd polynomial for |x| < 0.625, else
/// `1 - 2/(e^{2|x|} + 1)`, and the sign of x on both (so `tanh(-0) = -0`), where `e^{2|x|}` is
/// `ex2.approx.ftz` of the product `2|x|·log2 e` rounded once (not [`exp`]'s split product:
/// tanh's absolute error is the relative error of `e^{2|x|}` times `2e/(e+1)^2`, which falls as
/// `e^{-2|x|}` while the product's rounding grows only with |x|) and the quotient by
/// `rcp.approx.ftz.f32`: 3.6 ulp at most with both approximations at their bounds, worst next to
/// 0.625. The product is clamped at [`TANH_T_MAX`] (`e^40`; tanh is 1 in f32 from |x| = 9.1 on),
/// so the divisor stays finite. Eighteen instructions, two of them MUFU (the soft-capped
/// attention spends them per score: BENCHMARKS.md, session 18).
fn tanh(f: &mut Func, x: &str) -> String {
    let ax = fabs(f, x);
    // Small: x + x^3 P(x^2).
    let z = f.v(format!("fmul float {x}, {x}"));
    let coeffs: [f32; 5] = [-5.704_988_7e-3, 2.063_909e-2, -5.373_971_6e-2, 1.333_144_2e-1, -3.333_328e-1];
    let mut p = fc(coeffs[0]);
    for c in &coeffs[1..] {
        p = fma(f, &p, &z, &fc(*c));
    }
    let pz = f.v(format!("fmul float {p}, {z}"));
    let small_v = fma(f, &pz, x, x);
    // Large: 1 - 2 / (2^t + 1) with t = 2|x|·log2 e, clamped.
    let t = f.v(format!("fmul float {ax}, {}", fc(2.0 * std::f32::consts::LOG2_E)));
    // (A compare and select, not `minnum`, which would turn a NaN into the bound.)
    let over = f.v(format!("fcmp ogt float {t}, {}", fc(TANH_T_MAX)));
    let t = sel(f, &over, "float", &fc(TANH_T_MAX), &t);
    let e = f.call("float", "llvm.nvvm.ex2.approx.ftz.f", &[("float", &t)]);
    let e1 = f.v(format!("fadd float {e}, {}", fc(1.0)));
    let r = f.call("float", "llvm.nvvm.rcp.approx.ftz.f", &[("float", &e1)]);
    let large_v = fma(f, &fc(-2.0), &r, &fc(1.0));
    let small = f.v(format!("fcmp olt float {ax}, {}", fc(0.625)));
    let v = sel(f, &small, "float", &small_v, &large_v);
    // The sign of x on either range: the polynomial alone turns -0 into +0 (`-0·-0 + -0`).
    f.call("float", "llvm.copysign.f32", &[("float", &v), ("float", x)])
}

fn sigmoid(f: &mut Func, x: &str) -> String {
    let nx = f.v(format!("fneg float {x}"));
    let e = exp(f, &nx);
    let d = f.v(format!("fadd float {}, {e}", fc(1.0)));
    f.v(format!("fdiv float {}, {d}", fc(1.0)))
}

/// `gelu(x) = x·sigmoid(2u) = x / (1 + e^(-2u))` with `u = √(2/π)·(x + 0.044715·x³)`: the same
/// form as the interpreter and the CPU tiers. (The textbook `0.5·x·(1 + tanh u)` cancels to 0 for
/// x below about -5, where the true value is a tiny negative number.)
/// For results rounded to f16 or bf16 (`half`), `e^(-2u)` is [`exp_half`] and the quotient is
/// `x·(1/d)` with the approximate reciprocal: a few f32 ulp, far below their rounding, and cheap
/// enough for a GEMM epilogue (where `x < -10` the true value is below 10^-37 and the result is 0).
fn gelu(f: &mut Func, x: &str, half: bool) -> String {
    let x2 = f.v(format!("fmul float {x}, {x}"));
    let x3 = f.v(format!("fmul float {x2}, {x}"));
    let s = fma(f, &x3, &fc(0.044_715), x);
    let m2u = f.v(format!("fmul float {s}, {}", fc(-2.0 * 0.797_884_6)));
    let e = if half { exp_half(f, &m2u) } else { exp(f, &m2u) };
    let d = f.v(format!("fadd float {}, {e}", fc(1.0)));
    let r = if half {
        // `x·rcp.approx.ftz(d)` (1 ulp, 0 for d above 2^126): no slow-path branch, so a GEMM
        // epilogue's elements interleave.
        let inv = f.call("float", "llvm.nvvm.rcp.approx.ftz.f", &[("float", &d)]);
        f.v(format!("fmul float {x}, {inv}"))
    } else {
        f.v(format!("fdiv float {x}, {d}"))
    };
    let ninf = f.v(format!("fcmp oeq float {x}, {}", fc(f32::NEG_INFINITY)));
    sel(f, &ninf, "float", &fc(-0.0), &r)
}

/// Maximum or minimum propagating NaN: `NaN` if either is NaN, else `b` if `b > a` (`<` for
/// min), else `a`.
fn minmax_nan(f: &mut Func, max: bool, a: &str, b: &str) -> String {
    let uno = f.v(format!("fcmp uno float {a}, {b}"));
    let pred = if max { "ogt" } else { "olt" };
    let better = f.v(format!("fcmp {pred} float {b}, {a}"));
    let m = sel(f, &better, "float", b, a);
    sel(f, &uno, "float", &fc(f32::NAN), &m)
}

fn pow(f: &mut Func, a: &str, b: &str) -> String {
    let aa = fabs(f, a);
    let l = log2(f, &aa);
    let bl = f.v(format!("fmul float {b}, {l}"));
    let r = exp2(f, &bl);
    // Is b an integer, and odd?
    let fb = f.call("float", "llvm.floor.f32", &[("float", b)]);
    let is_int = f.v(format!("fcmp oeq float {fb}, {b}"));
    let hb = f.v(format!("fmul float {b}, {}", fc(0.5)));
    let fhb = f.call("float", "llvm.floor.f32", &[("float", &hb)]);
    let half_frac = f.v(format!("fcmp une float {fhb}, {hb}"));
    let odd = f.v(format!("and i1 {is_int}, {half_frac}"));
    // Sign: negative results for a negative base (or -0) and an odd integer exponent.
    let abits = f.v(format!("bitcast float {a} to i32"));
    let aneg = f.v(format!("icmp slt i32 {abits}, 0"));
    let flip = f.v(format!("and i1 {aneg}, {odd}"));
    let nr = f.v(format!("fneg float {r}"));
    let signed = sel(f, &flip, "float", &nr, &r);
    // A finite negative base and a non-integer exponent give NaN.
    let alt0 = f.v(format!("fcmp olt float {a}, {}", fc(0.0)));
    let afin = f.v(format!("fcmp one float {aa}, {}", fc(f32::INFINITY)));
    let not_int = f.v(format!("xor i1 {is_int}, true"));
    let bad0 = f.v(format!("and i1 {alt0}, {afin}"));
    let bad = f.v(format!("and i1 {bad0}, {not_int}"));
    let r1 = sel(f, &bad, "float", &fc(f32::NAN), &signed);
    // |a| == 1 and b = ±inf gives 1.
    let aone = f.v(format!("fcmp oeq float {aa}, {}", fc(1.0)));
    let ab = fabs(f, b);
    let binf = f.v(format!("fcmp oeq float {ab}, {}", fc(f32::INFINITY)));
    let one_inf = f.v(format!("and i1 {aone}, {binf}"));
    let r2 = sel(f, &one_inf, "float", &fc(1.0), &r1);
    // NaN operands give NaN, except that b == 0 or a == 1 give 1.
    let uno = f.v(format!("fcmp uno float {a}, {b}"));
    let r3 = sel(f, &uno, "float", &fc(f32::NAN), &r2);
    let b0 = f.v(format!("fcmp oeq float {b}, {}", fc(0.0)));
    let a1 = f.v(format!("fcmp oeq float {a}, {}", fc(1.0)));
    let one = f.v(format!("or i1 {b0}, {a1}"));
    sel(f, &one, "float", &fc(1.0), &r3)
}

/// `-x` on i32 (wrapping), as `~x + 1` inside inline PTX.
///
/// ptxas of CUDA 13.0 for sm_90a folds a negation (`neg.s32`, `sub.s32 0, x` or `mul.lo.s32 x, -1`)
/// that feeds a chain of two signed `min.s32` (or `max.s32`) into one three-input `VIMNMX3` and
/// drops the negation: `min(min(-m, s), t)` ran as `min(min(m, s), t)` at every JIT level above 0
/// (GPU soak seed 30001436, checked against `-O0` on an H100). `~x + 1` is assembled correctly (as
/// a `LOP3` and a `VIADDMNMX`); LLVM would fold it back into `0 - x`, hence the asm.
pub(crate) fn ineg(f: &mut Func, x: &str) -> String {
    f.v(format!(
        "call i32 asm \"{{ .reg .b32 tcc_not; not.b32 tcc_not, $1; add.s32 $0, tcc_not, 1; }}\", \"=r,r\"(i32 {x})"
    ))
}

/// One element of a unary op on a value of `dtype`.
pub(crate) fn unary(f: &mut Func, caps: &GpuCaps, op: UnaryOp, dtype: DType, x: &str) -> Result<String, PtxError> {
    if dtype == DType::I32 {
        return Ok(match op {
            UnaryOp::Neg => ineg(f, x),
            UnaryOp::Abs => {
                let n = ineg(f, x);
                let c = f.v(format!("icmp slt i32 {x}, 0"));
                sel(f, &c, "i32", &n, x)
            }
            UnaryOp::Relu => {
                let c = f.v(format!("icmp sgt i32 {x}, 0"));
                sel(f, &c, "i32", x, "0")
            }
            _ => {
                return Err(PtxError::Unsupported { target: caps.name, what: format!("`{}` on i32", op.name()) });
            }
        });
    }
    if !dtype.is_float() {
        return Err(PtxError::Unsupported { target: caps.name, what: format!("`{}` on {dtype}", op.name()) });
    }
    let r = match op {
        UnaryOp::Neg => f.v(format!("fneg float {x}")),
        UnaryOp::Abs => fabs(f, x),
        UnaryOp::Exp if dtype.size_bytes() == 2 => exp_half(f, x),
        UnaryOp::Exp => exp(f, x),
        UnaryOp::Log => log(f, x),
        UnaryOp::Sqrt => f.call("float", "llvm.sqrt.f32", &[("float", x)]),
        UnaryOp::Rsqrt => {
            let s = f.call("float", "llvm.sqrt.f32", &[("float", x)]);
            f.v(format!("fdiv float {}, {s}", fc(1.0)))
        }
        UnaryOp::Tanh => tanh(f, x),
        UnaryOp::Sigmoid => sigmoid(f, x),
        UnaryOp::Relu => {
            let c = f.v(format!("fcmp ole float {x}, {}", fc(0.0)));
            sel(f, &c, "float", &fc(0.0), x)
        }
        UnaryOp::Gelu => gelu(f, x, dtype.size_bytes() == 2),
    };
    round(f, caps, dtype, &r)
}

/// One element of a binary op on values of `dtype`.
pub(crate) fn binary(
    f: &mut Func,
    caps: &GpuCaps,
    op: BinaryOp,
    dtype: DType,
    a: &str,
    b: &str,
) -> Result<String, PtxError> {
    if dtype == DType::I32 {
        return Ok(match op {
            BinaryOp::Add => f.v(format!("add i32 {a}, {b}")),
            BinaryOp::Sub if a == "0" => ineg(f, b),
            BinaryOp::Sub => f.v(format!("sub i32 {a}, {b}")),
            BinaryOp::Mul => f.v(format!("mul i32 {a}, {b}")),
            BinaryOp::Div => {
                // x / 0 = 0; i32::MIN / -1 wraps to i32::MIN; never divide by 0 or overflow.
                let z = f.v(format!("icmp eq i32 {b}, 0"));
                let m1 = f.v(format!("icmp eq i32 {b}, -1"));
                let bad = f.v(format!("or i1 {z}, {m1}"));
                let d = sel(f, &bad, "i32", "1", b);
                let q = f.v(format!("sdiv i32 {a}, {d}"));
                let na = ineg(f, a);
                let q1 = sel(f, &m1, "i32", &na, &q);
                sel(f, &z, "i32", "0", &q1)
            }
            BinaryOp::Max | BinaryOp::Min => {
                let pred = if op == BinaryOp::Max { "sgt" } else { "slt" };
                let c = f.v(format!("icmp {pred} i32 {b}, {a}"));
                sel(f, &c, "i32", b, a)
            }
            BinaryOp::Pow => {
                return Err(PtxError::Unsupported { target: caps.name, what: "`pow` on i32".into() });
            }
        });
    }
    if !dtype.is_float() {
        return Err(PtxError::Unsupported { target: caps.name, what: format!("`{}` on {dtype}", op.name()) });
    }
    let r = match op {
        BinaryOp::Add => f.v(format!("fadd float {a}, {b}")),
        BinaryOp::Sub => f.v(format!("fsub float {a}, {b}")),
        BinaryOp::Mul => f.v(format!("fmul float {a}, {b}")),
        // Correctly rounded for every dtype: `div.rn.f32` (or, by a constant, its reciprocal and
        // Markstein's correction: [`divide_by_constant`]), then the rounding to f16/bf16 (a double
        // rounding that is harmless, f32's 24 bits being at least 2p + 2 for their p of 11 and 8
        // bits). Not `a · (1/b)` alone: for f16 that can round the other way next to a midpoint,
        // so a quotient would differ from the interpreter's (issue 30).
        BinaryOp::Div => constant_value(b)
            .and_then(|divisor| divide_by_constant(f, a, divisor))
            .unwrap_or_else(|| f.v(format!("fdiv float {a}, {b}"))),
        BinaryOp::Max => minmax_nan(f, true, a, b),
        BinaryOp::Min => minmax_nan(f, false, a, b),
        BinaryOp::Pow => pow(f, a, b),
    };
    round(f, caps, dtype, &r)
}

/// One element of a comparison of values of `dtype`, as `i1`.
pub(crate) fn compare(f: &mut Func, op: CompareOp, dtype: DType, a: &str, b: &str) -> String {
    let (fp, ip, bp) = match op {
        CompareOp::Eq => ("oeq", "eq", "eq"),
        CompareOp::Ne => ("une", "ne", "ne"),
        CompareOp::Lt => ("olt", "slt", "ult"),
        CompareOp::Le => ("ole", "sle", "ule"),
        CompareOp::Gt => ("ogt", "sgt", "ugt"),
        CompareOp::Ge => ("oge", "sge", "uge"),
    };
    match dtype {
        DType::F32 | DType::F16 | DType::BF16 => f.v(format!("fcmp {fp} float {a}, {b}")),
        DType::I32 => f.v(format!("icmp {ip} i32 {a}, {b}")),
        DType::Bool => f.v(format!("icmp {bp} i1 {a}, {b}")),
    }
}

/// i32 → f32 rounded to odd (truncate, then set the last bit if inexact): rounding that to a
/// narrower float once more gives the correctly rounded result (no double rounding).
fn i32_to_f32_odd(f: &mut Func, x: &str) -> String {
    let r = f.v(format!("sitofp i32 {x} to float"));
    let back = f.v(format!("fptosi float {r} to i64"));
    let x64 = f.v(format!("sext i32 {x} to i64"));
    let ab = f.call("i64", "llvm.abs.i64", &[("i64", &back), ("i1", "false")]);
    let ax = f.call("i64", "llvm.abs.i64", &[("i64", &x64), ("i1", "false")]);
    let away = f.v(format!("icmp ugt i64 {ab}, {ax}"));
    let bits = f.v(format!("bitcast float {r} to i32"));
    let dec = f.v(format!("sub i32 {bits}, 1"));
    let trunc = sel(f, &away, "i32", &dec, &bits);
    let inexact = f.v(format!("icmp ne i64 {back}, {x64}"));
    let odd = f.v(format!("or i32 {trunc}, 1"));
    let b2 = sel(f, &inexact, "i32", &odd, &trunc);
    f.v(format!("bitcast i32 {b2} to float"))
}

/// Converts a value of dtype `from` to dtype `to` (contract §5: round to nearest even, float → i32
/// saturating with NaN → 0, `x != 0` for bool).
pub(crate) fn cast(f: &mut Func, caps: &GpuCaps, from: DType, to: DType, x: &str) -> Result<String, PtxError> {
    use DType::*;
    Ok(match (from, to) {
        (a, b) if a == b => x.to_string(),
        (F32 | F16 | BF16, F32 | F16 | BF16) => round(f, caps, to, x)?,
        (F32 | F16 | BF16, I32) => f.call("i32", "llvm.fptosi.sat.i32.f32", &[("float", x)]),
        (F32 | F16 | BF16, Bool) => f.v(format!("fcmp one float {x}, {}", fc(0.0))),
        (I32, F32 | F16) => {
            // Exact below 2^24; above, f16 overflows anyway and f32 rounds once.
            let r = f.v(format!("sitofp i32 {x} to float"));
            round(f, caps, to, &r)?
        }
        (I32, BF16) => {
            let r = i32_to_f32_odd(f, x);
            round(f, caps, to, &r)?
        }
        (I32, Bool) => f.v(format!("icmp ne i32 {x}, 0")),
        (Bool, I32) => f.v(format!("zext i1 {x} to i32")),
        (Bool, F32 | F16 | BF16) => f.v(format!("uitofp i1 {x} to float")),
        // Covered by the first arm; listed for exhaustiveness.
        (I32, I32) | (Bool, Bool) => x.to_string(),
    })
}

/// The identity of a reduction, in the register kind of `dtype`.
pub(crate) fn reduce_init(op: ReduceOp, dtype: DType) -> String {
    match (op, dtype) {
        (ReduceOp::Sum | ReduceOp::Mean, DType::I32) => "0".into(),
        (ReduceOp::Sum | ReduceOp::Mean, _) => fc(0.0),
        (ReduceOp::Max, DType::I32) => i32::MIN.to_string(),
        (ReduceOp::Max, _) => fc(f32::NEG_INFINITY),
        (ReduceOp::Min, DType::I32) => i32::MAX.to_string(),
        (ReduceOp::Min, _) => fc(f32::INFINITY),
    }
}

/// One step of a reduction: combines the accumulator with a value (no rounding: reductions
/// accumulate in f32 and round once at the output).
pub(crate) fn reduce_step(f: &mut Func, op: ReduceOp, dtype: DType, acc: &str, x: &str) -> String {
    let int = dtype == DType::I32;
    match op {
        ReduceOp::Sum | ReduceOp::Mean if int => f.v(format!("add i32 {acc}, {x}")),
        ReduceOp::Sum | ReduceOp::Mean => f.v(format!("fadd float {acc}, {x}")),
        ReduceOp::Max | ReduceOp::Min if int => {
            let pred = if op == ReduceOp::Max { "sgt" } else { "slt" };
            let c = f.v(format!("icmp {pred} i32 {x}, {acc}"));
            sel(f, &c, "i32", x, acc)
        }
        // `max.NaN`/`min.NaN` (sm_80+): NaN if either is NaN. They order -0 below +0, which
        // only a reduction's unspecified order could tell apart anyway.
        ReduceOp::Max => f.call("float", "llvm.maximum.f32", &[("float", acc), ("float", x)]),
        ReduceOp::Min => f.call("float", "llvm.minimum.f32", &[("float", acc), ("float", x)]),
    }
}

/// The final value of a reduction over `count` elements, rounded to `dtype`.
pub(crate) fn reduce_finish(
    f: &mut Func,
    caps: &GpuCaps,
    op: ReduceOp,
    dtype: DType,
    acc: &str,
    count: u64,
) -> Result<String, PtxError> {
    if dtype == DType::I32 {
        return Ok(acc.to_string());
    }
    let v = if op == ReduceOp::Mean { f.v(format!("fdiv float {acc}, {}", fc(count as f32))) } else { acc.to_string() };
    round(f, caps, dtype, &v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The quotient [`divide_by_constant`] computes, in f32 arithmetic on the host.
    fn markstein(a: f32, b: f32, y: f32) -> f32 {
        let q = a * y;
        let corrected = (-q).mul_add(b, a).mul_add(y, q);
        if q != 0.0 && q.is_finite() { corrected } else { q }
    }

    /// `a / b` correctly rounded: f64's quotient of two f32 numbers is never an f32 midpoint nor
    /// within 2^-53 of one unless exact, so rounding it to f32 rounds the true quotient once.
    fn exact(a: f32, b: f32) -> f32 {
        #[allow(clippy::cast_possible_truncation)]
        let q = (f64::from(a) / f64::from(b)) as f32;
        q
    }

    /// `tanh x` as [`tanh`] computes it above 0.625, with `2^t` and the reciprocal off by
    /// `e_err` and `r_err` (relative).
    fn tanh_large(x: f32, e_err: f64, r_err: f64) -> f32 {
        let t = (x.abs() * (2.0 * std::f32::consts::LOG2_E)).min(TANH_T_MAX);
        #[allow(clippy::cast_possible_truncation)]
        let e = (f64::from(t).exp2() * (1.0 + e_err)) as f32;
        #[allow(clippy::cast_possible_truncation)]
        let r = ((1.0 / f64::from(e + 1.0)) * (1.0 + r_err)) as f32;
        (-2.0f32).mul_add(r, 1.0).copysign(x)
    }

    #[test]
    fn tanh_above_the_polynomial_is_within_four_ulp_at_the_approximations_worst() {
        // PTX ISA bounds: ex2.approx.ftz.f32 2 ulp (2^-22), rcp.approx.ftz.f32 1 ulp (2^-23).
        let ulp = |v: f32| f64::from(v.next_up() - v);
        let mut worst = 0.0f64;
        for bits in (0.625f32.to_bits()..=9.5f32.to_bits()).step_by(97) {
            let x = f32::from_bits(bits);
            let want = f64::from(x).tanh();
            #[allow(clippy::cast_possible_truncation)]
            let u = ulp(want as f32);
            for (e_err, r_err) in [(2e-7, 1.2e-7), (-2e-7, -1.2e-7), (2e-7, -1.2e-7), (-2e-7, 1.2e-7)] {
                worst = worst.max((f64::from(tanh_large(x, e_err, r_err)) - want).abs() / u);
            }
        }
        assert!(worst <= 4.0, "{worst} ulp");
    }

    #[test]
    fn reciprocals_are_correctly_rounded_and_only_of_normal_numbers() {
        for b in [3.0f32, 30.0, 7.0, 0.1, 11.313_708, 1e-30, 6e37, 1.5, 0.999_999_9] {
            let y = reciprocal(b).unwrap();
            let miss = |y: f32| (f64::from(y) * f64::from(b) - 1.0).abs();
            assert!(miss(y) < miss(y.next_up()) && miss(y) < miss(y.next_down()), "{b}");
        }
        assert_eq!(reciprocal(2.0), Some(0.5));
        for b in [0.0f32, -0.0, f32::INFINITY, f32::NAN, 1e-40, 1e38, -1e38] {
            assert_eq!(reciprocal(b), None, "{b}");
        }
        assert_eq!(constant_value(&fc(30.0)), Some(30.0));
        assert_eq!(constant_value("%v3"), None);
        assert_eq!(constant_value("0x3FB999999999999A"), None, "0.1 in f64 is no f32");
    }

    #[test]
    fn dividing_by_a_constant_is_correctly_rounded() {
        // Every significand of a in [1, 2) (scaling a by a power of two scales the quotient
        // exactly while it stays normal), for divisors of attention's soft caps and scales, odd
        // ones, ones just off a power of two and a few spread over the exponent range.
        let mut divisors = vec![30.0f32, 50.0, 11.313_708, 3.0, 7.0, 0.1, 1.000_000_1, 1.999_999_9, 6.0e-20, 3.3e25];
        let mut state = 0x9E37_79B9_u32;
        for _ in 0..4 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            divisors.push(f32::from_bits(0x3F80_0000 | (state >> 9)) * 1.0e3);
        }
        for b in divisors {
            let y = reciprocal(b).unwrap();
            for bits in 0x3F80_0000u32..0x4000_0000 {
                let a = f32::from_bits(bits);
                let (got, want) = (markstein(a, b, y), exact(a, b));
                assert!(got.to_bits() == want.to_bits(), "{a:e} / {b:e}: {got:e}, correctly rounded {want:e}");
            }
            // The special cases keep the quotient's sign, infinities and NaN.
            for a in [0.0f32, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, -3.0e38, 1e-45] {
                let (got, want) = (markstein(a, b, y), exact(a, b));
                assert!(got.to_bits() == want.to_bits() || (got - want).abs() <= 1e-45, "{a:e} / {b:e}: {got:e}");
            }
            assert!(markstein(f32::NAN, b, y).is_nan());
        }
    }
}
