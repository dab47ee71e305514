//! Emission of one phase of a [`LoopKernel`] as an LLVM IR function with the uniform ABI
//! `void(ptr bufs, i64 row_begin, i64 row_end)`.
//!
//! Loops run as scalar code; an innermost loop whose stores are contiguous along its variable and
//! whose loads are contiguous or invariant along it runs `lanes` elements at a time (16 with
//! AVX-512, 8 with AVX2; fewer for short loops), then a scalar tail. Pure reductions keep four
//! vector accumulators so the combining instruction's latency overlaps. Expressions are computed
//! once per loop body (the arena is hash-consed); expressions that do not move with the vector
//! variable are computed once before the loop as scalars and broadcast. Loop variables and
//! accumulators live in stack slots that LLVM's `mem2reg` turns into registers.

use std::collections::{BTreeSet, HashMap};

use tcc_ir::{BinaryOp, CompareOp, DType, UnaryOp};

use super::convert;
use super::gemm;
use super::host::HostCpu;
use super::math;
use crate::cpu::analysis::{self, ExprReads, Moving, VectorSupport};
use crate::cpu::memo::Memo;
use crate::cpu::{Class, class};
use crate::error::CodegenError;
use crate::llvm_text::{Elem, FPred, IPred, Ty, TypedFunc, V};
use crate::loops::{AccId, BufId, Combine, Expr, ExprId, Extent, Index, LoopKernel, Phase, Stmt, VarId};

/// What the wide vector code does beyond f32/i32 arithmetic: bools are loaded and stored as
/// vectors of bytes, and LLVM splits a vector i32 division into lanes.
const VECTOR_SUPPORT: VectorSupport = VectorSupport { bool_memory: true, int_division: true };

fn elem_of(c: Class) -> Elem {
    match c {
        Class::Float => Elem::F32,
        Class::Int => Elem::I32,
        Class::Bool => Elem::I1,
    }
}

/// The element type a dtype is stored as (f16/bf16 as their bits).
fn storage(d: DType) -> Elem {
    match d {
        DType::F32 => Elem::F32,
        DType::I32 => Elem::I32,
        DType::F16 | DType::BF16 => Elem::I16,
        DType::Bool => Elem::I8,
    }
}

/// Lanes of the code being emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Scalar,
    /// `lanes` consecutive values of the variable per iteration.
    Vector(VarId, u32),
}

/// Emits phase `phase` of `kernel` as the function `@name`; returns its text and the
/// declarations it needs.
pub fn emit_phase(
    kernel: &LoopKernel,
    phase: &Phase,
    host: &HostCpu,
    name: &str,
) -> Result<(String, BTreeSet<String>), CodegenError> {
    let mut e = Emitter::new(kernel, host);
    e.entry(phase)?;
    Ok(e.f
        .finish(&format!("define void @{name}(ptr noalias nocapture readonly %bufs, i64 %row_begin, i64 %row_end) #0")))
}

pub(super) struct Emitter<'k> {
    k: &'k LoopKernel,
    pub(super) host: &'k HostCpu,
    pub(super) f: TypedFunc,
    bases: Vec<V>,
    vars: HashMap<VarId, V>,
    accs: Vec<V>,
    vaccs: HashMap<AccId, V>,
    /// Computed values by expression and lane count.
    memo: Memo<u32, V>,
    reads: ExprReads,
    /// What moves with the variable of the vector loop being emitted.
    depends: Moving,
    mode: Mode,
    /// In the masked last iteration of a vector loop: which lanes are real.
    mask: Option<V>,
}

impl<'k> Emitter<'k> {
    fn new(k: &'k LoopKernel, host: &'k HostCpu) -> Emitter<'k> {
        Emitter {
            k,
            host,
            f: TypedFunc::new(host.fma),
            bases: Vec::new(),
            vars: HashMap::new(),
            accs: Vec::new(),
            vaccs: HashMap::new(),
            memo: Memo::new(),
            reads: ExprReads::of(k),
            depends: Moving::default(),
            mode: Mode::Scalar,
            mask: None,
        }
    }

    pub(super) fn bad(&self, reason: impl Into<String>) -> CodegenError {
        CodegenError::malformed(&self.k.name, reason)
    }

    fn lanes(&self) -> u32 {
        match self.mode {
            Mode::Scalar => 1,
            Mode::Vector(_, n) => n,
        }
    }

    fn entry(&mut self, phase: &Phase) -> Result<(), CodegenError> {
        let bufs = V { ty: Ty::scalar(Elem::Ptr), text: "%bufs".into() };
        for i in 0..self.k.bufs.len() {
            let slot = self.f.gep(Elem::Ptr, &bufs, &self.f.i64c(i as i64));
            let base = self.f.load(Ty::scalar(Elem::Ptr), &slot, 8);
            self.bases.push(base);
        }
        for &dtype in &self.k.accs {
            let ty = Ty::scalar(elem_of(class(dtype)));
            let slot = self.f.alloca(ty);
            let zero = self.zero(ty);
            self.f.store(&zero, &slot, 4);
            self.accs.push(slot);
        }
        let row_begin = V { ty: Ty::scalar(Elem::I64), text: "%row_begin".into() };
        let row_end = V { ty: Ty::scalar(Elem::I64), text: "%row_end".into() };
        match phase.row_var {
            Some(r) => {
                let rows = self.f.i64c(i64::try_from(phase.rows).unwrap_or(i64::MAX));
                let end = self.f.intr("smin", rows.ty, &[&row_end, &rows]);
                self.counted_loop(r, &row_begin, &end, &phase.row_digits(), &phase.body)?;
            }
            None => {
                let (body, exit) = (self.f.label(), self.f.label());
                let go = self.f.icmp(IPred::Slt, &row_begin, &row_end);
                self.f.cond_br(&go, &body, &exit);
                self.f.start(&body);
                self.stmts(&phase.body)?;
                self.f.br(&exit);
                self.f.start(&exit);
            }
        }
        self.f.ret();
        Ok(())
    }

    fn zero(&self, ty: Ty) -> V {
        match ty.elem {
            Elem::F32 => self.f.fc(ty.lanes, 0.0),
            Elem::I1 => self.f.bc(ty.lanes, false),
            e => self.f.ic(e, ty.lanes, 0),
        }
    }

    fn var_slot(&mut self, v: VarId) -> V {
        if let Some(x) = self.vars.get(&v) {
            return x.clone();
        }
        let slot = self.f.alloca(Ty::scalar(Elem::I64));
        self.vars.insert(v, slot.clone());
        slot
    }

    fn var_value(&mut self, v: VarId) -> V {
        let slot = self.var_slot(v);
        self.f.load(Ty::scalar(Elem::I64), &slot, 8)
    }

    fn stmts(&mut self, stmts: &[Stmt]) -> Result<(), CodegenError> {
        for s in stmts {
            self.stmt(s)?;
        }
        Ok(())
    }

    fn stmt(&mut self, s: &Stmt) -> Result<(), CodegenError> {
        match s {
            Stmt::Loop { var, extent, body } => self.emit_loop(*var, extent, body),
            Stmt::If { cond, body } => {
                if self.lanes() > 1 {
                    return Err(self.bad("a conditional inside a vector loop"));
                }
                let c = self.expr(*cond)?;
                let then = self.f.label();
                let done = self.f.label();
                self.f.cond_br(&c, &then, &done);
                self.f.start(&then);
                self.memo.enter();
                let result = self.stmts(body);
                self.memo.leave();
                result?;
                self.f.br(&done);
                self.f.start(&done);
                Ok(())
            }
            Stmt::MicroKernel(mk) => {
                if self.lanes() > 1 {
                    return Err(self.bad("micro-kernel inside a vector loop"));
                }
                gemm::micro_kernel(self, mk)?;
                self.memo.forget_readers(mk.c, &self.reads);
                Ok(())
            }
            Stmt::Store { buf, index, value } => {
                let v = self.expr(*value)?;
                self.store(*buf, index, &v)?;
                self.memo.forget_readers(*buf, &self.reads);
                Ok(())
            }
            Stmt::AccInit { acc, value } => {
                if self.lanes() > 1 {
                    return Err(self.bad("accumulator initialized inside a vector loop"));
                }
                let v = self.expr(*value)?;
                let slot = self.acc_slot(*acc)?;
                self.f.store(&v, &slot, 4);
                Ok(())
            }
            Stmt::AccUpdate { acc, combine, value } => {
                let v = self.expr(*value)?;
                let dtype = self.acc_dtype(*acc)?;
                let slot = match self.mode {
                    Mode::Scalar => self.acc_slot(*acc)?,
                    Mode::Vector(..) => {
                        self.vaccs.get(acc).cloned().ok_or_else(|| self.bad("vector accumulator missing"))?
                    }
                };
                let cur = self.f.load(v.ty, &slot, 4);
                let mut new = self.combine(*combine, dtype, &cur, &v)?;
                if let Some(mask) = self.mask.clone() {
                    new = self.f.select(&mask, &new, &cur);
                }
                self.f.store(&new, &slot, 4);
                Ok(())
            }
        }
    }

    fn acc_slot(&self, a: AccId) -> Result<V, CodegenError> {
        self.accs.get(a.0 as usize).cloned().ok_or_else(|| self.bad(format!("unknown accumulator {}", a.0)))
    }

    fn acc_dtype(&self, a: AccId) -> Result<DType, CodegenError> {
        self.k.accs.get(a.0 as usize).copied().ok_or_else(|| self.bad(format!("unknown accumulator {}", a.0)))
    }

    fn combine(&mut self, c: Combine, dtype: DType, a: &V, v: &V) -> Result<V, CodegenError> {
        Ok(match (c, class(dtype)) {
            (Combine::Add, Class::Float) => self.f.fadd(a, v),
            // IEEE 754-2019 `maximum`/`minimum` (NaN propagates, -0 below +0): a reduction's
            // result does not depend on its order (contract §5).
            (Combine::Max, Class::Float) => self.f.intr("maximum", a.ty, &[a, v]),
            (Combine::Min, Class::Float) => self.f.intr("minimum", a.ty, &[a, v]),
            (Combine::Add, Class::Int) => self.f.add(a, v),
            (Combine::Max, Class::Int) => self.f.intr("smax", a.ty, &[a, v]),
            (Combine::Min, Class::Int) => self.f.intr("smin", a.ty, &[a, v]),
            (_, Class::Bool) => return Err(self.bad("bool accumulator")),
        })
    }

    /// The value of an affine index (an `i64`).
    pub(super) fn index_value(&mut self, index: &Index) -> V {
        let mut v = self.f.i64c(index.offset);
        for &(var, c) in &index.terms {
            let x = self.var_value(var);
            let scaled = if c == 1 { x } else { self.f.mul(&x, &self.f.i64c(c)) };
            v = if v.text == "0" { scaled } else { self.f.add(&v, &scaled) };
        }
        v
    }

    pub(super) fn extent(&mut self, extent: &Extent) -> V {
        match extent {
            Extent::Const(n) => self.f.i64c(i64::try_from(*n).unwrap_or(i64::MAX)),
            Extent::Tail { total, block, outer } => {
                let o = self.index_value(outer);
                let block = self.f.i64c(i64::try_from(*block).unwrap_or(i64::MAX));
                let done = self.f.mul(&o, &block);
                let total = self.f.i64c(i64::try_from(*total).unwrap_or(i64::MAX));
                let rest = self.f.sub(&total, &done);
                self.f.intr("smin", rest.ty, &[&rest, &block])
            }
        }
    }

    fn emit_loop(&mut self, var: VarId, extent: &Extent, body: &[Stmt]) -> Result<(), CodegenError> {
        let n = self.extent(extent);
        let max = extent.max();
        if max >= 4
            && self.mode == Mode::Scalar
            && analysis::vectorizable(self.k, &self.reads, var, body, VECTOR_SUPPORT)
        {
            let mut lanes = self.host.lanes.max(4);
            while lanes > 4 && u64::from(lanes) > max {
                lanes /= 2;
            }
            self.hoist_uniform(var, body, lanes)?;
            // AVX2 and AVX-512 mask 32-bit lanes natively: the tail is one masked iteration.
            let masked = self.host.lanes >= 8;
            let start = self.vector_loop(var, &n, body, lanes, masked);
            return match start? {
                Some(start) => self.scalar_loop(var, &start, &n, body),
                None => Ok(()),
            };
        }
        let zero = self.f.i64c(0);
        self.scalar_loop(var, &zero, &n, body)
    }

    /// `for var in start..end { body }`.
    fn scalar_loop(&mut self, var: VarId, start: &V, end: &V, body: &[Stmt]) -> Result<(), CodegenError> {
        self.counted_loop(var, start, end, &[], body)
    }

    /// A scalar loop that first binds, in each iteration, every `(part, divisor, trips)` of
    /// `digits` to `var / divisor % trips` (a collapsed row, [`Phase::row_digits`]).
    fn counted_loop(
        &mut self,
        var: VarId,
        start: &V,
        end: &V,
        digits: &[(VarId, u64, u64)],
        body: &[Stmt],
    ) -> Result<(), CodegenError> {
        let slot = self.var_slot(var);
        self.f.store(start, &slot, 8);
        let (header, block, exit) = (self.f.label(), self.f.label(), self.f.label());
        self.f.br(&header);
        self.f.start(&header);
        let i = self.f.load(Ty::scalar(Elem::I64), &slot, 8);
        let go = self.f.icmp(IPred::Slt, &i, end);
        self.f.cond_br(&go, &block, &exit);
        self.f.start(&block);
        for &(part, divisor, trips) in digits {
            let i = self.f.load(Ty::scalar(Elem::I64), &slot, 8);
            let divisor = self.f.i64c(i64::try_from(divisor.max(1)).unwrap_or(i64::MAX));
            let trips = self.f.i64c(i64::try_from(trips.max(1)).unwrap_or(i64::MAX));
            let quotient = self.f.udiv(&i, &divisor);
            let digit = self.f.urem(&quotient, &trips);
            let part_slot = self.var_slot(part);
            self.f.store(&digit, &part_slot, 8);
        }
        self.memo.enter();
        let result = self.stmts(body);
        self.memo.leave();
        result?;
        let i = self.f.load(Ty::scalar(Elem::I64), &slot, 8);
        let next = self.f.add(&i, &self.f.i64c(1));
        self.f.store(&next, &slot, 8);
        self.f.br(&header);
        self.f.start(&exit);
        Ok(())
    }

    /// `lanes` iterations at a time while they fit, then (when `masked`) one iteration with the
    /// lanes past `end` masked off; returns the first index left for a scalar tail, if any.
    fn vector_loop(
        &mut self,
        var: VarId,
        end: &V,
        body: &[Stmt],
        lanes: u32,
        masked: bool,
    ) -> Result<Option<V>, CodegenError> {
        self.depends = Moving::with(self.k, var);
        let updated = analysis::updated_accs(body);
        let reduction_only = body.iter().all(|s| matches!(s, Stmt::AccUpdate { .. }));
        let unroll = if reduction_only { 4 } else { 1 };
        let mut sets: Vec<HashMap<AccId, V>> = Vec::with_capacity(unroll);
        for _ in 0..unroll {
            let mut set = HashMap::new();
            for &(acc, combine) in &updated {
                let dtype = self.acc_dtype(acc)?;
                let float = class(dtype) == Class::Float;
                let identity = combine.identity(float);
                let init = if float {
                    self.f.fc(lanes, identity as f32)
                } else {
                    self.f.ic(Elem::I32, lanes, i64::from(identity as i32))
                };
                let slot = self.f.alloca(init.ty);
                self.f.store(&init, &slot, 4);
                set.insert(acc, slot);
            }
            sets.push(set);
        }
        let slot = self.var_slot(var);
        self.f.store(&self.f.i64c(0), &slot, 8);
        let passes: &[usize] = if unroll > 1 { &[4, 1] } else { &[1] };
        for &copies in passes {
            let step = i64::from(lanes) * copies as i64;
            let (header, block, exit) = (self.f.label(), self.f.label(), self.f.label());
            self.f.br(&header);
            self.f.start(&header);
            let i = self.f.load(Ty::scalar(Elem::I64), &slot, 8);
            let next = self.f.add(&i, &self.f.i64c(step));
            let go = self.f.icmp(IPred::Sle, &next, end);
            self.f.cond_br(&go, &block, &exit);
            self.f.start(&block);
            let i = self.f.load(Ty::scalar(Elem::I64), &slot, 8);
            for (c, set) in sets.iter().enumerate().take(copies) {
                let at = self.f.add(&i, &self.f.i64c(i64::from(lanes) * c as i64));
                self.f.store(&at, &slot, 8);
                self.vaccs = set.clone();
                self.mode = Mode::Vector(var, lanes);
                self.memo.enter();
                let result = self.stmts(body);
                self.memo.leave();
                self.mode = Mode::Scalar;
                result?;
            }
            let next = self.f.add(&i, &self.f.i64c(step));
            self.f.store(&next, &slot, 8);
            self.f.br(&header);
            self.f.start(&exit);
        }
        if masked && let Some(set) = sets.first() {
            // Lanes `i + l` with `l < end - i` are real (none when the loop ended exactly).
            let i = self.f.load(Ty::scalar(Elem::I64), &slot, 8);
            let left = self.f.sub(end, &i);
            let left = self.f.conv("trunc", &left, Ty::scalar(Elem::I32));
            let left = self.f.splat(&left, lanes);
            let mask = self.f.icmp(IPred::Slt, &iota(lanes, 0), &left);
            self.vaccs = set.clone();
            self.mode = Mode::Vector(var, lanes);
            self.mask = Some(mask);
            self.memo.enter();
            let result = self.stmts(body);
            self.memo.leave();
            self.mask = None;
            self.mode = Mode::Scalar;
            result?;
        }
        self.vaccs.clear();
        for (acc, combine) in updated {
            let dtype = self.acc_dtype(acc)?;
            let ty = Ty::new(elem_of(class(dtype)), lanes);
            let mut vec: Option<V> = None;
            for set in &sets {
                let Some(x) = set.get(&acc) else { continue };
                let part = self.f.load(ty, x, 4);
                vec = Some(match vec {
                    None => part,
                    Some(prev) => self.combine(combine, dtype, &prev, &part)?,
                });
            }
            let Some(vec) = vec else { continue };
            let all = self.reduce_lanes(combine, dtype, vec)?;
            let slot = self.acc_slot(acc)?;
            let cur = self.f.load(all.ty, &slot, 4);
            let new = self.combine(combine, dtype, &cur, &all)?;
            self.f.store(&new, &slot, 4);
        }
        if masked {
            return Ok(None);
        }
        Ok(Some(self.f.load(Ty::scalar(Elem::I64), &slot, 8)))
    }

    /// Combines the lanes of `v` pairwise (halves, then quarters, ...) into one scalar.
    fn reduce_lanes(&mut self, combine: Combine, dtype: DType, mut v: V) -> Result<V, CodegenError> {
        while v.ty.lanes > 2 {
            let half = v.ty.lanes / 2;
            let lo: Vec<String> = (0..half).map(|i| format!("i32 {i}")).collect();
            let hi: Vec<String> = (half..2 * half).map(|i| format!("i32 {i}")).collect();
            let ty = Ty::new(v.ty.elem, half);
            let a = self.f.inst(ty, &format!("shufflevector {v}, {} poison, <{half} x i32> <{}>", v.ty, lo.join(", ")));
            let b = self.f.inst(ty, &format!("shufflevector {v}, {} poison, <{half} x i32> <{}>", v.ty, hi.join(", ")));
            v = self.combine(combine, dtype, &a, &b)?;
        }
        let a = self.f.extract(&v, 0);
        let b = self.f.extract(&v, 1);
        self.combine(combine, dtype, &a, &b)
    }

    /// Computes, before a vector loop over `var`, the subexpressions [`analysis::uniform_exprs`]
    /// finds, as scalars and as broadcasts to `lanes`; the loop body then finds them in the memo.
    fn hoist_uniform(&mut self, var: VarId, body: &[Stmt], lanes: u32) -> Result<(), CodegenError> {
        self.depends = Moving::with(self.k, var);
        for e in analysis::uniform_exprs(self.k, &self.reads, &self.depends, body) {
            let scalar = self.expr(e)?;
            let wide = self.f.splat(&scalar, lanes);
            self.memo.insert(e, lanes, wide);
        }
        Ok(())
    }

    /// The address of element `index` of `buf`.
    pub(super) fn address(&mut self, buf: BufId, index: &Index) -> Result<V, CodegenError> {
        let decl = *self.k.buf(buf).ok_or_else(|| self.bad(format!("unknown buffer {}", buf.0)))?;
        let base = self.bases.get(buf.0 as usize).cloned().ok_or_else(|| self.bad("buffer base missing"))?;
        let i = self.index_value(index);
        Ok(self.f.gep(storage(decl.dtype), &base, &i))
    }

    fn expr(&mut self, e: ExprId) -> Result<V, CodegenError> {
        let lanes = self.lanes();
        let cacheable = !self.reads.acc(e);
        if cacheable && let Some(v) = self.memo.get(e, lanes) {
            return Ok(v);
        }
        let v = if lanes > 1 && !self.depends.moves(e) {
            let saved = self.mode;
            self.mode = Mode::Scalar;
            let s = self.expr(e);
            self.mode = saved;
            let s = s?;
            self.f.splat(&s, lanes)
        } else {
            self.compute(e)?
        };
        if cacheable {
            self.memo.insert(e, lanes, v.clone());
        }
        Ok(v)
    }

    fn compute(&mut self, e: ExprId) -> Result<V, CodegenError> {
        let expr = self.k.expr(e).ok_or_else(|| self.bad("dangling expression"))?.clone();
        let lanes = self.lanes();
        match expr {
            Expr::Const { dtype, bits } => {
                let value = f64::from_bits(bits);
                Ok(match class(dtype) {
                    Class::Float => self.f.fc(lanes, value as f32),
                    Class::Int => self.f.ic(Elem::I32, lanes, i64::from(value as i32)),
                    Class::Bool => self.f.bc(lanes, value != 0.0 && !value.is_nan()),
                })
            }
            Expr::Load { buf, index } => self.load(buf, &index),
            Expr::Position(index) => {
                // In a vector loop the variable holds lane 0's value; lane `l` adds `l * coef`.
                let wide = self.index_value(&index);
                let v = self.f.conv("trunc", &wide, Ty::scalar(Elem::I32));
                let base = self.f.splat(&v, lanes);
                match self.mode {
                    Mode::Vector(var, n) if index.coef(var) != 0 => {
                        let step = index.coef(var);
                        let items: Vec<String> =
                            (0..i64::from(n)).map(|l| format!("i32 {}", step.wrapping_mul(l) as i32)).collect();
                        let steps = V { ty: Ty::new(Elem::I32, n), text: format!("<{}>", items.join(", ")) };
                        Ok(self.f.add(&base, &steps))
                    }
                    _ => Ok(base),
                }
            }
            Expr::Acc(a) => {
                let slot = self.acc_slot(a)?;
                let dtype = self.acc_dtype(a)?;
                let v = self.f.load(Ty::scalar(elem_of(class(dtype))), &slot, 4);
                Ok(self.f.splat(&v, lanes))
            }
            Expr::Unary { op, dtype, arg } => {
                let x = self.expr(arg)?;
                self.unary(op, dtype, &x)
            }
            Expr::Binary { op, dtype, lhs, rhs } => {
                let a = self.expr(lhs)?;
                let c = self.expr(rhs)?;
                self.binary(op, dtype, &a, &c)
            }
            Expr::Compare { op, operand, lhs, rhs } => {
                let a = self.expr(lhs)?;
                let c = self.expr(rhs)?;
                Ok(self.compare(op, operand, &a, &c))
            }
            Expr::Select { cond, on_true, on_false, .. } => {
                let c = self.expr(cond)?;
                let t = self.expr(on_true)?;
                let f = self.expr(on_false)?;
                Ok(self.f.select(&c, &t, &f))
            }
            Expr::Cast { from, to, arg } => {
                let x = self.expr(arg)?;
                Ok(self.cast(from, to, &x))
            }
        }
    }

    /// Rounds a float result to `dtype` (f16/bf16 values live in f32 registers).
    fn round(&mut self, dtype: DType, x: &V) -> V {
        match dtype {
            DType::F16 => convert::round_f16(&mut self.f, x, self.host.f16c),
            DType::BF16 => convert::round_bf16(&mut self.f, x),
            _ => x.clone(),
        }
    }

    fn unsupported(op: &str, dtype: DType) -> CodegenError {
        CodegenError::UnsupportedOp { op: op.into(), dtype }
    }

    fn unary(&mut self, op: UnaryOp, dtype: DType, x: &V) -> Result<V, CodegenError> {
        let f = &mut self.f;
        let n = x.ty.lanes;
        match class(dtype) {
            Class::Float => {
                let r = match op {
                    UnaryOp::Neg => f.fneg(x),
                    UnaryOp::Abs => f.intr("fabs", x.ty, &[x]),
                    UnaryOp::Exp => math::exp(f, x),
                    UnaryOp::Log => math::log(f, x),
                    UnaryOp::Sqrt => f.intr("sqrt", x.ty, &[x]),
                    UnaryOp::Rsqrt => {
                        let r = f.intr("sqrt", x.ty, &[x]);
                        f.fdiv(&f.fc(n, 1.0), &r)
                    }
                    UnaryOp::Tanh => math::tanh(f, x),
                    UnaryOp::Sigmoid => math::sigmoid(f, x),
                    UnaryOp::Relu => {
                        // NaN stays NaN; -0 and negatives become +0.
                        let zero = f.fc(n, 0.0);
                        let keep = f.fcmp(FPred::Ugt, x, &zero);
                        f.select(&keep, x, &zero)
                    }
                    UnaryOp::Gelu => math::gelu(f, x),
                };
                Ok(self.round(dtype, &r))
            }
            Class::Int => match op {
                UnaryOp::Neg => Ok(f.sub(&f.ic(Elem::I32, n, 0), x)),
                UnaryOp::Abs => Ok(f.call(x.ty, &format!("llvm.abs.{}", x.ty.suffix()), &[x, &f.bc(1, false)])),
                UnaryOp::Relu => Ok(f.intr("smax", x.ty, &[x, &f.ic(Elem::I32, n, 0)])),
                _ => Err(Self::unsupported(op.name(), dtype)),
            },
            Class::Bool => Err(Self::unsupported(op.name(), dtype)),
        }
    }

    fn binary(&mut self, op: BinaryOp, dtype: DType, a: &V, c: &V) -> Result<V, CodegenError> {
        match class(dtype) {
            Class::Float => {
                let r = match op {
                    BinaryOp::Add => self.f.fadd(a, c),
                    BinaryOp::Sub => self.f.fsub(a, c),
                    BinaryOp::Mul => self.f.fmul(a, c),
                    BinaryOp::Div => self.f.fdiv(a, c),
                    BinaryOp::Max => self.f.max_nan(a, c),
                    BinaryOp::Min => self.f.min_nan(a, c),
                    BinaryOp::Pow => self.pow(a, c),
                };
                Ok(self.round(dtype, &r))
            }
            Class::Int => Ok(match op {
                BinaryOp::Add => self.f.add(a, c),
                BinaryOp::Sub => self.f.sub(a, c),
                BinaryOp::Mul => self.f.mul(a, c),
                BinaryOp::Max => self.f.intr("smax", a.ty, &[a, c]),
                BinaryOp::Min => self.f.intr("smin", a.ty, &[a, c]),
                BinaryOp::Div => self.int_div(a, c),
                BinaryOp::Pow => return Err(Self::unsupported(op.name(), dtype)),
            }),
            Class::Bool => Err(Self::unsupported(op.name(), dtype)),
        }
    }

    /// Truncating i32 division where `x / 0 = 0` and `MIN / -1 = MIN` (wrapping), never trapping.
    fn int_div(&mut self, a: &V, c: &V) -> V {
        let f = &mut self.f;
        let n = a.ty.lanes;
        let zero = f.ic(Elem::I32, n, 0);
        let is_zero = f.icmp(IPred::Eq, c, &zero);
        let is_minus_one = f.icmp(IPred::Eq, c, &f.ic(Elem::I32, n, -1));
        let risky = f.or(&is_zero, &is_minus_one);
        let safe = f.select(&risky, &f.ic(Elem::I32, n, 1), c);
        let q = f.sdiv(a, &safe);
        let neg = f.sub(&zero, a);
        let q = f.select(&is_minus_one, &neg, &q);
        f.select(&is_zero, &zero, &q)
    }

    /// `a ^ b` through the host's `powf`, lane by lane.
    fn pow(&mut self, a: &V, c: &V) -> V {
        let f = &mut self.f;
        let ret = Ty::scalar(Elem::F32);
        if a.ty.lanes == 1 {
            return f.call(ret, "tcc_powf", &[a, c]);
        }
        let mut out = a.clone();
        for lane in 0..a.ty.lanes {
            let x = f.extract(a, lane);
            let y = f.extract(c, lane);
            let r = f.call(ret, "tcc_powf", &[&x, &y]);
            out = f.insert(&out, &r, lane);
        }
        out
    }

    fn compare(&mut self, op: CompareOp, operand: DType, a: &V, c: &V) -> V {
        match class(operand) {
            Class::Float => {
                let p = match op {
                    CompareOp::Eq => FPred::Oeq,
                    CompareOp::Ne => FPred::Une,
                    CompareOp::Lt => FPred::Olt,
                    CompareOp::Le => FPred::Ole,
                    CompareOp::Gt => FPred::Ogt,
                    CompareOp::Ge => FPred::Oge,
                };
                self.f.fcmp(p, a, c)
            }
            Class::Int | Class::Bool => {
                let signed = class(operand) == Class::Int;
                let p = match (op, signed) {
                    (CompareOp::Eq, _) => IPred::Eq,
                    (CompareOp::Ne, _) => IPred::Ne,
                    (CompareOp::Lt, true) => IPred::Slt,
                    (CompareOp::Le, true) => IPred::Sle,
                    (CompareOp::Gt, true) => IPred::Sgt,
                    (CompareOp::Ge, true) => IPred::Sge,
                    (CompareOp::Lt, false) => IPred::Ult,
                    (CompareOp::Le, false) => IPred::Ule,
                    (CompareOp::Gt, false) => IPred::Ugt,
                    (CompareOp::Ge, false) => IPred::Uge,
                };
                self.f.icmp(p, a, c)
            }
        }
    }

    fn cast(&mut self, from: DType, to: DType, x: &V) -> V {
        let n = x.ty.lanes;
        let fty = Ty::new(Elem::F32, n);
        let ity = Ty::new(Elem::I32, n);
        match (class(from), class(to)) {
            (Class::Float, Class::Float) => self.round(to, x),
            (Class::Float, Class::Int) => {
                let name = format!("llvm.fptosi.sat.{}.{}", ity.suffix(), fty.suffix());
                self.f.call(ity, &name, &[x])
            }
            // Ordered and not equal: false for NaN.
            (Class::Float, Class::Bool) => self.f.fcmp(FPred::One, x, &self.f.fc(n, 0.0)),
            (Class::Int, Class::Float) => {
                let v = self.f.conv("sitofp", x, fty);
                self.round(to, &v)
            }
            (Class::Int, Class::Int) | (Class::Bool, Class::Bool) => x.clone(),
            (Class::Int, Class::Bool) => self.f.icmp(IPred::Ne, x, &self.f.ic(Elem::I32, n, 0)),
            (Class::Bool, Class::Int) => self.f.conv("zext", x, ity),
            (Class::Bool, Class::Float) => self.f.conv("uitofp", x, fty),
        }
    }

    /// Loads `ty` from `p`; under a mask (in the tail iteration), only the real lanes.
    fn load_lanes(&mut self, ty: Ty, p: &V, align: u32) -> V {
        match self.mask.clone() {
            Some(mask) if ty.lanes > 1 => {
                let name = format!("llvm.masked.load.{}.p0", ty.suffix());
                let zero = V { ty, text: "zeroinitializer".into() };
                let align = self.f.ic(Elem::I32, 1, i64::from(align));
                self.f.call(ty, &name, &[p, &align, &mask, &zero])
            }
            _ => self.f.load(ty, p, align),
        }
    }

    /// Stores `v` to `p`; under a mask (in the tail iteration), only the real lanes.
    fn store_lanes(&mut self, v: &V, p: &V, align: u32) {
        match self.mask.clone() {
            Some(mask) if v.ty.lanes > 1 => {
                let name = format!("llvm.masked.store.{}.p0", v.ty.suffix());
                self.f.declare(format!("declare void @{name}({}, ptr, i32, {})", v.ty, mask.ty));
                self.f.line(&format!("call void @{name}({v}, {p}, i32 {align}, {mask})"));
            }
            _ => self.f.store(v, p, align),
        }
    }

    fn load(&mut self, buf: BufId, index: &Index) -> Result<V, CodegenError> {
        let dtype = self.k.buf(buf).ok_or_else(|| self.bad("unknown buffer"))?.dtype;
        let addr = self.address(buf, index)?;
        let n = self.lanes();
        Ok(match dtype {
            DType::F32 => self.load_lanes(Ty::new(Elem::F32, n), &addr, 4),
            DType::I32 => self.load_lanes(Ty::new(Elem::I32, n), &addr, 4),
            DType::Bool => {
                let bytes = self.load_lanes(Ty::new(Elem::I8, n), &addr, 1);
                self.f.icmp(IPred::Ne, &bytes, &self.f.ic(Elem::I8, n, 0))
            }
            DType::F16 | DType::BF16 => {
                let bits = self.load_lanes(Ty::new(Elem::I16, n), &addr, 2);
                let f = &mut self.f;
                if dtype == DType::F16 && self.host.f16c {
                    let h = f.bitcast(&bits, Elem::F16);
                    f.conv("fpext", &h, Ty::new(Elem::F32, n))
                } else {
                    let wide = f.conv("zext", &bits, Ty::new(Elem::I32, n));
                    if dtype == DType::F16 {
                        convert::f16_bits_to_f32(f, &wide)
                    } else {
                        convert::bf16_bits_to_f32(f, &wide)
                    }
                }
            }
        })
    }

    fn store(&mut self, buf: BufId, index: &Index, v: &V) -> Result<(), CodegenError> {
        let dtype = self.k.buf(buf).ok_or_else(|| self.bad("unknown buffer"))?.dtype;
        if v.ty.elem != elem_of(class(dtype)) {
            return Err(self.bad(format!("a {} value stored into a {dtype} buffer", v.ty)));
        }
        let addr = self.address(buf, index)?;
        let n = v.ty.lanes;
        let f = &mut self.f;
        let (bits, align) = match dtype {
            DType::F32 | DType::I32 => (v.clone(), 4),
            DType::Bool => (f.conv("zext", v, Ty::new(Elem::I8, n)), 1),
            DType::F16 if self.host.f16c => {
                let h = f.conv("fptrunc", v, Ty::new(Elem::F16, n));
                (f.bitcast(&h, Elem::I16), 2)
            }
            DType::F16 | DType::BF16 => {
                let wide =
                    if dtype == DType::F16 { convert::f32_to_f16_bits(f, v) } else { convert::f32_to_bf16_bits(f, v) };
                (f.conv("trunc", &wide, Ty::new(Elem::I16, n)), 2)
            }
        };
        self.store_lanes(&bits, &addr, align);
        Ok(())
    }
}

/// The constant vector `<start, start + 1, ..., start + lanes - 1>` of i32.
pub(super) fn iota(lanes: u32, start: u32) -> V {
    let items: Vec<String> = (0..lanes).map(|l| format!("i32 {}", start + l)).collect();
    V { ty: Ty::new(Elem::I32, lanes), text: format!("<{}>", items.join(", ")) }
}
