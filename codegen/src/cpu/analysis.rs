//! The loop analyses both CPU tiers run while they emit a phase. They read the loop IR only and
//! decide nothing about instructions: what each expression reads ([`ExprReads`]), which
//! expressions move with a loop variable ([`Moving`]), whether an innermost loop has a vector form
//! ([`vectorizable`]), which invariant subexpressions a vector loop computes once before it
//! ([`uniform_exprs`]) and which accumulators a loop body updates ([`updated_accs`]).
//!
//! Sets of buffers are bits of a `u64` ([`buf_bit`]: buffer `b` is bit `b % 64`); two buffers
//! sharing a bit only make an analysis more careful. An expression id the kernel does not have
//! counts as reading everything and moving with every variable.

use tcc_ir::{BinaryOp, DType};

use crate::loops::{AccId, BufId, Combine, Expr, ExprId, LoopKernel, Stmt, VarId};

/// The bit of buffer `buf` in a set of buffers.
pub(crate) fn buf_bit(buf: BufId) -> u64 {
    1u64 << (buf.0 % 64)
}

/// What every expression of a kernel reads, itself or through its operands: an accumulator
/// (its value changes while a loop runs), and which buffers.
#[derive(Debug, Clone)]
pub(crate) struct ExprReads {
    acc: Vec<bool>,
    bufs: Vec<u64>,
}

impl ExprReads {
    /// The reads of every expression of `k` (operands come before the expressions using them).
    pub(crate) fn of(k: &LoopKernel) -> ExprReads {
        let n = k.exprs.len();
        let mut acc = vec![false; n];
        let mut bufs = vec![0u64; n];
        for (i, e) in k.exprs.iter().enumerate() {
            let ops = k.operands(ExprId(i as u32));
            acc[i] = matches!(e, Expr::Acc(_)) || ops.iter().any(|o| acc.get(o.0 as usize).copied().unwrap_or(true));
            let own = match e {
                Expr::Load { buf, .. } => buf_bit(*buf),
                _ => 0,
            };
            bufs[i] = ops.iter().fold(own, |m, o| m | bufs.get(o.0 as usize).copied().unwrap_or(u64::MAX));
        }
        ExprReads { acc, bufs }
    }

    /// Whether `e` reads an accumulator.
    pub(crate) fn acc(&self, e: ExprId) -> bool {
        self.acc.get(e.0 as usize).copied().unwrap_or(true)
    }

    /// Whether `e` reads any of the buffers in the set `bufs`.
    pub(crate) fn any_of(&self, e: ExprId, bufs: u64) -> bool {
        self.bufs.get(e.0 as usize).is_none_or(|r| r & bufs != 0)
    }
}

/// Which expressions of a kernel move with one loop variable: they load at an index whose
/// coefficient of it is not zero, themselves or through an operand.
#[derive(Debug, Clone, Default)]
pub(crate) struct Moving(Vec<bool>);

impl Moving {
    /// The expressions of `k` that move with `var`.
    pub(crate) fn with(k: &LoopKernel, var: VarId) -> Moving {
        let mut dep = vec![false; k.exprs.len()];
        for (i, e) in k.exprs.iter().enumerate() {
            dep[i] = match e {
                Expr::Load { index, .. } | Expr::Position(index) => index.coef(var) != 0,
                _ => k.operands(ExprId(i as u32)).iter().any(|o| dep.get(o.0 as usize).copied().unwrap_or(true)),
            };
        }
        Moving(dep)
    }

    /// Whether `e` moves with the variable (every expression does for [`Moving::default`]).
    pub(crate) fn moves(&self, e: ExprId) -> bool {
        self.0.get(e.0 as usize).copied().unwrap_or(true)
    }
}

/// What to do after visiting an expression in [`walk`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Visit {
    /// Visit its operands too.
    Operands,
    /// Leave its operands out (unless something else reaches them).
    Skip,
    /// End the walk.
    Stop,
}

/// Visits each expression reachable from `roots` once, depth first from a stack (the last root
/// first, then its last operand); returns false when `visit` stopped the walk.
pub(crate) fn walk(k: &LoopKernel, mut roots: Vec<ExprId>, mut visit: impl FnMut(ExprId) -> Visit) -> bool {
    let mut seen = vec![false; k.exprs.len()];
    while let Some(e) = roots.pop() {
        match seen.get_mut(e.0 as usize) {
            Some(s) if !*s => *s = true,
            _ => continue,
        }
        match visit(e) {
            Visit::Operands => roots.extend(k.operands(e)),
            Visit::Skip => {}
            Visit::Stop => return false,
        }
    }
    true
}

/// What a tier's vector code does beyond f32/i32 arithmetic, loads and stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct VectorSupport {
    /// Bool buffers are loaded and stored as vectors.
    pub(crate) bool_memory: bool,
    /// i32 division has a vector form.
    pub(crate) int_division: bool,
}

/// Whether the innermost loop over `var` with `body` has a vector form: only stores (contiguous
/// along `var`) and accumulator updates; every expression that moves with `var` loads
/// contiguously along it, reads no accumulator and has a vector form under `support`. What does
/// not move is computed once as a scalar and broadcast.
pub(crate) fn vectorizable(
    k: &LoopKernel,
    reads: &ExprReads,
    var: VarId,
    body: &[Stmt],
    support: VectorSupport,
) -> bool {
    let moving = Moving::with(k, var);
    let vector_memory = |buf: BufId| support.bool_memory || k.buf(buf).is_some_and(|b| b.dtype != DType::Bool);
    let mut roots = Vec::new();
    for s in body {
        match s {
            Stmt::Loop { .. } | Stmt::If { .. } | Stmt::AccInit { .. } | Stmt::MicroKernel(_) => return false,
            Stmt::Store { buf, index, value } => {
                if index.coef(var) != 1 || !vector_memory(*buf) {
                    return false;
                }
                roots.push(*value);
            }
            Stmt::AccUpdate { value, .. } => roots.push(*value),
        }
    }
    walk(k, roots, |e| {
        if reads.acc(e) {
            return Visit::Stop;
        }
        if !moving.moves(e) {
            return Visit::Skip; // computed once as a scalar and broadcast
        }
        let vector = match k.expr(e) {
            Some(Expr::Load { buf, index }) => index.coef(var) == 1 && vector_memory(*buf),
            Some(Expr::Binary { op: BinaryOp::Div, dtype: DType::I32, .. }) => support.int_division,
            // Positions are the lane-0 position plus a constant vector of steps.
            Some(Expr::Position(_)) => true,
            Some(_) => true,
            None => false,
        };
        if vector { Visit::Operands } else { Visit::Stop }
    })
}

/// The largest subexpressions of the values `body` stores and accumulates that do not move
/// (`moving`: with the loop's variable), read no accumulator and read no buffer `body` stores to,
/// constants left out, in the order a vector loop's emitter computes them before the loop (as
/// scalars, then broadcast; the body then finds them computed). A division by an invariant
/// divisor stays a division: `a · (1/d)` is not `a / d` rounded once, and one quotient must have
/// one value in every lane and every loop of a kernel.
pub(crate) fn uniform_exprs(k: &LoopKernel, reads: &ExprReads, moving: &Moving, body: &[Stmt]) -> Vec<ExprId> {
    let mut stored = 0u64;
    let mut roots = Vec::new();
    for s in body {
        match s {
            Stmt::Store { buf, value, .. } => {
                stored |= buf_bit(*buf);
                roots.push(*value);
            }
            Stmt::AccUpdate { value, .. } => roots.push(*value),
            _ => {}
        }
    }
    let mut uniform = Vec::new();
    walk(k, roots, |e| {
        if moving.moves(e) || reads.acc(e) || reads.any_of(e, stored) {
            return Visit::Operands;
        }
        if !matches!(k.expr(e), Some(Expr::Const { .. })) {
            uniform.push(e);
        }
        Visit::Skip
    });
    uniform
}

/// The accumulators the statements of `body` update, each once in the order of its first update,
/// with how they combine.
pub(crate) fn updated_accs(body: &[Stmt]) -> Vec<(AccId, Combine)> {
    let mut updated: Vec<(AccId, Combine)> = Vec::new();
    for s in body {
        if let Stmt::AccUpdate { acc, combine, .. } = s
            && !updated.iter().any(|(a, _)| a == acc)
        {
            updated.push((*acc, *combine));
        }
    }
    updated
}
