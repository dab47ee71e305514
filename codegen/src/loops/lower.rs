//! Lowering of a kernel graph to a [`LoopKernel`]: the always-correct path for every op and dtype.
//!
//! Each node is either *materialized* (written to a buffer by its own loop nest: kernel outputs,
//! reductions, matmuls, concats, operands of reshapes, and nodes whose inlined expression would grow
//! too large) or *inlined* as an expression into the nests that use it. A kernel of pointwise ops
//! therefore becomes one nest with no temporaries, and a softmax becomes a few nests over rows.

mod attention;

use std::collections::HashMap;

use tcc_ir::attention::Attention;
use tcc_ir::{BinaryOp, Bindings, CompareOp, DType, Graph, NodeId, Op, ReduceOp};

use super::ir::{
    AccId, BufDecl, BufId, BufKind, Combine, Expr, ExprArena, ExprId, Extent, Index, LoopKernel, LoopRanges,
    MicroKernel, Phase, Stmt, VarId,
};
use super::parallel::substitute_stmt;
use crate::error::CodegenError;

/// Knobs of the lowering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LowerOptions {
    /// Materialize every node into its own buffer (the simplest lowering; used to test the others).
    pub materialize_all: bool,
    /// Materialize a node when its inlined expression would exceed this many ops.
    pub max_inline_cost: usize,
    /// Lower matmuls to packed panels and register tiles of these sizes; `None` lowers them to a
    /// plain loop nest.
    pub gemm: Option<GemmTiles>,
    /// Lower an attention graph ([`Attention::find`]) as one online-softmax nest over blocks of
    /// these many queries and keys; `None` (or a graph that is no attention) lowers it node by node.
    pub attention: Option<[u32; 2]>,
}

impl Default for LowerOptions {
    fn default() -> LowerOptions {
        LowerOptions { materialize_all: false, max_inline_cost: 48, gemm: Some(GemmTiles::default()), attention: None }
    }
}

/// Tile sizes of a packed matmul: an `mr x nr` register tile and `mc x kc` blocks of A; B is
/// packed whole, in panels of `nr` columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GemmTiles {
    /// Rows of the register tile (1..=8).
    pub mr: u32,
    /// Columns of the register tile (a multiple of 4).
    pub nr: u32,
    /// Rows of an A panel (a multiple of `mr`).
    pub mc: u32,
    /// Columns of a B block (a multiple of `nr`); the lowering packs B whole, so this no longer
    /// changes the code (kept for schedules and callers that set it).
    pub nc: u32,
    /// Depth of both panels.
    pub kc: u32,
}

impl Default for GemmTiles {
    fn default() -> GemmTiles {
        GemmTiles { mr: 4, nr: 8, mc: 64, nc: 256, kc: 256 }
    }
}

impl GemmTiles {
    /// An `mr x nr` register tile with the schedule's panels (`tile_m x tile_n x tile_k`, at most
    /// 1024 x 4096 x 4096) rounded up to it: each CPU tier picks the register tile its registers
    /// hold, both read the panels this way.
    pub fn with_schedule_panels(s: &tcc_ir::Schedule, mr: u32, nr: u32) -> GemmTiles {
        let round_up = |x: u32, m: u32| x.max(m).div_ceil(m) * m;
        GemmTiles {
            mr,
            nr,
            mc: round_up(s.tile_m.min(1024), mr),
            nc: round_up(s.tile_n.min(4096), nr),
            kc: s.tile_k.clamp(1, 4096),
        }
    }
}

/// Panels of B packed together, reading B's rows this many panels wide (at most).
const PACK_B_GROUP: u64 = 8;

/// Groups of panels the packing of B is split into (at least, where B has that many panels):
/// the packing phase's parallel rows.
const PACK_B_ROWS: u64 = 4;

/// Lowers `graph` (a kernel's fused ops) under `bindings` to a loop kernel named `name`.
pub fn lower_graph(
    name: &str,
    graph: &Graph,
    bindings: &Bindings,
    options: &LowerOptions,
) -> Result<LoopKernel, CodegenError> {
    let attention =
        options.attention.filter(|_| !options.materialize_all).and_then(|b| Some((Attention::find(graph)?, b)));
    if let Some((a, blocks)) = attention {
        // Reshapes read through affine indices first (grouped heads without copies), copied if not;
        // a graph the attention nest cannot express falls through to the node-by-node lowering.
        for copy_reshapes in [false, true] {
            let mut lowerer = Lowerer::new(name, graph, bindings)?;
            lowerer.gemm = options.gemm;
            let built = lowerer
                .plan_attention(&a, options.max_inline_cost, copy_reshapes)
                .and_then(|()| lowerer.build_attention(&a, blocks));
            if built.is_ok() {
                return Ok(lowerer.finish());
            }
        }
    }
    let mut lowerer = Lowerer::new(name, graph, bindings)?;
    lowerer.plan(options)?;
    lowerer.build()?;
    Ok(lowerer.finish())
}

/// Resolves a shape to sizes, checking that its element count can be indexed.
pub fn resolve_dims(shape: &tcc_ir::Shape, bindings: &Bindings) -> Result<Vec<u64>, CodegenError> {
    let mut dims = Vec::with_capacity(shape.rank());
    for d in shape.dims() {
        match d.resolve(bindings) {
            Some(n) => dims.push(n),
            None => return Err(CodegenError::UnboundDim(d.to_string())),
        }
    }
    let numel = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
    match numel {
        Some(n) if n < (1u64 << 40) => Ok(dims),
        _ => Err(CodegenError::TooLarge(dims)),
    }
}

fn numel(dims: &[u64]) -> u64 {
    dims.iter().product()
}

fn as_i64(n: u64) -> i64 {
    // Sizes are below 2^40 (checked by `resolve_dims`), so this never saturates.
    i64::try_from(n).unwrap_or(i64::MAX)
}

struct Lowerer<'g> {
    g: &'g Graph,
    shapes: Vec<Vec<u64>>,
    kernel: LoopKernel,
    arena: ExprArena,
    mat: Vec<Option<BufId>>,
    copies: Vec<(BufId, NodeId)>,
    memo: HashMap<(NodeId, Vec<Index>), ExprId>,
    body: Vec<Vec<Stmt>>,
    gemm: Option<GemmTiles>,
    /// Nodes read from a call-local block buffer instead (the attention kernel's scores and
    /// output): take precedence over `mat`.
    views: HashMap<NodeId, View>,
    /// Ranges of the loop variables a reshape's index may be re-split over
    /// ([`Lowerer::reshaped_index`]).
    ranges: LoopRanges,
    /// Matmuls whose one pointwise consumer, a kernel output, is computed in their register
    /// tiles' store ([`Lowerer::plan_epilogues`]): matmul -> output.
    epilogues: HashMap<NodeId, NodeId>,
}

/// Where a node's elements live in a block buffer: element `idx` is at
/// `sum(strides[k] * (idx[k] - origin[k]))`.
#[derive(Debug, Clone)]
struct View {
    buf: BufId,
    origin: Vec<Index>,
    strides: Vec<i64>,
}

impl View {
    fn index(&self, idx: &[Index]) -> Index {
        let mut at = Index::constant(0);
        for ((i, o), &s) in idx.iter().zip(&self.origin).zip(&self.strides) {
            if s != 0 {
                at = at.add(&i.add(&o.scale(-1)).scale(s));
            }
        }
        at
    }
}

impl<'g> Lowerer<'g> {
    fn new(name: &str, g: &'g Graph, bindings: &Bindings) -> Result<Lowerer<'g>, CodegenError> {
        let shapes = g.nodes.iter().map(|n| resolve_dims(&n.ty.shape, bindings)).collect::<Result<_, _>>()?;
        let mut kernel = LoopKernel::new(name);
        for p in &g.params {
            let dims = resolve_dims(&p.ty.shape, bindings)?;
            let kind = BufKind::Input(kernel.bufs.len());
            kernel.bufs.push(BufDecl { dtype: p.ty.dtype, len: numel(&dims), kind });
        }
        Ok(Lowerer {
            g,
            shapes,
            kernel,
            arena: ExprArena::default(),
            mat: vec![None; g.nodes.len()],
            copies: Vec::new(),
            memo: HashMap::new(),
            body: Vec::new(),
            gemm: None,
            views: HashMap::new(),
            ranges: LoopRanges::default(),
            epilogues: HashMap::new(),
        })
    }

    fn bad(&self, reason: impl Into<String>) -> CodegenError {
        CodegenError::malformed(&self.kernel.name, reason)
    }

    fn shape(&self, n: NodeId) -> Result<&[u64], CodegenError> {
        self.shapes.get(n.index()).map(Vec::as_slice).ok_or_else(|| self.bad(format!("dangling node {n}")))
    }

    fn dtype(&self, n: NodeId) -> Result<DType, CodegenError> {
        self.g.ty(n).map(|t| t.dtype).ok_or_else(|| self.bad(format!("dangling node {n}")))
    }

    fn scratch(&mut self, n: NodeId) -> Result<BufId, CodegenError> {
        let dtype = self.dtype(n)?;
        let len = numel(self.shape(n)?);
        Ok(self.push_buf(BufDecl { dtype, len, kind: BufKind::Scratch }))
    }

    fn push_buf(&mut self, decl: BufDecl) -> BufId {
        let id = BufId(u32::try_from(self.kernel.bufs.len()).unwrap_or(u32::MAX));
        self.kernel.bufs.push(decl);
        id
    }

    fn new_var(&mut self) -> VarId {
        let v = VarId(self.kernel.vars);
        self.kernel.vars += 1;
        v
    }

    fn new_acc(&mut self, dtype: DType) -> AccId {
        let a = AccId(u32::try_from(self.kernel.accs.len()).unwrap_or(u32::MAX));
        self.kernel.accs.push(dtype);
        a
    }

    /// Decides which nodes get buffers.
    fn plan(&mut self, options: &LowerOptions) -> Result<(), CodegenError> {
        self.gemm = options.gemm;
        for (i, node) in self.g.nodes.iter().enumerate() {
            if let Op::Input { index } = node.op {
                if index >= self.g.params.len() {
                    return Err(self.bad(format!("input {index} names no parameter")));
                }
                self.mat[i] = Some(BufId(u32::try_from(index).unwrap_or(u32::MAX)));
            }
        }
        for (k, &o) in self.g.outputs.iter().enumerate() {
            let dtype = self.dtype(o)?;
            let len = numel(self.shape(o)?);
            let buf = self.push_buf(BufDecl { dtype, len, kind: BufKind::Output(k) });
            if self.mat[o.index()].is_none() {
                self.mat[o.index()] = Some(buf);
            } else {
                self.copies.push((buf, o));
            }
        }
        for (i, node) in self.g.nodes.iter().enumerate() {
            let forced =
                options.materialize_all || matches!(node.op, Op::Reduce { .. } | Op::MatMul(..) | Op::Concat { .. });
            if forced && self.mat[i].is_none() {
                self.mat[i] = Some(self.scratch(NodeId(i as u32))?);
            }
            if let Op::Reshape(a) = node.op
                && self.mat.get(a.index()).is_some_and(Option::is_none)
                && numel(self.shape(a)?) > 1
            {
                self.mat[a.index()] = Some(self.scratch(a)?);
            }
        }
        if !options.materialize_all {
            self.share_output_buffers();
        }
        let mut cost = vec![1usize; self.g.nodes.len()];
        for (i, node) in self.g.nodes.iter().enumerate() {
            if self.mat[i].is_some() {
                continue;
            }
            let c = 1 + node
                .op
                .operands()
                .iter()
                .map(|a| {
                    if self.mat.get(a.index()).is_some_and(Option::is_some) {
                        1
                    } else {
                        cost.get(a.index()).copied().unwrap_or(1)
                    }
                })
                .sum::<usize>();
            if c > options.max_inline_cost {
                self.mat[i] = Some(self.scratch(NodeId(i as u32))?);
            } else {
                cost[i] = c;
            }
        }
        if !options.materialize_all && options.gemm.is_some() {
            self.plan_epilogues();
        }
        Ok(())
    }

    /// Finds the matmuls whose product feeds a pointwise kernel output and nothing else: a float
    /// matmul into a scratch buffer whose every user is an inlined elementwise node of the same
    /// shape (or the output itself), all of whose users are such nodes again, ending in one output
    /// of that shape computed elementwise; and the output's expression reads no other node built
    /// after the matmul. That output is then computed tile by tile as each register tile of the
    /// product is finished (a bias, an activation, a residual, a cast), instead of by a nest of
    /// its own re-reading the product.
    fn plan_epilogues(&mut self) {
        let g = self.g;
        let users = g.users();
        let elementwise = |op: &Op| matches!(op, Op::Unary(..) | Op::Binary(..) | Op::Select { .. } | Op::Cast(_));
        for (i, node) in g.nodes.iter().enumerate() {
            let n = NodeId(i as u32);
            if !matches!(node.op, Op::MatMul(..)) || !matches!(node.ty.dtype, DType::F32 | DType::F16 | DType::BF16) {
                continue;
            }
            let Some(c) = self.mat[i] else { continue };
            if self.kernel.buf(c).map(|d| d.kind) != Some(BufKind::Scratch) {
                continue;
            }
            let shape = self.shapes.get(i);
            // Walk the users: inlined elementwise nodes of the product's shape, up to one output.
            let (mut out, mut ok) = (None, true);
            let mut stack = users[i].clone();
            let mut seen = vec![false; g.nodes.len()];
            while let Some(u) = stack.pop() {
                if std::mem::replace(&mut seen[u.index()], true) {
                    continue;
                }
                let un = &g.nodes[u.index()];
                if !elementwise(&un.op) || self.shapes.get(u.index()) != shape {
                    ok = false;
                    break;
                }
                match self.mat[u.index()] {
                    None => stack.extend(users[u.index()].iter().copied()),
                    Some(b) if matches!(self.kernel.buf(b).map(|d| d.kind), Some(BufKind::Output(_))) => {
                        if out.is_some_and(|o| o != u) || !users[u.index()].is_empty() {
                            ok = false;
                            break;
                        }
                        out = Some(u);
                    }
                    Some(_) => {
                        ok = false;
                        break;
                    }
                }
            }
            let Some(o) = out.filter(|_| ok) else { continue };
            if self.epilogues.values().any(|&x| x == o) || g.outputs.iter().filter(|&&x| x == o).count() != 1 {
                continue;
            }
            // Every other materialized node the output reads must be built before the matmul.
            let mut leaves_ok = true;
            let mut stack: Vec<NodeId> = g.nodes[o.index()].op.operands();
            let mut seen = vec![false; g.nodes.len()];
            while let Some(m) = stack.pop() {
                if std::mem::replace(&mut seen[m.index()], true) {
                    continue;
                }
                match self.mat[m.index()] {
                    None => stack.extend(g.nodes[m.index()].op.operands()),
                    Some(_) if m <= n || matches!(g.nodes[m.index()].op, Op::Input { .. }) => {}
                    Some(_) => leaves_ok = false,
                }
            }
            if leaves_ok {
                self.epilogues.insert(n, o);
            }
        }
    }

    /// Writes a costly operand of a kernel output (one with a transcendental: a softmax's `exp`)
    /// into that output's buffer, once, when only reductions (one or more, whose nests run before the
    /// output's) and the output itself read it, the output reading it elementwise at its own
    /// position. The reductions then read it from there and the output overwrites it in place,
    /// instead of every nest that reads it computing it again.
    fn share_output_buffers(&mut self) {
        let g = self.g;
        let users = g.users();
        for (k, &o) in g.outputs.iter().enumerate() {
            let Some(buf) = self.mat.get(o.index()).copied().flatten() else { continue };
            if self.kernel.buf(buf).map(|d| d.kind) != Some(BufKind::Output(k)) {
                continue;
            }
            let node = &g.nodes[o.index()];
            if !matches!(node.op, Op::Unary(..) | Op::Binary(..) | Op::Select { .. } | Op::Cast(_)) {
                continue;
            }
            let operands = node.op.operands();
            let candidate = operands.iter().copied().find(|&e| {
                self.mat.get(e.index()).is_some_and(Option::is_none)
                    && self.shapes.get(e.index()) == self.shapes.get(o.index())
                    && g.ty(e).map(|t| t.dtype) == Some(node.ty.dtype)
                    && self.inline_reaches(e, &mut transcendental)
                    && users[e.index()].iter().any(|&u| u != o)
                    && users[e.index()]
                        .iter()
                        .all(|&u| u == o || (u < o && matches!(g.nodes[u.index()].op, Op::Reduce { .. })))
                    && operands.iter().all(|&a| a == e || !self.reads(a, e))
            });
            if let Some(e) = candidate {
                self.mat[e.index()] = Some(buf);
            }
        }
    }

    /// Whether the expression of `n` inlined so far (stopping at materialized nodes) holds a
    /// node whose op satisfies `hit`.
    fn inline_reaches(&self, n: NodeId, hit: &mut dyn FnMut(&Op) -> bool) -> bool {
        let mut stack = vec![n];
        let mut seen = vec![false; self.g.nodes.len()];
        while let Some(m) = stack.pop() {
            if std::mem::replace(&mut seen[m.index()], true) {
                continue;
            }
            let op = &self.g.nodes[m.index()].op;
            if hit(op) {
                return true;
            }
            if m == n || self.mat.get(m.index()).is_some_and(Option::is_none) {
                stack.extend(op.operands());
            }
        }
        false
    }

    /// Whether `n`'s inlined expression reads `target` (stopping at materialized nodes).
    fn reads(&self, n: NodeId, target: NodeId) -> bool {
        let mut stack = vec![n];
        let mut seen = vec![false; self.g.nodes.len()];
        while let Some(m) = stack.pop() {
            if m == target {
                return true;
            }
            if std::mem::replace(&mut seen[m.index()], true) {
                continue;
            }
            if self.mat.get(m.index()).is_some_and(Option::is_none) {
                stack.extend(self.g.nodes[m.index()].op.operands());
            }
        }
        false
    }

    /// Emits the nests in topological order, then the copies of repeated outputs.
    fn build(&mut self) -> Result<(), CodegenError> {
        for i in 0..self.g.nodes.len() {
            let n = NodeId(i as u32);
            let Some(buf) = self.mat[i] else { continue };
            if self.epilogues.values().any(|&o| o == n) {
                continue; // computed in its matmul's tiles
            }
            let stmt = match &self.g.nodes[i].op {
                Op::Input { .. } => continue,
                Op::Reduce { op, input, axes, keepdim } => self.reduce_nest(n, buf, *op, *input, axes, *keepdim)?,
                Op::MatMul(a, b) => match self.gemm {
                    Some(tiles) => self.gemm_nest(n, buf, *a, *b, tiles)?,
                    None => self.matmul_nest(n, buf, *a, *b)?,
                },
                Op::Concat { inputs, axis } => self.concat_nests(n, buf, inputs, *axis)?,
                _ => self.pointwise_nest(n, buf, |l, idx| l.op_expr(n, idx))?,
            };
            if !stmt.is_empty() {
                self.body.push(stmt);
            }
        }
        for (buf, o) in std::mem::take(&mut self.copies) {
            let stmts = self.pointwise_nest(o, buf, |l, idx| l.expr_at(o, idx))?;
            self.body.push(stmts);
        }
        Ok(())
    }

    fn finish(self) -> LoopKernel {
        let mut kernel = self.kernel;
        kernel.exprs = self.arena.into_exprs();
        // One serial phase per nest; `split_rows` fuses and parallelizes them.
        kernel.phases = self.body.into_iter().map(Phase::serial).collect();
        kernel
    }

    /// A nest over the shape of `n` storing `value(idx)` into `buf`.
    fn pointwise_nest(
        &mut self,
        n: NodeId,
        buf: BufId,
        value: impl FnOnce(&mut Self, &[Index]) -> Result<ExprId, CodegenError>,
    ) -> Result<Vec<Stmt>, CodegenError> {
        let dims = self.shape(n)?.to_vec();
        let vars: Vec<VarId> = dims.iter().map(|_| self.new_var()).collect();
        let idx: Vec<Index> = vars.iter().map(|&v| Index::var(v)).collect();
        let value = value(self, &idx)?;
        let store = Stmt::Store { buf, index: Index::flatten(&idx, &dims), value };
        Ok(wrap_loops(&vars, &dims, vec![store]))
    }

    fn reduce_nest(
        &mut self,
        n: NodeId,
        buf: BufId,
        op: ReduceOp,
        input: NodeId,
        axes: &[usize],
        keepdim: bool,
    ) -> Result<Vec<Stmt>, CodegenError> {
        let in_dims = self.shape(input)?.to_vec();
        let out_dims = self.shape(n)?.to_vec();
        let dtype = self.dtype(n)?;
        let acc_dtype = if dtype == DType::I32 { DType::I32 } else { DType::F32 };
        let vars: Vec<VarId> = in_dims.iter().map(|_| self.new_var()).collect();
        let full: Vec<Index> = vars.iter().map(|&v| Index::var(v)).collect();
        let mut out_idx = Vec::new();
        for (d, &v) in vars.iter().enumerate() {
            if !axes.contains(&d) {
                out_idx.push(Index::var(v));
            } else if keepdim {
                out_idx.push(Index::constant(0));
            }
        }
        if out_idx.len() != out_dims.len() {
            return Err(self.bad(format!("reduction {n} has the wrong output rank")));
        }
        // The loops over the kept axes, and the number of elements each output reduces.
        let (kv, ke): (Vec<VarId>, Vec<u64>) = vars
            .iter()
            .zip(&in_dims)
            .enumerate()
            .filter(|(d, _)| !axes.contains(d))
            .map(|(_, (&v, &e))| (v, e))
            .unzip();
        let count: u64 = axes.iter().filter_map(|&a| in_dims.get(a)).product();
        let count = self.arena.constant(DType::F32, count as f64);
        if dtype.is_float() && self.broadcast_along(input, axes)? {
            // Every reduced element is the same value: the mean, maximum and minimum are that
            // value and the sum `count` times it, exactly (a loop of f32 adds and a division can
            // land an ulp off, which a comparison with the value itself then shows everywhere
            // the broadcast repeats it).
            let mut at = full.clone();
            for &a in axes {
                if let Some(slot) = at.get_mut(a) {
                    *slot = Index::constant(0);
                }
            }
            let value = self.expr_at(input, &at)?;
            let value = if op == ReduceOp::Sum {
                self.arena.intern(Expr::Binary { op: BinaryOp::Mul, dtype, lhs: value, rhs: count })
            } else {
                value
            };
            let body = vec![Stmt::Store { buf, index: Index::flatten(&out_idx, &out_dims), value }];
            return Ok(wrap_loops(&kv, &ke, body));
        }
        let acc = self.new_acc(acc_dtype);
        let combine = match op {
            ReduceOp::Sum | ReduceOp::Mean => Combine::Add,
            ReduceOp::Max => Combine::Max,
            ReduceOp::Min => Combine::Min,
        };
        let init = self.arena.constant(acc_dtype, combine.identity(acc_dtype != DType::I32));
        let value = self.expr_at(input, &full)?;
        let mut inner = vec![Stmt::AccUpdate { acc, combine, value }];
        for &a in axes.iter().rev() {
            let (Some(&var), Some(&extent)) = (vars.get(a), in_dims.get(a)) else {
                return Err(self.bad(format!("reduction {n} has a bad axis {a}")));
            };
            inner = vec![Stmt::Loop { var, extent: Extent::Const(extent), body: inner }];
        }
        let acc_value = self.arena.intern(Expr::Acc(acc));
        let result = if op == ReduceOp::Mean {
            self.arena.intern(Expr::Binary { op: BinaryOp::Div, dtype, lhs: acc_value, rhs: count })
        } else {
            acc_value
        };
        let mut body = vec![Stmt::AccInit { acc, value: init }];
        body.extend(inner);
        body.push(Stmt::Store { buf, index: Index::flatten(&out_idx, &out_dims), value: result });
        Ok(wrap_loops(&kv, &ke, body))
    }

    /// Whether `input` is a broadcast that repeats its operand along every axis in `axes` (axes
    /// the operand lacks, or has with size 1), so that the elements along them are one value.
    fn broadcast_along(&self, input: NodeId, axes: &[usize]) -> Result<bool, CodegenError> {
        let Op::Broadcast(src) = self.g.nodes[input.index()].op else { return Ok(false) };
        let out = self.shape(input)?;
        let from = self.shape(src)?;
        let lead = out.len().saturating_sub(from.len());
        Ok(!axes.is_empty() && axes.iter().all(|&a| a < lead || from.get(a - lead) == Some(&1)))
    }

    fn matmul_nest(&mut self, n: NodeId, buf: BufId, a: NodeId, b: NodeId) -> Result<Vec<Stmt>, CodegenError> {
        let out_dims = self.shape(n)?.to_vec();
        let a_dims = self.shape(a)?.to_vec();
        let b_dims = self.shape(b)?.to_vec();
        let (r, ra, rb) = (out_dims.len(), a_dims.len(), b_dims.len());
        if r < 2 || ra < 2 || rb < 2 {
            return Err(self.bad(format!("matmul {n} has operands of rank below 2")));
        }
        let k = a_dims[ra - 1];
        let vars: Vec<VarId> = out_dims.iter().map(|_| self.new_var()).collect();
        let kv = self.new_var();
        let idx: Vec<Index> = vars.iter().map(|&v| Index::var(v)).collect();
        let batch = &idx[..r - 2];
        let mut a_idx = broadcast_index(batch, &a_dims[..ra - 2], &out_dims[..r - 2]);
        a_idx.push(idx[r - 2].clone());
        a_idx.push(Index::var(kv));
        let mut b_idx = broadcast_index(batch, &b_dims[..rb - 2], &out_dims[..r - 2]);
        b_idx.push(Index::var(kv));
        b_idx.push(idx[r - 1].clone());
        let lhs = self.expr_at(a, &a_idx)?;
        let rhs = self.expr_at(b, &b_idx)?;
        let product = self.arena.intern(Expr::Binary { op: BinaryOp::Mul, dtype: DType::F32, lhs, rhs });
        let acc = self.new_acc(DType::F32);
        let zero = self.arena.constant(DType::F32, 0.0);
        let acc_value = self.arena.intern(Expr::Acc(acc));
        let body = vec![
            Stmt::AccInit { acc, value: zero },
            Stmt::Loop {
                var: kv,
                extent: Extent::Const(k),
                body: vec![Stmt::AccUpdate { acc, combine: Combine::Add, value: product }],
            },
            Stmt::Store { buf, index: Index::flatten(&idx, &out_dims), value: acc_value },
        ];
        Ok(wrap_loops(&vars, &out_dims, body))
    }

    /// A matmul as packed panels and register tiles. B is packed once, in a phase of its own
    /// (rows: panels of `nr` columns, or B's batch entries), into a shared scratch buffer: for
    /// each panel, every depth step's `nr` values side by side. Then for each block of `mc` rows
    /// and each `kc` depth block, the A block is packed into a call-local panel and the register
    /// tiles sweep every column panel (B's panel of that depth block stays in L1 while the A
    /// block, in L2, is reused across all columns). Operands are evaluated while packing, so a
    /// pointwise prologue costs one pass over them. Each row block (or batch entry) is
    /// independent. `nc` is not used: every A block is packed once for all columns.
    fn gemm_nest(
        &mut self,
        n: NodeId,
        buf: BufId,
        a: NodeId,
        b: NodeId,
        t: GemmTiles,
    ) -> Result<Vec<Stmt>, CodegenError> {
        let out_dims = self.shape(n)?.to_vec();
        let a_dims = self.shape(a)?.to_vec();
        let b_dims = self.shape(b)?.to_vec();
        let (r, ra, rb) = (out_dims.len(), a_dims.len(), b_dims.len());
        if r < 2 || ra < 2 || rb < 2 {
            return Err(self.bad(format!("matmul {n} has operands of rank below 2")));
        }
        let (m, nn, k) = (out_dims[r - 2], out_dims[r - 1], a_dims[ra - 1]);
        let (mr, nr, mc, kc) = (u64::from(t.mr), u64::from(t.nr), u64::from(t.mc), u64::from(t.kc));
        let dtype = self.dtype(n)?;
        let c = if dtype == DType::F32 {
            buf
        } else {
            self.push_buf(BufDecl { dtype: DType::F32, len: numel(&out_dims), kind: BufKind::Scratch })
        };
        let i64c = as_i64;
        let n_panels = nn.div_ceil(nr);
        // Elements of one B matrix packed: `n_panels` panels of `k x nr`.
        let panel_len = k.saturating_mul(nr);
        let b_len = n_panels.saturating_mul(panel_len);
        let b_batch_dims = b_dims[..rb - 2].to_vec();
        // An edge panel's padding (columns past n, rows past m) is never written: it only feeds
        // accumulator lanes that are never stored (temporaries start unspecified, see BufKind).
        let bp = self.push_buf(BufDecl {
            dtype: DType::F32,
            len: numel(&b_batch_dims).saturating_mul(b_len),
            kind: BufKind::Scratch,
        });
        let ap = self.push_buf(BufDecl { dtype: DType::F32, len: mc * kc, kind: BufKind::Local });

        // Pack B: for bb, jg, p, jq, jj, with panel jp = jg*group + jq:
        // bp[bb*b_len + jp*k*nr + p*nr + jj] = B[bb, p, jp*nr + jj]. A group of panels reads
        // B's rows a group wide (1 KiB at nr = 32), front to back: a panel at a time read 128
        // bytes `nn` elements apart (packing 1024^3's B took 1.57 ms on one thread of an
        // AVX-512 host that way, 1.05 ms in groups). Groups are the phase's parallel rows.
        // The full panels copy `nr` columns, a constant (straight-line vectors on the cranelift
        // tier); the last group then copies the edge panel's `nn % nr`, if any: with one
        // trip count for every panel, each of them paid the edge's bounds.
        let bb_vars: Vec<VarId> = b_batch_dims.iter().map(|_| self.new_var()).collect();
        let bb: Vec<Index> = bb_vars.iter().map(|&v| Index::var(v)).collect();
        let (jg, jq, p, jj) = (self.new_var(), self.new_var(), self.new_var(), self.new_var());
        let group = PACK_B_GROUP.min(n_panels.div_ceil(PACK_B_ROWS)).max(1);
        let groups = n_panels.div_ceil(group);
        let (full_panels, edge) = (nn / nr, nn % nr);
        let copy_panel = |l: &mut Self, jp: &Index, jj: VarId, width: u64| -> Result<Stmt, CodegenError> {
            let mut b_idx = bb.clone();
            b_idx.push(Index::var(p));
            b_idx.push(jp.scale(i64c(nr)).add(&Index::var(jj)));
            let value = l.expr_at(b, &b_idx)?;
            let index = Index::flatten(&bb, &b_batch_dims)
                .scale(i64c(b_len))
                .add(&jp.scale(i64c(panel_len)))
                .add(&Index::var(p).scale(i64c(nr)))
                .add(&Index::var(jj));
            Ok(Stmt::Loop { var: jj, extent: Extent::Const(width), body: vec![Stmt::Store { buf: bp, index, value }] })
        };
        let jp = Index::var(jg).scale(i64c(group)).add(&Index::var(jq));
        let mut per_row = vec![Stmt::Loop {
            var: jq,
            extent: Extent::Tail { total: full_panels, block: group, outer: Index::var(jg) },
            body: vec![copy_panel(self, &jp, jj, nr)?],
        }];
        if edge > 0 {
            let last_group = self.arena.intern(Expr::Position(Index::var(jg)));
            let last = self.arena.constant(DType::I32, (groups - 1) as f64);
            let cond =
                self.arena.intern(Expr::Compare { op: CompareOp::Eq, operand: DType::I32, lhs: last_group, rhs: last });
            // Panel `full_panels`, written in terms of `jg` (which the condition fixes) so that
            // the phase's rows stay visibly disjoint.
            let edge_panel = Index::var(jg).scale(i64c(group)).add_const(i64c(full_panels - (groups - 1) * group));
            let edge_jj = self.new_var();
            let edge_copy = copy_panel(self, &edge_panel, edge_jj, edge)?;
            per_row.push(Stmt::If { cond, body: vec![edge_copy] });
        }
        let pack_b = vec![Stmt::Loop {
            var: jg,
            extent: Extent::Const(groups),
            body: vec![Stmt::Loop { var: p, extent: Extent::Const(k), body: per_row }],
        }];
        let pack_b = wrap_loops(&bb_vars, &b_batch_dims, pack_b);

        let batch_vars: Vec<VarId> = out_dims[..r - 2].iter().map(|_| self.new_var()).collect();
        let batch: Vec<Index> = batch_vars.iter().map(|&v| Index::var(v)).collect();
        let (icb, pcb) = (self.new_var(), self.new_var());
        // Rows of C before this batch entry, and the panel counts.
        let batch_row = Index::flatten(&batch, &out_dims[..r - 2]).scale(i64c(m));
        let k_eff = Extent::Tail { total: k, block: kc, outer: Index::var(pcb) };
        let k0 = Index::var(pcb).scale(i64c(kc));
        // Pack A: for ir, ii, p: ap[ir*kc*mr + p*mr + ii] = A[batch, icb*mc + ir*mr + ii, k0 + p].
        let (ir, ii, p2) = (self.new_var(), self.new_var(), self.new_var());
        let m_panels = Extent::Tail { total: m.div_ceil(mr), block: mc / mr, outer: Index::var(icb) };
        let panel_m = Index::var(icb).scale(i64c(mc / mr)).add(&Index::var(ir));
        let row = panel_m.scale(i64c(mr)).add(&Index::var(ii));
        let mut a_idx = broadcast_index(&batch, &a_dims[..ra - 2], &out_dims[..r - 2]);
        a_idx.push(row);
        a_idx.push(k0.add(&Index::var(p2)));
        let a_val = self.expr_at(a, &a_idx)?;
        let a_at = Index::var(ir).scale(i64c(kc * mr)).add(&Index::var(p2).scale(i64c(mr))).add(&Index::var(ii));
        let pack_a = Stmt::Loop {
            var: ir,
            extent: m_panels.clone(),
            body: vec![Stmt::Loop {
                var: ii,
                extent: Extent::Tail { total: m, block: mr, outer: panel_m.clone() },
                body: vec![Stmt::Loop {
                    var: p2,
                    extent: k_eff.clone(),
                    body: vec![Stmt::Store { buf: ap, index: a_at, value: a_val }],
                }],
            }],
        };
        // Tiles: for jt, it: C[batch_row + tile_m*mr, jt*nr] (+)= ap[it] . bp[bb, jt, k0..].
        let (jt, it) = (self.new_var(), self.new_var());
        let tile_m = Index::var(icb).scale(i64c(mc / mr)).add(&Index::var(it));
        let b_of_batch = broadcast_index(&batch, &b_batch_dims, &out_dims[..r - 2]);
        let b_panel = Index::flatten(&b_of_batch, &b_batch_dims)
            .scale(i64c(b_len))
            .add(&Index::var(jt).scale(i64c(panel_len)))
            .add(&k0.scale(i64c(nr)));
        let bound = if batch.is_empty() { (Index::var(icb).scale(i64c(mc)), mc) } else { (batch_row.clone(), m) };
        let tile = Stmt::MicroKernel(Box::new(MicroKernel {
            mr: t.mr,
            nr: t.nr,
            a: ap,
            a_at: Index::var(it).scale(i64c(kc * mr)),
            b: bp,
            b_at: b_panel,
            depth: k_eff,
            c,
            c_row: batch_row.add(&tile_m.scale(i64c(mr))),
            c_col: Index::var(jt).scale(i64c(nr)),
            ldc: i64c(nn),
            bound,
            rows: Extent::Tail { total: m, block: mr, outer: tile_m.clone() },
            cols: Extent::Tail { total: nn, block: nr, outer: Index::var(jt) },
            first: Index::var(pcb),
        }));
        let k_blocks = k.div_ceil(kc);
        // The output written tile by tile: the matmul's elementwise consumer, else the product
        // itself when it is rounded to a narrower dtype.
        let target = match self.epilogues.get(&n).copied() {
            Some(o) => Some(o),
            None if c != buf && matches!(dtype, DType::F16 | DType::BF16) => Some(n),
            None => None,
        };
        let epilogue = match target {
            Some(o) => Some(self.tile_epilogue((n, o), (c, buf), &t, (&batch, &tile_m, jt), k_blocks > 1)?),
            None => None,
        };
        let fused = epilogue.is_some();
        let tiles_over = |body: Vec<Stmt>| Stmt::Loop {
            var: jt,
            extent: Extent::Const(n_panels),
            body: vec![Stmt::Loop { var: it, extent: m_panels.clone(), body }],
        };
        let per_block = match epilogue {
            None => {
                let tiles = tiles_over(vec![tile]);
                vec![Stmt::Loop { var: pcb, extent: Extent::Const(k_blocks), body: vec![pack_a, tiles] }]
            }
            Some((tile_buf, epilogue)) => {
                // Every depth block but the last adds to C; the last one's tiles go to a
                // call-local tile buffer, which the epilogue reads (adding C's partial sums) to
                // write the output, while the tile is in L1.
                let Stmt::MicroKernel(mk) = &tile else { return Err(self.bad("gemm tile is no micro-kernel")) };
                let last_tile = Stmt::MicroKernel(Box::new(MicroKernel {
                    c: tile_buf,
                    c_row: Index::constant(0),
                    c_col: Index::constant(0),
                    ldc: i64c(nr),
                    bound: (Index::constant(0), mr),
                    rows: Extent::Const(mr),
                    cols: Extent::Const(nr),
                    first: Index::constant(0),
                    ..mk.as_ref().clone()
                }));
                let mut last_body = vec![last_tile];
                last_body.extend(epilogue);
                let last = Index::constant(i64c(k_blocks - 1));
                let mut memo = HashMap::new();
                let last_block: Vec<Stmt> = [pack_a.clone(), tiles_over(last_body)]
                    .iter()
                    .map(|s| substitute_stmt(s, pcb, &last, &mut self.arena, &mut memo))
                    .collect();
                let mut stmts = Vec::new();
                if k_blocks > 1 {
                    let tiles = tiles_over(vec![tile]);
                    stmts.push(Stmt::Loop { var: pcb, extent: Extent::Const(k_blocks - 1), body: vec![pack_a, tiles] });
                }
                stmts.extend(last_block);
                stmts
            }
        };
        let row_blocks = vec![Stmt::Loop { var: icb, extent: Extent::Const(m.div_ceil(mc)), body: per_block }];
        let stmts = wrap_loops(&batch_vars, &out_dims[..r - 2], row_blocks);
        self.body.push(pack_b);
        if c != buf && !fused {
            // Round the f32 result once to the node's dtype, in a nest of its own.
            let out = self.pointwise_nest(n, buf, |l, idx| {
                let index = Index::flatten(idx, &out_dims);
                Ok(l.arena.intern(Expr::Load { buf: c, index }))
            })?;
            self.body.push(stmts);
            return Ok(out);
        }
        Ok(stmts)
    }

    /// The statements that write output `o`, the elementwise consumer of matmul `n` (or `n`
    /// itself, into `buf`, rounded to its dtype), for one register tile of `n` just written to
    /// the returned call-local tile buffer (`mr x nr`, rows `nr` apart): `o`'s expression at the
    /// tile's real rows and columns, reading the product from the tile buffer (plus the f32
    /// partial sums of the earlier depth blocks in `c` when `partial`), rounded to `n`'s dtype.
    /// `batch` and `tile_m` (the tile's row of tiles) and `jt` (its column of tiles) are the
    /// enclosing loops' indices.
    fn tile_epilogue(
        &mut self,
        (n, o): (NodeId, NodeId),
        (c, buf): (BufId, BufId),
        t: &GemmTiles,
        (batch, tile_m, jt): (&[Index], &Index, VarId),
        partial: bool,
    ) -> Result<(BufId, Vec<Stmt>), CodegenError> {
        let dims = self.shape(n)?.to_vec();
        let (m, nn) = (dims[dims.len() - 2], dims[dims.len() - 1]);
        let (mr, nr) = (u64::from(t.mr), u64::from(t.nr));
        let tile_buf = self.push_buf(BufDecl { dtype: DType::F32, len: mr * nr, kind: BufKind::Local });
        let (ri, cj) = (self.new_var(), self.new_var());
        let mut idx = batch.to_vec();
        idx.push(tile_m.scale(as_i64(mr)).add(&Index::var(ri)));
        idx.push(Index::var(jt).scale(as_i64(nr)).add(&Index::var(cj)));
        let in_tile = Index::var(ri).scale(as_i64(nr)).add(&Index::var(cj));
        let mut product = self.arena.intern(Expr::Load { buf: tile_buf, index: in_tile });
        if partial {
            let rhs = self.arena.intern(Expr::Load { buf: c, index: Index::flatten(&idx, &dims) });
            product = self.arena.intern(Expr::Binary { op: BinaryOp::Add, dtype: DType::F32, lhs: product, rhs });
        }
        let dtype = self.dtype(n)?;
        if dtype != DType::F32 {
            product = self.arena.intern(Expr::Cast { from: DType::F32, to: dtype, arg: product });
        }
        let (out, value) = if o == n {
            (buf, product)
        } else {
            // The users read the product at its own position (size-1 axes at 0, as operands are read).
            let keys = [idx.clone(), broadcast_index(&idx, &dims, &dims)];
            for key in &keys {
                self.memo.insert((n, key.clone()), product);
            }
            let value = self.op_expr(o, &idx);
            for key in &keys {
                self.memo.remove(&(n, key.clone()));
            }
            let out = self.mat[o.index()].ok_or_else(|| self.bad(format!("output {o} has no buffer")))?;
            (out, value?)
        };
        let store = Stmt::Store { buf: out, index: Index::flatten(&idx, &dims), value };
        let cols = Stmt::Loop {
            var: cj,
            extent: Extent::Tail { total: nn, block: nr, outer: Index::var(jt) },
            body: vec![store],
        };
        let rows = Stmt::Loop {
            var: ri,
            extent: Extent::Tail { total: m, block: mr, outer: tile_m.clone() },
            body: vec![cols],
        };
        Ok((tile_buf, vec![rows]))
    }

    fn concat_nests(
        &mut self,
        n: NodeId,
        buf: BufId,
        inputs: &[NodeId],
        axis: usize,
    ) -> Result<Vec<Stmt>, CodegenError> {
        let out_dims = self.shape(n)?.to_vec();
        let mut offset = 0i64;
        for &input in inputs {
            let dims = self.shape(input)?.to_vec();
            let Some(&len) = dims.get(axis) else {
                return Err(self.bad(format!("concat {n} has a bad axis {axis}")));
            };
            let vars: Vec<VarId> = dims.iter().map(|_| self.new_var()).collect();
            let idx: Vec<Index> = vars.iter().map(|&v| Index::var(v)).collect();
            let value = self.expr_at(input, &idx)?;
            let mut out_idx = idx.clone();
            out_idx[axis] = out_idx[axis].add_const(offset);
            let store = Stmt::Store { buf, index: Index::flatten(&out_idx, &out_dims), value };
            self.body.push(wrap_loops(&vars, &dims, vec![store]));
            offset += as_i64(len);
        }
        Ok(Vec::new())
    }

    /// The value of node `n` at multi-index `idx`: a load if it is materialized, else its op.
    fn expr_at(&mut self, n: NodeId, idx: &[Index]) -> Result<ExprId, CodegenError> {
        let key = (n, idx.to_vec());
        if let Some(&e) = self.memo.get(&key) {
            return Ok(e);
        }
        if let Some(view) = self.views.get(&n) {
            let index = view.index(idx);
            let e = self.arena.intern(Expr::Load { buf: view.buf, index });
            self.memo.insert(key, e);
            return Ok(e);
        }
        let e = match self.mat.get(n.index()).copied().flatten() {
            Some(buf) => {
                let index = Index::flatten(idx, self.shape(n)?);
                self.arena.intern(Expr::Load { buf, index })
            }
            None => self.op_expr(n, idx)?,
        };
        self.memo.insert(key, e);
        Ok(e)
    }

    /// Whether operand `b` of a node of shape `dims` is a stored value (a buffer, not an
    /// expression) broadcast along the last axis of a row longer than one element.
    fn row_invariant(&self, b: NodeId, dims: &[u64]) -> Result<bool, CodegenError> {
        let b_dims = self.shape(b)?;
        let stored = self.mat.get(b.index()).is_some_and(Option::is_some) && !self.views.contains_key(&b);
        Ok(stored && b_dims.last().is_none_or(|&d| d == 1) && dims.last().is_some_and(|&d| d > 1))
    }

    /// The value of node `n`'s op at `idx`, reading its operands through [`Self::expr_at`].
    fn op_expr(&mut self, n: NodeId, idx: &[Index]) -> Result<ExprId, CodegenError> {
        let node = self.g.node(n).ok_or_else(|| self.bad(format!("dangling node {n}")))?;
        let dtype = node.ty.dtype;
        let dims = self.shape(n)?.to_vec();
        if idx.len() != dims.len() {
            return Err(self.bad(format!("node {n} indexed with the wrong rank")));
        }
        let e = match node.op.clone() {
            Op::Input { .. } | Op::Reduce { .. } | Op::MatMul(..) | Op::Concat { .. } => {
                return Err(self.bad(format!("node {n} ({}) must be materialized", node.op.kind_name())));
            }
            Op::Constant { value } => self.arena.constant(dtype, value),
            Op::Iota => {
                let position = idx.first().cloned().ok_or_else(|| self.bad(format!("iota {n} has rank 0")))?;
                self.arena.intern(Expr::Position(position))
            }
            Op::Unary(op, a) => {
                let arg = self.operand_at(a, idx, &dims)?;
                self.arena.intern(Expr::Unary { op, dtype, arg })
            }
            Op::Cast(a) => {
                let from = self.dtype(a)?;
                let arg = self.operand_at(a, idx, &dims)?;
                if from == dtype { arg } else { self.arena.intern(Expr::Cast { from, to: dtype, arg }) }
            }
            Op::Binary(BinaryOp::Div, a, b) if dtype == DType::F32 && self.row_invariant(b, &dims)? => {
                // `x / d` with `d` one stored value per row (a softmax's sum): one reciprocal per
                // row, computed before the row's loop, and a multiply per element (within an ulp
                // of the quotient; a vector division costs many multiplies).
                let lhs = self.operand_at(a, idx, &dims)?;
                let rhs = self.operand_at(b, idx, &dims)?;
                let one = self.arena.constant(DType::F32, 1.0);
                let recip = self.arena.intern(Expr::Binary { op: BinaryOp::Div, dtype, lhs: one, rhs });
                self.arena.intern(Expr::Binary { op: BinaryOp::Mul, dtype, lhs, rhs: recip })
            }
            Op::Binary(op, a, b) => {
                let lhs = self.operand_at(a, idx, &dims)?;
                let rhs = self.operand_at(b, idx, &dims)?;
                self.arena.intern(Expr::Binary { op, dtype, lhs, rhs })
            }
            Op::Compare(op, a, b) => {
                let operand = self.dtype(a)?;
                let lhs = self.operand_at(a, idx, &dims)?;
                let rhs = self.operand_at(b, idx, &dims)?;
                self.arena.intern(Expr::Compare { op, operand, lhs, rhs })
            }
            Op::Select { cond, on_true, on_false } => {
                let cond = self.operand_at(cond, idx, &dims)?;
                let on_true = self.operand_at(on_true, idx, &dims)?;
                let on_false = self.operand_at(on_false, idx, &dims)?;
                self.arena.intern(Expr::Select { dtype, cond, on_true, on_false })
            }
            Op::Broadcast(a) => self.operand_at(a, idx, &dims)?,
            Op::Permute { input, perm } => {
                let mut in_idx = vec![Index::constant(0); perm.len()];
                for (i, &p) in perm.iter().enumerate() {
                    match (in_idx.get_mut(p), idx.get(i)) {
                        (Some(slot), Some(v)) => *slot = v.clone(),
                        _ => return Err(self.bad(format!("permute {n} has a bad permutation"))),
                    }
                }
                self.expr_at(input, &in_idx)?
            }
            Op::Slice { input, axis, start, .. } => {
                let mut in_idx = idx.to_vec();
                let slot = in_idx.get_mut(axis).ok_or_else(|| self.bad(format!("slice {n} has a bad axis")))?;
                *slot = slot.add_const(as_i64(start));
                self.expr_at(input, &in_idx)?
            }
            Op::Reshape(a) => {
                let a_dims = self.shape(a)?.to_vec();
                match self.mat.get(a.index()).copied().flatten() {
                    Some(buf) => {
                        let index = Index::flatten(idx, &dims);
                        self.arena.intern(Expr::Load { buf, index })
                    }
                    None if numel(&a_dims) == 1 => {
                        let zeros = vec![Index::constant(0); a_dims.len()];
                        self.expr_at(a, &zeros)?
                    }
                    None => match self.reshaped_index(idx, &dims, &a_dims) {
                        Some(a_idx) => self.expr_at(a, &a_idx)?,
                        None => {
                            return Err(self.bad(format!("the operand of reshape {n} is not materialized")));
                        }
                    },
                }
            }
        };
        Ok(e)
    }

    /// The index into a reshape's operand (shape `from`) of the element at `idx` of the reshape
    /// (shape `to`), when it is affine: the axes both shapes end with pass through, and the leading
    /// ones are re-split from their flat position, which must be a sum of variables of known
    /// range (`ranges`) whose every term lands in one axis and stays in range there (a head
    /// axis `hk * G + g` split back into `[hk, g]`, size-1 axes added or removed).
    fn reshaped_index(&self, idx: &[Index], to: &[u64], from: &[u64]) -> Option<Vec<Index>> {
        let suffix = to.iter().rev().zip(from.iter().rev()).take_while(|(a, b)| a == b).count();
        let (lead_to, lead_from) = (&to[..to.len() - suffix], &from[..from.len() - suffix]);
        let flat = Index::flatten(idx.get(..lead_to.len())?, lead_to);
        let mut strides = vec![1i64; lead_from.len()];
        for k in (0..lead_from.len().saturating_sub(1)).rev() {
            strides[k] = strides[k + 1].checked_mul(i64::try_from(lead_from[k + 1]).ok()?)?;
        }
        let mut out = vec![Index::constant(0); lead_from.len()];
        let mut offset = flat.offset;
        if offset < 0 {
            return None;
        }
        for (k, &s) in strides.iter().enumerate() {
            out[k] = out[k].add_const(offset / s);
            offset %= s;
        }
        for &(v, c) in &flat.terms {
            // The outermost axis whose stride divides the coefficient (size-1 axes never).
            let k = (0..lead_from.len()).find(|&k| lead_from[k] > 1 && c % strides[k] == 0 && c >= strides[k])?;
            out[k] = out[k].add(&Index::var(v).scale(c / strides[k]));
        }
        for (k, index) in out.iter().enumerate() {
            let (lo, hi) = self.ranges.range(index, &[])?;
            if lo < 0 || hi >= i128::from(lead_from[k]) {
                return None;
            }
        }
        out.extend(idx.get(lead_to.len()..)?.iter().cloned());
        Some(out)
    }

    /// Operand `a` of a node of shape `dims`, at the broadcast of `idx`.
    fn operand_at(&mut self, a: NodeId, idx: &[Index], dims: &[u64]) -> Result<ExprId, CodegenError> {
        let a_dims = self.shape(a)?.to_vec();
        if a_dims.len() > dims.len() {
            return Err(self.bad(format!("operand {a} has a higher rank than its user")));
        }
        let a_idx = broadcast_index(idx, &a_dims, dims);
        self.expr_at(a, &a_idx)
    }
}

/// The index into an operand of shape `from` (right-aligned, size-1 axes broadcast) of the
/// element at `idx` of a tensor of shape `to`.
fn broadcast_index(idx: &[Index], from: &[u64], to: &[u64]) -> Vec<Index> {
    let offset = to.len().saturating_sub(from.len());
    from.iter()
        .enumerate()
        .map(|(j, &d)| if d == 1 { Index::constant(0) } else { idx.get(j + offset).cloned().unwrap_or_default() })
        .collect()
}

/// Ops that cost a polynomial or a call per element.
fn transcendental(op: &Op) -> bool {
    use tcc_ir::UnaryOp::{Exp, Gelu, Log, Sigmoid, Tanh};
    matches!(op, Op::Unary(Exp | Log | Tanh | Sigmoid | Gelu, _) | Op::Binary(BinaryOp::Pow, ..))
}

/// Wraps `body` in loops over `vars` (outermost first) with trip counts `dims`.
fn wrap_loops(vars: &[VarId], dims: &[u64], body: Vec<Stmt>) -> Vec<Stmt> {
    let mut stmts = body;
    for (&var, &d) in vars.iter().zip(dims).rev() {
        stmts = vec![Stmt::Loop { var, extent: Extent::Const(d), body: stmts }];
    }
    stmts
}
