//! Which kernel class a fused body lowers as, or that it is not a legal kernel at all.
//!
//! - **MatMul**: exactly one matmul, no reduction; its operands' prologues are elementwise chains,
//!   transposes or broadcasts of one tensor each (plus scalars), B also such tensors joined along
//!   its columns; every op downstream of the matmul
//!   is elementwise with the matmul's output shape (the epilogue: bias, activation, residual, scale,
//!   cast).
//!   A *dual product* ([`tcc_ir::DualProduct`]: two f16/bf16 products of one left operand that
//!   meet in the epilogue, a gated MLP's `silu(x @ g) * (x @ u)`) is a MatMul kernel too, with
//!   these prologues per product.
//! - **RowReduction**: reductions that all reduce the same innermost axes `R` of tensors of one
//!   shape `D`; every value downstream of a reduction has shape `D`, or `D` with `R` kept as 1, or
//!   the fully reduced shape; the prologue is elementwise or broadcast.
//! - **Generic**: the same structure with other reduced axes, or with data-movement ops in the
//!   prologue: still one kernel, lowered by a simple loop nest.
//! - **Pointwise**: elementwise and data-movement ops only.
//! - **Attention**: two matmuls around a row softmax, as [`tcc_ir::attention::Attention::find`]
//!   defines it (the one matcher; the body is converted to a graph to ask it).

use tcc_ir::{Dim, KernelClass, Shape};

use crate::body::{Body, BodyNode};
use crate::lang::TOp;

/// The class of `body`, or `None` if it is not a legal kernel.
pub fn classify(body: &Body) -> Option<KernelClass> {
    let n = body.nodes.len();
    let mut after_mm = vec![false; n];
    let mut after_red = vec![false; n];
    let mut matmuls = Vec::new();
    let mut reduces = Vec::new();
    for (i, node) in body.nodes.iter().enumerate() {
        if let BodyNode::Op(op, kids) = node {
            let dep = |v: &[bool]| kids.iter().any(|k| v.get(*k).copied().unwrap_or(false));
            after_mm[i] = dep(&after_mm) || *op == TOp::MatMul;
            after_red[i] = dep(&after_red) || matches!(op, TOp::Reduce { .. });
            match op {
                TOp::MatMul => matmuls.push(i),
                TOp::Reduce { .. } => reduces.push(i),
                TOp::Kernel { .. } | TOp::Input(_) => return None,
                _ => {}
            }
        }
    }
    match (matmuls.as_slice(), reduces.is_empty()) {
        ([], true) => pointwise(body),
        ([m], true) => matmul(body, &[*m], &after_mm),
        ([_, _], true) => dual(body, &matmuls, &after_mm),
        ([], false) => reduction(body, &reduces, &after_red),
        ([_, _], false) => attention(body),
        _ => None,
    }
}

/// Whether `body` is a MatMul kernel of two products: a dual product.
pub fn is_dual_product(body: &Body) -> bool {
    body.class == KernelClass::MatMul
        && body.nodes.iter().filter(|n| matches!(n, BodyNode::Op(TOp::MatMul, _))).count() == 2
}

/// The parts of a MatMul kernel's joined B (the values a column concat as B's top node joins:
/// [`matmul`] allows a concat nowhere else), or `None` when its B is one tensor.
pub fn joined_b_parts(body: &Body) -> Option<&[usize]> {
    if body.class != KernelClass::MatMul {
        return None;
    }
    body.nodes.iter().find_map(|n| match n {
        BodyNode::Op(TOp::Concat(_), kids) => Some(kids.as_ref()),
        _ => None,
    })
}

fn ops(body: &Body) -> impl Iterator<Item = (usize, &TOp, &[usize])> {
    body.nodes.iter().enumerate().filter_map(|(i, n)| match n {
        BodyNode::Op(op, kids) => Some((i, op, kids.as_slice())),
        BodyNode::Input(_) => None,
    })
}

fn attention(body: &Body) -> Option<KernelClass> {
    let g = body.to_graph("attention").ok()?;
    tcc_ir::attention::Attention::find(&g).map(|_| KernelClass::Attention)
}

fn pointwise(body: &Body) -> Option<KernelClass> {
    let ok = ops(body).all(|(_, op, _)| op.is_elementwise() || op.is_index_only() || op.is_generator());
    ok.then_some(KernelClass::Pointwise)
}

fn is_scalar(body: &Body, v: usize) -> bool {
    body.types.get(v).is_some_and(|t| t.shape.rank() == 0)
}

/// The non-scalar external inputs a value depends on (through any ops).
fn tensor_inputs(body: &Body, v: usize, out: &mut Vec<usize>) {
    match body.nodes.get(v) {
        Some(BodyNode::Input(i)) if !is_scalar(body, v) && !out.contains(i) => out.push(*i),
        Some(BodyNode::Input(_)) => {}
        Some(BodyNode::Op(_, kids)) => {
            for k in kids {
                tensor_inputs(body, *k, out);
            }
        }
        None => {}
    }
}

/// A dual product ([`tcc_ir::DualProduct`], the one matcher, asked through the body's graph) whose
/// operands' prologues are those of a single product.
fn dual(body: &Body, products: &[usize], after: &[bool]) -> Option<KernelClass> {
    let g = body.to_graph("dual").ok()?;
    tcc_ir::DualProduct::find(&g)?;
    matmul(body, products, after)
}

/// `products` (one, or the two of a dual product, of one shape) with their prologues and an
/// elementwise epilogue.
fn matmul(body: &Body, products: &[usize], after: &[bool]) -> Option<KernelClass> {
    let out_shape = &body.types.get(*products.first()?)?.shape;
    for (i, op, _) in ops(body) {
        if products.contains(&i) {
            continue;
        }
        let ok = if after.get(i).copied().unwrap_or(false) {
            op.is_elementwise() && body.types.get(i).is_some_and(|t| &t.shape == out_shape)
        } else {
            op.is_elementwise()
                || matches!(op, TOp::Permute(_) | TOp::Broadcast(_) | TOp::Slice { .. })
                || op.const_value().is_some()
                || (matches!(op, TOp::Concat(_)) && is_b_of(body, products, i))
        };
        if !ok {
            return None;
        }
    }
    if !after.get(body.output).copied().unwrap_or(false) {
        return None;
    }
    // Each operand's prologue transforms one tensor (plus scalars) as it is loaded; B may also
    // join such tensors along its columns (a concatenated B, each block tile read from one).
    for m in products {
        if let Some(BodyNode::Op(_, kids)) = body.nodes.get(*m) {
            for (j, k) in kids.iter().enumerate() {
                let one = |v: usize| {
                    let mut inputs = Vec::new();
                    tensor_inputs(body, v, &mut inputs);
                    inputs.len() == 1
                };
                if !(one(*k) || (j == 1 && is_column_concat(body, *k, &one))) {
                    return None;
                }
            }
        }
    }
    Some(KernelClass::MatMul)
}

/// Whether value `v` is the right operand (B) of one of `products`.
fn is_b_of(body: &Body, products: &[usize], v: usize) -> bool {
    products.iter().any(|&m| matches!(body.nodes.get(m), Some(BodyNode::Op(_, kids)) if kids.get(1) == Some(&v)))
}

/// Whether value `v` joins, along its last axis, values that `one` accepts.
fn is_column_concat(body: &Body, v: usize, one: &dyn Fn(usize) -> bool) -> bool {
    let rank = body.types.get(v).map_or(0, |t| t.shape.rank());
    matches!(body.nodes.get(v), Some(BodyNode::Op(TOp::Concat(axis), kids))
        if rank >= 2 && *axis == rank - 1 && kids.iter().all(|&k| one(k)))
}

fn reduction(body: &Body, reduces: &[usize], after: &[bool]) -> Option<KernelClass> {
    // Every reduction reduces the same axes of values of one shape `D`.
    let (domain, axes) = {
        let first = *reduces.first()?;
        let BodyNode::Op(TOp::Reduce { axes, .. }, kids) = body.nodes.get(first)? else {
            return None;
        };
        (body.types.get(*kids.first()?)?.shape.clone(), axes.clone())
    };
    let kept = Shape(
        domain.0.iter().enumerate().map(|(i, d)| if axes.contains(&i) { Dim::Const(1) } else { d.clone() }).collect(),
    );
    let removed =
        Shape(domain.0.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, d)| d.clone()).collect());
    let row_shape = |s: &Shape| s == &domain || s == &kept || s == &removed;
    let mut generic = false;
    for (i, op, kids) in ops(body) {
        let shape = &body.types.get(i)?.shape;
        if let TOp::Reduce { axes: a, .. } = op {
            let input_shape = &body.types.get(*kids.first()?)?.shape;
            if a != &axes || input_shape != &domain {
                return None;
            }
            continue;
        }
        if after.get(i).copied().unwrap_or(false) {
            // Downstream of a reduction: row-shaped values only.
            if !row_shape(shape) {
                return None;
            }
            match op {
                _ if op.is_elementwise() => {
                    // Mixing the fully reduced shape (without kept axes) with the domain
                    // broadcasts along the wrong axes unless it is a scalar.
                    let mixes = kids.iter().any(|k| {
                        after.get(*k).copied().unwrap_or(false)
                            && body
                                .types
                                .get(*k)
                                .is_some_and(|t| t.shape == removed && removed != kept && t.shape.rank() > 0)
                    }) && shape != &removed;
                    generic |= mixes;
                }
                TOp::Broadcast(_) | TOp::Reshape(_) => {
                    let from_removed = kids
                        .first()
                        .filter(|k| after.get(**k).copied().unwrap_or(false))
                        .and_then(|k| body.types.get(*k))
                        .is_some_and(|t| t.shape == removed && removed != kept && t.shape.rank() > 0);
                    generic |= from_removed && shape == &domain;
                }
                _ => return None,
            }
        } else if !(op.is_elementwise() || matches!(op, TOp::Broadcast(_)) || op.is_generator()) {
            if op.is_index_only() {
                generic = true;
            } else {
                return None;
            }
        }
    }
    if !row_shape(&body.types.get(body.output)?.shape) {
        return None;
    }
    let rank = domain.rank();
    let suffix = axes.iter().enumerate().all(|(j, &a)| a + axes.len() == rank + j);
    Some(if suffix && !generic { KernelClass::RowReduction } else { KernelClass::Generic })
}
