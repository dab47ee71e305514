//! Attention as the optimizer finds it in a kernel's graph: `softmax(f(q kᵀ)) v` written as plain
//! math, which a kernel of class [`crate::KernelClass::Attention`] computes with an online softmax
//! (the running row maximum and sum carried across blocks of keys, the output rescaled) without
//! ever storing the score matrix.
//!
//! [`Attention::find`] is the one matcher: the optimizer asks it whether a fused body is an
//! attention kernel, and the code generators ask it where the pieces are. A graph matches when:
//! - it has two matmuls, the *scores* `q kᵀ` over a domain `[.., S, T]` and the *output* `p v`;
//! - the *logits* `x = f(scores)` come from the scores through elementwise ops only (scale, bias
//!   from a tensor or from positions, soft cap, masking by `select`), the other operands of those
//!   ops not depending on the scores;
//! - the softmax is written with the usual max-subtract form over the key axis (the last):
//!   `e = exp(x - max(x, -1, keepdim))`, `l = sum(e, -1, keepdim)`, and either `p = e / l`
//!   (possibly cast) is the output product's left operand, or `p = e` and the product is divided
//!   by `l` afterwards;
//! - nothing else reads the scores, the logits, `e` or the row statistics, and every value after
//!   the output product is elementwise on its shape (a cast, a residual), up to the value stored
//!   as the first graph output, possibly through a *layout tail* ([`OutputLayout`]): a permute
//!   that keeps the head (last) axis last, then reshapes, so that the kernel stores each output
//!   row where the permuted, reshaped tensor has it (`o.permute([2, 0, 1, 3]).reshape([S, H*d])`
//!   before an output projection costs no kernel of its own);
//! - any further graph output is a *statistic* of the rows: computed elementwise from the row
//!   maximum and sum alone (the log-sum-exp `row_max + log(row_sum)` that a split-KV combine or a
//!   backward pass needs), with the domain's shape with the key axis kept as 1 or dropped.
//!
//! A [`Mask`] records what is known about the logits as a function of positions: where `x` is
//! `select(cond, .., fill)` with a constant `fill` and `cond` a conjunction of affine comparisons
//! of the query position `i` and the key position `j` (from `iota`), a kernel may skip blocks of
//! keys where some comparison fails at every position of the block. That is exact only when the
//! fill is `-inf`: masked keys then weigh nothing, and a row whose every key is masked is NaN
//! either way (the written formula's `-inf - -inf`). With a finite fill such a row is an average of
//! `v`, so every block must be visited ([`Mask::skips_blocks`]).

mod groups;

use crate::graph::Graph;
use crate::op::{BinaryOp, CompareOp, NodeId, Op, ReduceOp, UnaryOp};
use crate::shape::{Dim, Shape};

/// Where the pieces of an attention are in a graph (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct Attention {
    /// The first product, `q kᵀ`: shape `[.., S, T]` (the domain).
    pub scores: NodeId,
    /// The logits `f(scores)`, the operand of the row maximum: the domain's shape.
    pub logits: NodeId,
    /// `max(logits, -1, keepdim)`.
    pub row_max: NodeId,
    /// `exp(logits - row_max)`.
    pub exp: NodeId,
    /// `sum(exp, -1, keepdim)`.
    pub row_sum: NodeId,
    /// The second product, `p v`: shape `[.., S, Dv]`.
    pub output: NodeId,
    /// Whether the product's operand is already divided by the row sum ([`Normalized::Before`]),
    /// or the product is divided afterwards by the node [`Normalized::After`] names.
    pub normalized: Normalized,
    /// What is known of the logits as a function of positions, if anything.
    pub mask: Option<Mask>,
    /// The graph's further outputs, each a statistic of the rows (see the module docs), in output
    /// order.
    pub statistics: Vec<NodeId>,
    /// Where the first output's value is stored through a layout tail, if it is.
    pub layout: Option<OutputLayout>,
}

/// The layout tail of an attention's first output: `value` (the output product's shape) goes
/// through a permute that keeps the last axis last, then reshapes (which keep every element's
/// flat position), to the graph's output. So the element at multi-index `i` of `value` lands at
/// the flat position of `i` permuted by `perm` in `value`'s dims permuted alike, and consecutive
/// elements of a head stay consecutive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputLayout {
    /// The value the tail moves: elementwise from the output product, of its shape.
    pub value: NodeId,
    /// The permutation (`perm[k]`: the axis of `value` that is axis `k` of the permuted tensor;
    /// the identity when the tail only reshapes).
    pub perm: Vec<usize>,
}

impl OutputLayout {
    /// `items` (one per axis of the value) in the permuted order.
    pub fn permuted<T: Clone>(&self, items: &[T]) -> Vec<T> {
        self.perm.iter().filter_map(|&p| items.get(p).cloned()).collect()
    }
}

/// Where the division by the row sum happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Normalized {
    /// `p = exp / row_sum` (possibly cast) is the output product's left operand.
    Before,
    /// The output product reads `exp` (possibly cast) and this node divides it (or its cast) by
    /// the row sum.
    After(NodeId),
}

/// The logits' mask: `select(cond, .., fill)`, possibly nested with the same fill, where every
/// `cond` in [`Mask::atoms`] is an affine comparison of positions.
#[derive(Debug, Clone, PartialEq)]
pub struct Mask {
    /// The constant the masked logits take.
    pub fill: f64,
    /// Comparisons that all hold where a logit is kept (other conditions may hold too).
    pub atoms: Vec<Atom>,
}

/// The comparison `query * i + key * j + offset  op  0` of the query position `i` and the key
/// position `j` (causal: `i - j >= 0`; a window of `W`: also `j - i + W > 0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Atom {
    /// Coefficient of the query position.
    pub query: i64,
    /// Coefficient of the key position.
    pub key: i64,
    /// The constant term.
    pub offset: i64,
    /// The comparison with zero.
    pub op: CompareOp,
}

impl Atom {
    /// Whether the comparison can hold somewhere in the block of queries `q0..=q1` and keys
    /// `k0..=k1` (an affine function takes its extremes at the corners).
    pub fn may_hold(&self, (q0, q1): (i64, i64), (k0, k1): (i64, i64)) -> bool {
        let (lo, hi) = self.range((q0, q1), (k0, k1));
        match self.op {
            CompareOp::Ge => hi >= 0,
            CompareOp::Gt => hi > 0,
            CompareOp::Le => lo <= 0,
            CompareOp::Lt => lo < 0,
            CompareOp::Eq => lo <= 0 && hi >= 0,
            CompareOp::Ne => !(lo == 0 && hi == 0),
        }
    }

    /// The smallest and largest value of the affine side over the block.
    pub fn range(&self, (q0, q1): (i64, i64), (k0, k1): (i64, i64)) -> (i64, i64) {
        let (qa, qb) = (self.query.saturating_mul(q0), self.query.saturating_mul(q1));
        let (ka, kb) = (self.key.saturating_mul(k0), self.key.saturating_mul(k1));
        let lo = qa.min(qb).saturating_add(ka.min(kb)).saturating_add(self.offset);
        let hi = qa.max(qb).saturating_add(ka.max(kb)).saturating_add(self.offset);
        (lo, hi)
    }

    /// The comparison at one position.
    pub fn holds(&self, i: i64, j: i64) -> bool {
        self.may_hold((i, i), (j, j))
    }
}

impl Mask {
    /// Whether a kernel may skip the blocks [`Mask::block_is_masked`] names: only for a `-inf`
    /// fill (see the module docs).
    pub fn skips_blocks(&self) -> bool {
        self.fill == f64::NEG_INFINITY && !self.atoms.is_empty()
    }

    /// Whether every logit of the block of queries `q0..=q1` and keys `k0..=k1` is the fill.
    pub fn block_is_masked(&self, q: (i64, i64), k: (i64, i64)) -> bool {
        self.atoms.iter().any(|a| !a.may_hold(q, k))
    }
}

/// An affine function `query * i + key * j + offset` of the positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Affine {
    query: i64,
    key: i64,
    offset: i64,
}

impl Affine {
    const ZERO: Affine = Affine { query: 0, key: 0, offset: 0 };

    fn add(self, o: Affine, sign: i64) -> Option<Affine> {
        Some(Affine {
            query: self.query.checked_add(o.query.checked_mul(sign)?)?,
            key: self.key.checked_add(o.key.checked_mul(sign)?)?,
            offset: self.offset.checked_add(o.offset.checked_mul(sign)?)?,
        })
    }

    fn scale(self, k: i64) -> Option<Affine> {
        Some(Affine {
            query: self.query.checked_mul(k)?,
            key: self.key.checked_mul(k)?,
            offset: self.offset.checked_mul(k)?,
        })
    }

    fn constant(&self) -> Option<i64> {
        (self.query == 0 && self.key == 0).then_some(self.offset)
    }
}

impl Attention {
    /// The attention computed by `g`, if `g` is one (see the module docs).
    pub fn find(g: &Graph) -> Option<Attention> {
        let matmuls: Vec<usize> =
            g.nodes.iter().enumerate().filter(|(_, n)| matches!(n.op, Op::MatMul(..))).map(|(i, _)| i).collect();
        let [s, o] = matmuls.as_slice() else { return None };
        let (scores, output) = (NodeId(*s as u32), NodeId(*o as u32));
        let (out, statistics) = g.outputs.split_first()?;
        let users = g.users();
        let layout = output_layout(g, &users, *out);
        let in_tail = layout.as_ref().map(|l| g.downstream_of(l.value));
        let tail = |n: NodeId| layout.as_ref().zip(in_tail.as_ref()).is_some_and(|(l, t)| t[n.index()] && n != l.value);
        let domain = shape(g, scores)?;
        let rank = domain.rank();
        if rank < 2 || shape(g, output)?.rank() != rank {
            return None;
        }
        let Op::MatMul(probs_operand, _) = g.node(output)?.op else { return None };
        // p = cast?(e / l) or cast?(e).
        let probs = strip_casts(g, probs_operand);
        let (exp, row_sum, normalized) = match &g.node(probs)?.op {
            Op::Binary(BinaryOp::Div, e, l) if is_row_stat(g, *l, ReduceOp::Sum, *e) => (*e, *l, Normalized::Before),
            Op::Unary(UnaryOp::Exp, _) => {
                let (div, sum) = division_after(g, &users, output, probs)?;
                (probs, sum, Normalized::After(div))
            }
            _ => return None,
        };
        let Op::Unary(UnaryOp::Exp, shifted) = g.node(exp)?.op else { return None };
        let Op::Binary(BinaryOp::Sub, logits, row_max) = g.node(shifted)?.op else { return None };
        if !is_row_stat(g, row_max, ReduceOp::Max, logits) || shape(g, logits)? != domain {
            return None;
        }
        // The score function: elementwise from the scores to the logits, read by nothing else.
        let from_scores = g.downstream_of(scores);
        let from_output = g.downstream_of(output);
        let softmax = [row_max, shifted, exp, row_sum];
        let stats = row_statistics(g, statistics, (row_max, row_sum), domain)?;
        for (i, node) in g.nodes.iter().enumerate() {
            let n = NodeId(i as u32);
            if n == scores || n == output || softmax.contains(&n) || stats[i] || tail(n) {
                continue;
            }
            if from_output[i] {
                // The epilogue: elementwise on the output's shape (the division by the row sum
                // when normalizing after the product).
                let elementwise = matches!(node.op, Op::Unary(..) | Op::Binary(..) | Op::Cast(_) | Op::Select { .. });
                if !elementwise || shape(g, n)? != shape(g, output)? {
                    return None;
                }
            } else if from_scores[i] {
                let between = n == probs || is_cast_chain(g, n, probs_operand, probs);
                let score_fn = matches!(node.op, Op::Unary(..) | Op::Binary(..) | Op::Cast(_) | Op::Select { .. })
                    && shape(g, n)? == domain
                    && (n == logits || users[i].iter().all(|&u| from_scores[u.index()] && u <= logits));
                if !(between || score_fn) {
                    return None;
                }
            }
        }
        // The intermediates are read only inside the pattern (the row statistics also by the
        // statistic outputs).
        let inside = |n: NodeId, allowed: &[NodeId]| users[n.index()].iter().all(|u| allowed.contains(u));
        let only_user = |n: NodeId, u: NodeId| users[n.index()].iter().all(|&x| x == u || stats[x.index()]);
        if !inside(logits, &[row_max, shifted])
            || !only_user(row_max, shifted)
            || !only_user(shifted, exp)
            || !(from_output[out.index()] || *out == output)
        {
            return None;
        }
        match normalized {
            Normalized::Before => {
                if !inside(exp, &[row_sum, probs]) || !only_user(row_sum, probs) {
                    return None;
                }
            }
            Normalized::After(div) => {
                let exp_users: Vec<NodeId> = users[exp.index()].clone();
                if !exp_users.iter().all(|&u| u == row_sum || is_cast_chain(g, u, probs_operand, exp) || u == output)
                    || !only_user(row_sum, div)
                {
                    return None;
                }
            }
        }
        if let Some(l) = &layout
            && (!(from_output[l.value.index()] || l.value == output) || shape(g, l.value)? != shape(g, output)?)
        {
            return None;
        }
        let mask = mask_of(g, logits, rank);
        let statistics = statistics.to_vec();
        Some(Attention { scores, logits, row_max, exp, row_sum, output, normalized, mask, statistics, layout })
    }

    /// The value stored as the first output: the output itself, or the value its layout tail
    /// moves ([`OutputLayout`]), of the output product's shape.
    pub fn stored_value(&self, g: &Graph) -> Option<NodeId> {
        match &self.layout {
            Some(l) => Some(l.value),
            None => g.outputs.first().copied(),
        }
    }

    /// The node whose value is `softmax(logits) v`: the output product, or the division after it.
    pub fn normalized_output(&self) -> NodeId {
        match self.normalized {
            Normalized::Before => self.output,
            Normalized::After(div) => div,
        }
    }
}

fn shape(g: &Graph, n: NodeId) -> Option<&Shape> {
    g.ty(n).map(|t| &t.shape)
}

/// The layout tail ending at `out` ([`OutputLayout`]): reshapes back from `out`, then at most one
/// permute that keeps the last axis last, each node read only by the next (`out` by nothing).
/// `None` when `out` is no permute or reshape (or the tail is another chain of them).
fn output_layout(g: &Graph, users: &[Vec<NodeId>], out: NodeId) -> Option<OutputLayout> {
    if !users.get(out.index())?.is_empty() {
        return None;
    }
    let mut at = out;
    let mut perm = None;
    loop {
        let node = g.node(at)?;
        let next = match &node.op {
            Op::Reshape(a) if perm.is_none() => *a,
            Op::Permute { input, perm: p } if perm.is_none() => {
                let r = p.len();
                if r == 0 || p[r - 1] != r - 1 {
                    return None;
                }
                perm = Some(p.clone());
                *input
            }
            _ => break,
        };
        if users.get(next.index())?.as_slice() != [at] {
            return None;
        }
        at = next;
    }
    if at == out {
        return None;
    }
    let rank = shape(g, at)?.rank();
    Some(OutputLayout { value: at, perm: perm.unwrap_or_else(|| (0..rank).collect()) })
}

/// Which nodes compute the statistic `outputs` (see the module docs) from the row maximum and sum
/// (`stats.0`, `stats.1`): elementwise ops, casts and reshapes over them and scalar constants,
/// each output of the domain's shape with the key axis kept as 1 or dropped. `None` when an
/// output is no such statistic.
fn row_statistics(g: &Graph, outputs: &[NodeId], stats: (NodeId, NodeId), domain: &Shape) -> Option<Vec<bool>> {
    let mut is_stat = vec![false; g.nodes.len()];
    let rank = domain.rank();
    let kept = Shape(domain.dims()[..rank - 1].iter().cloned().chain([Dim::Const(1)]).collect());
    let dropped = Shape(domain.dims()[..rank - 1].to_vec());
    for (i, node) in g.nodes.iter().enumerate() {
        let n = NodeId(i as u32);
        if n == stats.0 || n == stats.1 {
            continue;
        }
        let of_stats =
            |a: &NodeId| *a == stats.0 || *a == stats.1 || is_stat[a.index()] || constant_value(g, *a).is_some();
        let per_row = matches!(node.op, Op::Unary(..) | Op::Binary(..) | Op::Cast(_) | Op::Reshape(_))
            && (node.ty.shape == kept || node.ty.shape == dropped)
            && node.op.operands().iter().any(|a| *a == stats.0 || *a == stats.1 || is_stat[a.index()])
            && node.op.operands().iter().all(of_stats);
        is_stat[i] = per_row;
    }
    // Only what the outputs read is theirs: a value computed from the statistics that anything
    // else reads is no statistic.
    let users = g.users();
    for i in (0..g.nodes.len()).rev() {
        let n = NodeId(i as u32);
        is_stat[i] &= outputs.contains(&n) || (!users[i].is_empty() && users[i].iter().all(|u| is_stat[u.index()]));
    }
    outputs.iter().all(|o| is_stat[o.index()]).then_some(is_stat)
}

/// `n` with the casts in front of it removed.
fn strip_casts(g: &Graph, mut n: NodeId) -> NodeId {
    while let Some(Op::Cast(a)) = g.node(n).map(|x| &x.op) {
        n = *a;
    }
    n
}

/// Whether `n` is one of the casts between `base` and `top` (`top` = cast(..cast(base))).
fn is_cast_chain(g: &Graph, n: NodeId, top: NodeId, base: NodeId) -> bool {
    let mut at = top;
    while at != base {
        if at == n {
            return true;
        }
        match g.node(at).map(|x| &x.op) {
            Some(Op::Cast(a)) => at = *a,
            _ => return false,
        }
    }
    false
}

/// Whether `stat` is `op(of, last axis, keepdim)`.
fn is_row_stat(g: &Graph, stat: NodeId, op: ReduceOp, of: NodeId) -> bool {
    let rank = shape(g, of).map_or(0, Shape::rank);
    matches!(g.node(stat).map(|n| &n.op), Some(Op::Reduce { op: o, input, axes, keepdim: true })
        if *o == op && *input == of && axes.as_slice() == [rank.wrapping_sub(1)])
}

/// The division of the output product (or its casts) by `sum(exp)` after the product: the
/// division node and the row sum.
fn division_after(g: &Graph, users: &[Vec<NodeId>], output: NodeId, exp: NodeId) -> Option<(NodeId, NodeId)> {
    let mut at = output;
    loop {
        let [u] = users.get(at.index())?.as_slice() else { return None };
        match &g.node(*u)?.op {
            Op::Cast(_) => at = *u,
            Op::Binary(BinaryOp::Div, a, l) if *a == at && is_row_stat(g, *l, ReduceOp::Sum, exp) => {
                return Some((*u, *l));
            }
            _ => return None,
        }
    }
}

/// The mask of the logits, if they are `select(cond, .., constant)` with analyzable conditions.
fn mask_of(g: &Graph, logits: NodeId, rank: usize) -> Option<Mask> {
    let mut atoms = Vec::new();
    let mut fill = None;
    let mut at = logits;
    while let Some(Op::Select { cond, on_true, on_false }) = g.node(at).map(|n| &n.op) {
        let value = constant_value(g, *on_false)?;
        if fill.is_some_and(|f: f64| f.to_bits() != value.to_bits()) {
            break;
        }
        fill = Some(value);
        let idx = domain_index(rank);
        let at_cond = operand_index(g, *cond, &idx, shape(g, at)?);
        if let Some(atom) = at_cond.and_then(|i| condition(g, *cond, &i)) {
            atoms.push(atom);
        }
        at = *on_true;
    }
    fill.map(|fill| Mask { fill, atoms })
}

/// The symbolic index of the domain: batch axes unknown, then `i`, then `j`.
fn domain_index(rank: usize) -> Vec<Option<Affine>> {
    let mut idx = vec![None; rank];
    if rank >= 2 {
        idx[rank - 2] = Some(Affine { query: 1, key: 0, offset: 0 });
        idx[rank - 1] = Some(Affine { query: 0, key: 1, offset: 0 });
    }
    idx
}

/// The value of a constant node (a scalar constant, broadcast or reshaped, or cast exactly).
fn constant_value(g: &Graph, n: NodeId) -> Option<f64> {
    match &g.node(n)?.op {
        Op::Constant { value } => Some(*value),
        Op::Broadcast(a) | Op::Reshape(a) => constant_value(g, *a),
        Op::Cast(a) => {
            let v = constant_value(g, *a)?;
            (v.is_infinite() || v == 0.0).then_some(v)
        }
        _ => None,
    }
}

/// `cond` at the symbolic index `idx` as one affine comparison.
fn condition(g: &Graph, cond: NodeId, idx: &[Option<Affine>]) -> Option<Atom> {
    let node = g.node(cond)?;
    match &node.op {
        Op::Broadcast(a) => condition(g, *a, &operand_index(g, *a, idx, &node.ty.shape)?),
        Op::Reshape(a) => condition(g, *a, &unit_reshape_index(g, *a, idx, &node.ty.shape)?),
        Op::Compare(op, a, b) => {
            if g.ty(*a)?.dtype != crate::DType::I32 {
                return None;
            }
            let lhs = affine(g, *a, &operand_index(g, *a, idx, &node.ty.shape)?)?;
            let rhs = affine(g, *b, &operand_index(g, *b, idx, &node.ty.shape)?)?;
            let d = lhs.add(rhs, -1)?;
            Some(Atom { query: d.query, key: d.key, offset: d.offset, op: *op })
        }
        _ => None,
    }
}

/// The i32 value of `n` at the symbolic index `idx`, if it is affine in the positions.
fn affine(g: &Graph, n: NodeId, idx: &[Option<Affine>]) -> Option<Affine> {
    let node = g.node(n)?;
    let at = |a: NodeId| operand_index(g, a, idx, &node.ty.shape);
    match &node.op {
        Op::Iota => *idx.first()?,
        Op::Constant { value } if value.fract() == 0.0 && value.abs() < 1e15 => {
            Some(Affine { offset: *value as i64, ..Affine::ZERO })
        }
        Op::Broadcast(a) => affine(g, *a, &at(*a)?),
        Op::Reshape(a) => affine(g, *a, &unit_reshape_index(g, *a, idx, &node.ty.shape)?),
        Op::Cast(a) if node.ty.dtype == crate::DType::I32 && g.ty(*a)?.dtype == crate::DType::I32 => affine(g, *a, idx),
        Op::Unary(UnaryOp::Neg, a) => affine(g, *a, &at(*a)?)?.scale(-1),
        Op::Binary(op @ (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul), a, b) => {
            let x = affine(g, *a, &at(*a)?)?;
            let y = affine(g, *b, &at(*b)?)?;
            match op {
                BinaryOp::Add => x.add(y, 1),
                BinaryOp::Sub => x.add(y, -1),
                _ => match (x.constant(), y.constant()) {
                    (Some(k), _) => y.scale(k),
                    (_, Some(k)) => x.scale(k),
                    _ => None,
                },
            }
        }
        _ => None,
    }
}

/// The symbolic index of operand `a` (shape broadcast right-aligned to `to`).
fn operand_index(g: &Graph, a: NodeId, idx: &[Option<Affine>], to: &Shape) -> Option<Vec<Option<Affine>>> {
    let from = shape(g, a)?;
    let offset = to.rank().checked_sub(from.rank())?;
    Some(
        from.dims()
            .iter()
            .enumerate()
            .map(|(k, d)| if d.is_one() { Some(Affine::ZERO) } else { idx.get(k + offset).copied().flatten() })
            .collect(),
    )
}

/// The symbolic index of a reshape's operand when the reshape only adds or removes size-1 axes.
fn unit_reshape_index(g: &Graph, a: NodeId, idx: &[Option<Affine>], to: &Shape) -> Option<Vec<Option<Affine>>> {
    let from = shape(g, a)?;
    let big = |s: &Shape| s.dims().iter().filter(|d| !d.is_one()).cloned().collect::<Vec<Dim>>();
    if big(from) != big(to) {
        return None;
    }
    let mut kept = to.dims().iter().zip(idx).filter(|(d, _)| !d.is_one()).map(|(_, i)| *i);
    Some(from.dims().iter().map(|d| if d.is_one() { Some(Affine::ZERO) } else { kept.next().flatten() }).collect())
}

/// Head dimensions the GPU attention kernel runs: multiples of 16 up to this.
pub const GPU_MAX_HEAD_DIM: u64 = 128;

/// An attention the GPU attention kernel runs, with its operands: the one predicate of what that
/// kernel supports, asked by the optimizer (an attention body it does not run keeps the three
/// kernels on a GPU) and by the code generator.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuAttention {
    /// The attention.
    pub attention: Attention,
    /// The queries, `[.., S, depth]`: the scores' left operand.
    pub queries: NodeId,
    /// The keys as the scores read them, `kᵀ`: `[.., depth, T]`.
    pub keys: NodeId,
    /// The values, `[.., T, width]`: the output product's right operand.
    pub values: NodeId,
    /// The query/key head dimension.
    pub depth: u32,
    /// The value head dimension.
    pub width: u32,
    /// Tensors the score function reads (a bias or a mask passed as data).
    pub score_reads: u32,
    /// Consecutive query heads (along the scores' last batch axis) that read the same key and
    /// value rows, their query rows at one stride (1: no grouping known).
    pub group: u32,
    /// Query rows of one group: queries times [`GpuAttention::group`] (0 when not constant).
    pub rows: u64,
}

impl GpuAttention {
    /// What its schedule must fit.
    pub fn shape(&self) -> crate::schedule::AttentionShape {
        crate::schedule::AttentionShape {
            depth: self.depth,
            width: self.width,
            score_reads: self.score_reads,
            rows: self.rows,
        }
    }

    /// The attention of `g` when the GPU kernel runs it: f16 or bf16 queries, keys, values and
    /// probabilities (f32 accumulation); head dimensions known, multiples of 16 and at most
    /// [`GPU_MAX_HEAD_DIM`]; and each operand a view of a parameter (permutes, broadcasts and
    /// reshapes of the batch axes, and reshapes that split the head out of the parameter's last
    /// axis, a projection's `[T, heads * d]`) whose head lies along the parameter's last axis, so
    /// that its rows are 16-byte aligned rows in memory at some stride (copied by `cp.async`,
    /// never packed).
    /// [`Attention::statistics`] (the row log-sum-exp) are written by the kernel's split form.
    pub fn find(g: &Graph) -> Option<GpuAttention> {
        let attention = Attention::find(g)?;
        let Op::MatMul(queries, keys) = g.node(attention.scores)?.op else { return None };
        let Op::MatMul(probs, values) = g.node(attention.output)?.op else { return None };
        let dtype = g.ty(queries)?.dtype;
        let same = [keys, values, probs].iter().all(|&n| g.ty(n).is_some_and(|t| t.dtype == dtype));
        if !matches!(dtype, crate::DType::F16 | crate::DType::BF16) || !same {
            return None;
        }
        let head = |n: NodeId| -> Option<u32> {
            let d = shape(g, n)?.dims().last()?.as_const()?;
            (d > 0 && d % 16 == 0 && d <= GPU_MAX_HEAD_DIM).then_some(d as u32)
        };
        let (depth, width) = (head(queries)?, head(values)?);
        let rank = |n: NodeId| shape(g, n).map_or(0, Shape::rank);
        let rows_in_memory = row_view(g, queries, rank(queries).checked_sub(2)?, rank(queries) - 1)
            && row_view(g, keys, rank(keys).checked_sub(1)?, rank(keys) - 2)
            && row_view(g, values, rank(values).checked_sub(2)?, rank(values) - 1);
        let score_reads = score_reads(g, &attention);
        let domain = shape(g, attention.scores)?;
        let group = groups::head_group(g, domain, (queries, keys, values));
        let s_len = domain.dims().get(domain.rank().checked_sub(2)?)?.as_const().unwrap_or(0);
        let rows = s_len.saturating_mul(u64::from(group));
        rows_in_memory.then_some(GpuAttention {
            attention,
            queries,
            keys,
            values,
            depth,
            width,
            score_reads,
            group,
            rows,
        })
    }
}

/// The parameters the score function reads: inputs upstream of the logits but not of the scores.
fn score_reads(g: &Graph, a: &Attention) -> u32 {
    let mut upstream = vec![false; g.nodes.len()];
    if let Some(u) = upstream.get_mut(a.logits.index()) {
        *u = true;
    }
    let mut reads = 0;
    for i in (0..=a.logits.index().min(g.nodes.len().saturating_sub(1))).rev() {
        if !upstream[i] || i == a.scores.index() {
            continue;
        }
        match &g.nodes[i].op {
            Op::Input { .. } => reads += 1,
            op => {
                for o in op.operands() {
                    if let Some(u) = upstream.get_mut(o.index()) {
                        *u = true;
                    }
                }
            }
        }
    }
    reads
}

/// Whether `n`, read along axis `row` (positions) and axis `head` (the head dimension), is a view
/// of a parameter whose last axis is the head axis, through permutes, broadcasts (never of the
/// head axis) and reshapes that leave those two axes as they are or split the head out of a wider
/// last axis ([`split_head`]: a projection's `[S, heads * d]` read as `[S, heads, d]`), so that
/// every row is `d` contiguous elements at one stride from the row before.
fn row_view(g: &Graph, mut n: NodeId, mut row: usize, mut head: usize) -> bool {
    loop {
        let Some(node) = g.node(n) else { return false };
        let r = node.ty.shape.rank();
        match &node.op {
            // Rows start 16 bytes apart at least (the parameter's rows are whole 16-bit
            // vectors of 8): a slice may have cut a head out of rows of any width.
            Op::Input { .. } => {
                let width = node.ty.shape.dims().last().and_then(Dim::as_const);
                return head + 1 == r && row != head && width.is_some_and(|w| w.is_multiple_of(8));
            }
            Op::Permute { input, perm } => {
                let (Some(&pr), Some(&ph)) = (perm.get(row), perm.get(head)) else { return false };
                (row, head, n) = (pr, ph, *input);
            }
            Op::Broadcast(a) => {
                let Some(ar) = shape(g, *a).map(Shape::rank) else { return false };
                let off = r.saturating_sub(ar);
                if row < off || head < off {
                    return false;
                }
                // A broadcast head axis would read one element as a whole row.
                let from_head = shape(g, *a).and_then(|s| s.dims().get(head - off).cloned());
                if from_head.as_ref() != node.ty.shape.dims().get(head) {
                    return false;
                }
                (row, head, n) = (row - off, head - off, *a);
            }
            // A slice keeps every index but its axis's; along the head axis it must start a head
            // on a 16-byte boundary (8 16-bit elements), rows keep their stride.
            Op::Slice { input, axis, start, .. } => {
                if *axis == head && !start.is_multiple_of(8) {
                    return false;
                }
                n = *input;
            }
            Op::Reshape(a) => {
                let Some(from) = shape(g, *a) else { return false };
                let (to, fr) = (node.ty.shape.dims(), from.rank());
                let last_two = |s: &[Dim]| s.len() >= 2 && s[s.len() - 2..] == to[r - 2..];
                if r >= 2 && last_two(from.dims()) && row.min(head) >= r - 2 {
                    (row, head, n) = (row + fr - r, head + fr - r, *a);
                } else if let Some(k) = split_head(from.dims(), to, row, head) {
                    (row, head, n) = (k, fr - 1, *a);
                } else {
                    return false;
                }
            }
            _ => return false,
        }
    }
}

/// Where a reshape from `from` to `to` puts the rows and the head of `to` (read along axis `row`
/// and the last axis `head`) in `from`, when the head is the whole last axis of `to` and each row
/// maps to one axis `k` of `from` with the head inside `from`'s last axis: `to`'s last size `d`
/// (constant) divides `from`'s (so a head never crosses a row of `from`, each starting at a
/// multiple of `d`), and axis `k` has `to[row]`'s size and the same constant number of elements
/// after it (so moving one row moves `from`'s index `k` by one and leaves every other index of
/// `from` as it is). Returns `k`; the head then lies along `from`'s last axis.
fn split_head(from: &[Dim], to: &[Dim], row: usize, head: usize) -> Option<usize> {
    let r = to.len();
    if r == 0 || head != r - 1 || row >= head {
        return None;
    }
    let d = to[head].as_const()?;
    let wide = from.last()?.as_const()?;
    if d == 0 || !wide.is_multiple_of(d) {
        return None;
    }
    let after = |dims: &[Dim]| dims.iter().try_fold(1u64, |acc, x| acc.checked_mul(x.as_const()?));
    let stride = after(&to[row + 1..])?;
    (0..from.len().saturating_sub(1)).find(|&k| from[k] == to[row] && after(&from[k + 1..]) == Some(stride))
}

impl Mask {
    /// The logits of `a` before this mask: where every comparison of the mask holds at every
    /// position of a block ([`Mask::block_is_full`]), they equal the node returned, the innermost
    /// `on_true` of the select chain. `None` when the chain holds a condition that is no atom
    /// (a mask tensor), which no block can be known to pass.
    pub fn unmasked(&self, g: &Graph, a: &Attention) -> Option<NodeId> {
        let mut at = a.logits;
        let mut selects = 0;
        while let Some(Op::Select { on_true, on_false, .. }) = g.node(at).map(|n| &n.op) {
            if constant_value(g, *on_false).is_none_or(|v| v.to_bits() != self.fill.to_bits()) {
                break;
            }
            selects += 1;
            at = *on_true;
        }
        (selects > 0 && selects == self.atoms.len()).then_some(at)
    }

    /// Whether every comparison holds at every position of the block of queries `q0..=q1` and
    /// keys `k0..=k1`, so that no logit of it is masked.
    pub fn block_is_full(&self, q: (i64, i64), k: (i64, i64)) -> bool {
        self.atoms.iter().all(|a| a.always_holds(q, k))
    }
}

impl Atom {
    /// Whether the comparison holds everywhere in the block of queries `q0..=q1` and keys
    /// `k0..=k1`.
    pub fn always_holds(&self, q: (i64, i64), k: (i64, i64)) -> bool {
        let (lo, hi) = self.range(q, k);
        match self.op {
            CompareOp::Ge => lo >= 0,
            CompareOp::Gt => lo > 0,
            CompareOp::Le => hi <= 0,
            CompareOp::Lt => hi < 0,
            CompareOp::Eq => lo == 0 && hi == 0,
            CompareOp::Ne => lo > 0 || hi < 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::parse_graph;

    fn find(text: &str) -> Option<Attention> {
        let g = parse_graph(text).unwrap();
        Attention::find(&g)
    }

    const CAUSAL: &str = "fn attn(q: f32[8, 16], k: f32[12, 16], v: f32[12, 4]) -> (f32[8, 4]) {
  %0 = input 0 : f32[8, 16]
  %1 = input 1 : f32[12, 16]
  %2 = input 2 : f32[12, 4]
  %3 = permute %1 perm=[1, 0] : f32[16, 12]
  %4 = matmul %0, %3 : f32[8, 12]
  %5 = const 0.25 : f32[]
  %6 = mul %4, %5 : f32[8, 12]
  %7 = iota : i32[8]
  %8 = reshape %7 : i32[8, 1]
  %9 = const 4 : i32[]
  %10 = add %8, %9 : i32[8, 1]
  %11 = iota : i32[12]
  %12 = ge %10, %11 : bool[8, 12]
  %13 = const -inf : f32[]
  %14 = select %12, %6, %13 : f32[8, 12]
  %15 = reduce_max %14 axes=[1] keepdim : f32[8, 1]
  %16 = sub %14, %15 : f32[8, 12]
  %17 = exp %16 : f32[8, 12]
  %18 = reduce_sum %17 axes=[1] keepdim : f32[8, 1]
  %19 = div %17, %18 : f32[8, 12]
  %20 = matmul %19, %2 : f32[8, 4]
  return %20
}";

    #[test]
    fn a_causal_attention_is_found_with_its_mask() {
        let a = find(CAUSAL).expect("an attention");
        assert_eq!(a.normalized, Normalized::Before);
        let mask = a.mask.expect("a mask");
        assert!(mask.skips_blocks());
        // i + 4 - j >= 0
        assert_eq!(mask.atoms, vec![Atom { query: 1, key: -1, offset: 4, op: CompareOp::Ge }]);
        assert!(mask.block_is_masked((0, 3), (8, 11)));
        assert!(!mask.block_is_masked((4, 7), (8, 11)));
    }

    #[test]
    fn scores_read_elsewhere_are_not_an_attention() {
        let leaked = CAUSAL.replace(
            "  return %20",
            "  %21 = reduce_sum %6 axes=[1] keepdim : f32[8, 1]\n  %22 = add %20, %21 : f32[8, 4]\n  return %22",
        );
        assert!(find(&leaked).is_none());
        let divided_after = CAUSAL
            .replace("%19 = div %17, %18 : f32[8, 12]", "%19 = const 1 : f32[]")
            .replace("%20 = matmul %19, %2", "%20 = matmul %17, %2")
            .replace("  return %20", "  %21 = div %20, %18 : f32[8, 4]\n  return %21");
        let a = find(&divided_after).expect("an attention normalized after the product");
        assert_eq!(a.normalized, Normalized::After(NodeId(21)));
    }

    #[test]
    fn the_row_log_sum_exp_is_a_statistic_output() {
        let with_lse = CAUSAL.replace("-> (f32[8, 4])", "-> (f32[8, 4], f32[8])").replace(
            "  return %20",
            "  %21 = log %18 : f32[8, 1]\n  %22 = add %15, %21 : f32[8, 1]\n  %23 = reshape %22 : f32[8]\n  return %20, %23",
        );
        let a = find(&with_lse).expect("an attention with its log-sum-exp");
        assert_eq!(a.statistics, vec![NodeId(23)]);
        // The statistic must come after the attention's output, and be a function of the rows.
        let first = with_lse
            .replace("return %20, %23", "return %23, %20")
            .replace("-> (f32[8, 4], f32[8])", "-> (f32[8], f32[8, 4])");
        assert!(find(&first).is_none());
        let of_scores = with_lse.replace("%21 = log %18", "%21 = reduce_sum %6 axes=[1] keepdim");
        assert!(find(&of_scores).is_none());
        // A value of the statistics that the output also reads is no statistic.
        let shared = with_lse.replace("  return %20, %23", "  %24 = add %20, %22 : f32[8, 4]\n  return %24, %23");
        assert!(parse_graph(&shared).is_ok());
        assert!(find(&shared).is_none());
    }

    #[test]
    fn full_blocks_read_the_logits_before_the_mask() {
        let g = parse_graph(CAUSAL).unwrap();
        let a = Attention::find(&g).expect("an attention");
        let mask = a.mask.clone().expect("a mask");
        // i + 4 - j >= 0 everywhere for queries 4..=7 and keys 0..=8, not for keys 8..=11.
        assert!(mask.block_is_full((4, 7), (0, 8)));
        assert!(!mask.block_is_full((4, 7), (8, 11)));
        assert_eq!(mask.unmasked(&g, &a), Some(NodeId(6)));
    }

    #[test]
    fn a_head_is_split_out_of_a_wide_last_axis_only_where_rows_stay_strided() {
        let d = |v: &[u64]| v.iter().map(|&x| Dim::Const(x)).collect::<Vec<_>>();
        let s = Dim::Var("S".into());
        // [S, 1024] as [S, 8, 128]: the row axis is S, the head the last 128 of each row.
        assert_eq!(
            split_head(&[s.clone(), Dim::Const(1024)], &[s.clone(), Dim::Const(8), Dim::Const(128)], 0, 2),
            Some(0)
        );
        assert_eq!(split_head(&d(&[2, 12, 256]), &d(&[2, 12, 4, 64]), 1, 3), Some(1));
        // The head must be the last axis, whole, and divide the wide axis.
        assert_eq!(split_head(&d(&[12, 1000]), &d(&[12, 8, 125]), 0, 2), Some(0));
        assert_eq!(split_head(&d(&[2, 10, 24]), &d(&[2, 15, 16]), 0, 2), None);
        assert_eq!(split_head(&d(&[12, 96]), &d(&[12, 2, 48]), 0, 1), None);
        assert_eq!(split_head(&d(&[12, 96]), &d(&[12, 3, 32]), 1, 2), None);
        // Rows spread over two axes of the source: not found (conservatively).
        assert_eq!(split_head(&d(&[6, 2, 64]), &d(&[12, 4, 16]), 0, 2), None);
    }

    const TOKEN_MAJOR: &str = "fn attn(q: f16[2, 8, 16], k: f16[12, 32], v: f16[12, 32]) -> (f16[2, 8, 16]) {
  %0 = input 0 : f16[2, 8, 16]
  %1 = input 1 : f16[12, 32]
  %2 = input 2 : f16[12, 32]
  %3 = reshape %1 : f16[12, 2, 16]
  %4 = permute %3 perm=[1, 2, 0] : f16[2, 16, 12]
  %5 = matmul %0, %4 : f16[2, 8, 12]
  %6 = cast %5 : f32[2, 8, 12]
  %7 = reduce_max %6 axes=[2] keepdim : f32[2, 8, 1]
  %8 = sub %6, %7 : f32[2, 8, 12]
  %9 = exp %8 : f32[2, 8, 12]
  %10 = reduce_sum %9 axes=[2] keepdim : f32[2, 8, 1]
  %11 = div %9, %10 : f32[2, 8, 12]
  %12 = cast %11 : f16[2, 8, 12]
  %13 = reshape %2 : f16[12, 2, 16]
  %14 = permute %13 perm=[1, 0, 2] : f16[2, 12, 16]
  %15 = matmul %12, %14 : f16[2, 8, 16]
  return %15
}";

    #[test]
    fn token_major_operands_are_rows_in_memory_for_the_gpu_kernel() {
        let g = parse_graph(TOKEN_MAJOR).unwrap();
        let ga = GpuAttention::find(&g).expect("a GPU attention");
        assert_eq!((ga.keys, ga.values), (NodeId(4), NodeId(14)));
        // Values whose head axis is not the source's last (the heads innermost) are no rows.
        let heads_inner = TOKEN_MAJOR
            .replace("%13 = reshape %2 : f16[12, 2, 16]", "%13 = reshape %2 : f16[12, 16, 2]")
            .replace("%14 = permute %13 perm=[1, 0, 2]", "%14 = permute %13 perm=[2, 0, 1]");
        assert!(Attention::find(&parse_graph(&heads_inner).unwrap()).is_some());
        assert!(GpuAttention::find(&parse_graph(&heads_inner).unwrap()).is_none());
        // A broadcast head axis reads one element as a row.
        let broadcast_head = TOKEN_MAJOR
            .replace("v: f16[12, 32]", "v: f16[12, 2, 1]")
            .replace("  %2 = input 2 : f16[12, 32]\n", "  %2 = input 2 : f16[12, 2, 1]\n")
            .replace("%13 = reshape %2 : f16[12, 2, 16]", "%13 = broadcast %2 : f16[12, 2, 16]");
        let g = parse_graph(&broadcast_head).unwrap();
        assert!(Attention::find(&g).is_some());
        assert!(GpuAttention::find(&g).is_none());
    }

    /// The token-major case's output `[2, 8, 16]` moved by `tail` (its last line returns
    /// values of the types `returns`).
    fn with_tail(tail: &str, returns: &str) -> String {
        TOKEN_MAJOR.replace("  return %15\n", tail).replace("-> (f16[2, 8, 16])", &format!("-> ({returns})"))
    }

    #[test]
    fn a_permute_keeping_the_head_last_then_a_reshape_is_a_layout_tail() {
        let tail =
            "  %16 = permute %15 perm=[1, 0, 2] : f16[8, 2, 16]\n  %17 = reshape %16 : f16[8, 32]\n  return %17\n";
        let g = parse_graph(&with_tail(tail, "f16[8, 32]")).unwrap();
        let a = Attention::find(&g).expect("an attention with a layout tail");
        assert_eq!(a.layout, Some(OutputLayout { value: NodeId(15), perm: vec![1, 0, 2] }));
        assert_eq!(a.stored_value(&g), Some(NodeId(15)));
        assert!(GpuAttention::find(&g).is_some());
        // Reshapes alone keep every element's flat position: the identity permutation.
        let reshaped = "  %16 = reshape %15 : f16[16, 16]\n  return %16\n";
        let a = Attention::find(&parse_graph(&with_tail(reshaped, "f16[16, 16]")).unwrap()).expect("an attention");
        assert_eq!(a.layout.map(|l| l.perm), Some(vec![0, 1, 2]));
        // Without a tail the output is the stored value.
        let g = parse_graph(TOKEN_MAJOR).unwrap();
        let a = Attention::find(&g).expect("an attention");
        assert_eq!((a.layout.clone(), a.stored_value(&g)), (None, Some(NodeId(15))));
    }

    #[test]
    fn layouts_that_move_the_head_axis_or_reshape_before_permuting_are_no_tail() {
        // The head axis moved: a row's elements would not be consecutive.
        let head_moved = "  %16 = permute %15 perm=[0, 2, 1] : f16[2, 16, 8]\n  return %16\n";
        assert!(Attention::find(&parse_graph(&with_tail(head_moved, "f16[2, 16, 8]")).unwrap()).is_none());
        // A reshape before the permute changes which index is which.
        let reshape_first = "  %16 = reshape %15 : f16[2, 8, 2, 8]\n  %17 = permute %16 perm=[1, 0, 2, 3] : f16[8, 2, 2, 8]\n  return %17\n";
        assert!(Attention::find(&parse_graph(&with_tail(reshape_first, "f16[8, 2, 2, 8]")).unwrap()).is_none());
        // A value the tail moves that something else also reads is no tail.
        let two_users =
            "  %16 = permute %15 perm=[1, 0, 2] : f16[8, 2, 16]\n  %17 = neg %15 : f16[2, 8, 16]\n  return %16, %17\n";
        assert!(
            Attention::find(&parse_graph(&with_tail(two_users, "f16[8, 2, 16], f16[2, 8, 16]")).unwrap()).is_none()
        );
    }

    /// The token-major case with V's heads sliced out of rows of `width` elements, from `start`.
    fn sliced_values(width: u64, start: u64) -> String {
        TOKEN_MAJOR
            .replace("v: f16[12, 32]", &format!("v: f16[12, 2, {width}]"))
            .replace("  %2 = input 2 : f16[12, 32]", &format!("  %2 = input 2 : f16[12, 2, {width}]"))
            .replace(
                "%13 = reshape %2 : f16[12, 2, 16]",
                &format!("%13 = slice %2 axis=2 start={start} end={} : f16[12, 2, 16]", start + 16),
            )
    }

    #[test]
    fn sliced_operands_are_rows_when_their_rows_stay_16_byte_aligned() {
        // A joined product's columns: the head starts on a 16-byte boundary of 16-byte rows.
        assert!(GpuAttention::find(&parse_graph(&sliced_values(24, 8)).unwrap()).is_some());
        // Rows of 20 f16 (40 bytes) or a head starting 4 elements in: no 16-byte copies.
        for (width, start) in [(20, 0), (24, 4)] {
            let g = parse_graph(&sliced_values(width, start)).unwrap();
            assert!(Attention::find(&g).is_some());
            assert!(GpuAttention::find(&g).is_none(), "width {width}, start {start}");
        }
    }

    #[test]
    fn a_finite_fill_visits_every_block() {
        let finite = CAUSAL.replace("const -inf", "const -10000");
        let mask = find(&finite).and_then(|a| a.mask).expect("a mask");
        assert_eq!(mask.fill, -10000.0);
        assert!(!mask.skips_blocks());
    }
}
