//! A thin helper over cranelift's builder that emits the same code for one lane (scalar `f32`,
//! `i32`, conditions as `i8`) or for four lanes (`f32x4`, `i32x4`, conditions as `i32x4` masks),
//! so the conversions and polynomials are written once.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{Endianness, InstBuilder, MemFlagsData, Type, Value, types};
use cranelift_frontend::FunctionBuilder;

/// Emits lane-polymorphic arithmetic into a function.
pub struct Simd<'a, 'f> {
    /// The builder.
    pub b: &'a mut FunctionBuilder<'f>,
    /// Four lanes (`true`) or one.
    pub vector: bool,
    /// Use `fma` instructions.
    pub fma: bool,
}

impl Simd<'_, '_> {
    /// The float type (`f32` or `f32x4`).
    pub fn fty(&self) -> Type {
        if self.vector { types::F32X4 } else { types::F32 }
    }

    /// The integer type (`i32` or `i32x4`).
    pub fn ity(&self) -> Type {
        if self.vector { types::I32X4 } else { types::I32 }
    }

    /// A float constant in every lane.
    pub fn fc(&mut self, v: f32) -> Value {
        let s = self.b.ins().f32const(v);
        if self.vector { self.b.ins().splat(types::F32X4, s) } else { s }
    }

    /// An integer constant in every lane.
    pub fn ic(&mut self, v: i32) -> Value {
        let s = self.b.ins().iconst(types::I32, i64::from(v));
        if self.vector { self.b.ins().splat(types::I32X4, s) } else { s }
    }

    fn flags() -> MemFlagsData {
        MemFlagsData::new().with_endianness(Endianness::Little)
    }

    /// Reinterprets float bits as integer bits.
    pub fn as_int(&mut self, x: Value) -> Value {
        let ty = self.ity();
        self.b.ins().bitcast(ty, Self::flags(), x)
    }

    /// Reinterprets integer bits as float bits.
    pub fn as_float(&mut self, x: Value) -> Value {
        let ty = self.fty();
        self.b.ins().bitcast(ty, Self::flags(), x)
    }

    /// `cond ? a : b` for a condition from [`Simd::fcmp`] or [`Simd::icmp`].
    pub fn sel(&mut self, cond: Value, a: Value, b: Value) -> Value {
        if self.vector {
            let ty = self.b.func.dfg.value_type(a);
            let mask = if ty == types::I32X4 { cond } else { self.b.ins().bitcast(ty, Self::flags(), cond) };
            self.b.ins().bitselect(mask, a, b)
        } else {
            self.b.ins().select(cond, a, b)
        }
    }

    /// A float comparison (a condition).
    pub fn fcmp(&mut self, cc: FloatCC, a: Value, b: Value) -> Value {
        self.b.ins().fcmp(cc, a, b)
    }

    /// An integer comparison (a condition).
    pub fn icmp(&mut self, cc: IntCC, a: Value, b: Value) -> Value {
        self.b.ins().icmp(cc, a, b)
    }

    /// `x << k` in every lane.
    pub fn shl(&mut self, x: Value, k: i64) -> Value {
        let k = self.b.ins().iconst(types::I32, k);
        self.b.ins().ishl(x, k)
    }

    /// `x >> k` (logical) in every lane.
    pub fn ushr(&mut self, x: Value, k: i64) -> Value {
        let k = self.b.ins().iconst(types::I32, k);
        self.b.ins().ushr(x, k)
    }

    /// `x >> k` (arithmetic) in every lane.
    pub fn sshr(&mut self, x: Value, k: i64) -> Value {
        let k = self.b.ins().iconst(types::I32, k);
        self.b.ins().sshr(x, k)
    }

    /// `a | b` of two conditions.
    pub fn or(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().bor(a, b)
    }

    /// `a * b + c`, fused when the CPU has FMA.
    pub fn mul_add(&mut self, a: Value, b: Value, c: Value) -> Value {
        if self.fma {
            self.b.ins().fma(a, b, c)
        } else {
            let p = self.b.ins().fmul(a, b);
            self.b.ins().fadd(p, c)
        }
    }

    /// `a * k + c` with a constant `k`.
    pub fn mul_add_c(&mut self, a: Value, k: f32, c: Value) -> Value {
        let k = self.fc(k);
        self.mul_add(a, k, c)
    }

    /// Horner evaluation of `coeffs[0] * x^(n-1) + ... + coeffs[n-1]`.
    pub fn horner(&mut self, x: Value, coeffs: &[f32]) -> Value {
        let mut iter = coeffs.iter();
        let first = iter.next().copied().unwrap_or(0.0);
        let mut p = self.fc(first);
        for &c in iter {
            let c = self.fc(c);
            p = self.mul_add(p, x, c);
        }
        p
    }
}
