//! Layout rules: compose and cancel permutes, reshapes and broadcasts; move permutes through
//! reductions and matmuls when that moves fewer bytes; order matmul chains by flop count.
//! Transposes that feed a matmul are folded into its operand layout by fusion
//! (`fuse-matmul-prologue`), so no transpose kernel remains.

use egg::Id;

use super::util::{nodes_where, numel, ty};
use super::{Rule, Term};
use crate::analysis::EG;
use crate::lang::{TNode, TOp};

/// Every rule of the family.
pub fn rules() -> Vec<Rule> {
    vec![
        Rule { name: "permute-compose", find: permute_compose },
        Rule { name: "permute-identity", find: permute_identity },
        Rule { name: "reshape-compose", find: reshape_compose },
        Rule { name: "reshape-identity", find: reshape_identity },
        Rule { name: "broadcast-compose", find: broadcast_compose },
        Rule { name: "broadcast-identity", find: broadcast_identity },
        Rule { name: "reduce-of-permute", find: reduce_of_permute },
        Rule { name: "transpose-of-matmul", find: transpose_of_matmul },
        Rule { name: "matmul-chain-order", find: matmul_chain_order },
    ]
}

fn is_identity(perm: &[usize]) -> bool {
    perm.iter().enumerate().all(|(i, &p)| i == p)
}

/// `permute(permute(x, p), q) = permute(x, p∘q)` (or `x` when that is the identity).
fn permute_compose(egraph: &EG, _: Id, node: &TNode) -> Vec<Term> {
    let (TOp::Permute(q), [a]) = (&node.op, node.children.as_slice()) else {
        return Vec::new();
    };
    nodes_where(egraph, *a, |o| matches!(o, TOp::Permute(_)))
        .filter_map(|(inner, k)| {
            let TOp::Permute(p) = inner else { return None };
            let composed: Option<Vec<usize>> = q.iter().map(|&i| p.get(i).copied()).collect();
            let composed = composed?;
            Some(if is_identity(&composed) { Term::Class(k[0]) } else { Term::op(TOp::Permute(composed), &[k[0]]) })
        })
        .collect()
}

/// `permute(x, identity) = x`.
fn permute_identity(_: &EG, _: Id, node: &TNode) -> Vec<Term> {
    match (&node.op, node.children.as_slice()) {
        (TOp::Permute(p), [a]) if is_identity(p) => vec![Term::Class(*a)],
        _ => Vec::new(),
    }
}

/// `reshape(reshape(x)) = reshape(x)` (row-major reshapes compose).
fn reshape_compose(egraph: &EG, _: Id, node: &TNode) -> Vec<Term> {
    let (op @ TOp::Reshape(_), [a]) = (&node.op, node.children.as_slice()) else {
        return Vec::new();
    };
    nodes_where(egraph, *a, |o| matches!(o, TOp::Reshape(_))).map(|(_, k)| Term::op(op.clone(), &[k[0]])).collect()
}

/// A reshape to the operand's own shape is the operand.
fn reshape_identity(egraph: &EG, _: Id, node: &TNode) -> Vec<Term> {
    match (&node.op, node.children.as_slice()) {
        (TOp::Reshape(s), [a]) if &ty(egraph, *a).shape == s => vec![Term::Class(*a)],
        _ => Vec::new(),
    }
}

/// `broadcast(broadcast(x)) = broadcast(x)`.
fn broadcast_compose(egraph: &EG, _: Id, node: &TNode) -> Vec<Term> {
    let (op @ TOp::Broadcast(_), [a]) = (&node.op, node.children.as_slice()) else {
        return Vec::new();
    };
    nodes_where(egraph, *a, |o| matches!(o, TOp::Broadcast(_))).map(|(_, k)| Term::op(op.clone(), &[k[0]])).collect()
}

/// A broadcast to the operand's own shape is the operand.
fn broadcast_identity(egraph: &EG, _: Id, node: &TNode) -> Vec<Term> {
    match (&node.op, node.children.as_slice()) {
        (TOp::Broadcast(s), [a]) if &ty(egraph, *a).shape == s => vec![Term::Class(*a)],
        _ => Vec::new(),
    }
}

/// `reduce(permute(x, p), axes) = permute'(reduce(x, p[axes]))`: reduce in the operand's own layout,
/// then permute the (smaller) result, or nothing when the remaining axes keep their order.
fn reduce_of_permute(egraph: &EG, _: Id, node: &TNode) -> Vec<Term> {
    let (TOp::Reduce { op, axes, keepdim }, [a]) = (&node.op, node.children.as_slice()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (inner, k) in nodes_where(egraph, *a, |o| matches!(o, TOp::Permute(_))) {
        let TOp::Permute(p) = inner else { continue };
        let mut mapped: Vec<usize> = axes.iter().filter_map(|&i| p.get(i).copied()).collect();
        mapped.sort_unstable();
        let reduced = TOp::Reduce { op: *op, axes: mapped.clone(), keepdim: *keepdim };
        let after: Vec<usize> = if *keepdim {
            p.clone()
        } else {
            // Output axis j is the j-th kept axis of the permuted tensor, i.e. x-axis p[r_j]; the
            // reduced x keeps its axes in increasing order.
            let kept: Vec<usize> =
                (0..p.len()).filter(|i| !axes.contains(i)).filter_map(|i| p.get(i).copied()).collect();
            let mut sorted = kept.clone();
            sorted.sort_unstable();
            kept.iter().filter_map(|x| sorted.iter().position(|s| s == x)).collect()
        };
        let inner_term = Term::op(reduced, &[k[0]]);
        out.push(if is_identity(&after) { inner_term } else { Term::Op(TOp::Permute(after), vec![inner_term]) });
    }
    out
}

fn swap_last2(rank: usize) -> Option<Vec<usize>> {
    if rank < 2 {
        return None;
    }
    let mut p: Vec<usize> = (0..rank).collect();
    p.swap(rank - 1, rank - 2);
    Some(p)
}

/// `(a @ b)^T = b^T @ a^T` when transposing the operands moves fewer elements than transposing
/// the product.
fn transpose_of_matmul(egraph: &EG, _: Id, node: &TNode) -> Vec<Term> {
    let (TOp::Permute(p), [x]) = (&node.op, node.children.as_slice()) else {
        return Vec::new();
    };
    if swap_last2(p.len()).as_deref() != Some(p.as_slice()) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (_, k) in nodes_where(egraph, *x, |o| *o == TOp::MatMul) {
        let (a, b) = (k[0], k[1]);
        let (ta, tb) = (ty(egraph, a), ty(egraph, b));
        if numel(ta) + numel(tb) >= numel(ty(egraph, *x)) {
            continue;
        }
        let (Some(pa), Some(pb)) = (swap_last2(ta.shape.rank()), swap_last2(tb.shape.rank())) else { continue };
        out.push(Term::Op(TOp::MatMul, vec![Term::op(TOp::Permute(pb), &[b]), Term::op(TOp::Permute(pa), &[a])]));
    }
    out
}

/// Flops of `[.., m, k] @ [.., k, n]` giving `out`.
fn matmul_flops(egraph: &EG, a: Id, out: &tcc_ir::TensorType) -> f64 {
    let ta = ty(egraph, a);
    let k = ta.shape.0.last().map(|d| crate::cost::dim(d, &tcc_ir::Bindings::new())).unwrap_or(1.0);
    2.0 * numel(out) * k
}

/// `(a @ b) @ c = a @ (b @ c)` and back, only towards fewer flops (rank-2 f32 operands: the
/// intermediate product is rounded at a different place, which stays within f32's tolerance but
/// not within f16/bf16's when the dot products cancel).
fn matmul_chain_order(egraph: &EG, class: Id, node: &TNode) -> Vec<Term> {
    let (TOp::MatMul, [l, r]) = (&node.op, node.children.as_slice()) else {
        return Vec::new();
    };
    let rank2 = |id: Id| ty(egraph, id).shape.rank() == 2 && ty(egraph, id).dtype == tcc_ir::DType::F32;
    let out_ty = ty(egraph, class).clone();
    let mut out = Vec::new();
    // (a @ b) @ c -> a @ (b @ c)
    for (_, k) in nodes_where(egraph, *l, |o| *o == TOp::MatMul) {
        let (a, b, c) = (k[0], k[1], *r);
        if !(rank2(a) && rank2(b) && rank2(c)) {
            continue;
        }
        let (tb, tc) = (ty(egraph, b), ty(egraph, c));
        let bc = tcc_ir::TensorType {
            dtype: tb.dtype,
            shape: tcc_ir::Shape(vec![tb.shape.0[0].clone(), tc.shape.0[1].clone()]),
        };
        let before = matmul_flops(egraph, a, ty(egraph, *l)) + matmul_flops(egraph, *l, &out_ty);
        let after = matmul_flops(egraph, b, &bc)
            + numel(&out_ty) * 2.0 * crate::cost::dim(&tb.shape.0[0], &tcc_ir::Bindings::new());
        if after < before {
            out.push(Term::Op(TOp::MatMul, vec![Term::Class(a), Term::op(TOp::MatMul, &[b, c])]));
        }
    }
    // a @ (b @ c) -> (a @ b) @ c
    for (_, k) in nodes_where(egraph, *r, |o| *o == TOp::MatMul) {
        let (a, b, c) = (*l, k[0], k[1]);
        if !(rank2(a) && rank2(b) && rank2(c)) {
            continue;
        }
        let (ta, tb) = (ty(egraph, a), ty(egraph, b));
        let ab = tcc_ir::TensorType {
            dtype: ta.dtype,
            shape: tcc_ir::Shape(vec![ta.shape.0[0].clone(), tb.shape.0[1].clone()]),
        };
        let before = matmul_flops(egraph, b, ty(egraph, *r)) + matmul_flops(egraph, a, &out_ty);
        let after = matmul_flops(egraph, a, &ab) + matmul_flops(egraph, b, &out_ty);
        if after < before {
            out.push(Term::Op(TOp::MatMul, vec![Term::op(TOp::MatMul, &[a, b]), Term::Class(c)]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::rules;
    use crate::rules::testkit::{proves, rule};

    fn case(name: &str, params: &str, lhs: &str, rhs: &str) -> bool {
        proves(&[rule(&rules(), name)], params, lhs, rhs)
    }

    #[test]
    fn permute_compose() {
        let p = "x: f32[2, 3, 4]";
        assert!(case("permute-compose", p, "(permute:0,2,1 (permute:0,2,1 (permute:1,0,2 x)))", "(permute:1,0,2 x)"));
        assert!(case("permute-compose", "x: f32[2, 3]", "(permute:1,0 (permute:1,0 x))", "x"));
        assert!(case("permute-compose", p, "(permute:2,0,1 (permute:1,2,0 x))", "x"));
        assert!(case("permute-compose", p, "(permute:0,2,1 (permute:1,0,2 x))", "(permute:1,2,0 x)"));
    }
    #[test]
    fn permute_identity() {
        assert!(case("permute-identity", "x: f32[2, 3]", "(permute:0,1 x)", "x"));
    }
    #[test]
    fn reshape_compose() {
        assert!(case("reshape-compose", "x: f32[2, 6]", "(reshape:3,4 (reshape:12 x))", "(reshape:3,4 x)"));
    }
    #[test]
    fn reshape_identity() {
        assert!(case("reshape-identity", "x: f32[2, 6]", "(reshape:2,6 x)", "x"));
    }
    #[test]
    fn broadcast_compose() {
        assert!(case("broadcast-compose", "x: f32[3]", "(broadcast:5,4,3 (broadcast:4,3 x))", "(broadcast:5,4,3 x)"));
    }
    #[test]
    fn broadcast_identity() {
        assert!(case("broadcast-identity", "x: f32[4, 3]", "(broadcast:4,3 x)", "x"));
    }
    #[test]
    fn reduce_of_permute() {
        let p = "x: f32[2, 3, 4]";
        assert!(case("reduce-of-permute", p, "(reduce_sum:0 (permute:2,0,1 x))", "(reduce_sum:2 x)"));
        assert!(case("reduce-of-permute", p, "(reduce_max:2 (permute:2,0,1 x))", "(permute:1,0 (reduce_max:1 x))"));
        assert!(case("reduce-of-permute", p, "(reduce_sum:0 (permute:2,1,0 x))", "(permute:1,0 (reduce_sum:2 x))"));
        assert!(case(
            "reduce-of-permute",
            p,
            "(reduce_sum:0:keep (permute:2,0,1 x))",
            "(permute:2,0,1 (reduce_sum:2:keep x))"
        ));
    }
    #[test]
    fn transpose_of_matmul() {
        let p = "a: f32[16, 2]; b: f32[2, 16]";
        assert!(case(
            "transpose-of-matmul",
            p,
            "(permute:1,0 (matmul a b))",
            "(matmul (permute:1,0 b) (permute:1,0 a))"
        ));
        // Only when transposing the operands moves fewer elements than transposing the product.
        let q = "a: f32[2, 16]; b: f32[16, 2]";
        assert!(!case(
            "transpose-of-matmul",
            q,
            "(permute:1,0 (matmul a b))",
            "(matmul (permute:1,0 b) (permute:1,0 a))"
        ));
    }
    #[test]
    fn matmul_chain_order() {
        let p = "a: f32[64, 64]; b: f32[64, 64]; c: f32[64, 2]";
        assert!(case("matmul-chain-order", p, "(matmul (matmul a b) c)", "(matmul a (matmul b c))"));
        let square = "a: f32[8, 8]; b: f32[8, 8]; c: f32[8, 8]";
        assert!(!case("matmul-chain-order", square, "(matmul (matmul a b) c)", "(matmul a (matmul b c))"));
        let q = "a: f32[2, 64]; b: f32[64, 64]; c: f32[64, 64]";
        assert!(case("matmul-chain-order", q, "(matmul a (matmul b c))", "(matmul (matmul a b) c)"));
        let h = "a: f16[64, 64]; b: f16[64, 64]; c: f16[64, 2]";
        assert!(!case("matmul-chain-order", h, "(matmul (matmul a b) c)", "(matmul a (matmul b c))"));
    }
}
