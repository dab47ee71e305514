//! Kernel formation. Every op first becomes a one-op kernel ([`seed_all`]); a kernel then grows by
//! absorbing a producer kernel of one of its inputs, as long as the result is a legal kernel
//! ([`crate::classify`]): pointwise chains, matmul prologues and epilogues, reduction prologues and
//! epilogues, and several reductions over the same rows (softmax, layernorm, rmsnorm as one
//! single-pass kernel). Each kernel node joins the class of the value it computes, so extraction
//! chooses among "fused" and "materialized" per value.
//!
//! Growth is bounded: in each e-class only the most promising kernel of each kernel class grows
//! (fewest computed inputs, then most ops; one lineage per class, so a matmul-with-epilogue lineage
//! cannot starve a row-reduction lineage), it absorbs the most promising legal kernel of an input,
//! and a value with several users is recomputed only if it is cheap (a short pointwise chain) or a
//! row reduction recomputed inside another row kernel; a matmul is never recomputed.
//!
//! Products that share their left operand and meet in an epilogue become one dual-product kernel
//! ([`fuse_shared_operand`]) on targets that have it; products of one left operand that do not
//! meet may become one product of their Bs joined along the columns, each product's value its
//! columns of it ([`join_sibling_products`]).
//!
//! Attention is formed in one step ([`fuse_attention`]): a product whose left operand is a row
//! softmax over another product's result absorbs both, when the target has attention kernels.

use std::sync::Arc;

use egg::Id;
use tcc_ir::KernelClass;

use super::{ClassRule, Term, add_term};
use crate::analysis::{EG, MergeLookup};
use crate::body::{Body, BodyBuilder, BodyNode, merge, merge_unclassified};
use crate::lang::{TNode, TOp};

/// A kernel never fuses more than this many ops.
pub const MAX_KERNEL_OPS: usize = 48;
/// A value with several users is recomputed inside a consumer only up to this many pointwise ops.
pub const RECOMPUTE_MAX_OPS: usize = 8;

/// Every rule of the family.
pub fn rules() -> Vec<ClassRule> {
    vec![
        ClassRule { name: "fuse-pointwise", find: fuse_pointwise },
        ClassRule { name: "fuse-matmul-epilogue", find: fuse_matmul_epilogue },
        ClassRule { name: "fuse-matmul-prologue", find: fuse_matmul_prologue },
        ClassRule { name: "fuse-reduction-prologue", find: fuse_reduction_prologue },
        ClassRule { name: "fuse-reduction-epilogue", find: fuse_reduction_epilogue },
        ClassRule { name: "fuse-reductions", find: fuse_reductions },
        ClassRule { name: "fuse-attention", find: fuse_attention },
        ClassRule { name: "fuse-attention-prologue", find: fuse_attention_prologue },
        ClassRule { name: "fuse-attention-epilogue", find: fuse_attention_epilogue },
        ClassRule { name: "fuse-shared-operand", find: fuse_shared_operand },
        ClassRule { name: "join-sibling-products", find: join_sibling_products },
    ]
}

/// The one-op kernel of `node` (scalar constant operands are folded into the body).
pub fn seed_body(egraph: &EG, class: Id, node: &TNode) -> Option<(Body, Vec<Id>)> {
    let mut b = BodyBuilder::new();
    let mut kids = Vec::with_capacity(node.children.len());
    for &c in &node.children {
        let c = egraph.find(c);
        let data = &egraph[c].data;
        let v = match data.konst {
            Some(v) if data.ty.shape.rank() == 0 => b.op(TOp::constant(v, data.ty.dtype), Vec::new(), data.ty.clone()),
            _ => b.input(c, &data.ty),
        };
        kids.push(v);
    }
    let out = b.op(node.op.clone(), kids, egraph[class].data.ty.clone());
    b.finish(out, Vec::new())
}

/// Gives every compute op (and constant) its one-op kernel, before any fusion rule runs, so that
/// every value has a kernel whatever the budget cuts short. Returns how many were added.
pub fn seed_all(egraph: &mut EG) -> usize {
    crate::analysis::TensorAnalysis::mark_params(egraph);
    let mut classes: Vec<Id> = egraph.classes().map(|c| c.id).collect();
    classes.sort_unstable();
    let mut added = 0;
    for class in classes {
        let has_kernel = egraph[class].nodes.iter().any(|n| matches!(n.op, TOp::Kernel { .. }));
        let node = egraph[class].nodes.iter().find(|n| n.op.is_compute() || n.op.const_value().is_some()).cloned();
        let (Some(node), false) = (node, has_kernel) else { continue };
        if let Some((body, inputs)) = seed_body(egraph, class, &node) {
            let id = add_term(egraph, Term::Kernel(Arc::new(body), inputs));
            let from = if egraph.are_explanations_enabled() { egraph.add_uncanonical(node) } else { class };
            egraph.union_trusted(from, id, "kernel-seed");
            added += 1;
        }
    }
    egraph.rebuild();
    added
}

/// How promising a kernel node is (smaller is better): fewest inputs that are computed values (not
/// parameters), then most ops, then the oldest body.
type Rank = (usize, std::cmp::Reverse<usize>, u32);

/// An unscheduled kernel node of a class with its body and rank.
struct Ranked<'a> {
    node: &'a TNode,
    body: &'a Body,
    index: u32,
    rank: Rank,
}

/// An unscheduled kernel node of a class as fusion lists it: its position among the class's
/// nodes, its body and its rank.
#[derive(Debug, Clone, Copy)]
struct Listed {
    at: usize,
    body: u32,
    rank: Rank,
}

/// The unscheduled kernel nodes of a class in node order, and their order by rank (kept in
/// [`crate::rules::SearchState`] until the class changes).
#[derive(Debug, Default)]
pub(crate) struct Listing {
    in_node_order: Vec<Listed>,
    /// Positions in `in_node_order`, most promising first (ties in node order).
    by_rank: Vec<u32>,
}

/// The unscheduled kernel nodes of `class`: listed once until the class changes.
fn listed(egraph: &EG, class: Id) -> Arc<Listing> {
    let class = egraph.find(class);
    if let Some(list) = egraph.analysis.search.kernels.borrow().get(&class) {
        return Arc::clone(list);
    }
    let in_node_order: Vec<Listed> = egraph[class]
        .nodes
        .iter()
        .enumerate()
        .filter_map(|(at, n)| match n.op {
            TOp::Kernel { body, sched: None } => {
                let (_, ops) = egraph.analysis.body_with_ops(body)?;
                let open = n.children.iter().filter(|&&c| !egraph.analysis.is_param(c)).count();
                Some(Listed { at, body, rank: (open, std::cmp::Reverse(ops), body) })
            }
            _ => None,
        })
        .collect();
    let mut by_rank: Vec<u32> = (0..in_node_order.len()).filter_map(|i| u32::try_from(i).ok()).collect();
    by_rank.sort_by_key(|&i| in_node_order.get(i as usize).map(|l| l.rank));
    let list = Arc::new(Listing { in_node_order, by_rank });
    egraph.analysis.search.kernels.borrow_mut().insert(class, Arc::clone(&list));
    list
}

/// The kernel of `l` in `class` with its body.
fn ranked<'a>(egraph: &'a EG, class: Id, l: &Listed) -> Option<Ranked<'a>> {
    let node = egraph[class].nodes.get(l.at)?;
    Some(Ranked { node, body: egraph.analysis.body(l.body)?, index: l.body, rank: l.rank })
}

/// The unscheduled kernel nodes of a class with their bodies, in node order.
fn unscheduled_kernels(egraph: &EG, class: Id) -> impl Iterator<Item = Ranked<'_>> {
    let class = egraph.find(class);
    let list = listed(egraph, class);
    (0..list.in_node_order.len()).filter_map(move |i| ranked(egraph, class, list.in_node_order.get(i)?))
}

/// The unscheduled kernel nodes of a class, most promising first.
fn kernels(egraph: &EG, class: Id) -> impl Iterator<Item = Ranked<'_>> {
    let class = egraph.find(class);
    let list = listed(egraph, class);
    (0..list.by_rank.len()).filter_map(move |i| {
        let at = *list.by_rank.get(i)?;
        ranked(egraph, class, list.in_node_order.get(at as usize)?)
    })
}

fn is_reduction(class: KernelClass) -> bool {
    matches!(class, KernelClass::RowReduction | KernelClass::Generic)
}

/// May a producer with several users be recomputed inside a consumer?
fn may_recompute(producer: &Body, consumer: &Body) -> bool {
    match producer.class {
        KernelClass::Pointwise => producer.op_count() <= RECOMPUTE_MAX_OPS,
        KernelClass::RowReduction | KernelClass::Generic => {
            is_reduction(consumer.class) || consumer.class == KernelClass::Pointwise
        }
        KernelClass::MatMul | KernelClass::Attention => false,
    }
}

/// The growth step shared by the fusion rules: every kernel of a consumer kind in `class` that is
/// the most promising of its kernel class (one lineage per kernel class) absorbs, for each input,
/// the most promising legal producer kernel of a producer kind. Terms come with the node they grow
/// from, in the class's node order; at most `limit` of them.
fn grow(
    egraph: &EG,
    class: Id,
    limit: usize,
    rule: &'static str,
    consumer: fn(KernelClass) -> bool,
    producer: fn(KernelClass) -> bool,
) -> Vec<(TNode, Term)> {
    grow_counting(egraph, class, limit, rule, (consumer, producer), (Users::All, Producers::First))
}

/// Which users of a producer's value count as its users when a consumer absorbs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Users {
    /// Every user in the program (a value two ops of one consumer read has two).
    All,
    /// The users outside the consumer: the consumer's own reads of the value do not make it
    /// recomputed (a dual product's gate `g * sigmoid(g)` reads its product twice).
    Outside,
}

/// The kernel classes a growth step takes as consumers and as producers.
type Kinds = (fn(KernelClass) -> bool, fn(KernelClass) -> bool);

/// Which legal producer kernels of an input a consumer absorbs in one growth step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Producers {
    /// The most promising one.
    First,
    /// Each one, where the kernels of one value differ in what a target runs, which the matcher
    /// does not know: an attention's variants (a layout tail must reach the one the target
    /// runs), an operand's views of a product or of a joined product's columns.
    Every,
}

/// [`grow`], counting a producer's users as `users` says.
fn grow_counting(
    egraph: &EG,
    class: Id,
    limit: usize,
    rule: &'static str,
    (consumer, producer): Kinds,
    (users, producers): (Users, Producers),
) -> Vec<(TNode, Term)> {
    let candidates: Vec<Ranked<'_>> = unscheduled_kernels(egraph, class).collect();
    // The head of each lineage: the best rank among the kernels of its kernel class.
    let mut heads: Vec<(KernelClass, Rank)> = Vec::new();
    for k in &candidates {
        match heads.iter_mut().find(|(c, _)| *c == k.body.class) {
            Some((_, best)) => *best = (*best).min(k.rank),
            None => heads.push((k.body.class, k.rank)),
        }
    }
    let is_head = |k: &Ranked<'_>| heads.iter().any(|(c, best)| *c == k.body.class && best.2 == k.index);
    let mut out = Vec::new();
    for k in candidates.iter().filter(|k| consumer(k.body.class) && is_head(k)) {
        for term in grow_kernel(egraph, class, k, limit - out.len(), rule, producer, (users, producers)) {
            out.push((k.node.clone(), term));
        }
        if out.len() >= limit {
            break;
        }
    }
    out
}

/// The terms of one lineage head `k` of `class`: for each input, the merge with the most promising
/// legal producer kernel of a producer kind (at most `limit` terms).
fn grow_kernel(
    egraph: &EG,
    class: Id,
    k: &Ranked<'_>,
    limit: usize,
    rule: &'static str,
    producer: fn(KernelClass) -> bool,
    (users, producers): (Users, Producers),
) -> Vec<Term> {
    let (kb, kbody) = (k.index, k.body);
    let kids: Vec<Id> = k.node.children.iter().map(|&c| egraph.find(c)).collect();
    let mut out = Vec::new();
    for (i, &child) in kids.iter().enumerate() {
        if out.len() >= limit {
            break;
        }
        let inside = match users {
            Users::All => 1,
            Users::Outside => reads_of_input(kbody, i).max(1),
        };
        let several_users = egraph.analysis.users_of(child) > inside;
        for Ranked { node: pnode, body: pbody, index: pb, .. } in kernels(egraph, child) {
            if !producer(pbody.class) || (several_users && !may_recompute(pbody, kbody)) {
                continue;
            }
            let pkids: Vec<Id> = pnode.children.iter().map(|&c| egraph.find(c)).collect();
            let merged = egraph.analysis.merged((kb, &kids), i, (pb, &pkids), || {
                merge((kbody, &kids), i, (pbody, &pkids), rule)
                    .filter(|(m, _)| m.op_count() <= MAX_KERNEL_OPS)
                    .map(|(b, inputs)| (Arc::new(b), inputs))
            });
            let merged = match merged {
                // The e-graph has it: nothing new from this input for an applier. A searcher
                // still reports the class (its applier sees what other rules add before it runs).
                MergeLookup::Added if producers == Producers::Every => continue,
                MergeLookup::Added if egraph.analysis.search.applying() => break,
                MergeLookup::Added => {
                    out.push(Term::Class(class));
                    break;
                }
                MergeLookup::Result(merged) => merged,
            };
            if let Some((merged, inputs)) = merged.filter(|(_, inputs)| !inputs.contains(&class)) {
                if egraph.analysis.search.applying() {
                    egraph.analysis.mark_added((kb, &kids), i, (pb, &pkids));
                }
                out.push(Term::Kernel(merged, inputs));
                if producers == Producers::First || out.len() >= limit {
                    break;
                }
            }
        }
    }
    out
}

/// How many ops of `body` read its input `at`.
fn reads_of_input(body: &Body, at: usize) -> usize {
    let Some(v) = body.nodes.iter().position(|n| *n == BodyNode::Input(at)) else { return 0 };
    body.nodes
        .iter()
        .map(|n| if let BodyNode::Op(_, kids) = n { kids.iter().filter(|&&k| k == v).count() } else { 0 })
        .sum()
}

fn pointwise(c: KernelClass) -> bool {
    c == KernelClass::Pointwise
}

fn matmul(c: KernelClass) -> bool {
    c == KernelClass::MatMul
}

/// A pointwise kernel absorbs a pointwise producer: one pass over memory for the chain.
fn fuse_pointwise(egraph: &EG, class: Id, limit: usize) -> Vec<(TNode, Term)> {
    grow(egraph, class, limit, "fuse-pointwise", pointwise, pointwise)
}

/// A pointwise consumer absorbs the matmul it reads: bias, activation, residual, scale or cast
/// become the matmul's epilogue.
fn fuse_matmul_epilogue(egraph: &EG, class: Id, limit: usize) -> Vec<(TNode, Term)> {
    grow(egraph, class, limit, "fuse-matmul-epilogue", pointwise, matmul)
}

/// A matmul kernel absorbs pointwise producers of its operands (transposes become operand
/// layouts, casts and scales are applied as tiles load) or of its epilogue's other inputs.
fn fuse_matmul_prologue(egraph: &EG, class: Id, limit: usize) -> Vec<(TNode, Term)> {
    grow(egraph, class, limit, "fuse-matmul-prologue", matmul, pointwise)
}

/// A matmul kernel whose epilogue reads another product of its own left operand absorbs that
/// product: a dual product ([`tcc_ir::DualProduct`], a gated MLP's `silu(x @ g) * (x @ u)`), one
/// kernel that computes both products of each output tile side by side, reading the shared
/// operand once, and applies the epilogue to both accumulators, so the absorbed product never goes
/// through memory. Only on targets whose code generator has that kernel
/// ([`crate::target::TargetModel::dual_products`]); the classification decides what is one.
fn fuse_shared_operand(egraph: &EG, class: Id, limit: usize) -> Vec<(TNode, Term)> {
    if !egraph.analysis.target.as_ref().is_some_and(|t| t.dual_products()) {
        return Vec::new();
    }
    grow_counting(egraph, class, limit, "fuse-shared-operand", (matmul, matmul), (Users::Outside, Producers::First))
}

/// Each B's columns must be a multiple of this for [`join_sibling_products`]: every block tile
/// of the warpgroup GEMM (64, 128 or 256 columns) then lies inside one B (the `mma.sync` GEMM
/// reads each chunk from its own B and needs no such bound).
pub const GROUPED_COLUMNS: u64 = 256;
/// Most products [`join_sibling_products`] joins.
pub const MAX_GROUPED: usize = 4;

/// Products of one left operand, `x @ b_1, .., x @ b_n`, are each their own columns of
/// `x @ concat([b_1, .., b_n], -1)`: one matmul kernel (its B joined along the columns, each
/// weight read in place) that reads `x` once, a decoder layer's Q, K and V
/// projections of one normalized input. The product's class gains `slice(joined)`, and that
/// slice its one-op kernel (a later step), which the products' consumers absorb: they read the
/// joined product's columns in place. Only on targets whose GEMM reads such a B in place
/// ([`crate::TargetModel::grouped_products`]): unbatched f16/bf16 Bs of one depth (a multiple of
/// 8) and dtype, each the transpose of a weight stored `[n, k]` ([`transposed`]) of a multiple
/// of [`GROUPED_COLUMNS`] columns, at most [`MAX_GROUPED`], whose values are only moved
/// ([`only_moved`]), in the order of their products' classes (each member builds the same
/// kernel). Exact: each column is the same sum. Extraction keeps the separate products where
/// joining does not pay.
fn join_sibling_products(egraph: &EG, class: Id, limit: usize) -> Vec<(TNode, Term)> {
    if limit == 0 || !egraph.analysis.target.as_ref().is_some_and(crate::TargetModel::grouped_products) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for node in &egraph[class].nodes {
        let term = match (&node.op, node.children.as_slice()) {
            (TOp::Slice { .. }, [joined]) if has_joined_product(egraph, *joined) => {
                seed_body(egraph, class, node).map(|(body, inputs)| Term::Kernel(Arc::new(body), inputs))
            }
            (TOp::MatMul, [x, _]) => joined_product(egraph, class, *x),
            _ => None,
        };
        if let Some(term) = term {
            out.push((node.clone(), term));
            if out.len() >= limit {
                break;
            }
        }
    }
    out
}

/// The classes holding a joined product ([`join_sibling_products`]), for extraction to try
/// sharing ([`crate::extract::extract_sharing`]), in id order.
pub fn joined_product_classes(egraph: &EG) -> Vec<Id> {
    let mut out: Vec<Id> = egraph.classes().map(|c| c.id).filter(|&c| has_joined_product(egraph, c)).collect();
    out.sort_unstable();
    out
}

/// Whether `class` holds a matmul kernel whose B joins several tensors along its columns.
fn has_joined_product(egraph: &EG, class: Id) -> bool {
    kernels(egraph, class).any(|k| crate::classify::joined_b_parts(k.body).is_some())
}

/// The class of `w` where `b`'s class holds `w.t()` (a 2-D transpose): a weight stored `[n, k]`,
/// as the joined product's kernel reads each part in place.
fn transposed(egraph: &EG, b: Id) -> Option<Id> {
    egraph[b].nodes.iter().find_map(|n| match (&n.op, n.children.as_slice()) {
        (TOp::Permute(p), [w]) if p.as_slice() == [1, 0] => Some(egraph.find(*w)),
        _ => None,
    })
}

/// Whether every op reading `class` only moves its values (a reshape, permute or slice: a
/// projection split into heads). Products that are combined (a gated MLP's gate and up meet in
/// an epilogue: a dual product) are left to the other fusion rules.
fn only_moved(egraph: &EG, class: Id) -> bool {
    egraph[class].parents().all(|parent| {
        egraph[egraph.find(parent)].nodes.iter().all(|n| {
            let reads = n.children.iter().any(|&c| egraph.find(c) == class);
            !reads || matches!(n.op, TOp::Kernel { .. } | TOp::Reshape(_) | TOp::Permute(_) | TOp::Slice { .. })
        })
    })
}

/// `slice(x @ concat(b_1, .., b_n))` for the product in `class` of left operand `x` and its
/// siblings (see [`join_sibling_products`]), or `None`.
fn joined_product(egraph: &EG, class: Id, x: Id) -> Option<Term> {
    let x = egraph.find(x);
    let x_ty = &egraph[x].data.ty;
    let rank = x_ty.shape.rank();
    let depth = x_ty.shape.0.last().and_then(tcc_ir::Dim::as_const);
    let joinable = |b: Id| -> Option<u64> {
        let t = &egraph[b].data.ty;
        let [k, n] = t.shape.0.as_slice() else { return None };
        let n = n.as_const()?;
        let ok = matches!(t.dtype, tcc_ir::DType::F16 | tcc_ir::DType::BF16)
            && t.dtype == x_ty.dtype
            && k.as_const() == depth
            && depth.is_some_and(|k| k.is_multiple_of(8))
            && n.is_multiple_of(GROUPED_COLUMNS)
            && transposed(egraph, b).is_some();
        (ok && n > 0).then_some(n)
    };
    // Each class computing a product of x: its first such node with a joinable B.
    let mut members: Vec<(Id, Id, u64)> = Vec::new();
    for parent in egraph[x].parents() {
        let p = egraph.find(parent);
        if members.iter().any(|m| m.0 == p) {
            continue;
        }
        let found = egraph[p].nodes.iter().find_map(|n| match (&n.op, n.children.as_slice()) {
            (TOp::MatMul, [a, b]) if egraph.find(*a) == x => joinable(egraph.find(*b)).map(|c| (egraph.find(*b), c)),
            _ => None,
        });
        if let Some((b, cols)) = found
            && only_moved(egraph, p)
        {
            members.push((p, b, cols));
        }
    }
    members.sort_unstable_by_key(|m| m.0);
    members.truncate(MAX_GROUPED);
    let at = members.iter().position(|m| m.0 == egraph.find(class))?;
    if members.len() < 2 || rank < 2 {
        return None;
    }
    let mut b = BodyBuilder::new();
    let xv = b.input(x, x_ty);
    // Each B as its weight's transpose (`w.t()`), so the kernel reads every weight in place (the
    // new kernel's class is not searched again, so no later step would absorb the transposes).
    let mut bs = Vec::with_capacity(members.len());
    for m in &members {
        let w = transposed(egraph, m.1)?;
        let wv = b.input(w, &egraph[w].data.ty);
        bs.push(b.op(TOp::Permute(vec![1, 0]), vec![wv], egraph[m.1].data.ty.clone()));
    }
    let total: u64 = members.iter().map(|m| m.2).sum();
    let dims = |last: u64| {
        let mut d = x_ty.shape.0[..rank - 1].to_vec();
        d.push(tcc_ir::Dim::Const(last));
        d
    };
    let joined_ty = tcc_ir::TensorType {
        dtype: x_ty.dtype,
        shape: tcc_ir::Shape(vec![x_ty.shape.0[rank - 1].clone(), tcc_ir::Dim::Const(total)]),
    };
    let joined = b.op(TOp::Concat(1), bs, joined_ty);
    let product_ty = tcc_ir::TensorType { dtype: x_ty.dtype, shape: tcc_ir::Shape(dims(total)) };
    let product = b.op(TOp::MatMul, vec![xv, joined], product_ty);
    let (body, inputs) = b.finish(product, vec!["join-sibling-products"])?;
    let start: u64 = members[..at].iter().map(|m| m.2).sum();
    let end = start + members[at].2;
    let kernel = Term::Kernel(Arc::new(body), inputs);
    Some(Term::Op(TOp::Slice { axis: rank - 1, start, end }, vec![kernel]))
}

/// A reduction kernel absorbs pointwise producers of the rows it reads.
fn fuse_reduction_prologue(egraph: &EG, class: Id, limit: usize) -> Vec<(TNode, Term)> {
    grow(egraph, class, limit, "fuse-reduction-prologue", is_reduction, pointwise)
}

/// A pointwise consumer absorbs the reduction it reads (normalization, division by the sum).
fn fuse_reduction_epilogue(egraph: &EG, class: Id, limit: usize) -> Vec<(TNode, Term)> {
    grow(egraph, class, limit, "fuse-reduction-epilogue", pointwise, is_reduction)
}

/// Reductions over the same rows join one kernel (softmax's max and sum, layernorm's mean and
/// variance).
fn fuse_reductions(egraph: &EG, class: Id, limit: usize) -> Vec<(TNode, Term)> {
    grow(egraph, class, limit, "fuse-reductions", is_reduction, is_reduction)
}

/// `softmax(f(q kᵀ)) v` as one kernel: a matmul kernel whose left operand's class has a
/// reduction kernel (the softmax, a generic one when a mask reshapes positions, with the score
/// function `f` as its prologue) reading a class with a matmul kernel (the scores, perhaps with part
/// of `f` as its epilogue) absorbs both at once (the intermediate, a product with a reduction
/// before it, is no legal kernel). When the product is divided by the row sum afterwards, the
/// sum's kernel is absorbed too. The result must be an attention
/// ([`tcc_ir::attention::Attention::find`]). A value another kernel also reads is recomputed
/// there; the cost model then counts both.
fn fuse_attention(egraph: &EG, class: Id, limit: usize) -> Vec<(TNode, Term)> {
    if egraph.analysis.target.as_ref().is_some_and(|t| !t.attention_kernels()) {
        return Vec::new();
    }
    let children = |n: &TNode| -> Vec<Id> { n.children.iter().map(|&c| egraph.find(c)).collect() };
    let has_product = |c: Id| unscheduled_kernels(egraph, c).any(|k| matmul(k.body.class));
    let mut out = Vec::new();
    for product in kernels(egraph, class).filter(|k| matmul(k.body.class)) {
        let kids = children(product.node);
        'operand: for (at, &probs) in kids.iter().enumerate() {
            // Cheap tests first (merging builds bodies): the input is the product's left operand,
            // a softmax's kernel computes it, and the softmax reads a product.
            if !left_operand_is_input(product.body, at) {
                continue;
            }
            let softmaxes = kernels(egraph, probs).filter(|k| {
                is_reduction(k.body.class)
                    && has_softmax_ops(k.body)
                    && children(k.node).iter().any(|&c| has_product(c))
            });
            for softmax in softmaxes {
                let Some(partial) =
                    merge_unclassified((product.body, &kids), at, (softmax.body, &children(softmax.node)), RULE)
                else {
                    continue;
                };
                for (body, inputs) in with_row_statistics(egraph, partial) {
                    for (j, &scores) in inputs.iter().enumerate() {
                        for first in kernels(egraph, scores).filter(|k| matmul(k.body.class)) {
                            let merged = merge((&body, &inputs), j, (first.body, &children(first.node)), RULE);
                            if let Some((body, merged_inputs)) = merged
                                && body.class == KernelClass::Attention
                                && !merged_inputs.contains(&class)
                            {
                                let term = with_log_sum_exp(egraph, &body, &merged_inputs)
                                    .unwrap_or_else(|| Term::Kernel(Arc::new(body), merged_inputs));
                                out.push((product.node.clone(), term));
                                if out.len() >= limit {
                                    return out;
                                }
                                break 'operand;
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

const RULE: &str = "fuse-attention";

/// The attention `body` (over `inputs`) with its rows' log-sum-exp as a side output, when the
/// program also computes the log-sum-exp of the same row statistics, `row_max + log(row_sum)`
/// (perhaps reshaped to drop the key axis): a tuple whose outputs join the attention's class and
/// the log-sum-exp's, so that one kernel writes both. `None` when the program has no such value.
fn with_log_sum_exp(egraph: &EG, body: &Body, inputs: &[Id]) -> Option<Term> {
    use tcc_ir::{BinaryOp, UnaryOp};
    let (g, ids) = body.to_graph_with_ids("attention").ok()?;
    let a = tcc_ir::attention::Attention::find(&g)?;
    let value_of = |n: tcc_ir::NodeId| ids.iter().position(|&x| x == n);
    let (m_value, l_value) = (value_of(a.row_max)?, value_of(a.row_sum)?);
    let classes = value_classes(egraph, body, inputs);
    let (m, l) = (classes.get(m_value).copied().flatten()?, classes.get(l_value).copied().flatten()?);
    let log_l = egraph.lookup(TNode::new(TOp::Unary(UnaryOp::Log), vec![l]))?;
    let (lse, max_first) = [(vec![m, log_l], true), (vec![log_l, m], false)]
        .into_iter()
        .find_map(|(kids, first)| egraph.lookup(TNode::new(TOp::Binary(BinaryOp::Add), kids)).map(|c| (c, first)))?;
    // The log-sum-exp without the key axis, if the program reshapes it so.
    let rows = &egraph[lse].data.ty.shape.0;
    let dropped = tcc_ir::Shape(rows[..rows.len().saturating_sub(1)].to_vec());
    let reshaped = egraph[lse].parents().find_map(|p| {
        let p = egraph.find(p);
        let reshapes = egraph[p].nodes.iter().any(|n| {
            n.op == TOp::Reshape(dropped.clone()) && n.children.first().is_some_and(|&c| egraph.find(c) == lse)
        });
        reshapes.then_some(p)
    });

    let mut b = BodyBuilder::new();
    let map = b.splice_all(body, inputs, &|_| None)?;
    let ty = |c: Id| egraph[c].data.ty.clone();
    let log = b.op(TOp::Unary(UnaryOp::Log), vec![*map.get(l_value)?], ty(log_l));
    let m_value = *map.get(m_value)?;
    let kids = if max_first { vec![m_value, log] } else { vec![log, m_value] };
    let sum = b.op(TOp::Binary(BinaryOp::Add), kids, ty(lse));
    let (mut side, mut siblings) = (Vec::new(), Vec::new());
    if let Some(r) = reshaped {
        side.push(b.op(TOp::Reshape(dropped), vec![sum], ty(r)));
        siblings.push(r);
    }
    // The sum itself, unless only its reshape reads it.
    if reshaped.is_none() || egraph.analysis.users_of(lse) > 1 {
        side.push(sum);
        siblings.push(lse);
    }
    let output = *map.get(body.output)?;
    let (tuple, tuple_inputs) = b.finish_with_side_outputs(output, side, body.rules.clone())?;
    (tuple.class == KernelClass::Attention).then(|| Term::Tuple {
        body: Arc::new(tuple),
        inputs: tuple_inputs,
        siblings,
    })
}

/// The class of each value of `body` (over `inputs`), where the e-graph holds it as a node.
fn value_classes(egraph: &EG, body: &Body, inputs: &[Id]) -> Vec<Option<Id>> {
    let mut out: Vec<Option<Id>> = Vec::with_capacity(body.nodes.len());
    for node in &body.nodes {
        let class = match node {
            BodyNode::Input(j) => inputs.get(*j).map(|&c| egraph.find(c)),
            BodyNode::Op(op, kids) => {
                let children: Option<Vec<Id>> = kids.iter().map(|k| out.get(*k).copied().flatten()).collect();
                children.and_then(|children| egraph.lookup(TNode::new(op.clone(), children)))
            }
        };
        out.push(class);
    }
    out
}

/// Whether `body`'s matmul reads its input `at` (perhaps through casts) as its left operand.
fn left_operand_is_input(body: &Body, at: usize) -> bool {
    let Some(BodyNode::Op(_, kids)) = body.nodes.iter().find(|n| matches!(n, BodyNode::Op(TOp::MatMul, _))) else {
        return false;
    };
    let mut v = kids.first().copied();
    while let Some(i) = v {
        match body.nodes.get(i) {
            Some(BodyNode::Input(j)) => return *j == at,
            Some(BodyNode::Op(TOp::Cast(_), k)) => v = k.first().copied(),
            _ => return false,
        }
    }
    false
}

/// Whether `body` holds a softmax's ops: a row maximum, an exponential and a row sum.
fn has_softmax_ops(body: &Body) -> bool {
    let has = |f: &dyn Fn(&TOp) -> bool| body.nodes.iter().any(|n| matches!(n, BodyNode::Op(op, _) if f(op)));
    has(&|op| matches!(op, TOp::Reduce { op: tcc_ir::ReduceOp::Max, .. }))
        && has(&|op| matches!(op, TOp::Unary(tcc_ir::UnaryOp::Exp)))
}

fn attention(c: KernelClass) -> bool {
    c == KernelClass::Attention
}

/// An attention kernel absorbs pointwise producers of its inputs: a reshape or broadcast of K
/// and V for grouped heads, a rotary embedding, a scale, read as its operands load (each legal
/// producer of an input, not only the most promising).
fn fuse_attention_prologue(egraph: &EG, class: Id, limit: usize) -> Vec<(TNode, Term)> {
    // Every producer: an operand's views may come from a product or from a joined product's
    // columns, and only extraction knows which of the two is computed.
    let kinds: Kinds = (attention, pointwise);
    grow_counting(egraph, class, limit, "fuse-attention-prologue", kinds, (Users::All, Producers::Every))
}

/// `partial`, and `partial` with the most promising reduction kernel of one of its inputs merged
/// in (the row sum a product is divided by afterwards), for each input that has one.
fn with_row_statistics(egraph: &EG, partial: (Body, Vec<Id>)) -> Vec<(Body, Vec<Id>)> {
    let mut out = Vec::new();
    for (j, &input) in partial.1.iter().enumerate() {
        let stats = kernels(egraph, input).find(|k| is_reduction(k.body.class) && has_softmax_ops(k.body));
        if let Some(stats) = stats {
            let kids: Vec<Id> = stats.node.children.iter().map(|&c| egraph.find(c)).collect();
            out.extend(merge_unclassified((&partial.0, &partial.1), j, (stats.body, &kids), RULE));
        }
    }
    out.insert(0, partial);
    out
}

/// A pointwise consumer absorbs the attention it reads: a residual or cast computed as the
/// output is stored, or a *layout tail* (a permute that keeps the head axis last, then reshapes:
/// `o.permute([2, 0, 1, 3]).reshape([S, H*d])` before an output projection), which the kernel
/// folds into where it stores each row ([`tcc_ir::attention::OutputLayout`]), so the layout
/// change costs no kernel. The attention matcher decides what is legal.
fn fuse_attention_epilogue(egraph: &EG, class: Id, limit: usize) -> Vec<(TNode, Term)> {
    if egraph.analysis.target.as_ref().is_some_and(|t| !t.attention_kernels()) {
        return Vec::new();
    }
    let kinds: Kinds = (pointwise, attention);
    grow_counting(egraph, class, limit, "fuse-attention-epilogue", kinds, (Users::All, Producers::Every))
}

#[cfg(test)]
mod tests {
    use tcc_ir::KernelClass;

    use crate::rules::testkit::graph;
    use crate::{OptimizeOptions, Optimized, optimize};

    fn run(params: &str, e: &str) -> Optimized {
        let out = optimize(&graph(params, &[e]), &OptimizeOptions::default()).unwrap();
        tcc_ir::verify::verify_program(&out.program).unwrap();
        out
    }

    /// The classes of the kernels, and whether some kernel was formed by `rule`.
    fn kernels(params: &str, e: &str, rule: &str) -> (Vec<KernelClass>, bool) {
        let out = run(params, e);
        let fired = out.report.kernels.iter().any(|k| k.rules.iter().any(|r| r == rule));
        (out.program.launches.iter().map(|l| l.kernel.class).collect(), fired)
    }

    const X: &str = "x: f32[8, 16]";
    const AB: &str = "a: f32[16, 8]; b: f32[8, 16]";

    #[test]
    fn kernel_seed() {
        let out = run(X, "(exp x)");
        assert_eq!(out.program.launches.len(), 1);
        assert!(out.report.kernels[0].rules.is_empty());
    }
    #[test]
    fn fuse_pointwise() {
        assert_eq!(kernels(X, "(exp (neg (mul x 2.0)))", "fuse-pointwise"), (vec![KernelClass::Pointwise], true));
    }
    #[test]
    fn fuse_matmul_epilogue() {
        assert_eq!(kernels(AB, "(relu (matmul a b))", "fuse-matmul-epilogue"), (vec![KernelClass::MatMul], true));
    }
    #[test]
    fn fuse_matmul_prologue() {
        let p = "a: f32[8, 16]; b: f32[8, 16]";
        assert_eq!(kernels(p, "(matmul (permute:1,0 a) b)", "fuse-matmul-prologue"), (vec![KernelClass::MatMul], true));
    }
    #[test]
    fn fuse_reduction_prologue() {
        assert_eq!(
            kernels(X, "(reduce_sum:1 (exp x))", "fuse-reduction-prologue"),
            (vec![KernelClass::RowReduction], true)
        );
    }
    #[test]
    fn fuse_reduction_epilogue() {
        assert_eq!(
            kernels(X, "(mul (reduce_sum:1:keep x) 2.0)", "fuse-reduction-epilogue"),
            (vec![KernelClass::RowReduction], true)
        );
    }
    #[test]
    fn fuse_reductions() {
        assert_eq!(
            kernels(X, "(reduce_max:1 (sub x (reduce_sum:1:keep x)))", "fuse-reductions"),
            (vec![KernelClass::RowReduction], true)
        );
    }
    #[test]
    fn reductions_over_other_axes_are_one_generic_kernel() {
        assert_eq!(
            kernels(X, "(reduce_max:0 (sub x (reduce_sum:0:keep x)))", "fuse-reductions"),
            (vec![KernelClass::Generic], true)
        );
    }
    #[test]
    fn a_reduced_row_broadcast_along_the_wrong_axis_is_generic() {
        // `x - sum(x, 1)` without keepdim broadcasts the sums along rows, not columns.
        assert_eq!(
            kernels("x: f32[8, 8]", "(sub x (reduce_sum:1 x))", "fuse-reduction-epilogue"),
            (vec![KernelClass::Generic], true)
        );
    }
    #[test]
    fn a_matmul_is_never_recomputed() {
        let out = run(AB, "(add (relu (matmul a b)) (exp (matmul a b)))");
        let matmuls = out.report.kernels.iter().filter(|k| k.ops.iter().any(|o| o == "matmul")).count();
        assert_eq!(matmuls, 1, "{}", out.report);
    }
    /// `silu(x @ g) * (x @ u)` (silu as `x * sigmoid(x)`) of `dtype` operands.
    const GATED: &str = "(mul (mul (matmul x g) (sigmoid (matmul x g))) (matmul x u))";

    fn gated(dtype: &str, target: crate::TargetModel) -> (Vec<KernelClass>, bool) {
        let params = format!("x: {dtype}[64, 32]; g: {dtype}[32, 48]; u: {dtype}[32, 48]");
        let out = optimize(&graph(&params, &[GATED]), &OptimizeOptions::new(target)).unwrap();
        tcc_ir::verify::verify_program(&out.program).unwrap();
        let fired = out.report.kernels.iter().any(|k| k.rules.iter().any(|r| r == "fuse-shared-operand"));
        (out.program.launches.iter().map(|l| l.kernel.class).collect(), fired)
    }
    #[test]
    fn fuse_shared_operand() {
        assert_eq!(gated("bf16", crate::TargetModel::sm_80()), (vec![KernelClass::MatMul], true));
        assert_eq!(gated("f16", crate::TargetModel::sm_90a()), (vec![KernelClass::MatMul], true));
    }
    #[test]
    fn fuse_shared_operand_needs_a_gpu_and_tensor_core_operands() {
        assert!(!gated("bf16", crate::TargetModel::cpu_host()).1);
        assert!(!gated("f32", crate::TargetModel::sm_80()).1);
        // Products of different left operands are no dual product.
        let p = "x: f16[64, 32]; y: f16[64, 32]; g: f16[32, 48]";
        let opts = OptimizeOptions::new(crate::TargetModel::sm_80());
        let out = optimize(&graph(p, &["(mul (matmul x g) (matmul y g))"]), &opts).unwrap();
        assert!(out.report.kernels.iter().all(|k| !k.rules.iter().any(|r| r == "fuse-shared-operand")));
    }
    #[test]
    fn a_reduction_does_not_fuse_into_a_matmul() {
        assert_eq!(
            kernels(AB, "(reduce_sum:1 (matmul a b))", "fuse-reduction-prologue").0,
            [KernelClass::MatMul, KernelClass::RowReduction]
        );
    }
}
