//! A costly value read by reductions and by the output computed from it is written once, into
//! the output's buffer (a softmax's `exp` per element once, not once per nest), and only when
//! that is safe.

use tcc_codegen::loops::{BufKind, Expr, LoopKernel, lower_graph, split_rows};
use tcc_codegen::{Backend, CraneliftBackend, LowerOptions};
use tcc_ir::{
    BinaryOp, Bindings, DType, Graph, Kernel, KernelClass, NodeId, Op, ReduceOp, Schedule, Shape, TensorType, Tier,
    UnaryOp,
};

fn ty(dtype: DType, dims: &[u64]) -> TensorType {
    TensorType { dtype, shape: Shape::from_consts(dims) }
}

fn exps(k: &LoopKernel) -> usize {
    k.exprs.iter().filter(|e| matches!(e, Expr::Unary { op: UnaryOp::Exp, .. })).count()
}

/// `x`, `e = exp(x - max(x))` and `sum(e)` of `[rows, cols]`.
fn softmax_parts(g: &mut Graph, dtype: DType, rows: u64, cols: u64) -> (NodeId, NodeId, NodeId) {
    let x = g.add_param("x", ty(dtype, &[rows, cols])).unwrap();
    let m = g.push(Op::Reduce { op: ReduceOp::Max, input: x, axes: vec![1], keepdim: true }).unwrap();
    let d = g.push(Op::Binary(BinaryOp::Sub, x, m)).unwrap();
    let e = g.push(Op::Unary(UnaryOp::Exp, d)).unwrap();
    let s = g.push(Op::Reduce { op: ReduceOp::Sum, input: e, axes: vec![1], keepdim: true }).unwrap();
    (x, e, s)
}

#[test]
fn softmax_computes_exp_once_into_its_output_and_stays_one_parallel_phase() {
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let mut g = Graph::new("softmax");
        let (_, e, s) = softmax_parts(&mut g, dtype, 8, 100);
        let y = g.push(Op::Binary(BinaryOp::Div, e, s)).unwrap();
        g.outputs.push(y);
        let mut k = lower_graph("softmax", &g, &Bindings::new(), &LowerOptions::default()).unwrap();
        assert_eq!(exps(&k), 1, "{dtype}: exp in one nest only");
        // max, exp into the output, sum, the in-place division; scratch only for max and sum.
        assert_eq!(k.phases.len(), 4);
        assert_eq!(k.bufs.iter().filter(|b| b.kind == BufKind::Scratch).count(), 2);
        split_rows(&mut k, 4096);
        assert_eq!(k.phases.len(), 1, "{dtype}: {:#?}", k.phases);
        assert_eq!(k.phases[0].rows, 8);
        let kernel = Kernel {
            name: "softmax".into(),
            class: KernelClass::RowReduction,
            graph: g,
            schedule: Schedule::default_for(Tier::Cranelift),
        };
        CraneliftBackend::new().unwrap().compile(&kernel, &Bindings::new()).unwrap();
    }
}

#[test]
fn values_read_after_the_output_or_elsewhere_are_not_shared() {
    // A reduction of `e` after the output would read the overwritten buffer.
    let mut g = Graph::new("late");
    let (_, e, _) = softmax_parts(&mut g, DType::F32, 4, 64);
    let two = g.constant(2.0, DType::F32).unwrap();
    let y = g.push(Op::Binary(BinaryOp::Mul, e, two)).unwrap();
    let late = g.push(Op::Reduce { op: ReduceOp::Max, input: e, axes: vec![1], keepdim: true }).unwrap();
    g.outputs.push(y);
    g.outputs.push(late);
    let k = lower_graph("late", &g, &Bindings::new(), &LowerOptions::default()).unwrap();
    assert!(exps(&k) > 1, "e must be recomputed");
    // Another output reads `e` too.
    let mut g = Graph::new("elsewhere");
    let (_, e, s) = softmax_parts(&mut g, DType::F32, 4, 64);
    let y = g.push(Op::Binary(BinaryOp::Div, e, s)).unwrap();
    let t = g.push(Op::Unary(UnaryOp::Neg, e)).unwrap();
    g.outputs.push(y);
    g.outputs.push(t);
    let k = lower_graph("elsewhere", &g, &Bindings::new(), &LowerOptions::default()).unwrap();
    assert!(exps(&k) > 1, "e has a user other than the output and reductions");
    // A cheap operand (no transcendental) is recomputed rather than stored twice.
    let mut g = Graph::new("cheap");
    let x = g.add_param("x", ty(DType::F32, &[4, 64])).unwrap();
    let sq = g.push(Op::Binary(BinaryOp::Mul, x, x)).unwrap();
    let s = g.push(Op::Reduce { op: ReduceOp::Sum, input: sq, axes: vec![1], keepdim: true }).unwrap();
    let y = g.push(Op::Binary(BinaryOp::Div, sq, s)).unwrap();
    g.outputs.push(y);
    let k = lower_graph("cheap", &g, &Bindings::new(), &LowerOptions::default()).unwrap();
    assert_eq!(k.phases.len(), 2, "the sum and the output nests");
}
