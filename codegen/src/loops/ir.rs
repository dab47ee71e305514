//! The loop-level kernel IR: buffers, loop nests, stores, scalar accumulators and expression DAGs
//! over affine loads. Every kernel class lowers to it; each target emits it.

use std::collections::HashMap;

use tcc_ir::{BinaryOp, CompareOp, DType, UnaryOp};

/// A buffer of a loop kernel (an index into [`LoopKernel::bufs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufId(pub u32);

/// A loop variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarId(pub u32);

/// A scalar accumulator (a local variable of the kernel).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AccId(pub u32);

/// An expression of the kernel's arena (an index into [`LoopKernel::exprs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExprId(pub u32);

/// Where a buffer's memory comes from; the function's pointer array lists buffers in the order of
/// [`LoopKernel::bufs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BufKind {
    /// The kernel graph's `i`-th parameter (read only).
    Input(usize),
    /// The kernel graph's `i`-th output.
    Output(usize),
    /// Temporary memory the caller allocates for the kernel, shared by all its calls. Like
    /// [`BufKind::Local`] memory, it starts with unspecified contents (a runtime reuses it between
    /// runs as it was left): a kernel writes every element whose value reaches a stored result
    /// before reading it (an edge panel's padding, never written, only feeds lanes that are
    /// never stored).
    Scratch,
    /// Temporary memory private to each call (each thread's row range), such as packed matmul
    /// panels; the caller allocates one per concurrent call. Unspecified contents, as
    /// [`BufKind::Scratch`].
    Local,
}

/// One buffer: dtype, element count and role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BufDecl {
    /// Element type as stored in memory.
    pub dtype: DType,
    /// Number of elements.
    pub len: u64,
    /// Role.
    pub kind: BufKind,
}

/// An affine element index `offset + sum(coef * var)`, normalized (terms sorted by variable, no
/// zero coefficients).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Index {
    /// The constant part.
    pub offset: i64,
    /// `(variable, coefficient)` pairs.
    pub terms: Vec<(VarId, i64)>,
}

impl Index {
    /// The constant index `c`.
    pub fn constant(c: i64) -> Index {
        Index { offset: c, terms: Vec::new() }
    }

    /// The index equal to variable `v`.
    pub fn var(v: VarId) -> Index {
        Index { offset: 0, terms: vec![(v, 1)] }
    }

    /// `self + other`.
    pub fn add(&self, other: &Index) -> Index {
        let mut terms = self.terms.clone();
        for &(v, c) in &other.terms {
            match terms.iter_mut().find(|(w, _)| *w == v) {
                Some(t) => t.1 = t.1.wrapping_add(c),
                None => terms.push((v, c)),
            }
        }
        terms.retain(|t| t.1 != 0);
        terms.sort();
        Index { offset: self.offset.wrapping_add(other.offset), terms }
    }

    /// `self * k`.
    pub fn scale(&self, k: i64) -> Index {
        if k == 0 {
            return Index::constant(0);
        }
        Index {
            offset: self.offset.wrapping_mul(k),
            terms: self.terms.iter().map(|&(v, c)| (v, c.wrapping_mul(k))).collect(),
        }
    }

    /// `self + c`.
    pub fn add_const(&self, c: i64) -> Index {
        Index { offset: self.offset.wrapping_add(c), terms: self.terms.clone() }
    }

    /// The coefficient of `v` (0 when absent).
    pub fn coef(&self, v: VarId) -> i64 {
        self.terms.iter().find(|t| t.0 == v).map_or(0, |t| t.1)
    }

    /// `self` with variable `v` replaced by the index `by`.
    pub fn substitute(&self, v: VarId, by: &Index) -> Index {
        let c = self.coef(v);
        if c == 0 {
            return self.clone();
        }
        let rest = Index { offset: self.offset, terms: self.terms.iter().copied().filter(|t| t.0 != v).collect() };
        rest.add(&by.scale(c))
    }

    /// The row-major flat index of the multi-index `idx` into a tensor of shape `dims`.
    pub fn flatten(idx: &[Index], dims: &[u64]) -> Index {
        let mut flat = Index::constant(0);
        let mut stride: i64 = 1;
        for (i, d) in idx.iter().zip(dims).rev() {
            flat = flat.add(&i.scale(stride));
            stride = stride.wrapping_mul(i64::try_from(*d).unwrap_or(i64::MAX));
        }
        flat
    }
}

/// The ranges of loop variables, for bounding affine indices: each variable's trip count, and for
/// the inner variable of a strip-mined pair (`Extent::Tail`) its total, block and outer index.
#[derive(Debug, Clone, Default)]
pub struct LoopRanges {
    /// Trip count of each variable (it takes `0..max`).
    pub max: HashMap<VarId, u64>,
    /// Inner variable of a pair `block * outer + inner`, which stays below `total`.
    pub tails: HashMap<VarId, (u64, i64, Index)>,
}

impl LoopRanges {
    /// The smallest and largest value of `index` with the variables in `exclude` left out
    /// (counted as 0), a strip-mined pair counted as one position below its total (not `block`
    /// times the outer count, which overshoots the total when the last strip is short); `None`
    /// when a variable's range is unknown.
    pub fn range(&self, index: &Index, exclude: &[VarId]) -> Option<(i128, i128)> {
        let (mut lo, mut hi) = (i128::from(index.offset), i128::from(index.offset));
        let mut add = |span: i128| if span < 0 { lo += span } else { hi += span };
        // Each variable is counted once: in a pair (inner, outer), or alone.
        let mut counted: Vec<VarId> = exclude.to_vec();
        for &(v, c) in &index.terms {
            if let Some((total, block, outer)) = self.tails.get(&v)
                && !counted.contains(&v)
                && outer.offset == 0
                && !outer.terms.is_empty()
                && outer.terms.iter().all(|&(o, oc)| {
                    o != v
                        && !counted.contains(&o)
                        && i128::from(index.coef(o)) == i128::from(oc) * i128::from(*block) * i128::from(c)
                })
            {
                counted.push(v);
                counted.extend(outer.terms.iter().map(|t| t.0));
                add(i128::from(c) * i128::from(total.saturating_sub(1)));
            }
        }
        for &(v, c) in &index.terms {
            if !counted.contains(&v) {
                add(i128::from(c) * i128::from(self.max.get(&v)?.checked_sub(1)?));
            }
        }
        Some((lo, hi))
    }
}

/// A computation producing one scalar (or, when vectorized, one value per lane).
///
/// Values of f16 and bf16 are held as f32; an arithmetic expression whose `dtype` is f16 or bf16
/// rounds its result to that dtype. Operands of arithmetic expressions share a class (float, i32 or
/// bool), not necessarily a dtype (an f32 accumulator may meet an f16 load).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Expr {
    /// A constant (`bits` is the f64 bit pattern of the value).
    Const {
        /// The dtype.
        dtype: DType,
        /// `f64::to_bits` of the value.
        bits: u64,
    },
    /// An element of a buffer, converted from its storage dtype to its compute type.
    Load {
        /// The buffer.
        buf: BufId,
        /// The element index.
        index: Index,
    },
    /// The current value of an accumulator.
    Acc(AccId),
    /// The value of an affine index of loop variables, as an i32 (`iota`'s elements: positions
    /// that masks and biases compare and scale).
    Position(Index),
    /// An elementwise op of one operand.
    Unary {
        /// The op.
        op: UnaryOp,
        /// The result dtype.
        dtype: DType,
        /// The operand.
        arg: ExprId,
    },
    /// An elementwise op of two operands.
    Binary {
        /// The op.
        op: BinaryOp,
        /// The result dtype.
        dtype: DType,
        /// Left operand.
        lhs: ExprId,
        /// Right operand.
        rhs: ExprId,
    },
    /// A comparison giving bool.
    Compare {
        /// The comparison.
        op: CompareOp,
        /// The operands' dtype.
        operand: DType,
        /// Left operand.
        lhs: ExprId,
        /// Right operand.
        rhs: ExprId,
    },
    /// `cond ? on_true : on_false`.
    Select {
        /// The result dtype.
        dtype: DType,
        /// A bool expression.
        cond: ExprId,
        /// Taken where `cond` holds.
        on_true: ExprId,
        /// Taken elsewhere.
        on_false: ExprId,
    },
    /// A conversion between dtypes (contract §5 cast semantics).
    Cast {
        /// The operand's dtype.
        from: DType,
        /// The result dtype.
        to: DType,
        /// The operand.
        arg: ExprId,
    },
}

impl Expr {
    /// The expressions this one reads (none for constants, loads, accumulators and positions).
    pub fn operands(&self) -> Vec<ExprId> {
        match self {
            Expr::Unary { arg, .. } | Expr::Cast { arg, .. } => vec![*arg],
            Expr::Binary { lhs, rhs, .. } | Expr::Compare { lhs, rhs, .. } => vec![*lhs, *rhs],
            Expr::Select { cond, on_true, on_false, .. } => vec![*cond, *on_true, *on_false],
            Expr::Const { .. } | Expr::Load { .. } | Expr::Acc(_) | Expr::Position(_) => Vec::new(),
        }
    }
}

/// How an accumulator combines a new value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Combine {
    /// `acc + v` (wrapping for i32).
    Add,
    /// `max(acc, v)`, propagating NaN.
    Max,
    /// `min(acc, v)`, propagating NaN.
    Min,
}

impl Combine {
    /// The value an accumulator starts from, which every value combined into it replaces: for f32
    /// lanes when `float`, else for i32.
    pub fn identity(self, float: bool) -> f64 {
        match (self, float) {
            (Combine::Add, _) => 0.0,
            (Combine::Max, true) => f64::NEG_INFINITY,
            (Combine::Min, true) => f64::INFINITY,
            (Combine::Max, false) => f64::from(i32::MIN),
            (Combine::Min, false) => f64::from(i32::MAX),
        }
    }
}

/// A loop's trip count.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Extent {
    /// A constant trip count.
    Const(u64),
    /// `min(block, total - block * outer)`: the inner loop of a strip-mined loop (or the real
    /// part of a tile).
    Tail {
        /// The trip count of the original loop.
        total: u64,
        /// The strip size.
        block: u64,
        /// Which strip (an affine index of outer loop variables).
        outer: Index,
    },
}

impl Extent {
    /// The extent with loop variable `v` replaced by `by`.
    pub fn substitute(&self, v: VarId, by: &Index) -> Extent {
        match self {
            Extent::Tail { total, block, outer } => {
                let outer = outer.substitute(v, by);
                if outer.terms.is_empty() {
                    let done = block.saturating_mul(u64::try_from(outer.offset).unwrap_or(0));
                    Extent::Const((*block).min(total.saturating_sub(done)))
                } else {
                    Extent::Tail { total: *total, block: *block, outer }
                }
            }
            Extent::Const(n) => Extent::Const(*n),
        }
    }

    /// The largest trip count this extent can take.
    pub fn max(&self) -> u64 {
        match self {
            Extent::Const(n) => *n,
            Extent::Tail { total, block, .. } => (*block).min(*total),
        }
    }
}

/// A statement of a loop kernel.
#[derive(Debug, Clone, PartialEq)]
pub enum Stmt {
    /// `for var in 0..extent { body }`.
    Loop {
        /// The loop variable.
        var: VarId,
        /// The trip count.
        extent: Extent,
        /// The body.
        body: Vec<Stmt>,
    },
    /// `buf[index] = value`, converted to the buffer's dtype.
    Store {
        /// The buffer.
        buf: BufId,
        /// The element index.
        index: Index,
        /// The value.
        value: ExprId,
    },
    /// `acc = value`.
    AccInit {
        /// The accumulator.
        acc: AccId,
        /// Its initial value.
        value: ExprId,
    },
    /// A register-blocked matmul tile: `C[i, j] (+)= sum_p A[i, p] B[p, j]` for an `mr x nr` tile
    /// from packed panels.
    MicroKernel(Box<MicroKernel>),
    /// `if cond { body }`: `cond` is a scalar bool expression (never inside a vector loop).
    If {
        /// The condition.
        cond: ExprId,
        /// Run where it holds.
        body: Vec<Stmt>,
    },
    /// `acc = combine(acc, value)`.
    AccUpdate {
        /// The accumulator.
        acc: AccId,
        /// How values combine.
        combine: Combine,
        /// The new value.
        value: ExprId,
    },
}

/// A step of a kernel that runs after the previous step has finished on every thread.
///
/// With `row_var` set, the body runs once per row of the range a call is given, with `row_var`
/// bound to the row; the row splitting guarantees that different rows write disjoint elements and
/// read nothing another row writes (except [`BufKind::Local`] buffers, private to each call), so
/// ranges may run on different threads. Without it, `rows` is 1 and the body runs once.
///
/// With `row_parts` set, the rows are a collapsed nest of loops (`(var, trip count)`, outermost
/// first; their trip counts multiply to `rows`): each row binds every part's variable to its digit
/// of the row in that mixed radix before the body runs, so a nest whose outer loop alone has few
/// iterations (the batch entries of an attention) still gives every thread rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    /// The row (parallel) variable, if rows may be split.
    pub row_var: Option<VarId>,
    /// Number of rows.
    pub rows: u64,
    /// The loop variables the row collapses, outermost first (empty: the row variable is the
    /// only one).
    pub row_parts: Vec<(VarId, u64)>,
    /// The statements (per row when `row_var` is set).
    pub body: Vec<Stmt>,
}

impl Phase {
    /// A phase that runs `body` once, on one thread.
    pub fn serial(body: Vec<Stmt>) -> Phase {
        Phase { row_var: None, rows: 1, row_parts: Vec::new(), body }
    }

    /// Each row part's variable with the divisor of its digit (the product of the trip counts
    /// inside it) and its trip count: `var = row / divisor % trips`.
    pub fn row_digits(&self) -> Vec<(VarId, u64, u64)> {
        let mut divisor = 1u64;
        let mut out: Vec<(VarId, u64, u64)> = Vec::with_capacity(self.row_parts.len());
        for &(var, trips) in self.row_parts.iter().rev() {
            out.push((var, divisor, trips));
            divisor = divisor.saturating_mul(trips);
        }
        out.reverse();
        out
    }

    /// Total innermost iterations over all rows: a rough measure of work, used to decide whether
    /// threads pay off.
    pub fn work(&self) -> u64 {
        fn count(stmts: &[Stmt]) -> u64 {
            stmts
                .iter()
                .map(|s| match s {
                    Stmt::Loop { extent, body, .. } => extent.max().saturating_mul(count(body).max(1)),
                    Stmt::If { body, .. } => count(body).max(1),
                    Stmt::MicroKernel(mk) => mk.depth.max().saturating_mul(u64::from(mk.mr) * u64::from(mk.nr)),
                    _ => 1,
                })
                .fold(0u64, u64::saturating_add)
        }
        count(&self.body).saturating_mul(self.rows.max(1))
    }
}

/// One register tile of a packed matmul (see [`Stmt::MicroKernel`]).
///
/// `a` holds `depth` groups of `mr` f32 values (column `p` of the tile's rows, zero padded) from
/// element `a_at`; `b` holds `depth` groups of `nr` values from `b_at`. The tile's top-left element
/// is `c[c_row * ldc + c_col]`, rows `ldc` elements apart; only `rows x cols` of it are real. The tile is written
/// when `first` evaluates to 0 and added to otherwise.
#[derive(Debug, Clone, PartialEq)]
pub struct MicroKernel {
    /// Rows of the register tile.
    pub mr: u32,
    /// Columns of the register tile (a multiple of 4).
    pub nr: u32,
    /// Packed A panel buffer (f32).
    pub a: BufId,
    /// First element of the panel.
    pub a_at: Index,
    /// Packed B panel buffer (f32).
    pub b: BufId,
    /// First element of the panel.
    pub b_at: Index,
    /// The reduction depth of this call.
    pub depth: Extent,
    /// The f32 output buffer, seen as a matrix of rows of `ldc` elements.
    pub c: BufId,
    /// The row of C holding the tile's first row.
    pub c_row: Index,
    /// The column of C holding the tile's first column.
    pub c_col: Index,
    /// Distance between rows of C, in elements.
    pub ldc: i64,
    /// The tile touches only rows `bound.0 .. bound.0 + bound.1` of C (used to prove that
    /// different parallel rows write different tiles).
    pub bound: (Index, u64),
    /// Real rows of the tile (at most `mr`).
    pub rows: Extent,
    /// Real columns of the tile (at most `nr`).
    pub cols: Extent,
    /// Overwrite C where this index is 0 (the first k-block), accumulate elsewhere.
    pub first: Index,
}

/// A lowered kernel: buffers, expressions and the phases one compiled function per phase runs.
///
/// Each phase's function receives a pointer per buffer (in the order of `bufs`) and a half-open
/// range of rows; see [`Phase`].
#[derive(Debug, Clone, PartialEq)]
pub struct LoopKernel {
    /// A readable name.
    pub name: String,
    /// The buffers.
    pub bufs: Vec<BufDecl>,
    /// The accumulators' dtypes (their compute class matters).
    pub accs: Vec<DType>,
    /// The expression arena.
    pub exprs: Vec<Expr>,
    /// Number of loop variables used.
    pub vars: u32,
    /// The phases, in order.
    pub phases: Vec<Phase>,
}

impl LoopKernel {
    /// An empty kernel named `name`.
    pub fn new(name: impl Into<String>) -> LoopKernel {
        LoopKernel {
            name: name.into(),
            bufs: Vec::new(),
            accs: Vec::new(),
            exprs: Vec::new(),
            vars: 0,
            phases: Vec::new(),
        }
    }

    /// The expression with id `e`, if it exists.
    pub fn expr(&self, e: ExprId) -> Option<&Expr> {
        self.exprs.get(e.0 as usize)
    }

    /// The buffer `b`, if it exists.
    pub fn buf(&self, b: BufId) -> Option<&BufDecl> {
        self.bufs.get(b.0 as usize)
    }

    /// The dtype of expression `e` (bool for comparisons; `None` for a dangling id).
    pub fn dtype_of(&self, e: ExprId) -> Option<DType> {
        Some(match self.expr(e)? {
            Expr::Const { dtype, .. }
            | Expr::Unary { dtype, .. }
            | Expr::Binary { dtype, .. }
            | Expr::Select { dtype, .. } => *dtype,
            Expr::Load { buf, .. } => self.buf(*buf)?.dtype,
            Expr::Acc(a) => *self.accs.get(a.0 as usize)?,
            Expr::Position(_) => DType::I32,
            Expr::Compare { .. } => DType::Bool,
            Expr::Cast { to, .. } => *to,
        })
    }

    /// The operands of expression `e`.
    pub fn operands(&self, e: ExprId) -> Vec<ExprId> {
        self.expr(e).map_or_else(Vec::new, Expr::operands)
    }
}

/// Builds a [`LoopKernel`]'s arena with hash-consing, so equal expressions share one id (the
/// emitter then computes each once per loop body).
#[derive(Debug, Default)]
pub struct ExprArena {
    exprs: Vec<Expr>,
    ids: HashMap<Expr, ExprId>,
}

impl ExprArena {
    /// Interns `e`.
    pub fn intern(&mut self, e: Expr) -> ExprId {
        if let Some(&id) = self.ids.get(&e) {
            return id;
        }
        let id = ExprId(u32::try_from(self.exprs.len()).unwrap_or(u32::MAX));
        self.exprs.push(e.clone());
        self.ids.insert(e, id);
        id
    }

    /// A constant of `dtype`.
    pub fn constant(&mut self, dtype: DType, value: f64) -> ExprId {
        self.intern(Expr::Const { dtype, bits: value.to_bits() })
    }

    /// The expressions, in id order.
    pub fn into_exprs(self) -> Vec<Expr> {
        self.exprs
    }
}

impl ExprArena {
    /// An arena holding `exprs` (ids kept), ready to intern more.
    pub fn from_exprs(exprs: Vec<Expr>) -> ExprArena {
        let ids = exprs.iter().enumerate().map(|(i, e)| (e.clone(), ExprId(i as u32))).collect();
        ExprArena { exprs, ids }
    }

    /// The expression with id `e`.
    pub fn get(&self, e: ExprId) -> Option<&Expr> {
        self.exprs.get(e.0 as usize)
    }

    /// `e` with loop variable `v` replaced by `by` in every load index (new ids where needed).
    pub fn substitute(&mut self, e: ExprId, v: VarId, by: &Index, memo: &mut HashMap<ExprId, ExprId>) -> ExprId {
        if let Some(&done) = memo.get(&e) {
            return done;
        }
        let Some(expr) = self.get(e).cloned() else {
            return e;
        };
        let mut sub = |arena: &mut ExprArena, x: ExprId| arena.substitute(x, v, by, memo);
        let new = match expr {
            Expr::Const { .. } | Expr::Acc(_) => expr,
            Expr::Load { buf, index } => Expr::Load { buf, index: index.substitute(v, by) },
            Expr::Position(index) => Expr::Position(index.substitute(v, by)),
            Expr::Unary { op, dtype, arg } => Expr::Unary { op, dtype, arg: sub(self, arg) },
            Expr::Cast { from, to, arg } => Expr::Cast { from, to, arg: sub(self, arg) },
            Expr::Binary { op, dtype, lhs, rhs } => {
                let lhs = sub(self, lhs);
                Expr::Binary { op, dtype, lhs, rhs: sub(self, rhs) }
            }
            Expr::Compare { op, operand, lhs, rhs } => {
                let lhs = sub(self, lhs);
                Expr::Compare { op, operand, lhs, rhs: sub(self, rhs) }
            }
            Expr::Select { dtype, cond, on_true, on_false } => {
                let cond = sub(self, cond);
                let on_true = sub(self, on_true);
                Expr::Select { dtype, cond, on_true, on_false: sub(self, on_false) }
            }
        };
        let id = self.intern(new);
        memo.insert(e, id);
        id
    }
}

impl Stmt {
    /// Visits every expression root of this statement and the statements nested in it.
    pub fn for_each_root(&self, f: &mut impl FnMut(&Stmt)) {
        f(self);
        if let Stmt::Loop { body, .. } | Stmt::If { body, .. } = self {
            for s in body {
                s.for_each_root(f);
            }
        }
    }
}

impl ExprArena {
    /// Number of expressions.
    pub fn len(&self) -> usize {
        self.exprs.len()
    }

    /// True if the arena holds no expression.
    pub fn is_empty(&self) -> bool {
        self.exprs.is_empty()
    }
}
