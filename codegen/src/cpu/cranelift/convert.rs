//! f16 and bf16 conversions as integer bit operations (round to nearest even, overflow to inf,
//! NaN kept NaN, subnormals exact), for one lane or four.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{InstBuilder, Value};

use super::simd::Simd;

/// The f16 bit pattern (in the low 16 bits of an `i32` lane) nearest to the f32 `x`.
pub fn f32_to_f16_bits(s: &mut Simd, x: Value) -> Value {
    let u = s.as_int(x);
    let sign_mask = s.ic(i32::MIN);
    let sign = s.b.ins().band(u, sign_mask);
    let a = s.b.ins().bxor(u, sign);
    // Inf or NaN (or too large: rounds to inf).
    let f32_inf = s.ic(0x7f80_0000);
    let is_nan = s.icmp(IntCC::SignedGreaterThan, a, f32_inf);
    let (qnan, inf) = (s.ic(0x7e00), s.ic(0x7c00));
    let special = s.sel(is_nan, qnan, inf);
    let f16_max = s.ic(0x4780_0000);
    let is_big = s.icmp(IntCC::SignedGreaterThanOrEqual, a, f16_max);
    // Subnormal or zero: let the float adder round the mantissa into place.
    let af = s.as_float(a);
    let magic = s.fc(0.5);
    let sum = s.b.ins().fadd(af, magic);
    let sum_bits = s.as_int(sum);
    let magic_bits = s.ic(0x3f00_0000);
    let sub = s.b.ins().isub(sum_bits, magic_bits);
    let min_normal = s.ic(0x3880_0000);
    let is_small = s.icmp(IntCC::SignedLessThan, a, min_normal);
    // Normal: rebias the exponent and round to nearest even by hand.
    let shifted = s.ushr(a, 13);
    let one = s.ic(1);
    let odd = s.b.ins().band(shifted, one);
    let bias = s.ic(0xc800_0fff_u32 as i32);
    let biased = s.b.ins().iadd(a, bias);
    let biased = s.b.ins().iadd(biased, odd);
    let norm = s.ushr(biased, 13);
    let finite = s.sel(is_small, sub, norm);
    let bits = s.sel(is_big, special, finite);
    let sign16 = s.ushr(sign, 16);
    s.b.ins().bor(bits, sign16)
}

/// The f32 value of the f16 bit pattern in the low 16 bits of `h` (exact).
pub fn f16_bits_to_f32(s: &mut Simd, h: Value) -> Value {
    let low = s.ic(0x7fff);
    let magnitude = s.b.ins().band(h, low);
    let o = s.shl(magnitude, 13);
    let exp_mask = s.ic(0x0f80_0000);
    let exp = s.b.ins().band(o, exp_mask);
    let rebias = s.ic(0x3800_0000);
    let o = s.b.ins().iadd(o, rebias);
    // Inf/NaN: move the exponent all the way up.
    let inf_nan = s.b.ins().iadd(o, rebias);
    let is_special = s.icmp(IntCC::Equal, exp, exp_mask);
    // Zero/subnormal: renormalize through the float unit.
    let one_exp = s.ic(0x0080_0000);
    let plus = s.b.ins().iadd(o, one_exp);
    let plus_f = s.as_float(plus);
    let magic = s.fc(f32::from_bits(0x3880_0000));
    let renorm = s.b.ins().fsub(plus_f, magic);
    let renorm = s.as_int(renorm);
    let zero = s.ic(0);
    let is_sub = s.icmp(IntCC::Equal, exp, zero);
    let r = s.sel(is_sub, renorm, o);
    let r = s.sel(is_special, inf_nan, r);
    let sign_bit = s.ic(0x8000);
    let sign = s.b.ins().band(h, sign_bit);
    let sign = s.shl(sign, 16);
    let r = s.b.ins().bor(r, sign);
    s.as_float(r)
}

/// The bf16 bit pattern (in the low 16 bits of an `i32` lane) nearest to the f32 `x`.
pub fn f32_to_bf16_bits(s: &mut Simd, x: Value) -> Value {
    let u = s.as_int(x);
    let high = s.ushr(u, 16);
    let one = s.ic(1);
    let odd = s.b.ins().band(high, one);
    let half = s.ic(0x7fff);
    let r = s.b.ins().iadd(u, half);
    let r = s.b.ins().iadd(r, odd);
    let r = s.ushr(r, 16);
    let quiet = s.ic(0x40);
    let nan = s.b.ins().bor(high, quiet);
    let is_nan = s.fcmp(FloatCC::Unordered, x, x);
    s.sel(is_nan, nan, r)
}

/// The f32 value of the bf16 bit pattern in the low 16 bits of `h` (exact).
pub fn bf16_bits_to_f32(s: &mut Simd, h: Value) -> Value {
    let bits = s.shl(h, 16);
    s.as_float(bits)
}

/// `x` rounded to the nearest f16 value, kept as f32.
pub fn round_f16(s: &mut Simd, x: Value) -> Value {
    let bits = f32_to_f16_bits(s, x);
    f16_bits_to_f32(s, bits)
}

/// `x` rounded to the nearest bf16 value, kept as f32.
pub fn round_bf16(s: &mut Simd, x: Value) -> Value {
    let bits = f32_to_bf16_bits(s, x);
    bf16_bits_to_f32(s, bits)
}
