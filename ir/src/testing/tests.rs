//! The generator's graphs are well typed, run on the interpreter, cover every op kind and dtype, and
//! shrink; inputs are deterministic; comparisons honour their tolerances.

use std::collections::BTreeSet;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestError, TestRng, TestRunner};

use super::*;
use crate::infer::{check_declared, infer};
use crate::op::{Op, UnaryOp};

fn sample(cfg: GenConfig, n: usize) -> Vec<GeneratedProgram> {
    let mut runner = TestRunner::deterministic();
    let strategy = arb_graph(cfg);
    (0..n).map(|_| strategy.new_tree(&mut runner).unwrap().current()).collect()
}

/// Checks every node's type against the type rules, operand order, outputs, bindings and sizes.
fn check_well_typed(p: &GeneratedProgram, cfg: &GenConfig) -> Result<(), String> {
    let g = &p.graph;
    if g.outputs.is_empty() {
        return Err("no outputs".into());
    }
    for (i, node) in g.nodes.iter().enumerate() {
        if node.op.operands().iter().any(|o| o.index() >= i) {
            return Err(format!("node {i} uses a later node"));
        }
        match node.op {
            Op::Cast(_) | Op::Broadcast(_) | Op::Reshape(_) | Op::Constant { .. } => {
                check_declared(g, &node.op, &node.ty).map_err(|e| format!("node {i}: {e}"))?;
            }
            _ => {
                let ty = infer(g, &node.op).map_err(|e| format!("node {i}: {e}"))?;
                if ty != node.ty {
                    return Err(format!("node {i}: declared {} but infers {ty}", node.ty));
                }
            }
        }
        let dims = node.ty.shape.resolve(&p.bindings).ok_or(format!("node {i}: unbound shape {}", node.ty.shape))?;
        if dims.len() > cfg.max_rank || dims.iter().product::<usize>() as u64 > cfg.max_elements {
            return Err(format!("node {i}: {} is beyond the configured sizes", node.ty));
        }
    }
    for v in g.shape_vars() {
        if !p.bindings.contains_key(&v) {
            return Err(format!("variable {v} has no binding"));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn generated_graphs_are_well_typed_and_run(p in arb_graph(GenConfig::default()), seed in any::<u64>()) {
        check_well_typed(&p, &GenConfig::default()).map_err(TestCaseError::fail)?;
        let inputs = p.random_inputs(seed).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let outputs = crate::interp::run_graph(&p.graph, &inputs).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(outputs.len(), p.graph.outputs.len());
        for (out, id) in outputs.iter().zip(&p.graph.outputs) {
            let ty = p.graph.ty(*id).unwrap();
            prop_assert_eq!(out.dtype, ty.dtype);
            prop_assert_eq!(Some(out.shape.clone()), ty.shape.resolve(&p.bindings));
        }
    }

    #[test]
    fn presets_stay_within_their_subsets(
        f in arb_graph(GenConfig::float_only()),
        pw in arb_graph(GenConfig::pointwise_only()),
        lc in arb_graph(GenConfig::long_chains()),
    ) {
        check_well_typed(&f, &GenConfig::float_only()).map_err(TestCaseError::fail)?;
        check_well_typed(&pw, &GenConfig::pointwise_only()).map_err(TestCaseError::fail)?;
        check_well_typed(&lc, &GenConfig::long_chains()).map_err(TestCaseError::fail)?;
        prop_assert!(f.graph.nodes.iter().all(|n| n.ty.dtype.is_float()));
        let reduces = |n: &crate::graph::Node| matches!(n.op, Op::Reduce { .. } | Op::MatMul(..));
        prop_assert!(!pw.graph.nodes.iter().any(reduces), "a pointwise graph reduces");
        let inputs = lc.random_inputs(1).map_err(|e| TestCaseError::fail(e.to_string()))?;
        crate::interp::run_graph(&lc.graph, &inputs).map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
}

#[test]
fn five_hundred_graphs_cover_every_op_kind_and_dtype() {
    let programs = sample(GenConfig::default(), 500);
    let graphs: Vec<Graph> = programs.iter().map(|p| p.graph.clone()).collect();
    let cov = coverage(&graphs);
    let kinds: BTreeSet<&str> = cov.keys().map(|(k, _)| k.as_str()).collect();
    let dtypes: BTreeSet<DType> = cov.keys().map(|(_, d)| *d).collect();
    let mut expected: Vec<String> = ["input", "const", "cast", "select", "broadcast", "reshape", "permute", "slice"]
        .into_iter()
        .chain(["concat", "matmul"])
        .map(String::from)
        .collect();
    expected.extend(UnaryOp::ALL.iter().map(|u| u.name().to_string()));
    expected.extend(crate::op::BinaryOp::ALL.iter().map(|b| b.name().to_string()));
    expected.extend(crate::op::CompareOp::ALL.iter().map(|c| c.name().to_string()));
    expected.extend(crate::op::ReduceOp::ALL.iter().map(|r| format!("reduce_{}", r.name())));
    for kind in &expected {
        assert!(kinds.contains(kind.as_str()), "no `{kind}` in 500 graphs: {kinds:?}");
    }
    assert_eq!(dtypes, DType::ALL.into_iter().collect());
    // i32 and bool results of arithmetic and selects, not only of parameters.
    for (kind, dtype) in [("add", DType::I32), ("select", DType::Bool), ("reduce_sum", DType::I32), ("eq", DType::Bool)]
    {
        assert!(cov.contains_key(&(kind.to_string(), dtype)), "no {kind} of {dtype}");
    }
    let long = programs.iter().filter(|p| p.graph.nodes.len() >= 50).count();
    let multi = programs.iter().filter(|p| p.graph.outputs.len() > 1).count();
    let vars = programs.iter().filter(|p| !p.bindings.is_empty()).count();
    let batched = graphs
        .iter()
        .filter(|g| g.nodes.iter().any(|n| matches!(n.op, Op::MatMul(..)) && n.ty.shape.rank() > 2))
        .count();
    let keepdim =
        graphs.iter().filter(|g| g.nodes.iter().any(|n| matches!(n.op, Op::Reduce { keepdim: true, .. }))).count();
    assert!(long >= 25, "{long} graphs of 50+ ops");
    assert!(multi >= 25, "{multi} graphs with several outputs");
    assert!(vars >= 25, "{vars} graphs with shape variables");
    assert!(batched >= 10, "{batched} graphs with batched matmul");
    assert!(keepdim >= 25, "{keepdim} graphs with keepdim reductions");
}

#[test]
fn values_are_mostly_finite_but_nan_and_inf_occur() {
    let programs = sample(GenConfig::default(), 150);
    let (mut all_finite, mut special) = (0, 0);
    for (i, p) in programs.iter().enumerate() {
        let outputs = crate::interp::run_graph(&p.graph, &p.random_inputs(i as u64).unwrap()).unwrap();
        let values = || outputs.iter().flat_map(|t| t.data.iter());
        if values().all(|v| v.is_finite()) {
            all_finite += 1;
        }
        if values().any(|v| !v.is_finite()) {
            special += 1;
        }
    }
    assert!(all_finite * 10 >= programs.len() * 6, "only {all_finite} of {} programs are all finite", programs.len());
    assert!(special >= 5, "only {special} programs produce NaN or inf");
}

#[test]
fn failing_programs_shrink_to_a_few_nodes() {
    // Properties that fail on any graph holding some op shrink to that op and little else.
    type Holds = fn(&Op) -> bool;
    let properties: [(&str, Holds); 4] = [
        ("matmul", |o| matches!(o, Op::MatMul(..))),
        ("concat", |o| matches!(o, Op::Concat { .. })),
        ("select", |o| matches!(o, Op::Select { .. })),
        ("reduce_mean", |o| matches!(o, Op::Reduce { op: crate::op::ReduceOp::Mean, .. })),
    ];
    for (name, holds) in properties {
        for seed in 0..3u8 {
            let config = Config { cases: 256, failure_persistence: None, ..Config::default() };
            let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]);
            let result = TestRunner::new_with_rng(config, rng).run(&arb_graph(GenConfig::default()), |p| {
                prop_assert!(!p.graph.nodes.iter().any(|n| holds(&n.op)));
                Ok(())
            });
            match result {
                Err(TestError::Fail(_, p)) => {
                    assert!(p.graph.nodes.len() <= 5, "{name}, seed {seed}: shrunk to {:?}", p.graph);
                }
                other => panic!("{name}, seed {seed}: expected a failure, got {other:?}"),
            }
        }
    }
}

#[test]
fn random_inputs_are_deterministic_nonzero_and_shaped() {
    let programs = sample(GenConfig::default(), 40);
    for p in &programs {
        let a = p.random_inputs(7).unwrap();
        assert_eq!(a, p.random_inputs(7).unwrap());
        for (t, param) in a.iter().zip(&p.graph.params) {
            assert_eq!(Some(t.shape.clone()), param.ty.shape.resolve(&p.bindings));
            assert_eq!(t.dtype, param.ty.dtype);
            match t.dtype {
                DType::Bool => assert!(t.data.iter().all(|&v| v == 0.0 || v == 1.0)),
                DType::I32 => assert!(t.data.iter().all(|&v| v != 0.0 && v.abs() <= 8.0 && v.fract() == 0.0)),
                d => assert!(t.data.iter().all(|&v| v != 0.0 && v.is_finite() && d.round(v) == v)),
            }
        }
    }
    let p = programs
        .iter()
        .find(|p| p.graph.params.iter().any(|x| x.ty.dtype == DType::F32 && x.ty.shape.rank() > 0))
        .unwrap();
    assert_ne!(p.random_inputs(1).unwrap(), p.random_inputs(2).unwrap());
    let mut unbound = p.clone();
    unbound.graph.params[0].ty.shape = crate::shape::Shape(vec![crate::shape::Dim::Var("Q".into())]);
    assert!(matches!(unbound.random_inputs(1), Err(InterpError::Unbound { .. })));
}

fn f32s(data: &[f64]) -> Tensor {
    Tensor::new(DType::F32, vec![data.len()], data.to_vec()).unwrap()
}

#[test]
fn compare_outputs_applies_bounds_and_matches_nan_and_inf() {
    let tol = Tolerance::default();
    let e = [f32s(&[1.0, f64::NAN, f64::INFINITY, 100.0])];
    assert_eq!(compare_outputs(&e, &[f32s(&[1.000_01, f64::NAN, f64::INFINITY, 100.005])], &tol), Ok(()));
    let err = compare_outputs(&e, &[f32s(&[1.0, 0.0, f64::INFINITY, 100.0])], &tol).unwrap_err();
    assert!(matches!(err, Mismatch::Value { output: 0, index: 1, bad: 1, total: 4, .. }), "{err}");
    let err = compare_outputs(&e, &[f32s(&[1.0, f64::NAN, f64::NEG_INFINITY, 100.0])], &tol).unwrap_err();
    assert!(matches!(err, Mismatch::Value { index: 2, .. }));
    let err = compare_outputs(&e, &[f32s(&[1.001, f64::NAN, f64::INFINITY, 100.0])], &tol).unwrap_err();
    assert!(err.to_string().contains("element 0"), "{err}");
    assert!(compare_outputs(&e, &[f32s(&[1.001, f64::NAN, f64::INFINITY, 100.0])], &tol.scaled(10.0)).is_ok());
    assert!(
        compare_outputs(
            &e,
            &[f32s(&[1.001, f64::NAN, f64::INFINITY, 100.0])],
            &Tolerance { outlier_fraction: 0.25, ..tol }
        )
        .is_ok()
    );
    assert_eq!(compare_outputs(&e, &[], &tol), Err(Mismatch::Count { expected: 1, actual: 0 }));
    let i = Tensor::new(DType::I32, vec![2], vec![1.0, 2.0]).unwrap();
    assert!(matches!(compare_outputs(&e, std::slice::from_ref(&i), &tol), Err(Mismatch::Type { output: 0, .. })));
    let j = Tensor::new(DType::I32, vec![2], vec![1.0, 3.0]).unwrap();
    assert!(matches!(compare_outputs(&[i], &[j], &tol), Err(Mismatch::Value { index: 1, .. })), "i32 is exact");
    assert_eq!(Tolerance::default().bound(DType::F16), Tolerance::default_for(DType::F16));
    assert!(!Tolerance::exact().f32.accepts(1.0, 1.000_001));
}

#[test]
fn generate_is_deterministic_per_seed_and_differs_between_seeds() {
    let cfg = GenConfig::default();
    let a = generate(&cfg, 42).unwrap();
    let b = generate(&cfg, 42).unwrap();
    assert_eq!(crate::text::print_graph(&a.graph), crate::text::print_graph(&b.graph));
    assert_eq!(a.bindings, b.bindings);
    let texts: BTreeSet<String> =
        (0..16).map(|s| crate::text::print_graph(&generate(&cfg, s).unwrap().graph)).collect();
    assert!(texts.len() >= 12, "only {} distinct programs in 16 seeds", texts.len());
}
