//! Algebraic identities that never make a program slower and keep every value's dtype: identities,
//! double negation, broadcast hoisting and scalar-factor motion into matmuls. Constant folding
//! lives in the analysis ([`crate::fold`]).
//!
//! Every rule on elementwise ops is exact under the interpreter's semantics (signed zeros, NaN,
//! overflow): a value the interpreter defines bit for bit keeps that value, so comparing it with
//! itself through another path stays true. Only the matmul rule changes results, by at most one
//! f32 rounding of an operand (a matmul's sum order is not defined bit for bit anyway); none
//! reassociates sums. `exp(a) * exp(b) = exp(a + b)` and `a / sqrt(b) = a * rsqrt(b)` are
//! deliberately absent: the first differs where one factor overflows and the other underflows,
//! the second rounds once more.

use egg::Id;
use tcc_ir::{BinaryOp, DType, UnaryOp};

use super::util::{konst, nodes_where, numel, ty};
use super::{Rule, Term};
use crate::analysis::EG;
use crate::lang::{TNode, TOp};

/// Every rule of the family.
pub fn rules() -> Vec<Rule> {
    vec![
        Rule { name: "double-negation", find: double_negation },
        Rule { name: "add-zero", find: add_zero },
        Rule { name: "sub-zero", find: sub_zero },
        Rule { name: "mul-one", find: mul_one },
        Rule { name: "div-one", find: div_one },
        Rule { name: "cast-identity", find: cast_identity },
        Rule { name: "idempotent-unary", find: idempotent_unary },
        Rule { name: "abs-of-neg", find: abs_of_neg },
        Rule { name: "add-neg-to-sub", find: add_neg_to_sub },
        Rule { name: "sub-neg-to-add", find: sub_neg_to_add },
        Rule { name: "hoist-broadcast-unary", find: hoist_broadcast_unary },
        Rule { name: "hoist-broadcast-binary", find: hoist_broadcast_binary },
        Rule { name: "scalar-factor-into-matmul", find: scalar_factor_into_matmul },
    ]
}

fn is_const(egraph: &EG, id: Id, value: f64) -> bool {
    konst(egraph, id) == Some(value)
}

/// `-(-x) = x` (exact).
fn double_negation(egraph: &EG, _: Id, node: &TNode) -> Vec<Term> {
    match (&node.op, node.children.as_slice()) {
        (TOp::Unary(UnaryOp::Neg), [a]) => {
            nodes_where(egraph, *a, |op| *op == TOp::Unary(UnaryOp::Neg)).map(|(_, k)| Term::Class(k[0])).collect()
        }
        _ => Vec::new(),
    }
}

/// True if class `id` is a zero that leaves every `x` unchanged under `x + zero`: `-0.0` for floats
/// (`-0 + +0` is `+0`, so `+0` is not an identity), any zero for integers.
fn is_additive_identity(egraph: &EG, id: Id) -> bool {
    match konst(egraph, id) {
        Some(v) if v == 0.0 => !ty(egraph, id).dtype.is_float() || v.is_sign_negative(),
        _ => false,
    }
}

/// `x + (-0) = (-0) + x = x` when the zero does not broadcast `x` (exact, signed zeros included).
fn add_zero(egraph: &EG, _: Id, node: &TNode) -> Vec<Term> {
    match (&node.op, node.children.as_slice()) {
        (TOp::Binary(BinaryOp::Add), [a, b]) if is_additive_identity(egraph, *b) => vec![Term::Class(*a)],
        (TOp::Binary(BinaryOp::Add), [a, b]) if is_additive_identity(egraph, *a) => vec![Term::Class(*b)],
        _ => Vec::new(),
    }
}

/// `x - (+0) = x` (exact, signed zeros included).
fn sub_zero(egraph: &EG, _: Id, node: &TNode) -> Vec<Term> {
    let positive_zero = |id: Id| konst(egraph, id).is_some_and(|v| v == 0.0 && v.is_sign_positive());
    match (&node.op, node.children.as_slice()) {
        (TOp::Binary(BinaryOp::Sub), [a, b]) if positive_zero(*b) => vec![Term::Class(*a)],
        _ => Vec::new(),
    }
}

/// `x * 1 = 1 * x = x` (exact).
fn mul_one(egraph: &EG, _: Id, node: &TNode) -> Vec<Term> {
    match (&node.op, node.children.as_slice()) {
        (TOp::Binary(BinaryOp::Mul), [a, b]) if is_const(egraph, *b, 1.0) => vec![Term::Class(*a)],
        (TOp::Binary(BinaryOp::Mul), [a, b]) if is_const(egraph, *a, 1.0) => vec![Term::Class(*b)],
        _ => Vec::new(),
    }
}

/// `x / 1 = x` (exact).
fn div_one(egraph: &EG, _: Id, node: &TNode) -> Vec<Term> {
    match (&node.op, node.children.as_slice()) {
        (TOp::Binary(BinaryOp::Div), [a, b]) if is_const(egraph, *b, 1.0) => vec![Term::Class(*a)],
        _ => Vec::new(),
    }
}

/// A cast to the operand's own dtype is the operand (exact).
fn cast_identity(egraph: &EG, _: Id, node: &TNode) -> Vec<Term> {
    match (&node.op, node.children.as_slice()) {
        (TOp::Cast(d), [a]) if ty(egraph, *a).dtype == *d => vec![Term::Class(*a)],
        _ => Vec::new(),
    }
}

/// `relu(relu x) = relu x`, `abs(abs x) = abs x` (exact).
fn idempotent_unary(egraph: &EG, _: Id, node: &TNode) -> Vec<Term> {
    match (&node.op, node.children.as_slice()) {
        (TOp::Unary(u @ (UnaryOp::Relu | UnaryOp::Abs)), [a]) => {
            nodes_where(egraph, *a, |op| *op == TOp::Unary(*u)).map(|_| Term::Class(*a)).take(1).collect()
        }
        _ => Vec::new(),
    }
}

/// `|-x| = |x|` (exact).
fn abs_of_neg(egraph: &EG, _: Id, node: &TNode) -> Vec<Term> {
    match (&node.op, node.children.as_slice()) {
        (TOp::Unary(UnaryOp::Abs), [a]) => nodes_where(egraph, *a, |op| *op == TOp::Unary(UnaryOp::Neg))
            .map(|(_, k)| Term::op(TOp::Unary(UnaryOp::Abs), &[k[0]]))
            .collect(),
        _ => Vec::new(),
    }
}

/// `x + (-y) = (-y) + x = x - y` (exact).
fn add_neg_to_sub(egraph: &EG, _: Id, node: &TNode) -> Vec<Term> {
    let (TOp::Binary(BinaryOp::Add), [a, b]) = (&node.op, node.children.as_slice()) else {
        return Vec::new();
    };
    let neg = |id: Id| nodes_where(egraph, id, |op| *op == TOp::Unary(UnaryOp::Neg)).map(|(_, k)| k[0]).next();
    let mut out = Vec::new();
    if let Some(y) = neg(*b) {
        out.push(Term::op(TOp::Binary(BinaryOp::Sub), &[*a, y]));
    }
    if let Some(y) = neg(*a) {
        out.push(Term::op(TOp::Binary(BinaryOp::Sub), &[*b, y]));
    }
    out
}

/// `x - (-y) = x + y` (exact).
fn sub_neg_to_add(egraph: &EG, _: Id, node: &TNode) -> Vec<Term> {
    match (&node.op, node.children.as_slice()) {
        (TOp::Binary(BinaryOp::Sub), [a, b]) => nodes_where(egraph, *b, |op| *op == TOp::Unary(UnaryOp::Neg))
            .map(|(_, k)| Term::op(TOp::Binary(BinaryOp::Add), &[*a, k[0]]))
            .collect(),
        _ => Vec::new(),
    }
}

/// `f(broadcast x) = broadcast(f x)` for unary ops and casts: compute on the small tensor (exact).
fn hoist_broadcast_unary(egraph: &EG, _: Id, node: &TNode) -> Vec<Term> {
    let (op @ (TOp::Unary(_) | TOp::Cast(_)), [a]) = (&node.op, node.children.as_slice()) else {
        return Vec::new();
    };
    nodes_where(egraph, *a, |o| matches!(o, TOp::Broadcast(_)))
        .map(|(b, k)| Term::Op(b.clone(), vec![Term::op(op.clone(), &[k[0]])]))
        .collect()
}

/// `broadcast(a) ∘ broadcast(b) = broadcast(a ∘ b)` when `a` and `b` have one shape, and
/// `broadcast(a) ∘ c = broadcast(a ∘ c)` for a scalar constant `c` (exact).
fn hoist_broadcast_binary(egraph: &EG, _: Id, node: &TNode) -> Vec<Term> {
    let (op @ (TOp::Binary(_) | TOp::Compare(_)), [a, b]) = (&node.op, node.children.as_slice()) else {
        return Vec::new();
    };
    let bcast = |id: Id| nodes_where(egraph, id, |o| matches!(o, TOp::Broadcast(_))).next();
    let mut out = Vec::new();
    match (bcast(*a), bcast(*b)) {
        (Some((ba, ka)), Some((_, kb))) if ty(egraph, ka[0]).shape == ty(egraph, kb[0]).shape => {
            out.push(Term::Op(ba.clone(), vec![Term::op(op.clone(), &[ka[0], kb[0]])]));
        }
        (Some((ba, ka)), None) if konst(egraph, *b).is_some() => {
            out.push(Term::Op(ba.clone(), vec![Term::op(op.clone(), &[ka[0], *b])]));
        }
        (None, Some((bb, kb))) if konst(egraph, *a).is_some() => {
            out.push(Term::Op(bb.clone(), vec![Term::op(op.clone(), &[*a, kb[0]])]));
        }
        _ => {}
    }
    out
}

/// True if scaling a matmul operand by the constant `s` (multiplying, or dividing when `divide`)
/// keeps the product within tolerance: a power of two scaling down (exact: no rounding, no
/// overflow) for every dtype; for f32 also any factor of magnitude in [1e-3, 1] (one f32 rounding
/// per element, far inside the f32 tolerance). Reduced-precision dtypes would round every scaled
/// element, which cancellation in the dot product can amplify beyond their tolerance.
fn safe_factor(s: f64, divide: bool, dtype: DType) -> bool {
    let factor = if divide { 1.0 / s } else { s };
    if !factor.is_finite() || factor == 0.0 {
        return false;
    }
    let m = factor.abs();
    let power_of_two = m.log2().fract() == 0.0;
    (power_of_two && (2f64.powi(-10)..=1.0).contains(&m)) || (dtype == DType::F32 && (1e-3..=1.0).contains(&m))
}

/// `(a @ b) * s = a @ (b * s)` (or `(a * s) @ b`) for a scalar constant `s` ([`safe_factor`]),
/// when the scaled operand is smaller than the product; also `/ s`.
fn scalar_factor_into_matmul(egraph: &EG, _: Id, node: &TNode) -> Vec<Term> {
    let (TOp::Binary(op @ (BinaryOp::Mul | BinaryOp::Div)), [x, y]) = (&node.op, node.children.as_slice()) else {
        return Vec::new();
    };
    let (prod, s) = if konst(egraph, *y).is_some() {
        (*x, *y)
    } else if *op == BinaryOp::Mul && konst(egraph, *x).is_some() {
        (*y, *x)
    } else {
        return Vec::new();
    };
    let (Some(value), dtype) = (konst(egraph, s), ty(egraph, prod).dtype) else {
        return Vec::new();
    };
    if !safe_factor(value, *op == BinaryOp::Div, dtype) {
        return Vec::new();
    }
    let out = numel(ty(egraph, prod));
    let mut terms = Vec::new();
    for (_, k) in nodes_where(egraph, prod, |o| *o == TOp::MatMul) {
        let (a, b) = (k[0], k[1]);
        let scaled = |v: Id| Term::op(TOp::Binary(*op), &[v, s]);
        let nb = numel(ty(egraph, b));
        let na = numel(ty(egraph, a));
        if nb < out && nb <= na {
            terms.push(Term::Op(TOp::MatMul, vec![Term::Class(a), scaled(b)]));
        } else if na < out {
            terms.push(Term::Op(TOp::MatMul, vec![scaled(a), Term::Class(b)]));
        }
    }
    terms
}

#[cfg(test)]
mod tests {
    use super::rules;
    use crate::rules::testkit::{proves, rule};

    fn case(name: &str, params: &str, lhs: &str, rhs: &str) -> bool {
        proves(&[rule(&rules(), name)], params, lhs, rhs)
    }

    const X: &str = "x: f32[4, 3]";

    #[test]
    fn double_negation() {
        assert!(case("double-negation", X, "(neg (neg x))", "x"));
    }
    #[test]
    fn add_zero_only_for_negative_zero() {
        assert!(case("add-zero", X, "(add x -0.0)", "x"));
        assert!(case("add-zero", X, "(add -0.0 x)", "x"));
        assert!(!case("add-zero", X, "(add x 0.0)", "x"));
        assert!(case("add-zero", "i: i32[4]", "(add i 0:i32)", "i"));
    }
    #[test]
    fn add_zero_never_broadcasts() {
        assert!(!case("add-zero", "s: f32[]", "(add (broadcast:4 s) -0.0)", "s"));
    }
    #[test]
    fn sub_zero() {
        assert!(case("sub-zero", X, "(sub x 0.0)", "x"));
        assert!(!case("sub-zero", X, "(sub x -0.0)", "x"));
    }
    #[test]
    fn mul_one() {
        assert!(case("mul-one", X, "(mul x 1.0)", "x"));
        assert!(case("mul-one", X, "(mul 1.0 x)", "x"));
        assert!(!case("mul-one", "s: f32[]", "(mul s (broadcast:4 1.0))", "s"));
    }
    #[test]
    fn div_one() {
        assert!(case("div-one", X, "(div x 1.0)", "x"));
    }
    #[test]
    fn cast_identity() {
        assert!(case("cast-identity", X, "(cast:f32 x)", "x"));
        assert!(!case("cast-identity", X, "(cast:f32 (cast:f16 x))", "x"));
    }
    #[test]
    fn idempotent_unary() {
        assert!(case("idempotent-unary", X, "(relu (relu x))", "(relu x)"));
        assert!(case("idempotent-unary", X, "(abs (abs x))", "(abs x)"));
    }
    #[test]
    fn abs_of_neg() {
        assert!(case("abs-of-neg", X, "(abs (neg x))", "(abs x)"));
    }
    #[test]
    fn add_neg_to_sub() {
        assert!(case("add-neg-to-sub", "x: f32[3]; y: f32[3]", "(add x (neg y))", "(sub x y)"));
        assert!(case("add-neg-to-sub", "x: f32[3]; y: f32[3]", "(add (neg y) x)", "(sub x y)"));
    }
    #[test]
    fn sub_neg_to_add() {
        assert!(case("sub-neg-to-add", "x: f32[3]; y: f32[3]", "(sub x (neg y))", "(add x y)"));
    }
    #[test]
    fn hoist_broadcast_unary() {
        assert!(case("hoist-broadcast-unary", "v: f32[3]", "(exp (broadcast:4,3 v))", "(broadcast:4,3 (exp v))"));
        assert!(case(
            "hoist-broadcast-unary",
            "v: f32[3]",
            "(cast:f16 (broadcast:4,3 v))",
            "(broadcast:4,3 (cast:f16 v))"
        ));
    }
    #[test]
    fn hoist_broadcast_binary() {
        let p = "u: f32[3]; v: f32[3]";
        assert!(case(
            "hoist-broadcast-binary",
            p,
            "(mul (broadcast:4,3 u) (broadcast:4,3 v))",
            "(broadcast:4,3 (mul u v))"
        ));
        assert!(case("hoist-broadcast-binary", p, "(add (broadcast:4,3 u) 2.0)", "(broadcast:4,3 (add u 2.0))"));
        assert!(!case(
            "hoist-broadcast-binary",
            "u: f32[3]; v: f32[1]",
            "(mul (broadcast:4,3 u) (broadcast:4,3 v))",
            "(broadcast:4,3 (mul u (broadcast:3 v)))"
        ));
    }
    #[test]
    fn a_division_by_a_square_root_stays_a_division() {
        // `a * rsqrt(b)` rounds three times where `a / sqrt(b)` rounds twice: not the same value,
        // so no rule of the family may turn one into the other (issue 30).
        assert!(!proves(&rules(), "x: f32[3]; y: f32[3]", "(div x (sqrt y))", "(mul x (rsqrt y))"));
    }
    #[test]
    fn scalar_factor_into_matmul() {
        let p = "a: f32[64, 8]; b: f32[8, 64]";
        assert!(case("scalar-factor-into-matmul", p, "(mul (matmul a b) 0.125)", "(matmul a (mul b 0.125))"));
        assert!(case("scalar-factor-into-matmul", p, "(div (matmul a b) 8.0)", "(matmul a (div b 8.0))"));
        // Not towards a bigger operand, not a factor that could overflow, not a rounding factor in f16.
        assert!(!case(
            "scalar-factor-into-matmul",
            "a: f32[2, 8]; b: f32[8, 2]",
            "(mul (matmul a b) 0.125)",
            "(matmul a (mul b 0.125))"
        ));
        assert!(!case("scalar-factor-into-matmul", p, "(mul (matmul a b) 4.0)", "(matmul a (mul b 4.0))"));
        let h = "a: f16[64, 8]; b: f16[8, 64]";
        assert!(!case("scalar-factor-into-matmul", h, "(mul (matmul a b) 0.1:f16)", "(matmul a (mul b 0.1:f16))"));
        assert!(case("scalar-factor-into-matmul", h, "(mul (matmul a b) 0.125:f16)", "(matmul a (mul b 0.125:f16))"));
    }
    #[test]
    fn constant_folding_uses_the_interpreter() {
        assert!(proves(&[], "", "(add 2.0 3.0)", "5.0"));
        assert!(proves(&[], "", "(add 2147483647:i32 1:i32)", "-2147483648:i32"));
    }
}
