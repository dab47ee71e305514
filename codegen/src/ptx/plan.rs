//! Planning: which values of a kernel graph are materialized in memory, and the stages (kernel
//! entries launched one after another) that compute them.
//!
//! Every value that is not materialized is recomputed, fused, wherever it is read. Four fast
//! plans cover whole kernels in one stage (pointwise, rows, matmul with epilogue, and on tensor
//! cores a dual product: two products of one operand meeting in their epilogue); the generic
//! plan, which always applies, gives each reduction and matmul its own stage and materializes
//! values whose recomputation would be too costly or too deep.

use std::collections::HashMap;

use tcc_ir::{Bindings, Graph, Kernel, NodeId, Op};

use super::error::PtxError;

/// Where a materialized value lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Src {
    /// Output buffer `k` of the kernel.
    Output(usize),
    /// The scratch buffer, at this byte offset.
    Scratch(u64),
}

/// A value a stage writes, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Out {
    /// The value.
    pub(crate) node: NodeId,
    /// Where it goes.
    pub(crate) dest: Src,
}

/// One kernel entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Stage {
    /// One thread per element (several per thread with vectors) of values of one shape.
    Elementwise {
        /// The shared shape.
        shape: Vec<u64>,
        /// The values written.
        outs: Vec<Out>,
    },
    /// Reductions over the trailing axes of rows sharing the leading axes `dims[..prefix]`: one
    /// warp or block per row computes every reduction of the row, then writes the values of
    /// `outs` that belong to the row.
    Rows {
        /// Rank of the row index (the shared leading axes).
        prefix: usize,
        /// The leading dims.
        row_dims: Vec<u64>,
        /// The reductions, in dependency order.
        reduces: Vec<NodeId>,
        /// The values written per row.
        outs: Vec<Out>,
    },
    /// A reduction over arbitrary axes: one thread per output element.
    Reduce {
        /// The reduce node.
        node: NodeId,
        /// Where it goes.
        dest: Src,
    },
    /// A tiled matmul whose epilogue writes `outs` (values of the matmul's shape).
    MatMul {
        /// The matmul node.
        node: NodeId,
        /// The values written from each output tile.
        outs: Vec<Out>,
    },
    /// A dual product ([`tcc_ir::DualProduct`]) on tensor cores: one tiled kernel computes both
    /// products of each tile and its epilogue writes `outs` (values of the products' shape) from
    /// both.
    DualMatMul {
        /// The two matmul nodes.
        products: [NodeId; 2],
        /// The values written from each output tile.
        outs: Vec<Out>,
    },
    /// The attention kernel (`super::attention`): the whole graph, its one output written from
    /// each block of queries.
    Attention,
}

/// The plan of one kernel.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Concrete dims of every node.
    pub(crate) dims: Vec<Vec<u64>>,
    /// Stages in launch order.
    pub(crate) stages: Vec<Stage>,
    /// Where each materialized node is read from (by later stages).
    pub(crate) loc: HashMap<NodeId, Src>,
    /// Bytes of scratch memory needed.
    pub(crate) scratch_bytes: u64,
    /// True when some index needs 64 bits.
    pub(crate) index64: bool,
}

/// Recomputing a multiply-used value costlier than this materializes it.
const SHARED_COST_LIMIT: u64 = 24;
/// Any fused expression larger than this is materialized.
const COST_LIMIT: u64 = 400;
/// Any fused expression deeper than this is materialized (bounds recursion in the emitter).
const DEPTH_LIMIT: u64 = 48;
/// Scratch regions start at multiples of this many bytes.
const SCRATCH_ALIGN: u64 = 256;

/// The number of elements of concrete dims.
pub(crate) fn numel(dims: &[u64]) -> u64 {
    dims.iter().product()
}

fn invalid(kernel: &Kernel, reason: String) -> PtxError {
    PtxError::InvalidGraph { kernel: kernel.name.clone(), reason }
}

/// Concrete dims of every node and every parameter.
type Resolved = (Vec<Vec<u64>>, Vec<Vec<u64>>);

fn resolve(kernel: &Kernel, bindings: &Bindings) -> Result<Resolved, PtxError> {
    let g = &kernel.graph;
    let vars: Vec<String> = g.shape_vars().into_iter().filter(|v| !bindings.contains_key(v)).collect();
    if !vars.is_empty() {
        return Err(PtxError::Unbound { kernel: kernel.name.clone(), vars });
    }
    let conc = |s: &tcc_ir::Shape| -> Vec<u64> { s.0.iter().map(|d| d.resolve(bindings).unwrap_or(0)).collect() };
    Ok((g.nodes.iter().map(|n| conc(&n.ty.shape)).collect(), g.params.iter().map(|p| conc(&p.ty.shape)).collect()))
}

/// Decides, in topological order, which nodes must be materialized: every reduction and matmul,
/// and values too costly or too deep to recompute.
fn materialized(g: &Graph) -> Vec<bool> {
    let uses = g.use_counts();
    let n = g.nodes.len();
    let mut mat = vec![false; n];
    let mut cost = vec![0u64; n];
    let mut depth = vec![0u64; n];
    for (i, node) in g.nodes.iter().enumerate() {
        match node.op {
            Op::Input { .. } | Op::Constant { .. } => {
                cost[i] = 1;
            }
            Op::Reduce { .. } | Op::MatMul(..) => {
                mat[i] = true;
                cost[i] = 1;
            }
            _ => {
                let ops = node.op.operands();
                let c = 1 + ops.iter().map(|o| cost.get(o.index()).copied().unwrap_or(1)).sum::<u64>();
                let d = 1 + ops.iter().map(|o| depth.get(o.index()).copied().unwrap_or(0)).max().unwrap_or(0);
                if (uses[i] > 1 && c > SHARED_COST_LIMIT) || c > COST_LIMIT || d > DEPTH_LIMIT {
                    mat[i] = true;
                    cost[i] = 1;
                } else {
                    cost[i] = c;
                    depth[i] = d;
                }
            }
        }
    }
    mat
}

/// Nodes that depend (transitively, or by being one) on a node of `roots`.
fn dependents(g: &Graph, roots: &[NodeId]) -> Vec<bool> {
    let mut dep = vec![false; g.nodes.len()];
    for (i, node) in g.nodes.iter().enumerate() {
        dep[i] = roots.iter().any(|r| r.index() == i)
            || node.op.operands().iter().any(|o| dep.get(o.index()).copied().unwrap_or(false));
    }
    dep
}

fn is_elementwise(op: &Op) -> bool {
    matches!(op, Op::Unary(..) | Op::Cast(_) | Op::Binary(..) | Op::Compare(..) | Op::Select { .. })
}

/// The trailing-axes split of a reduction: `Some(p)` when it reduces exactly axes `p..rank`.
fn trailing_split(op: &Op, input_rank: usize) -> Option<usize> {
    if let Op::Reduce { axes, .. } = op {
        let p = input_rank.checked_sub(axes.len())?;
        if axes.iter().enumerate().all(|(i, &a)| a == p + i) {
            return Some(p);
        }
    }
    None
}

/// Plans `kernel` under `bindings`; an attention kernel the GPU attention kernel runs
/// ([`tcc_ir::attention::GpuAttention`]) is one [`Stage::Attention`] when the target has
/// `tensor_cores` (`mma.sync` and `cp.async`).
pub(crate) fn plan(kernel: &Kernel, bindings: &Bindings, tensor_cores: bool) -> Result<Plan, PtxError> {
    let g = &kernel.graph;
    for (i, node) in g.nodes.iter().enumerate() {
        for o in node.op.operands() {
            if o.index() >= i {
                return Err(invalid(kernel, format!("node %{i} uses {o}, which is not an earlier node")));
            }
        }
        if let Op::Input { index } = node.op
            && index >= g.params.len()
        {
            return Err(invalid(kernel, format!("node %{i} reads parameter {index}, which does not exist")));
        }
    }
    if let Some(o) = g.outputs.iter().find(|o| o.index() >= g.nodes.len()) {
        return Err(invalid(kernel, format!("output {o} names no node")));
    }
    let (dims, param_dims) = resolve(kernel, bindings)?;
    let mat = materialized(g);
    let biggest = dims.iter().chain(&param_dims).map(|d| numel(d)).max().unwrap_or(0);
    let mut p = Plan { dims, stages: Vec::new(), loc: HashMap::new(), scratch_bytes: 0, index64: false };
    let attention = tensor_cores
        && kernel.class == tcc_ir::KernelClass::Attention
        && tcc_ir::attention::GpuAttention::find(g).is_some();
    if attention {
        p.stages.push(Stage::Attention);
    } else if !(try_rows(g, &mat, &mut p) || try_matmul(g, &mat, &mut p) || (tensor_cores && try_dual(g, &mat, &mut p)))
    {
        generic(g, &mat, &mut p);
    }
    p.index64 = biggest >= (1 << 30) || p.scratch_bytes >= (1 << 30);
    Ok(p)
}

fn outputs_at(g: &Graph, n: NodeId) -> Vec<usize> {
    g.outputs.iter().enumerate().filter(|(_, o)| **o == n).map(|(k, _)| k).collect()
}

/// Where a materialized node goes: its first output position, or fresh scratch.
fn place(g: &Graph, p: &mut Plan, n: NodeId) -> Src {
    if let Some(&k) = outputs_at(g, n).first() {
        return Src::Output(k);
    }
    let off = p.scratch_bytes.div_ceil(SCRATCH_ALIGN) * SCRATCH_ALIGN;
    let node = &g.nodes[n.index()];
    p.scratch_bytes = off + numel(&p.dims[n.index()]) * node.ty.dtype.size_bytes() as u64;
    Src::Scratch(off)
}

/// Adds elementwise stages writing every output position not written yet, grouped by shape.
fn output_stages(g: &Graph, p: &mut Plan, skip: &[usize]) {
    let mut groups: Vec<(Vec<u64>, Vec<Out>)> = Vec::new();
    for (k, &n) in g.outputs.iter().enumerate() {
        if skip.contains(&k) || p.loc.get(&n) == Some(&Src::Output(k)) {
            continue;
        }
        let shape = p.dims[n.index()].clone();
        let out = Out { node: n, dest: Src::Output(k) };
        match groups.iter_mut().find(|(s, _)| *s == shape) {
            Some((_, outs)) => outs.push(out),
            None => groups.push((shape, vec![out])),
        }
    }
    for (shape, outs) in groups {
        p.stages.push(Stage::Elementwise { shape, outs });
    }
}

/// The generic plan: one stage per materialized node, then the outputs.
fn generic(g: &Graph, mat: &[bool], p: &mut Plan) {
    for (i, node) in g.nodes.iter().enumerate() {
        if !mat[i] {
            continue;
        }
        let n = NodeId(i as u32);
        let dest = place(g, p, n);
        let stage = match &node.op {
            Op::Reduce { input, .. } => {
                let in_dims = &p.dims[input.index()];
                match trailing_split(&node.op, in_dims.len()) {
                    Some(prefix) => Stage::Rows {
                        prefix,
                        row_dims: in_dims[..prefix].to_vec(),
                        reduces: vec![n],
                        outs: vec![Out { node: n, dest }],
                    },
                    None => Stage::Reduce { node: n, dest },
                }
            }
            Op::MatMul(..) => Stage::MatMul { node: n, outs: vec![Out { node: n, dest }] },
            _ => Stage::Elementwise { shape: p.dims[i].clone(), outs: vec![Out { node: n, dest }] },
        };
        p.stages.push(stage);
        p.loc.insert(n, dest);
    }
    output_stages(g, p, &[]);
}

/// The rows plan: every reduction is over the trailing axes of rows with the same leading dims,
/// every value that depends on a reduction keeps those leading dims, and every output starts
/// with them; then one stage computes the whole kernel.
fn try_rows(g: &Graph, mat: &[bool], p: &mut Plan) -> bool {
    let reduces: Vec<NodeId> =
        (0..g.nodes.len()).filter(|&i| matches!(g.nodes[i].op, Op::Reduce { .. })).map(|i| NodeId(i as u32)).collect();
    if reduces.is_empty() || g.nodes.iter().any(|n| matches!(n.op, Op::MatMul(..))) {
        return false;
    }
    // Only the reductions may need memory.
    if mat.iter().enumerate().any(|(i, &m)| m && !matches!(g.nodes[i].op, Op::Reduce { .. })) {
        return false;
    }
    let mut row: Option<(usize, Vec<u64>)> = None;
    for r in &reduces {
        let Op::Reduce { input, .. } = &g.nodes[r.index()].op else { return false };
        let in_dims = &p.dims[input.index()];
        let Some(prefix) = trailing_split(&g.nodes[r.index()].op, in_dims.len()) else { return false };
        let lead = in_dims[..prefix].to_vec();
        match &row {
            None => row = Some((prefix, lead)),
            Some((pp, l)) if *pp == prefix && *l == lead => {}
            Some(_) => return false,
        }
    }
    let Some((prefix, lead)) = row else { return false };
    let starts = |d: &[u64]| d.len() >= prefix && d[..prefix] == lead[..];
    let dep = dependents(g, &reduces);
    for (i, node) in g.nodes.iter().enumerate() {
        if !dep[i] {
            continue;
        }
        if !starts(&p.dims[i]) {
            return false;
        }
        let ok = match &node.op {
            Op::Reduce { .. } | Op::Reshape(_) => true,
            op if is_elementwise(op) || matches!(op, Op::Broadcast(_)) => {
                op.operands().iter().all(|o| !dep[o.index()] || p.dims[o.index()].len() == p.dims[i].len())
            }
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    if !g.outputs.iter().all(|o| starts(&p.dims[o.index()])) {
        return false;
    }
    let outs = g.outputs.iter().enumerate().map(|(k, &n)| Out { node: n, dest: Src::Output(k) }).collect();
    p.stages.push(Stage::Rows { prefix, row_dims: lead, reduces, outs });
    true
}

/// The dual-product plan: the graph is a dual product ([`tcc_ir::DualProduct`]: both products
/// of one non-empty type, every value after them elementwise of their shape, every output after
/// them), nothing but the products needs memory, and one stage writes every output.
fn try_dual(g: &Graph, mat: &[bool], p: &mut Plan) -> bool {
    let Some(dual) = tcc_ir::DualProduct::find(g) else { return false };
    let [p0, p1] = dual.products;
    if mat.iter().enumerate().any(|(i, &x)| x && i != p0.index() && i != p1.index()) {
        return false;
    }
    let a = &p.dims[dual.a.index()];
    if numel(&p.dims[p0.index()]) == 0 || a.last().is_none_or(|&k| k == 0) {
        return false;
    }
    let outs = g.outputs.iter().enumerate().map(|(k, &n)| Out { node: n, dest: Src::Output(k) }).collect();
    p.stages.push(Stage::DualMatMul { products: dual.products, outs });
    true
}

/// The matmul plan: one matmul, every value depending on it is elementwise of its shape, and its
/// epilogue writes every output of its shape; other outputs get elementwise stages.
fn try_matmul(g: &Graph, mat: &[bool], p: &mut Plan) -> bool {
    let mms: Vec<usize> = (0..g.nodes.len()).filter(|&i| matches!(g.nodes[i].op, Op::MatMul(..))).collect();
    let [m] = mms[..] else { return false };
    if g.nodes.iter().any(|n| matches!(n.op, Op::Reduce { .. })) {
        return false;
    }
    if mat.iter().enumerate().any(|(i, &x)| x && i != m) {
        return false;
    }
    let mm = NodeId(m as u32);
    let dep = dependents(g, &[mm]);
    let shape = p.dims[m].clone();
    for (i, node) in g.nodes.iter().enumerate() {
        if dep[i] && i != m && (!is_elementwise(&node.op) || p.dims[i] != shape) {
            return false;
        }
    }
    let mut outs = Vec::new();
    let mut done = Vec::new();
    for (k, &n) in g.outputs.iter().enumerate() {
        if p.dims[n.index()] == shape {
            outs.push(Out { node: n, dest: Src::Output(k) });
            done.push(k);
        } else if dep[n.index()] {
            return false;
        }
    }
    p.stages.push(Stage::MatMul { node: mm, outs });
    output_stages(g, p, &done);
    true
}
