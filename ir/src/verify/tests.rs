//! Tests of the verifier: valid graphs and programs pass, and each kind of broken one is rejected
//! with the right error. Broken graphs are built by pushing nodes directly into `g.nodes`.

use super::*;
use crate::graph::{Node, Param};
use crate::op::{BinaryOp, ReduceOp, UnaryOp};
use crate::program::{Kernel, KernelClass, Launch, Schedule, Tier};
use crate::text::tests::{every_op_graph, odd_graphs, tt};

fn raw(g: &mut Graph, op: Op, ty: TensorType) {
    g.nodes.push(Node { op, ty });
}

/// `x: f32[M, 4]`, read by node %0.
fn base() -> Graph {
    let mut g = Graph::new("g");
    g.add_param("x", tt(DType::F32, &["M", "4"])).unwrap();
    g.outputs = vec![NodeId(0)];
    g
}

#[test]
fn valid_graphs_pass() {
    verify(&every_op_graph()).unwrap();
    for g in odd_graphs() {
        verify(&g).unwrap();
    }
    verify(&base()).unwrap();
}

#[test]
fn operands_must_come_earlier() {
    let mut g = base();
    raw(&mut g, Op::Unary(UnaryOp::Exp, NodeId(1)), tt(DType::F32, &["M", "4"]));
    assert_eq!(verify(&g), Err(VerifyError::OperandNotEarlier { node: NodeId(1), operand: NodeId(1) }));
    let mut g = base();
    raw(&mut g, Op::Binary(BinaryOp::Add, NodeId(0), NodeId(2)), tt(DType::F32, &["M", "4"]));
    raw(&mut g, Op::Unary(UnaryOp::Exp, NodeId(0)), tt(DType::F32, &["M", "4"]));
    assert_eq!(verify(&g), Err(VerifyError::OperandNotEarlier { node: NodeId(1), operand: NodeId(2) }));
}

#[test]
fn inputs_must_name_params_of_their_type() {
    let mut g = base();
    raw(&mut g, Op::Input { index: 1 }, tt(DType::F32, &["M", "4"]));
    assert_eq!(verify(&g), Err(VerifyError::BadInput { node: NodeId(1), index: 1, params: 1 }));
    let mut g = base();
    raw(&mut g, Op::Input { index: 0 }, tt(DType::F16, &["M", "4"]));
    assert!(matches!(verify(&g), Err(VerifyError::InputType { node: NodeId(1), index: 0, .. })));
}

#[test]
fn declared_types_are_checked() {
    let mut g = base();
    raw(&mut g, Op::Unary(UnaryOp::Exp, NodeId(0)), tt(DType::F32, &["M", "5"]));
    let e = verify(&g).unwrap_err();
    assert!(matches!(e, VerifyError::Type { node: NodeId(1), source: TypeError::DeclaredMismatch { .. } }));
    assert!(e.to_string().starts_with("node %1: declared type f32[M, 5]"), "{e}");
    let mut g = base();
    g.add_param("i", tt(DType::I32, &["M", "4"])).unwrap();
    raw(&mut g, Op::Binary(BinaryOp::Add, NodeId(0), NodeId(1)), tt(DType::F32, &["M", "4"]));
    assert!(matches!(verify(&g), Err(VerifyError::Type { node: NodeId(2), source: TypeError::DTypeMismatch { .. } })));
    let mut g = base();
    raw(
        &mut g,
        Op::Reduce { op: ReduceOp::Sum, input: NodeId(0), axes: vec![2], keepdim: false },
        tt(DType::F32, &["M"]),
    );
    assert!(matches!(verify(&g), Err(VerifyError::Type { node: NodeId(1), source: TypeError::BadAxis { .. } })));
}

#[test]
fn limits_are_checked() {
    let mut g = base();
    raw(&mut g, Op::Broadcast(NodeId(0)), tt(DType::F32, &["1", "1", "1", "1", "1", "1", "1", "M", "4"]));
    assert!(matches!(verify(&g), Err(VerifyError::Type { node: NodeId(1), source: TypeError::RankTooLarge(9) })));
    let mut g = base();
    g.params.push(Param { name: "big".into(), ty: tt(DType::F32, &["1048576", "1048576"]) });
    assert!(matches!(verify(&g), Err(VerifyError::Param { index: 1, source: TypeError::TooManyElements(_) })));
    let mut g = base();
    let node = Node { op: Op::Constant { value: 0.0 }, ty: tt(DType::F32, &[]) };
    g.nodes.resize(limits::MAX_OPS + 1, node);
    assert_eq!(verify(&g), Err(VerifyError::TooManyOps(limits::MAX_OPS + 1)));
}

#[test]
fn constants_must_be_representable() {
    for (value, dtype, ok) in [
        (0.1, DType::F32, false),
        (f64::from(0.1f32), DType::F32, true),
        (f64::from(0.1f32), DType::F16, false),
        (65504.0, DType::F16, true),
        (f64::INFINITY, DType::BF16, true),
        (f64::NAN, DType::F16, true),
        (f64::NAN, DType::I32, false),
        (2.5, DType::I32, false),
        (-2147483648.0, DType::I32, true),
        (2147483648.0, DType::I32, false),
        (1.0, DType::Bool, true),
        (2.0, DType::Bool, false),
    ] {
        let mut g = base();
        raw(&mut g, Op::Constant { value }, tt(dtype, &[]));
        match verify(&g) {
            Ok(()) => assert!(ok, "{value} accepted in {dtype}"),
            Err(e) => {
                assert!(!ok, "{value} rejected in {dtype}: {e}");
                assert!(matches!(e, VerifyError::Constant { node: NodeId(1), .. }));
            }
        }
    }
    let mut g = base();
    raw(&mut g, Op::Constant { value: 1.0 }, tt(DType::F32, &["2"]));
    assert!(matches!(verify(&g), Err(VerifyError::Type { source: TypeError::ConstantNotScalar(_), .. })));
}

#[test]
fn outputs_must_name_nodes() {
    let mut g = base();
    g.outputs = vec![NodeId(0), NodeId(1)];
    assert_eq!(verify(&g), Err(VerifyError::BadOutput { index: 1, id: NodeId(1) }));
}

fn kernel(name: &str, graph: Graph) -> Kernel {
    Kernel { name: name.into(), class: KernelClass::Generic, graph, schedule: Schedule::default_for(Tier::Interp) }
}

/// `exp(x)` into buffer 0, then its row sums into buffer 1, which is returned with `x`.
fn program() -> Program {
    let row = tt(DType::F32, &["M", "4"]);
    let sums = tt(DType::F32, &["M", "1"]);
    let mut k0 = Graph::new("k0");
    let a = k0.add_param("a", row.clone()).unwrap();
    k0.outputs = vec![k0.push(Op::Unary(UnaryOp::Exp, a)).unwrap()];
    let mut k1 = Graph::new("k1");
    let b = k1.add_param("b", row.clone()).unwrap();
    k1.outputs = vec![k1.push(Op::Reduce { op: ReduceOp::Sum, input: b, axes: vec![1], keepdim: true }).unwrap()];
    Program {
        name: "p".into(),
        params: vec![Param { name: "x".into(), ty: row.clone() }],
        buffers: vec![row, sums],
        launches: vec![
            Launch { kernel: kernel("k0", k0), inputs: vec![ValueRef::Param(0)], outputs: vec![ValueRef::Buffer(0)] },
            Launch { kernel: kernel("k1", k1), inputs: vec![ValueRef::Buffer(0)], outputs: vec![ValueRef::Buffer(1)] },
        ],
        outputs: vec![ValueRef::Buffer(1), ValueRef::Param(0)],
    }
}

#[test]
fn valid_program_passes() {
    verify_program(&program()).unwrap();
}

#[test]
fn broken_programs_are_rejected() {
    type Break = fn(&mut Program);
    type Check = fn(&VerifyError) -> bool;
    let cases: Vec<(Break, Check)> = vec![
        (
            |p| p.launches[1].kernel.graph.outputs = vec![NodeId(9)],
            |e| matches!(e, VerifyError::Kernel { launch: 1, source, .. } if matches!(**source, VerifyError::BadOutput { .. })),
        ),
        (
            |p| p.launches[0].inputs.push(ValueRef::Param(0)),
            |e| matches!(e, VerifyError::LaunchArity { launch: 0, what: "inputs", expected: 1, found: 2 }),
        ),
        (
            |p| p.launches[1].outputs.clear(),
            |e| matches!(e, VerifyError::LaunchArity { launch: 1, what: "outputs", .. }),
        ),
        (
            |p| p.launches[0].inputs[0] = ValueRef::Param(3),
            |e| matches!(e, VerifyError::UnknownValue { launch: 0, .. }),
        ),
        (
            |p| p.launches[0].outputs[0] = ValueRef::Buffer(7),
            |e| matches!(e, VerifyError::UnknownValue { launch: 0, .. }),
        ),
        (
            |p| p.launches[0].outputs[0] = ValueRef::Param(0),
            |e| matches!(e, VerifyError::WritesParam { launch: 0, .. }),
        ),
        (
            |p| p.launches[1].inputs[0] = ValueRef::Buffer(1),
            |e| matches!(e, VerifyError::ReadBeforeWrite { launch: 1, buffer: 1 }),
        ),
        (|p| p.launches.swap(0, 1), |e| matches!(e, VerifyError::ReadBeforeWrite { launch: 0, buffer: 0 })),
        (
            |p| p.buffers[0] = tt(DType::F16, &["M", "4"]),
            |e| matches!(e, VerifyError::LaunchType { launch: 0, what: "output", index: 0, .. }),
        ),
        (
            |p| p.params[0].ty = tt(DType::F32, &["N", "4"]),
            |e| matches!(e, VerifyError::LaunchType { launch: 0, what: "input", index: 0, .. }),
        ),
        (|p| p.outputs.push(ValueRef::Buffer(5)), |e| matches!(e, VerifyError::ProgramOutput { index: 2, .. })),
        (|p| p.outputs.push(ValueRef::Param(1)), |e| matches!(e, VerifyError::ProgramOutput { index: 2, .. })),
        (
            |p| {
                p.buffers.push(tt(DType::F32, &["3"]));
                p.outputs.push(ValueRef::Buffer(2));
            },
            |e| matches!(e, VerifyError::ProgramOutput { index: 2, reason: "is a buffer no launch writes", .. }),
        ),
        (
            |p| p.buffers.push(tt(DType::F32, &["1", "1", "1", "1", "1", "1", "1", "1", "1"])),
            |e| matches!(e, VerifyError::Buffer { index: 2, .. }),
        ),
    ];
    for (k, (breaks, check)) in cases.into_iter().enumerate() {
        let mut p = program();
        breaks(&mut p);
        match verify_program(&p) {
            Ok(()) => panic!("case {k} accepted"),
            Err(e) => assert!(check(&e), "case {k}: {e}"),
        }
    }
}
