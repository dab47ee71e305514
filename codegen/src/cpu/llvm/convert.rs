//! f16 and bf16 conversions (round to nearest even, overflow to inf, NaN kept NaN, subnormals
//! exact), for any lane count. f16 uses the hardware (`vcvtps2ph`/`vcvtph2ps`, F16C) when the host
//! has it, integer bit operations otherwise; bf16 always uses bit operations (AVX512-BF16's
//! `vcvtneps2bf16` flushes subnormals).

use crate::llvm_text::{Elem, FPred, IPred, TypedFunc, V};

/// The f16 bit pattern (in the low 16 bits of each `i32` lane) nearest to the f32 `x`.
pub fn f32_to_f16_bits(f: &mut TypedFunc, x: &V) -> V {
    let n = x.ty.lanes;
    let ic = |f: &TypedFunc, v: i64| f.ic(Elem::I32, n, v);
    let u = f.bitcast(x, Elem::I32);
    let sign = f.and(&u, &ic(f, i64::from(i32::MIN)));
    let a = f.xor(&u, &sign);
    // Inf or NaN (or too large: rounds to inf).
    let is_nan = f.icmp(IPred::Sgt, &a, &ic(f, 0x7f80_0000));
    let special = f.select(&is_nan, &ic(f, 0x7e00), &ic(f, 0x7c00));
    let is_big = f.icmp(IPred::Sge, &a, &ic(f, 0x4780_0000));
    // Subnormal or zero: let the float adder round the mantissa into place.
    let af = f.bitcast(&a, Elem::F32);
    let sum = f.fadd(&af, &f.fc(n, 0.5));
    let sum_bits = f.bitcast(&sum, Elem::I32);
    let sub = f.sub(&sum_bits, &ic(f, 0x3f00_0000));
    let is_small = f.icmp(IPred::Slt, &a, &ic(f, 0x3880_0000));
    // Normal: rebias the exponent and round to nearest even by hand.
    let shifted = f.lshr(&a, 13);
    let odd = f.and(&shifted, &ic(f, 1));
    let biased = f.add(&a, &ic(f, i64::from(0xc800_0fff_u32 as i32)));
    let biased = f.add(&biased, &odd);
    let norm = f.lshr(&biased, 13);
    let finite = f.select(&is_small, &sub, &norm);
    let bits = f.select(&is_big, &special, &finite);
    let sign16 = f.lshr(&sign, 16);
    f.or(&bits, &sign16)
}

/// The f32 value of the f16 bit pattern in the low 16 bits of each `i32` lane of `h` (exact).
pub fn f16_bits_to_f32(f: &mut TypedFunc, h: &V) -> V {
    let n = h.ty.lanes;
    let ic = |f: &TypedFunc, v: i64| f.ic(Elem::I32, n, v);
    let magnitude = f.and(h, &ic(f, 0x7fff));
    let o = f.shl(&magnitude, 13);
    let exp_mask = ic(f, 0x0f80_0000);
    let exp = f.and(&o, &exp_mask);
    let rebias = ic(f, 0x3800_0000);
    let o = f.add(&o, &rebias);
    // Inf/NaN: move the exponent all the way up.
    let inf_nan = f.add(&o, &rebias);
    let is_special = f.icmp(IPred::Eq, &exp, &exp_mask);
    // Zero/subnormal: renormalize through the float unit.
    let plus = f.add(&o, &ic(f, 0x0080_0000));
    let plus_f = f.bitcast(&plus, Elem::F32);
    let renorm = f.fsub(&plus_f, &f.fc(n, f32::from_bits(0x3880_0000)));
    let renorm = f.bitcast(&renorm, Elem::I32);
    let is_sub = f.icmp(IPred::Eq, &exp, &ic(f, 0));
    let r = f.select(&is_sub, &renorm, &o);
    let r = f.select(&is_special, &inf_nan, &r);
    let sign = f.and(h, &ic(f, 0x8000));
    let sign = f.shl(&sign, 16);
    let r = f.or(&r, &sign);
    f.bitcast(&r, Elem::F32)
}

/// The bf16 bit pattern (in the low 16 bits of each `i32` lane) nearest to the f32 `x`.
pub fn f32_to_bf16_bits(f: &mut TypedFunc, x: &V) -> V {
    let n = x.ty.lanes;
    let u = f.bitcast(x, Elem::I32);
    let high = f.lshr(&u, 16);
    let odd = f.and(&high, &f.ic(Elem::I32, n, 1));
    let r = f.add(&u, &f.ic(Elem::I32, n, 0x7fff));
    let r = f.add(&r, &odd);
    let r = f.lshr(&r, 16);
    let nan = f.or(&high, &f.ic(Elem::I32, n, 0x40));
    let is_nan = f.fcmp(FPred::Uno, x, x);
    f.select(&is_nan, &nan, &r)
}

/// The f32 value of the bf16 bit pattern in the low 16 bits of each `i32` lane of `h` (exact).
pub fn bf16_bits_to_f32(f: &mut TypedFunc, h: &V) -> V {
    let bits = f.shl(h, 16);
    f.bitcast(&bits, Elem::F32)
}

/// `x` rounded to the nearest f16 value, kept as f32.
pub fn round_f16(f: &mut TypedFunc, x: &V, hardware: bool) -> V {
    if hardware {
        let h = f.conv("fptrunc", x, x.ty.with(Elem::F16));
        return f.conv("fpext", &h, x.ty);
    }
    let bits = f32_to_f16_bits(f, x);
    f16_bits_to_f32(f, &bits)
}

/// `x` rounded to the nearest bf16 value, kept as f32.
pub fn round_bf16(f: &mut TypedFunc, x: &V) -> V {
    let bits = f32_to_bf16_bits(f, x);
    bf16_bits_to_f32(f, &bits)
}
