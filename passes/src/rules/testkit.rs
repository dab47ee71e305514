//! Test helpers for one-line rule cases: graphs written as s-expressions, and "does this rule
//! family prove these two expressions equal".
//!
//! `params` is `"x: f32[4, 3]; w: f32[3, 2]"`; an expression is a parameter name, a constant
//! `1.5` (f32) or `1.5:f16`, or `(op args...)` where `op` is an IR op name with attributes after
//! colons: `cast:f16`, `broadcast:2,4,3`, `reshape:12`, `permute:1,0`, `slice:1:0:2`, `concat:0`,
//! `reduce_sum:1` (`reduce_sum:1:keep` keeps the axis), `matmul`, `add`, `exp`, ...

use egg::{Id, Runner};
use tcc_ir::{BinaryOp, CompareOp, DType, Graph, NodeId, Op, ReduceOp, Shape, TensorType, UnaryOp};

use crate::analysis::TensorAnalysis;
use crate::convert::to_egraph;
use crate::rules::{Rule, rewrites};

fn parse_type(s: &str) -> TensorType {
    let s = s.trim();
    let open = s.find('[').unwrap();
    let dtype = DType::from_name(&s[..open]).unwrap();
    let dims: Vec<u64> = s[open + 1..s.len() - 1]
        .split(',')
        .filter(|d| !d.trim().is_empty())
        .map(|d| d.trim().parse().unwrap())
        .collect();
    TensorType { dtype, shape: Shape::from_consts(&dims) }
}

fn list(s: &str) -> Vec<u64> {
    s.split(',').filter(|x| !x.is_empty()).map(|x| x.parse().unwrap()).collect()
}

fn tokens(s: &str) -> Vec<String> {
    s.replace('(', " ( ").replace(')', " ) ").split_whitespace().map(str::to_string).collect()
}

fn expr(g: &mut Graph, names: &[(String, NodeId)], toks: &[String], pos: &mut usize) -> NodeId {
    let t = toks[*pos].clone();
    *pos += 1;
    if t != "(" {
        if let Some((_, id)) = names.iter().find(|(n, _)| *n == t) {
            return *id;
        }
        let (v, d) = t.split_once(':').unwrap_or((&t, "f32"));
        return g.constant(v.parse().unwrap(), DType::from_name(d).unwrap()).unwrap();
    }
    let head = toks[*pos].clone();
    *pos += 1;
    let mut args = Vec::new();
    while toks[*pos] != ")" {
        args.push(expr(g, names, toks, pos));
    }
    *pos += 1;
    let mut parts = head.split(':');
    let name = parts.next().unwrap();
    let attrs: Vec<&str> = parts.collect();
    let a = |i: usize| args[i];
    let ty0 = |g: &Graph| g.ty(args[0]).unwrap().clone();
    let typed = |g: &mut Graph, op: Op, ty: TensorType| g.push_typed(op, ty).unwrap();
    if let Some(u) = UnaryOp::from_name(name) {
        return g.push(Op::Unary(u, a(0))).unwrap();
    }
    if let Some(b) = BinaryOp::from_name(name) {
        return g.push(Op::Binary(b, a(0), a(1))).unwrap();
    }
    if let Some(c) = CompareOp::from_name(name) {
        return g.push(Op::Compare(c, a(0), a(1))).unwrap();
    }
    if let Some(r) = name.strip_prefix("reduce_").and_then(ReduceOp::from_name) {
        let axes = list(attrs[0]).into_iter().map(|x| x as usize).collect();
        return g.push(Op::Reduce { op: r, input: a(0), axes, keepdim: attrs.get(1) == Some(&"keep") }).unwrap();
    }
    match name {
        "matmul" => g.push(Op::MatMul(a(0), a(1))).unwrap(),
        "select" => g.push(Op::Select { cond: a(0), on_true: a(1), on_false: a(2) }).unwrap(),
        "cast" => {
            let ty = TensorType { dtype: DType::from_name(attrs[0]).unwrap(), shape: ty0(g).shape };
            typed(g, Op::Cast(a(0)), ty)
        }
        "broadcast" | "reshape" => {
            let ty = TensorType { dtype: ty0(g).dtype, shape: Shape::from_consts(&list(attrs[0])) };
            let op = if name == "broadcast" { Op::Broadcast(a(0)) } else { Op::Reshape(a(0)) };
            typed(g, op, ty)
        }
        "permute" => {
            let perm = list(attrs[0]).into_iter().map(|x| x as usize).collect();
            g.push(Op::Permute { input: a(0), perm }).unwrap()
        }
        "slice" => {
            let v: Vec<u64> = attrs.iter().map(|x| x.parse().unwrap()).collect();
            g.push(Op::Slice { input: a(0), axis: v[0] as usize, start: v[1], end: v[2] }).unwrap()
        }
        "concat" => g.push(Op::Concat { inputs: args.clone(), axis: attrs[0].parse().unwrap() }).unwrap(),
        other => panic!("unknown op {other}"),
    }
}

/// A graph with parameters `params` returning each of `exprs`.
pub fn graph(params: &str, exprs: &[&str]) -> Graph {
    let mut g = Graph::new("t");
    let mut names = Vec::new();
    for p in params.split(';').filter(|p| !p.trim().is_empty()) {
        let (name, ty) = p.split_once(':').unwrap();
        let id = g.add_param(name.trim(), parse_type(ty)).unwrap();
        names.push((name.trim().to_string(), id));
    }
    for e in exprs {
        let toks = tokens(e);
        let mut pos = 0;
        let out = expr(&mut g, &names, &toks, &mut pos);
        g.outputs.push(out);
    }
    tcc_ir::verify::verify(&g).unwrap();
    g
}

/// True if `rules` (with constant folding) prove `lhs` and `rhs` equal within a few iterations.
pub fn proves(rules: &[Rule], params: &str, lhs: &str, rhs: &str) -> bool {
    let g = graph(params, &[lhs, rhs]);
    let built = to_egraph(&g, TensorAnalysis::new(Vec::new(), true), false);
    let roots: Vec<Id> = built.roots.clone();
    let runner = Runner::default().with_egraph(built.egraph).with_iter_limit(6).run(&rewrites(rules));
    assert!(runner.egraph.analysis.errors.is_empty(), "{:?}", runner.egraph.analysis.errors);
    runner.egraph.find(roots[0]) == runner.egraph.find(roots[1])
}

/// The rule named `name` of `family`.
pub fn rule(family: &[Rule], name: &str) -> Rule {
    *family.iter().find(|r| r.name == name).unwrap()
}
