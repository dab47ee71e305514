//! Emission of a [`LoopKernel`] as one cranelift function with the uniform ABI
//! `extern "C" fn(bufs: *const *mut u8, row_begin: u64, row_end: u64)`.
//!
//! Every loop runs as scalar code; an innermost loop whose stores are contiguous along its
//! variable, whose loads are contiguous or invariant along it and whose ops all have vector forms
//! runs four lanes at a time (`f32x4`/`i32x4`), with a scalar loop for the tail and vector
//! accumulators for reductions. Expressions are computed once per loop body (the arena is
//! hash-consed), and expressions that do not depend on the vectorized variable are computed as
//! scalars and broadcast.

use std::collections::HashMap;

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{Endianness, FuncRef, InstBuilder, MemFlagsData, Type, Value, types};
use cranelift_frontend::{FunctionBuilder, Variable};
use tcc_ir::{BinaryOp, CompareOp, DType, UnaryOp};

use super::convert;
use super::math;
use super::simd::Simd;
use super::tile::TileShape;
use crate::cpu::analysis::{self, ExprReads, Moving, VectorSupport, Visit};
use crate::cpu::memo::Memo;
use crate::cpu::target::CpuCaps;
use crate::cpu::{Class, class};
use crate::error::CodegenError;
use crate::loops::{AccId, BufId, Combine, Expr, ExprId, Extent, Index, LoopKernel, MicroKernel, Phase, Stmt, VarId};

/// What the four-lane code cannot do: bool vectors live as `i32x4` masks, never in memory, and
/// x86 has no vector integer division.
const VECTOR_SUPPORT: VectorSupport = VectorSupport { bool_memory: false, int_division: false };

/// Lanes of the code being emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Scalar,
    /// Four consecutive values of the variable per iteration.
    Vector(VarId),
}

/// Emits phase `phase` of `kernel` into the function `b` is building (its signature is the
/// uniform ABI).
pub fn emit_phase(
    kernel: &LoopKernel,
    phase: &Phase,
    caps: CpuCaps,
    b: FunctionBuilder<'_>,
    imports: Imports,
    frontend: cranelift_codegen::isa::TargetFrontendConfig,
) -> Result<(), CodegenError> {
    let mut e = Emitter::new(kernel, caps, b, imports);
    e.entry(phase)?;
    e.b.seal_all_blocks();
    e.b.finalize(frontend);
    Ok(())
}

/// The functions a phase calls, declared in its function.
#[derive(Debug, Clone)]
pub struct Imports {
    /// The host's `powf` (`tcc_powf`).
    pub pow: FuncRef,
    /// The assembled matrix-product tiles ([`super::tile`]) by shape; a tile without one runs
    /// as cranelift IR.
    pub tiles: HashMap<TileShape, FuncRef>,
}

struct Emitter<'k, 'f> {
    k: &'k LoopKernel,
    caps: CpuCaps,
    b: FunctionBuilder<'f>,
    imports: Imports,
    bases: Vec<Value>,
    vars: HashMap<VarId, Variable>,
    accs: Vec<Variable>,
    vaccs: HashMap<AccId, Variable>,
    /// Computed values by expression and whether they are vectors.
    memo: Memo<bool, Value>,
    reads: ExprReads,
    /// What moves with the variable of the vector loop being emitted.
    depends: Moving,
    mode: Mode,
    /// While an innermost scalar loop is emitted: its variable and one pointer per access
    /// (buffer, index without the variable's term, that term's coefficient), advanced every
    /// iteration (see [`Emitter::hoist_addresses`]).
    hoisted: Option<(VarId, Pointers)>,
}

/// Pointer variables of an innermost loop's accesses, each with its (buffer, index without the
/// loop variable's term, that term's coefficient), in the order the accesses were found.
type Pointers = Vec<((BufId, Index, i64), Variable)>;

/// Most pointers an innermost scalar loop keeps in registers.
const MAX_HOISTED: usize = 6;

/// Innermost vector loops of a constant trip count up to this many elements (a multiple of four)
/// are emitted as straight-line vectors (a packed B panel's row of 8 to 32 columns).
const UNROLLED_ELEMENTS: u64 = 32;

fn mem() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

fn le() -> MemFlagsData {
    MemFlagsData::new().with_endianness(Endianness::Little)
}

impl<'k, 'f> Emitter<'k, 'f> {
    fn new(k: &'k LoopKernel, caps: CpuCaps, b: FunctionBuilder<'f>, imports: Imports) -> Emitter<'k, 'f> {
        Emitter {
            k,
            caps,
            b,
            imports,
            bases: Vec::new(),
            vars: HashMap::new(),
            accs: Vec::new(),
            vaccs: HashMap::new(),
            memo: Memo::new(),
            reads: ExprReads::of(k),
            depends: Moving::default(),
            mode: Mode::Scalar,
            hoisted: None,
        }
    }

    fn bad(&self, reason: impl Into<String>) -> CodegenError {
        CodegenError::malformed(&self.k.name, reason)
    }

    fn simd(&mut self, vector: bool) -> Simd<'_, 'f> {
        Simd { b: &mut self.b, vector, fma: self.caps.has_fma }
    }

    fn vector(&self) -> bool {
        matches!(self.mode, Mode::Vector(_))
    }

    fn entry(&mut self, phase: &Phase) -> Result<(), CodegenError> {
        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.b.switch_to_block(entry);
        let params = self.b.block_params(entry).to_vec();
        let [ptrs, row_begin, row_end] = params[..] else {
            return Err(self.bad("the function signature is not the uniform ABI"));
        };
        for i in 0..self.k.bufs.len() {
            let offset = i32::try_from(i * 8).map_err(|_| self.bad("too many buffers"))?;
            let base = self.b.ins().load(types::I64, MemFlagsData::trusted().with_readonly(), ptrs, offset);
            self.bases.push(base);
        }
        for &dtype in &self.k.accs {
            let ty = match class(dtype) {
                Class::Float => types::F32,
                Class::Int => types::I32,
                Class::Bool => types::I8,
            };
            let v = self.b.declare_var(ty);
            let zero = self.zero_of(ty);
            self.b.def_var(v, zero);
            self.accs.push(v);
        }
        match phase.row_var {
            Some(r) => {
                let rows = self.b.ins().iconst(types::I64, i64::try_from(phase.rows).unwrap_or(i64::MAX));
                let end = self.b.ins().smin(row_end, rows);
                self.counted_loop(r, row_begin, end, &phase.row_digits(), &phase.body)?;
            }
            None => {
                let body = self.b.create_block();
                let exit = self.b.create_block();
                let go = self.b.ins().icmp(IntCC::SignedLessThan, row_begin, row_end);
                self.b.ins().brif(go, body, &[], exit, &[]);
                self.b.switch_to_block(body);
                self.stmts(&phase.body)?;
                self.b.ins().jump(exit, &[]);
                self.b.switch_to_block(exit);
            }
        }
        self.b.ins().return_(&[]);
        Ok(())
    }

    fn zero_of(&mut self, ty: Type) -> Value {
        if ty == types::F32 { self.b.ins().f32const(0.0) } else { self.b.ins().iconst(ty, 0) }
    }

    fn var(&mut self, v: VarId) -> Variable {
        if let Some(&x) = self.vars.get(&v) {
            return x;
        }
        let x = self.b.declare_var(types::I64);
        self.vars.insert(v, x);
        x
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
                if self.vector() {
                    return Err(self.bad("a conditional inside a vector loop"));
                }
                let c = self.expr(*cond)?;
                let then = self.b.create_block();
                let done = self.b.create_block();
                self.b.ins().brif(c, then, &[], done, &[]);
                self.b.switch_to_block(then);
                self.memo.enter();
                let result = self.stmts(body);
                self.memo.leave();
                result?;
                self.b.ins().jump(done, &[]);
                self.b.switch_to_block(done);
                Ok(())
            }
            Stmt::MicroKernel(mk) => {
                if self.vector() {
                    return Err(self.bad("micro-kernel inside a vector loop"));
                }
                self.micro_kernel(mk)?;
                self.memo.forget_readers(mk.c, &self.reads);
                Ok(())
            }
            Stmt::Store { buf, index, value } => {
                let v = self.expr(*value)?;
                self.store(*buf, index, v)?;
                self.memo.forget_readers(*buf, &self.reads);
                Ok(())
            }
            Stmt::AccInit { acc, value } => {
                if self.vector() {
                    return Err(self.bad("accumulator initialized inside a vector loop"));
                }
                let v = self.expr(*value)?;
                let var = self.acc_var(*acc)?;
                self.b.def_var(var, v);
                Ok(())
            }
            Stmt::AccUpdate { acc, combine, value } => {
                let v = self.expr(*value)?;
                let dtype = self.acc_dtype(*acc)?;
                let var = match self.mode {
                    Mode::Scalar => self.acc_var(*acc)?,
                    Mode::Vector(_) => *self.vaccs.get(acc).ok_or_else(|| self.bad("vector accumulator missing"))?,
                };
                let cur = self.b.use_var(var);
                let new = self.combine(*combine, dtype, cur, v);
                self.b.def_var(var, new);
                Ok(())
            }
        }
    }

    fn acc_var(&self, a: AccId) -> Result<Variable, CodegenError> {
        self.accs.get(a.0 as usize).copied().ok_or_else(|| self.bad(format!("unknown accumulator {}", a.0)))
    }

    fn acc_dtype(&self, a: AccId) -> Result<DType, CodegenError> {
        self.k.accs.get(a.0 as usize).copied().ok_or_else(|| self.bad(format!("unknown accumulator {}", a.0)))
    }

    fn combine(&mut self, c: Combine, dtype: DType, a: Value, v: Value) -> Value {
        let float = class(dtype) == Class::Float;
        match (c, float) {
            (Combine::Add, true) => self.b.ins().fadd(a, v),
            (Combine::Add, false) => self.b.ins().iadd(a, v),
            (Combine::Max, true) => self.reduce_minmax(true, a, v),
            (Combine::Max, false) => self.b.ins().smax(a, v),
            (Combine::Min, true) => self.reduce_minmax(false, a, v),
            (Combine::Min, false) => self.b.ins().smin(a, v),
        }
    }

    /// `a < v ? v : a` (max; `v < a ? v : a` for min) that keeps NaN: `v` when `v` is NaN, else
    /// `a` when `a` is (a NaN never compares). A tie keeps `a`, as the interpreter's elementwise
    /// max and min do (`max(-0, +0)` is -0). The compare-and-select becomes one
    /// `maxps`/`minps`; cranelift's IEEE `fmax` costs several instructions on x86.
    fn fminmax(&mut self, max: bool, a: Value, v: Value) -> Value {
        let vector = self.vector_value(a);
        let mut s = self.simd(vector);
        let better = if max { s.fcmp(FloatCC::LessThan, a, v) } else { s.fcmp(FloatCC::LessThan, v, a) };
        let m = s.sel(better, v, a);
        let nan = s.fcmp(FloatCC::Unordered, v, v);
        s.sel(nan, v, m)
    }

    /// A max (min) reduction step: [`Self::fminmax`], except that zeros of both signs end on +0
    /// (-0), whichever comes first, so the result does not depend on the reduction's order
    /// (contract §5). Where the operands tie, `a & v` (`a | v`) is either of them, or +0 (-0)
    /// for two zeros of different signs.
    fn reduce_minmax(&mut self, max: bool, a: Value, v: Value) -> Value {
        let m = self.fminmax(max, a, v);
        let vector = self.vector_value(a);
        let mut s = self.simd(vector);
        let tie = s.fcmp(FloatCC::Equal, a, v);
        let (ai, vi) = (s.as_int(a), s.as_int(v));
        let bits = if max { s.b.ins().band(ai, vi) } else { s.b.ins().bor(ai, vi) };
        let zero = s.as_float(bits);
        s.sel(tie, zero, m)
    }

    fn vector_value(&self, x: Value) -> bool {
        self.b.func.dfg.value_type(x).is_vector()
    }

    /// The value of an affine index (an `i64`).
    fn index_value(&mut self, index: &Index) -> Value {
        let mut v = self.b.ins().iconst(types::I64, index.offset);
        for &(var, c) in &index.terms {
            let x = self.var(var);
            let x = self.b.use_var(x);
            let scaled = self.b.ins().imul_imm_s(x, c);
            v = self.b.ins().iadd(v, scaled);
        }
        v
    }

    fn extent(&mut self, extent: Extent) -> Value {
        match extent {
            Extent::Const(n) => self.b.ins().iconst(types::I64, i64::try_from(n).unwrap_or(i64::MAX)),
            Extent::Tail { total, block, outer } => {
                let o = self.index_value(&outer);
                let done = self.b.ins().imul_imm_s(o, i64::try_from(block).unwrap_or(i64::MAX));
                let total = self.b.ins().iconst(types::I64, i64::try_from(total).unwrap_or(i64::MAX));
                let rest = self.b.ins().isub(total, done);
                let block = self.b.ins().iconst(types::I64, i64::try_from(block).unwrap_or(i64::MAX));
                self.b.ins().smin(rest, block)
            }
        }
    }

    fn emit_loop(&mut self, var: VarId, extent: &Extent, body: &[Stmt]) -> Result<(), CodegenError> {
        if let Extent::Const(trips) = *extent
            && trips.is_multiple_of(4)
            && (4..=UNROLLED_ELEMENTS).contains(&trips)
            && self.mode == Mode::Scalar
            && analysis::updated_accs(body).is_empty()
            && self.vectorizable(var, body)
        {
            self.hoist_uniform(var, body)?;
            return self.unrolled_vector_loop(var, trips, body);
        }
        let n = self.extent(extent.clone());
        if extent.max() >= 4 && self.mode == Mode::Scalar && self.vectorizable(var, body) {
            self.hoist_uniform(var, body)?;
            let start = self.vector_loop(var, n, body);
            let start = start?;
            return self.scalar_loop(var, start, n, body);
        }
        let zero = self.b.ins().iconst(types::I64, 0);
        self.scalar_loop(var, zero, n, body)
    }

    /// Before an innermost scalar loop over `var` starting at `start`: one pointer variable per
    /// distinct access (at most [`MAX_HOISTED`]), set to the access's address at `start` and
    /// advanced by [`Emitter::advance_pointers`] every iteration; [`Emitter::address`] then
    /// returns the pointer. Cranelift would otherwise recompute every outer loop's term of
    /// every index in every iteration (it does not move them out of the loop). Returns whether
    /// it did.
    fn hoist_addresses(&mut self, var: VarId, start: Value, body: &[Stmt]) -> Result<bool, CodegenError> {
        if self.hoisted.is_some()
            || !body.iter().all(|s| matches!(s, Stmt::Store { .. } | Stmt::AccInit { .. } | Stmt::AccUpdate { .. }))
        {
            return Ok(false);
        }
        let mut keys: Vec<(BufId, Index, i64)> = Vec::new();
        let mut add = |buf: BufId, index: &Index| {
            let key = (buf, index.substitute(var, &Index::constant(0)), index.coef(var));
            if !key.1.terms.is_empty() && !keys.contains(&key) {
                keys.push(key);
            }
        };
        let mut roots = Vec::new();
        for s in body {
            match s {
                Stmt::Store { buf, index, value } => {
                    add(*buf, index);
                    roots.push(*value);
                }
                Stmt::AccInit { value, .. } | Stmt::AccUpdate { value, .. } => roots.push(*value),
                _ => {}
            }
        }
        let k = self.k;
        analysis::walk(k, roots, |e| {
            if let Some(Expr::Load { buf, index }) = k.expr(e) {
                add(*buf, index);
            }
            Visit::Operands
        });
        if keys.is_empty() || keys.len() > MAX_HOISTED {
            return Ok(false);
        }
        let mut map = Vec::with_capacity(keys.len());
        for key in keys {
            let (buf, rest, coef) = &key;
            let size = self.k.buf(*buf).map_or(1, |d| i64::try_from(d.dtype.size_bytes()).unwrap_or(1));
            let base = self.address(*buf, rest)?;
            let step = self.b.ins().imul_imm_s(start, coef.wrapping_mul(size));
            let at = self.b.ins().iadd(base, step);
            let p = self.b.declare_var(types::I64);
            self.b.def_var(p, at);
            map.push((key, p));
        }
        self.hoisted = Some((var, map));
        Ok(true)
    }

    /// Moves the pointers of [`Emitter::hoist_addresses`] to the next iteration.
    fn advance_pointers(&mut self) {
        let Some((_, map)) = &self.hoisted else { return };
        let steps: Vec<(Variable, i64)> = map
            .iter()
            .filter(|((_, _, coef), _)| *coef != 0)
            .map(|&((buf, _, coef), p)| {
                let size = self.k.buf(buf).map_or(1, |d| i64::try_from(d.dtype.size_bytes()).unwrap_or(1));
                (p, coef.wrapping_mul(size))
            })
            .collect();
        for (p, step) in steps {
            let v = self.b.use_var(p);
            let next = self.b.ins().iadd_imm_s(v, step);
            self.b.def_var(p, next);
        }
    }

    /// `for var in start..end { body }`.
    fn scalar_loop(&mut self, var: VarId, start: Value, end: Value, body: &[Stmt]) -> Result<(), CodegenError> {
        self.counted_loop(var, start, end, &[], body)
    }

    /// A scalar loop that first binds, in each iteration, every `(part, divisor, trips)` of
    /// `digits` to `var / divisor % trips` (a collapsed row, [`Phase::row_digits`]).
    fn counted_loop(
        &mut self,
        var: VarId,
        start: Value,
        end: Value,
        digits: &[(VarId, u64, u64)],
        body: &[Stmt],
    ) -> Result<(), CodegenError> {
        let v = self.var(var);
        self.b.def_var(v, start);
        let hoisted = digits.is_empty() && self.hoist_addresses(var, start, body)?;
        let header = self.b.create_block();
        let block = self.b.create_block();
        let exit = self.b.create_block();
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(header);
        let i = self.b.use_var(v);
        let go = self.b.ins().icmp(IntCC::SignedLessThan, i, end);
        self.b.ins().brif(go, block, &[], exit, &[]);
        self.b.switch_to_block(block);
        for &(part, divisor, trips) in digits {
            let i = self.b.use_var(v);
            let quotient = self.b.ins().udiv_imm_u(i, i64::try_from(divisor.max(1)).unwrap_or(i64::MAX));
            let digit = self.b.ins().urem_imm_u(quotient, i64::try_from(trips.max(1)).unwrap_or(i64::MAX));
            let p = self.var(part);
            self.b.def_var(p, digit);
        }
        self.memo.enter();
        let result = self.stmts(body);
        self.memo.leave();
        if hoisted {
            self.advance_pointers();
            self.hoisted = None;
        }
        result?;
        let i = self.b.use_var(v);
        let next = self.b.ins().iadd_imm_s(i, 1);
        self.b.def_var(v, next);
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(exit);
        Ok(())
    }

    /// The `trips` iterations of a vector loop without a reduction, four at a time and without
    /// loop control: the loop variable is a constant in each copy, so cranelift folds the
    /// addresses to one base (computed once) plus constant offsets.
    fn unrolled_vector_loop(&mut self, var: VarId, trips: u64, body: &[Stmt]) -> Result<(), CodegenError> {
        self.depends = Moving::with(self.k, var);
        let v = self.var(var);
        for first in (0..trips).step_by(4) {
            let at = self.b.ins().iconst(types::I64, i64::try_from(first).unwrap_or(i64::MAX));
            self.b.def_var(v, at);
            self.vector_copy(var, body)?;
        }
        Ok(())
    }

    /// `body` once in four lanes, for the lanes starting at the loop variable's current value.
    fn vector_copy(&mut self, var: VarId, body: &[Stmt]) -> Result<(), CodegenError> {
        self.mode = Mode::Vector(var);
        self.memo.enter();
        let result = self.stmts(body);
        self.memo.leave();
        self.mode = Mode::Scalar;
        result
    }

    /// Four iterations at a time while they fit; returns the first index left for the tail.
    /// Pure reductions run four vectors per iteration into separate accumulators (so the
    /// combining instruction's latency overlaps), then one vector at a time.
    fn vector_loop(&mut self, var: VarId, end: Value, body: &[Stmt]) -> Result<Value, CodegenError> {
        self.depends = Moving::with(self.k, var);
        let updated = analysis::updated_accs(body);
        // Four vectors per iteration: reductions get separate accumulators (so the combining
        // instruction's latency overlaps), every body spreads the loop's own cost.
        let unroll = 4;
        let mut sets: Vec<HashMap<AccId, Variable>> = Vec::with_capacity(unroll);
        for _ in 0..unroll {
            let mut set = HashMap::new();
            for &(acc, combine) in &updated {
                let dtype = self.acc_dtype(acc)?;
                let float = class(dtype) == Class::Float;
                let identity = combine.identity(float);
                let mut s = self.simd(true);
                let init = if float { s.fc(identity as f32) } else { s.ic(identity as i32) };
                let ty = if float { types::F32X4 } else { types::I32X4 };
                let x = self.b.declare_var(ty);
                self.b.def_var(x, init);
                set.insert(acc, x);
            }
            sets.push(set);
        }
        let v = self.var(var);
        let zero = self.b.ins().iconst(types::I64, 0);
        self.b.def_var(v, zero);
        let passes: &[usize] = if unroll > 1 { &[4, 1] } else { &[1] };
        for &copies in passes {
            let header = self.b.create_block();
            let block = self.b.create_block();
            let exit = self.b.create_block();
            self.b.ins().jump(header, &[]);
            self.b.switch_to_block(header);
            let i = self.b.use_var(v);
            let next = self.b.ins().iadd_imm_s(i, 4 * copies as i64);
            let go = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, next, end);
            self.b.ins().brif(go, block, &[], exit, &[]);
            self.b.switch_to_block(block);
            let i = self.b.use_var(v);
            for (c, set) in sets.iter().enumerate().take(copies) {
                let at = self.b.ins().iadd_imm_s(i, 4 * c as i64);
                self.b.def_var(v, at);
                self.vaccs = set.clone();
                self.vector_copy(var, body)?;
            }
            let next = self.b.ins().iadd_imm_s(i, 4 * copies as i64);
            self.b.def_var(v, next);
            self.b.ins().jump(header, &[]);
            self.b.switch_to_block(exit);
        }
        self.vaccs.clear();
        for (acc, combine) in updated {
            let dtype = self.acc_dtype(acc)?;
            let mut vec = None;
            for set in &sets {
                let Some(&x) = set.get(&acc) else { continue };
                let part = self.b.use_var(x);
                vec = Some(match vec {
                    None => part,
                    Some(prev) => self.combine(combine, dtype, prev, part),
                });
            }
            let Some(vec) = vec else { continue };
            let lanes: Vec<Value> = (0..4).map(|l| self.b.ins().extractlane(vec, l)).collect();
            let lo = self.combine(combine, dtype, lanes[0], lanes[1]);
            let hi = self.combine(combine, dtype, lanes[2], lanes[3]);
            let all = self.combine(combine, dtype, lo, hi);
            let var = self.acc_var(acc)?;
            let cur = self.b.use_var(var);
            let new = self.combine(combine, dtype, cur, all);
            self.b.def_var(var, new);
        }
        Ok(self.b.use_var(v))
    }

    /// Computes, before a vector loop over `var`, the subexpressions [`analysis::uniform_exprs`]
    /// finds, as scalars and as broadcasts; the loop body then finds them in the memo.
    fn hoist_uniform(&mut self, var: VarId, body: &[Stmt]) -> Result<(), CodegenError> {
        self.depends = Moving::with(self.k, var);
        for e in analysis::uniform_exprs(self.k, &self.reads, &self.depends, body) {
            let scalar = self.expr(e)?;
            let dtype = self.k.dtype_of(e).ok_or_else(|| self.bad("dangling expression"))?;
            let wide = self.splat(dtype, scalar);
            self.memo.insert(e, true, wide);
        }
        Ok(())
    }

    /// True if the innermost loop over `var` with `body` has a four-lane form on this CPU.
    fn vectorizable(&self, var: VarId, body: &[Stmt]) -> bool {
        self.caps.has_sse41
            && self.caps.f32_lanes == 4
            && analysis::vectorizable(self.k, &self.reads, var, body, VECTOR_SUPPORT)
    }

    /// The byte address of element `index` of `buf`.
    fn address(&mut self, buf: BufId, index: &Index) -> Result<Value, CodegenError> {
        let decl = *self.k.buf(buf).ok_or_else(|| self.bad(format!("unknown buffer {}", buf.0)))?;
        let base = *self.bases.get(buf.0 as usize).ok_or_else(|| self.bad("buffer base missing"))?;
        let size = i64::try_from(decl.dtype.size_bytes()).unwrap_or(1);
        if let Some((lv, map)) = &self.hoisted {
            let key = (buf, index.substitute(*lv, &Index::constant(0)), index.coef(*lv));
            if let Some(&(_, p)) = map.iter().find(|(k, _)| *k == key) {
                return Ok(self.b.use_var(p));
            }
        }
        let mut addr =
            if index.offset != 0 { self.b.ins().iadd_imm_s(base, index.offset.wrapping_mul(size)) } else { base };
        for &(v, c) in &index.terms {
            let x = self.var(v);
            let x = self.b.use_var(x);
            let scaled = self.b.ins().imul_imm_s(x, c.wrapping_mul(size));
            addr = self.b.ins().iadd(addr, scaled);
        }
        Ok(addr)
    }

    fn expr(&mut self, e: ExprId) -> Result<Value, CodegenError> {
        let vector = self.vector();
        let cacheable = !self.reads.acc(e);
        if cacheable && let Some(v) = self.memo.get(e, vector) {
            return Ok(v);
        }
        let v = if vector && !self.depends.moves(e) {
            let saved = self.mode;
            self.mode = Mode::Scalar;
            let s = self.expr(e);
            self.mode = saved;
            let s = s?;
            let dtype = self.k.dtype_of(e).ok_or_else(|| self.bad("dangling expression"))?;
            self.splat(dtype, s)
        } else {
            self.compute(e)?
        };
        if cacheable {
            self.memo.insert(e, vector, v);
        }
        Ok(v)
    }

    /// Broadcasts a scalar of `dtype`'s class to four lanes.
    fn splat(&mut self, dtype: DType, s: Value) -> Value {
        match class(dtype) {
            Class::Float => self.b.ins().splat(types::F32X4, s),
            Class::Int => self.b.ins().splat(types::I32X4, s),
            Class::Bool => {
                let wide = self.b.ins().uextend(types::I32, s);
                let mask = self.b.ins().ineg(wide);
                self.b.ins().splat(types::I32X4, mask)
            }
        }
    }

    fn compute(&mut self, e: ExprId) -> Result<Value, CodegenError> {
        let expr = self.k.expr(e).ok_or_else(|| self.bad("dangling expression"))?.clone();
        let vector = self.vector();
        match expr {
            Expr::Const { dtype, bits } => {
                let value = f64::from_bits(bits);
                let mut s = self.simd(vector);
                Ok(match class(dtype) {
                    Class::Float => s.fc(value as f32),
                    Class::Int => s.ic(value as i32),
                    Class::Bool => {
                        let on = value != 0.0 && !value.is_nan();
                        if vector { s.ic(if on { -1 } else { 0 }) } else { s.b.ins().iconst(types::I8, i64::from(on)) }
                    }
                })
            }
            Expr::Load { buf, index } => self.load(buf, &index),
            Expr::Position(index) => {
                // In a vector loop the variable holds lane 0's value; lane `l` adds `l * coef`.
                let wide = self.index_value(&index);
                let v = self.b.ins().ireduce(types::I32, wide);
                let step = match self.mode {
                    Mode::Vector(var) if vector => index.coef(var),
                    _ => return Ok(if vector { self.splat(DType::I32, v) } else { v }),
                };
                let base = self.splat(DType::I32, v);
                let zero = self.b.ins().iconst(types::I32, 0);
                let mut steps = self.b.ins().splat(types::I32X4, zero);
                for lane in 1..4u8 {
                    let x = self.b.ins().iconst(types::I32, step.wrapping_mul(i64::from(lane)));
                    steps = self.b.ins().insertlane(steps, x, lane);
                }
                Ok(self.b.ins().iadd(base, steps))
            }
            Expr::Acc(a) => {
                let var = self.acc_var(a)?;
                let v = self.b.use_var(var);
                match self.k.accs.get(a.0 as usize) {
                    Some(&d) if vector => Ok(self.splat(d, v)),
                    _ => Ok(v),
                }
            }
            Expr::Unary { op, dtype, arg } => {
                let x = self.expr(arg)?;
                self.unary(op, dtype, x)
            }
            Expr::Binary { op, dtype, lhs, rhs } => {
                let a = self.expr(lhs)?;
                let c = self.expr(rhs)?;
                self.binary(op, dtype, a, c)
            }
            Expr::Compare { op, operand, lhs, rhs } => {
                let a = self.expr(lhs)?;
                let c = self.expr(rhs)?;
                Ok(self.compare(op, operand, a, c))
            }
            Expr::Select { cond, on_true, on_false, .. } => {
                let c = self.expr(cond)?;
                let t = self.expr(on_true)?;
                let f = self.expr(on_false)?;
                Ok(self.simd(vector).sel(c, t, f))
            }
            Expr::Cast { from, to, arg } => {
                let x = self.expr(arg)?;
                Ok(self.cast(from, to, x))
            }
        }
    }

    /// Rounds a float result to `dtype` (f16/bf16 values live in f32 registers).
    fn round(&mut self, dtype: DType, x: Value) -> Value {
        let vector = self.vector();
        let mut s = self.simd(vector);
        match dtype {
            DType::F16 => convert::round_f16(&mut s, x),
            DType::BF16 => convert::round_bf16(&mut s, x),
            _ => x,
        }
    }

    fn unary(&mut self, op: UnaryOp, dtype: DType, x: Value) -> Result<Value, CodegenError> {
        let vector = self.vector();
        match class(dtype) {
            Class::Float => {
                let mut s = self.simd(vector);
                let r = match op {
                    UnaryOp::Neg => s.b.ins().fneg(x),
                    UnaryOp::Abs => s.b.ins().fabs(x),
                    UnaryOp::Exp => math::exp(&mut s, x),
                    UnaryOp::Log => math::log(&mut s, x),
                    UnaryOp::Sqrt => s.b.ins().sqrt(x),
                    UnaryOp::Rsqrt => {
                        let r = s.b.ins().sqrt(x);
                        let one = s.fc(1.0);
                        s.b.ins().fdiv(one, r)
                    }
                    UnaryOp::Tanh => math::tanh(&mut s, x),
                    UnaryOp::Sigmoid => math::sigmoid(&mut s, x),
                    UnaryOp::Relu => {
                        // `x <= 0 ? 0 : x` (NaN stays NaN, -0 gives +0): a compare and a mask
                        // where `fmax` costs several instructions on x86.
                        let zero = s.fc(0.0);
                        let c = s.fcmp(FloatCC::LessThanOrEqual, x, zero);
                        s.sel(c, zero, x)
                    }
                    UnaryOp::Gelu => math::gelu(&mut s, x),
                };
                Ok(self.round(dtype, r))
            }
            Class::Int => {
                let mut s = self.simd(vector);
                match op {
                    UnaryOp::Neg => Ok(s.b.ins().ineg(x)),
                    UnaryOp::Abs => Ok(s.b.ins().iabs(x)),
                    UnaryOp::Relu => {
                        let zero = s.ic(0);
                        Ok(s.b.ins().smax(x, zero))
                    }
                    _ => Err(CodegenError::UnsupportedOp { op: op.name().into(), dtype }),
                }
            }
            Class::Bool => Err(CodegenError::UnsupportedOp { op: op.name().into(), dtype }),
        }
    }

    fn binary(&mut self, op: BinaryOp, dtype: DType, a: Value, c: Value) -> Result<Value, CodegenError> {
        let vector = self.vector();
        match class(dtype) {
            Class::Float => {
                let r = match op {
                    BinaryOp::Add => self.b.ins().fadd(a, c),
                    BinaryOp::Sub => self.b.ins().fsub(a, c),
                    BinaryOp::Mul => self.b.ins().fmul(a, c),
                    BinaryOp::Div => self.b.ins().fdiv(a, c),
                    // `a` where they tie, as the interpreter (`max(-0, +0)` is -0; cranelift's
                    // IEEE `fmax` would give +0, and costs several instructions on x86).
                    BinaryOp::Max => self.fminmax(true, a, c),
                    BinaryOp::Min => self.fminmax(false, a, c),
                    BinaryOp::Pow => self.pow(a, c),
                };
                Ok(self.round(dtype, r))
            }
            Class::Int => Ok(match op {
                BinaryOp::Add => self.b.ins().iadd(a, c),
                BinaryOp::Sub => self.b.ins().isub(a, c),
                BinaryOp::Mul => self.b.ins().imul(a, c),
                BinaryOp::Max => self.b.ins().smax(a, c),
                BinaryOp::Min => self.b.ins().smin(a, c),
                BinaryOp::Div if !vector => self.int_div(a, c),
                BinaryOp::Div | BinaryOp::Pow => {
                    return Err(CodegenError::UnsupportedOp { op: op.name().into(), dtype });
                }
            }),
            Class::Bool => Err(CodegenError::UnsupportedOp { op: op.name().into(), dtype }),
        }
    }

    /// Truncating i32 division where `x / 0 = 0` and `MIN / -1 = MIN` (wrapping), never trapping.
    fn int_div(&mut self, a: Value, c: Value) -> Value {
        let zero = self.b.ins().icmp_imm_s(IntCC::Equal, c, 0);
        let minus_one = self.b.ins().icmp_imm_s(IntCC::Equal, c, -1);
        let risky = self.b.ins().bor(zero, minus_one);
        let one = self.b.ins().iconst(types::I32, 1);
        let safe = self.b.ins().select(risky, one, c);
        let q = self.b.ins().sdiv(a, safe);
        let neg = self.b.ins().ineg(a);
        let q = self.b.ins().select(minus_one, neg, q);
        let z = self.b.ins().iconst(types::I32, 0);
        self.b.ins().select(zero, z, q)
    }

    /// `a ^ b` through the host's `powf`, lane by lane.
    fn pow(&mut self, a: Value, c: Value) -> Value {
        let pow = self.imports.pow;
        if !self.vector() {
            let call = self.b.ins().call(pow, &[a, c]);
            return self.b.inst_results(call)[0];
        }
        let mut out = None;
        for lane in 0..4u8 {
            let x = self.b.ins().extractlane(a, lane);
            let y = self.b.ins().extractlane(c, lane);
            let call = self.b.ins().call(pow, &[x, y]);
            let r = self.b.inst_results(call)[0];
            out = Some(match out {
                None => self.b.ins().splat(types::F32X4, r),
                Some(v) => self.b.ins().insertlane(v, r, lane),
            });
        }
        out.unwrap_or(a)
    }

    fn compare(&mut self, op: CompareOp, operand: DType, a: Value, c: Value) -> Value {
        match class(operand) {
            Class::Float => {
                let cc = match op {
                    CompareOp::Eq => FloatCC::Equal,
                    CompareOp::Ne => FloatCC::NotEqual,
                    CompareOp::Lt => FloatCC::LessThan,
                    CompareOp::Le => FloatCC::LessThanOrEqual,
                    CompareOp::Gt => FloatCC::GreaterThan,
                    CompareOp::Ge => FloatCC::GreaterThanOrEqual,
                };
                self.b.ins().fcmp(cc, a, c)
            }
            Class::Int | Class::Bool => {
                let signed = class(operand) == Class::Int;
                let cc = match (op, signed) {
                    (CompareOp::Eq, _) => IntCC::Equal,
                    (CompareOp::Ne, _) => IntCC::NotEqual,
                    (CompareOp::Lt, true) => IntCC::SignedLessThan,
                    (CompareOp::Le, true) => IntCC::SignedLessThanOrEqual,
                    (CompareOp::Gt, true) => IntCC::SignedGreaterThan,
                    (CompareOp::Ge, true) => IntCC::SignedGreaterThanOrEqual,
                    (CompareOp::Lt, false) => IntCC::UnsignedLessThan,
                    (CompareOp::Le, false) => IntCC::UnsignedLessThanOrEqual,
                    (CompareOp::Gt, false) => IntCC::UnsignedGreaterThan,
                    (CompareOp::Ge, false) => IntCC::UnsignedGreaterThanOrEqual,
                };
                self.b.ins().icmp(cc, a, c)
            }
        }
    }

    fn cast(&mut self, from: DType, to: DType, x: Value) -> Value {
        let vector = self.vector();
        let (fty, ity) = if vector { (types::F32X4, types::I32X4) } else { (types::F32, types::I32) };
        match (class(from), class(to)) {
            (Class::Float, Class::Float) => self.round(to, x),
            (Class::Float, Class::Int) => self.b.ins().fcvt_to_sint_sat(ity, x),
            (Class::Float, Class::Bool) => {
                // `x < 0 || x > 0`: false for NaN (x86 has no vector `one`).
                let zero = self.simd(vector).fc(0.0);
                let lt = self.b.ins().fcmp(FloatCC::LessThan, x, zero);
                let gt = self.b.ins().fcmp(FloatCC::GreaterThan, x, zero);
                self.b.ins().bor(lt, gt)
            }
            (Class::Int, Class::Float) => {
                let f = self.b.ins().fcvt_from_sint(fty, x);
                self.round(to, f)
            }
            (Class::Int, Class::Int) | (Class::Bool, Class::Bool) => x,
            (Class::Int, Class::Bool) => {
                let mut s = self.simd(vector);
                math::nonzero_int(&mut s, x)
            }
            (Class::Bool, Class::Int) => self.bool_to_int(x),
            (Class::Bool, Class::Float) => {
                let i = self.bool_to_int(x);
                self.b.ins().fcvt_from_sint(fty, i)
            }
        }
    }

    /// A bool (`i8` 0/1, or an `i32x4` mask) as `i32` 0/1 lanes.
    fn bool_to_int(&mut self, x: Value) -> Value {
        if self.vector() {
            let one = self.simd(true).ic(1);
            self.b.ins().band(x, one)
        } else {
            self.b.ins().uextend(types::I32, x)
        }
    }

    fn load(&mut self, buf: BufId, index: &Index) -> Result<Value, CodegenError> {
        let dtype = self.k.buf(buf).ok_or_else(|| self.bad("unknown buffer"))?.dtype;
        let addr = self.address(buf, index)?;
        let vector = self.vector();
        let v = match (dtype, vector) {
            (DType::F32, false) => self.b.ins().load(types::F32, mem(), addr, 0),
            (DType::I32, false) => self.b.ins().load(types::I32, mem(), addr, 0),
            (DType::Bool, false) => self.b.ins().load(types::I8, mem(), addr, 0),
            (DType::F32, true) => self.b.ins().load(types::F32X4, mem(), addr, 0),
            (DType::I32, true) => self.b.ins().load(types::I32X4, mem(), addr, 0),
            (DType::F16 | DType::BF16, _) => {
                let bits = if vector {
                    self.b.ins().uload16x4(mem(), addr, 0)
                } else {
                    self.b.ins().uload16(types::I32, mem(), addr, 0)
                };
                let mut s = self.simd(vector);
                if dtype == DType::F16 {
                    convert::f16_bits_to_f32(&mut s, bits)
                } else {
                    convert::bf16_bits_to_f32(&mut s, bits)
                }
            }
            (DType::Bool, true) => return Err(self.bad("bool loads have no vector form")),
        };
        Ok(v)
    }

    /// An `mr x nr` register tile: `mr * nr / 4` f32x4 accumulators, by the assembled tile kernel
    /// of its shape where the module has one (`super::tile`), else by cranelift IR with `nr / 4`
    /// loads of B per step and a broadcast of A per fused multiply-add; full tiles store with
    /// vectors, edge tiles through a stack copy.
    fn micro_kernel(&mut self, mk: &MicroKernel) -> Result<(), CodegenError> {
        let (mr, nv) = (mk.mr as usize, (mk.nr / 4) as usize);
        if mr == 0 || nv == 0 || !mk.nr.is_multiple_of(4) {
            return Err(self.bad(format!("bad register tile {}x{}", mk.mr, mk.nr)));
        }
        let a_base = self.address(mk.a, &mk.a_at)?;
        let b_base = self.address(mk.b, &mk.b_at)?;
        let depth = self.extent(mk.depth.clone());
        let zero = self.simd(true).fc(0.0);
        let accs: Vec<Variable> = (0..mr * nv)
            .map(|_| {
                let v = self.b.declare_var(types::F32X4);
                self.b.def_var(v, zero);
                v
            })
            .collect();
        let assembled = TileShape::for_tile(mk.mr, mk.nr).and_then(|shape| self.imports.tiles.get(&shape));
        if let Some(&tile) = assembled {
            // The assembled tile (see `super::tile`) writes the accumulators to a stack slot.
            let slot = self.b.create_sized_stack_slot(cranelift_codegen::ir::StackSlotData::new(
                cranelift_codegen::ir::StackSlotKind::ExplicitSlot,
                u32::try_from(mr * nv * 16).unwrap_or(u32::MAX),
                4,
            ));
            let out = self.b.ins().stack_addr(types::I64, slot, 0);
            self.b.ins().call(tile, &[a_base, b_base, depth, out]);
            for (j, &acc) in accs.iter().enumerate() {
                let v = self.b.ins().stack_load(types::I64, types::F32X4, slot, i32::try_from(j * 16).unwrap_or(0));
                self.b.def_var(acc, v);
            }
        } else {
            // for p in 0..depth, walking the panel pointers: two steps per iteration, then one.
            // Every multiply-add gets its own broadcast of A: x86 FMAs overwrite a multiplicand,
            // so a broadcast shared by several would be copied for each but the last, and one
            // loaded once and used twice is not folded into the broadcast (`vmovss` + a shuffle
            // instead of one `vbroadcastss` from memory). Cranelift merges equal loads, so each
            // column vector reads A through its own copy of the panel pointer.
            let pas: Vec<Variable> = (0..nv)
                .map(|_| {
                    let v = self.b.declare_var(types::I64);
                    self.b.def_var(v, a_base);
                    v
                })
                .collect();
            let pb = self.b.declare_var(types::I64);
            let left = self.b.declare_var(types::I64);
            self.b.def_var(pb, b_base);
            self.b.def_var(left, depth);
            // Two steps: the accumulators' loop-carried moves are paid once per two; with more,
            // cranelift loads every step's B vectors first and spills.
            self.tile_steps(mk, &accs, &pas, [pb, left], 2);
            self.tile_steps(mk, &accs, &pas, [pb, left], 1);
        }

        // Store: C = acc where `first` is 0, C += acc elsewhere.
        let c_index = mk.c_row.scale(mk.ldc).add(&mk.c_col);
        let c_base = self.address(mk.c, &c_index)?;
        let first = self.index_value(&mk.first);
        let is_first = self.b.ins().icmp_imm_s(IntCC::Equal, first, 0);
        let rows = self.extent(mk.rows.clone());
        let cols = self.extent(mk.cols.clone());
        let full_rows = self.b.ins().icmp_imm_s(IntCC::Equal, rows, i64::from(mk.mr));
        let full_cols = self.b.ins().icmp_imm_s(IntCC::Equal, cols, i64::from(mk.nr));
        let full = self.b.ins().band(full_rows, full_cols);
        let full_block = self.b.create_block();
        let edge_block = self.b.create_block();
        let done = self.b.create_block();
        self.b.ins().brif(full, full_block, &[], edge_block, &[]);

        // A full tile of the first depth block only writes C (never reading the output's fresh
        // pages, which would fault twice: once to map the zero page, once to copy it); later
        // blocks add to it. (The accumulators start at +0, so they are never -0 and storing
        // them equals adding them to +0.)
        self.b.switch_to_block(full_block);
        let write_block = self.b.create_block();
        let add_block = self.b.create_block();
        self.b.ins().brif(is_first, write_block, &[], add_block, &[]);
        for (block, add) in [(write_block, false), (add_block, true)] {
            self.b.switch_to_block(block);
            for i in 0..mr {
                for v in 0..nv {
                    let offset = (i as i64 * mk.ldc + 4 * v as i64) * 4;
                    let ptr = self.b.ins().iadd_imm_s(c_base, offset);
                    let acc = self.b.use_var(accs[i * nv + v]);
                    let new = if add {
                        let old = self.b.ins().load(types::F32X4, mem(), ptr, 0);
                        self.b.ins().fadd(acc, old)
                    } else {
                        acc
                    };
                    self.b.ins().store(mem(), new, ptr, 0);
                }
            }
            self.b.ins().jump(done, &[]);
        }

        self.b.switch_to_block(edge_block);
        let slot = self.b.create_sized_stack_slot(cranelift_codegen::ir::StackSlotData::new(
            cranelift_codegen::ir::StackSlotKind::ExplicitSlot,
            u32::try_from(mr * nv * 16).unwrap_or(u32::MAX),
            4,
        ));
        for (j, &acc) in accs.iter().enumerate() {
            let acc = self.b.use_var(acc);
            self.b.ins().stack_store(types::I64, acc, slot, i32::try_from(j * 16).unwrap_or(0));
        }
        let tile = self.b.ins().stack_addr(types::I64, slot, 0);
        // for i in 0..rows, j in 0..cols: c[i*ldc + j] = tile[i*nr + j] + (first ? 0 : c[..]).
        let i_var = self.b.declare_var(types::I64);
        let j_var = self.b.declare_var(types::I64);
        let zero64 = self.b.ins().iconst(types::I64, 0);
        self.b.def_var(i_var, zero64);
        let ih = self.b.create_block();
        let ib = self.b.create_block();
        let jh = self.b.create_block();
        let jb = self.b.create_block();
        let jx = self.b.create_block();
        self.b.ins().jump(ih, &[]);
        self.b.switch_to_block(ih);
        let i = self.b.use_var(i_var);
        let go = self.b.ins().icmp(IntCC::SignedLessThan, i, rows);
        self.b.ins().brif(go, ib, &[], done, &[]);
        self.b.switch_to_block(ib);
        let zero64 = self.b.ins().iconst(types::I64, 0);
        self.b.def_var(j_var, zero64);
        self.b.ins().jump(jh, &[]);
        self.b.switch_to_block(jh);
        let j = self.b.use_var(j_var);
        let go = self.b.ins().icmp(IntCC::SignedLessThan, j, cols);
        self.b.ins().brif(go, jb, &[], jx, &[]);
        self.b.switch_to_block(jb);
        let i = self.b.use_var(i_var);
        let j = self.b.use_var(j_var);
        let t_off = self.b.ins().imul_imm_s(i, i64::from(mk.nr));
        let t_off = self.b.ins().iadd(t_off, j);
        let t_off = self.b.ins().imul_imm_s(t_off, 4);
        let t_ptr = self.b.ins().iadd(tile, t_off);
        let value = self.b.ins().load(types::F32, mem(), t_ptr, 0);
        let c_off = self.b.ins().imul_imm_s(i, mk.ldc);
        let c_off = self.b.ins().iadd(c_off, j);
        let c_off = self.b.ins().imul_imm_s(c_off, 4);
        let c_ptr = self.b.ins().iadd(c_base, c_off);
        let old = self.b.ins().load(types::F32, mem(), c_ptr, 0);
        let fzero = self.b.ins().f32const(0.0);
        let base = self.b.ins().select(is_first, fzero, old);
        let new = self.b.ins().fadd(value, base);
        self.b.ins().store(mem(), new, c_ptr, 0);
        let j = self.b.ins().iadd_imm_s(j, 1);
        self.b.def_var(j_var, j);
        self.b.ins().jump(jh, &[]);
        self.b.switch_to_block(jx);
        let i = self.b.use_var(i_var);
        let i = self.b.ins().iadd_imm_s(i, 1);
        self.b.def_var(i_var, i);
        self.b.ins().jump(ih, &[]);
        self.b.switch_to_block(done);
        Ok(())
    }

    /// `while left >= unroll { unroll steps of the tile }`, advancing the panel pointers (`pas`:
    /// one copy of the A pointer per column vector).
    fn tile_steps(
        &mut self,
        mk: &MicroKernel,
        accs: &[Variable],
        pas: &[Variable],
        [pb, left]: [Variable; 2],
        unroll: i64,
    ) {
        let (mr, nv) = (mk.mr as usize, (mk.nr / 4) as usize);
        let header = self.b.create_block();
        let block = self.b.create_block();
        let exit = self.b.create_block();
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(header);
        let l = self.b.use_var(left);
        let go = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, l, unroll);
        self.b.ins().brif(go, block, &[], exit, &[]);
        self.b.switch_to_block(block);
        let a_ptrs: Vec<Value> = pas.iter().map(|&v| self.b.use_var(v)).collect();
        let b_ptr = self.b.use_var(pb);
        // The panels are not written while tiles run: their loads may move next to their uses
        // (cranelift keeps side-effecting loads in order, which would keep every value live).
        let panel = mem().with_readonly().with_can_move();
        for step in 0..usize::try_from(unroll).unwrap_or(1) {
            let b_off = step * mk.nr as usize * 4;
            let a_off = step * mr * 4;
            let bv: Vec<Value> = (0..nv)
                .map(|v| self.b.ins().load(types::F32X4, panel, b_ptr, i32::try_from(b_off + 16 * v).unwrap_or(0)))
                .collect();
            for i in 0..mr {
                let off = i32::try_from(a_off + 4 * i).unwrap_or(0);
                for ((v, &b), &pa) in bv.iter().enumerate().zip(&a_ptrs) {
                    let s = self.b.ins().load(types::F32, panel, pa, off);
                    let a = self.b.ins().splat(types::F32X4, s);
                    let acc = self.b.use_var(accs[i * nv + v]);
                    let r = self.simd(true).mul_add(a, b, acc);
                    self.b.def_var(accs[i * nv + v], r);
                }
            }
        }
        for (&v, &p) in pas.iter().zip(&a_ptrs) {
            let next = self.b.ins().iadd_imm_s(p, i64::from(mk.mr) * 4 * unroll);
            self.b.def_var(v, next);
        }
        let b_next = self.b.ins().iadd_imm_s(b_ptr, i64::from(mk.nr) * 4 * unroll);
        self.b.def_var(pb, b_next);
        let l = self.b.use_var(left);
        let l = self.b.ins().iadd_imm_s(l, -unroll);
        self.b.def_var(left, l);
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(exit);
    }

    fn store(&mut self, buf: BufId, index: &Index, v: Value) -> Result<(), CodegenError> {
        let dtype = self.k.buf(buf).ok_or_else(|| self.bad("unknown buffer"))?.dtype;
        let addr = self.address(buf, index)?;
        let vector = self.vector();
        match dtype {
            DType::F32 | DType::I32 | DType::Bool => {
                if vector && dtype == DType::Bool {
                    return Err(self.bad("bool stores have no vector form"));
                }
                self.b.ins().store(mem(), v, addr, 0);
            }
            DType::F16 | DType::BF16 => {
                let mut s = self.simd(vector);
                let bits = if dtype == DType::F16 {
                    convert::f32_to_f16_bits(&mut s, v)
                } else {
                    convert::f32_to_bf16_bits(&mut s, v)
                };
                if vector {
                    let packed = self.b.ins().unarrow(bits, bits);
                    let wide = self.b.ins().bitcast(types::I64X2, le(), packed);
                    let low = self.b.ins().extractlane(wide, 0);
                    self.b.ins().store(mem(), low, addr, 0);
                } else {
                    self.b.ins().istore16(mem(), bits, addr, 0);
                }
            }
        }
        Ok(())
    }
}
