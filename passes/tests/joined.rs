//! Sibling products (`join-sibling-products`): products of one left operand whose values are
//! only moved (a layer's Q, K and V projections split into heads) become one product of their
//! weights joined along the columns on the GPUs, whose GEMMs read each weight in place, and
//! their consumers read its columns; the optimized program computes what the original
//! does, on both GPU targets and at a decode step's few rows. Never on the CPUs, and never for
//! products that meet in an epilogue (a dual product).

use proptest::prelude::*;
use tcc_ir::interp::{run_graph, run_program};
use tcc_ir::testing::{Tolerance, compare_outputs, random_inputs};
use tcc_ir::{Bindings, DType, Dim, Graph, KernelClass, Op, Shape, TensorType};
use tcc_passes::{OptimizeOptions, Optimized, TargetModel, optimize};

/// `x @ w_i.t()` for each weight, reshaped to `[S, heads, 128]` and permuted to heads first.
fn projections(rows: Dim, hidden: u64, heads: &[u64]) -> Graph {
    projections_of(rows, hidden, heads, 128)
}

/// [`projections`] with heads of `head_dim` columns.
fn projections_of(rows: Dim, hidden: u64, heads: &[u64], head_dim: u64) -> Graph {
    let t = |dims: Vec<Dim>| TensorType { dtype: DType::BF16, shape: Shape(dims) };
    let c = Dim::Const;
    let mut g = Graph::new("qkv");
    let x = g.add_param("x", t(vec![rows.clone(), c(hidden)])).unwrap();
    for (i, &h) in heads.iter().enumerate() {
        let w = g.add_param(format!("w{i}"), t(vec![c(h * head_dim), c(hidden)])).unwrap();
        let wt = g.push(Op::Permute { input: w, perm: vec![1, 0] }).unwrap();
        let y = g.push(Op::MatMul(x, wt)).unwrap();
        let split = g.push_typed(Op::Reshape(y), t(vec![rows.clone(), c(h), c(head_dim)])).unwrap();
        let heads_first = g.push(Op::Permute { input: split, perm: vec![1, 0, 2] }).unwrap();
        g.outputs.push(heads_first);
    }
    g
}

fn optimized(g: &Graph, target: TargetModel, s: u64) -> Optimized {
    let mut opts = OptimizeOptions::new(target);
    opts.bindings = [("S".to_string(), s)].into_iter().collect();
    opts.explain = true;
    optimize(g, &opts).unwrap()
}

/// The matmul kernels: how many, and how many join several weights.
fn products(out: &Optimized) -> (usize, usize) {
    let matmuls: Vec<_> = out.program.launches.iter().filter(|l| l.kernel.class == KernelClass::MatMul).collect();
    let joined = matmuls.iter().filter(|l| l.kernel.graph.nodes.iter().any(|n| matches!(n.op, Op::Concat { .. })));
    (matmuls.len(), joined.count())
}

#[test]
fn a_layers_projections_are_one_product_on_sm_90a_and_compute_the_same() {
    let g = projections(Dim::Var("S".into()), 512, &[4, 2, 2]);
    let out = optimized(&g, TargetModel::sm_90a(), 4096);
    assert_eq!(products(&out), (1, 1), "{}", out.report);
    assert!(out.report.kernels.iter().any(|k| k.rules.iter().any(|r| r == "join-sibling-products")), "{}", out.report);
    // The program at a size the interpreter runs quickly (the same kernels, S bound at run time).
    let bindings: Bindings = [("S".to_string(), 40u64)].into_iter().collect();
    let inputs = random_inputs(&g, &bindings, 3).unwrap();
    let expected = run_graph(&g, &inputs).unwrap();
    let actual = run_program(&out.program, &inputs).unwrap();
    compare_outputs(&expected, &actual, &Tolerance::default()).unwrap();
}

#[test]
fn the_gpus_join_at_every_size_and_the_cpus_never() {
    let g = projections(Dim::Var("S".into()), 512, &[4, 2, 2]);
    for target in [TargetModel::cpu_host(), TargetModel::cpu_llvm()] {
        let out = optimized(&g, target, 4096);
        assert_eq!(products(&out), (3, 0), "{}", out.report);
    }
    // sm_80's mma.sync tiles and a decode step's skinny tiles read each weight chunk by chunk.
    for (target, s) in [(TargetModel::sm_80(), 4096), (TargetModel::sm_90a(), 16), (TargetModel::sm_80(), 16)] {
        let out = optimized(&g, target, s);
        assert_eq!(products(&out), (1, 1), "S={s}: {}", out.report);
        let bindings: Bindings = [("S".to_string(), 16u64)].into_iter().collect();
        let inputs = random_inputs(&g, &bindings, 5).unwrap();
        let expected = run_graph(&g, &inputs).unwrap();
        compare_outputs(&expected, &run_program(&out.program, &inputs).unwrap(), &Tolerance::default()).unwrap();
    }
    // Weights whose rows are no multiple of 256 (a warpgroup tile could straddle two) are never
    // joined.
    let odd = projections(Dim::Var("S".into()), 512, &[3, 2]);
    assert_eq!(products(&optimized(&odd, TargetModel::sm_90a(), 4096)).1, 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random sibling projections (two to four, heads of 64 or 128 columns, so some weights are
    /// no multiple of 256 rows), depths that are and are not multiples of 8, rows from 1: on
    /// either GPU at either size, the optimized program computes the original, and every joined
    /// product joins weights of whole multiples of 256 rows read as transposes.
    #[test]
    fn joined_or_not_the_program_is_the_original(
        heads in prop::collection::vec(1u64..5, 2..5),
        head_dim in prop_oneof![Just(64u64), Just(128)],
        hidden in prop_oneof![Just(8u64), Just(64), Just(72), Just(36)],
        rows in prop_oneof![Just(1u64), 2u64..40],
        sm_90a in any::<bool>(),
        long in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let g = projections_of(Dim::Var("S".into()), hidden, &heads, head_dim);
        let target = if sm_90a { TargetModel::sm_90a() } else { TargetModel::sm_80() };
        let out = optimized(&g, target, if long { 4096 } else { 16 });
        for l in &out.program.launches {
            if let Some(Op::Concat { inputs, .. }) = l.kernel.graph.nodes.iter().map(|n| &n.op).find(|op| matches!(op, Op::Concat { .. })) {
                for &i in inputs {
                    let ty = &l.kernel.graph.nodes[i.index()].ty;
                    prop_assert!(ty.shape.0.last().and_then(Dim::as_const).is_some_and(|n| n % 256 == 0), "{}", out.report);
                    prop_assert!(matches!(l.kernel.graph.nodes[i.index()].op, Op::Permute { .. }), "{}", out.report);
                }
                prop_assert!(hidden % 8 == 0, "{}", out.report);
            }
        }
        let bindings: Bindings = [("S".to_string(), rows)].into_iter().collect();
        let inputs = random_inputs(&g, &bindings, seed).unwrap();
        let expected = run_graph(&g, &inputs).unwrap();
        let actual = run_program(&out.program, &inputs).unwrap();
        prop_assert!(compare_outputs(&expected, &actual, &Tolerance::default()).is_ok(), "{}", out.report);
    }
}
