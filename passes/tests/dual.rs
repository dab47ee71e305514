//! The dual-product rewrite (`fuse-shared-operand`): on the GPU targets a gated product
//! `silu(x @ g) * (x @ u)` (random sizes, 1 and sizes off every tile included, f16 and bf16, B
//! stored either way, batched or not, silu in the dtype or in f32 as Llama writes it) becomes a
//! program that computes what the original computes on the interpreter; where it pays it is one
//! matmul kernel holding both products. The CPU targets and f32 products never form one.

use proptest::prelude::*;
use tcc_ir::interp::{run_graph, run_program};
use tcc_ir::testing::{Tolerance, compare_outputs, dual_gemm_graph, random_inputs};
use tcc_ir::{BinaryOp, Bindings, DType, Graph, KernelClass, Op, Shape, TensorType, UnaryOp};
use tcc_passes::{OptimizeOptions, Optimized, TargetModel, optimize};

fn fail(e: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}

/// Llama's gated MLP product: `cast(silu(cast(x @ gᵀ, f32)), dtype) * (x @ uᵀ)`, weights `[n, k]`.
fn llama_gate(dtype: DType, (m, n, k): (u64, u64, u64)) -> Graph {
    let t = |d: DType, dims: &[u64]| TensorType { dtype: d, shape: Shape::from_consts(dims) };
    let mut g = Graph::new("gate");
    let x = g.add_param("x", t(dtype, &[m, k])).unwrap();
    let mut products = Vec::new();
    for name in ["gate", "up"] {
        let w = g.add_param(name, t(dtype, &[n, k])).unwrap();
        let wt = g.push(Op::Permute { input: w, perm: vec![1, 0] }).unwrap();
        products.push(g.push(Op::MatMul(x, wt)).unwrap());
    }
    let gf = g.push_typed(Op::Cast(products[0]), t(DType::F32, &[m, n])).unwrap();
    let sig = g.push(Op::Unary(UnaryOp::Sigmoid, gf)).unwrap();
    let silu = g.push(Op::Binary(BinaryOp::Mul, gf, sig)).unwrap();
    let silu = g.push_typed(Op::Cast(silu), t(dtype, &[m, n])).unwrap();
    let y = g.push(Op::Binary(BinaryOp::Mul, silu, products[1])).unwrap();
    g.outputs.push(y);
    g
}

/// The number of kernels holding both products, and the program's kernel count.
fn dual_kernels(out: &Optimized) -> (usize, usize) {
    let products = |k: &tcc_ir::Kernel| k.graph.nodes.iter().filter(|n| matches!(n.op, Op::MatMul(..))).count();
    let kernels: Vec<_> = out.program.launches.iter().map(|l| &l.kernel).collect();
    (kernels.iter().filter(|k| products(k) == 2 && k.class == KernelClass::MatMul).count(), kernels.len())
}

/// Optimizes `g` for `target` and compares the program with the graph on the interpreter.
fn check(g: &Graph, target: TargetModel, seed: u64) -> Result<Optimized, TestCaseError> {
    let out = optimize(g, &OptimizeOptions::new(target)).map_err(fail)?;
    tcc_ir::verify::verify_program(&out.program).map_err(fail)?;
    let inputs = random_inputs(g, &Bindings::new(), seed).map_err(fail)?;
    let expected = run_graph(g, &inputs).map_err(fail)?;
    let actual = run_program(&out.program, &inputs).map_err(fail)?;
    compare_outputs(&expected, &actual, &Tolerance::default()).map_err(|e| fail(format!("{e:?}\n{}", out.report)))?;
    Ok(out)
}

fn size() -> impl Strategy<Value = u64> {
    prop_oneof![Just(1u64), 1u64..40, Just(64), 65u64..100]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn gated_products_compute_what_the_program_computes(
        (m, n, k) in (size(), size(), size()),
        bf16 in any::<bool>(),
        nk in any::<bool>(),
        batched in any::<bool>(),
        llama in any::<bool>(),
        sm90 in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let dtype = if bf16 { DType::BF16 } else { DType::F16 };
        let g = if llama {
            llama_gate(dtype, (m, n, k))
        } else {
            dual_gemm_graph(dtype, if batched { &[2] } else { &[] }, (m, n, k), nk).map_err(fail)?
        };
        let target = if sm90 { TargetModel::sm_90a() } else { TargetModel::sm_80() };
        let out = check(&g, target, seed)?;
        // Whatever the cost model chose, no product is computed twice.
        let products: usize = out.program.launches.iter()
            .map(|l| l.kernel.graph.nodes.iter().filter(|n| matches!(n.op, Op::MatMul(..))).count())
            .sum();
        prop_assert_eq!(products, 2, "{}", out.report);
    }
}

#[test]
fn a_gated_product_is_one_kernel_on_sm_80_formed_by_the_rule() {
    for dtype in [DType::F16, DType::BF16] {
        for (m, n, k) in [(512, 1024, 512), (77, 130, 48), (1, 8, 16)] {
            let out = check(&llama_gate(dtype, (m, n, k)), TargetModel::sm_80(), 3).unwrap();
            assert_eq!(dual_kernels(&out), (1, 1), "{}", out.report);
            let k = &out.report.kernels[0];
            assert!(k.rules.iter().any(|r| r == "fuse-shared-operand"), "{}", out.report);
        }
    }
}

#[test]
fn the_gated_mlp_at_4096_tokens_is_one_ping_pong_kernel_on_sm_90a() {
    // Llama-3-8B's MLP at 4096 tokens: large enough for the dual product's measured default,
    // consumers taking turns on alternate 64-row tiles (`tcc_ir::dual::untuned_warpgroup`).
    let g = llama_gate(DType::BF16, (4096, 14336, 4096));
    let out = optimize(&g, &OptimizeOptions::new(TargetModel::sm_90a())).unwrap();
    assert_eq!(dual_kernels(&out), (1, 1), "{}", out.report);
    let schedule = &out.program.launches[0].kernel.schedule;
    let w = tcc_ir::WgmmaSchedule::decode(schedule).unwrap();
    assert!(w.pingpong && w.producer && w.tma && w.bn == 256, "{w:?}");
}

#[test]
fn cpu_targets_and_f32_products_keep_their_products_apart() {
    let f32_gate = dual_gemm_graph(DType::F32, &[], (64, 64, 64), true).unwrap();
    let out = check(&f32_gate, TargetModel::sm_80(), 1).unwrap();
    assert_eq!(dual_kernels(&out).0, 0, "{}", out.report);
    for target in [TargetModel::cpu_host(), TargetModel::cpu_llvm()] {
        let out = check(&llama_gate(DType::BF16, (64, 64, 64)), target, 1).unwrap();
        assert_eq!(dual_kernels(&out).0, 0, "{}", out.report);
    }
}

#[test]
fn products_of_different_operands_are_not_dual() {
    let t = |dims: &[u64]| TensorType { dtype: DType::F16, shape: Shape::from_consts(dims) };
    let mut g = Graph::new("two");
    let (x, y) = (g.add_param("x", t(&[64, 64])).unwrap(), g.add_param("y", t(&[64, 64])).unwrap());
    let w = g.add_param("w", t(&[64, 64])).unwrap();
    let p = g.push(Op::MatMul(x, w)).unwrap();
    let q = g.push(Op::MatMul(y, w)).unwrap();
    let r = g.push(Op::Binary(BinaryOp::Mul, p, q)).unwrap();
    g.outputs.push(r);
    let out = check(&g, TargetModel::sm_80(), 2).unwrap();
    assert_eq!(dual_kernels(&out).0, 0, "{}", out.report);
}
