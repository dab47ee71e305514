//! The issue's "done when" cases: each becomes the expected kernels and computes what the
//! original computes on the interpreter.

use tcc_ir::{BinaryOp, DType, Graph, KernelClass, Op, ReduceOp, Shape, TensorType, UnaryOp, ValueRef};
use tcc_passes::{OptimizeOptions, TargetModel, optimize};

use crate::common::*;

/// Optimizes for the CPU and for sm_90a; checks both numerically and returns the kernel classes.
fn classes(g: &Graph) -> Vec<KernelClass> {
    let gpu = optimize_checked_for(g, TargetModel::sm_90a());
    let cpu = optimize_checked(g);
    let kinds = |o: &tcc_passes::Optimized| o.program.launches.iter().map(|l| l.kernel.class).collect::<Vec<_>>();
    assert_eq!(kinds(&cpu), kinds(&gpu), "{}\n{}", cpu.report, gpu.report);
    kinds(&cpu)
}

fn softmax_graph(rows: u64, cols: u64, axis: usize) -> Graph {
    let mut b = B::new("softmax");
    let x = b.param("x", f32t(&[rows, cols]));
    let y = b.softmax(x, axis);
    b.out(&[y])
}

#[test]
fn softmax_last_axis_is_one_row_kernel() {
    assert_eq!(classes(&softmax_graph(8, 16, 1)), [KernelClass::RowReduction]);
}

#[test]
fn softmax_axis_0_is_one_kernel() {
    assert_eq!(classes(&softmax_graph(8, 16, 0)).len(), 1);
}

#[test]
fn softmax_of_scaled_input_is_one_kernel() {
    let mut b = B::new("scaled_softmax");
    let x = b.param("x", f32t(&[8, 16]));
    let s = b.konst(0.125, DType::F32);
    let xs = b.bin(BinaryOp::Mul, x, s);
    let y = b.softmax(xs, 1);
    assert_eq!(classes(&b.out(&[y])), [KernelClass::RowReduction]);
}

#[test]
fn softmax_of_masked_input_is_one_kernel() {
    for mask_shape in [&[8u64, 16][..], &[16][..]] {
        let mut b = B::new("masked_softmax");
        let x = b.param("x", f32t(&[8, 16]));
        let mask = b.param("mask", f32t(mask_shape));
        let xm = b.bin(BinaryOp::Add, x, mask);
        let y = b.softmax(xm, 1);
        assert_eq!(classes(&b.out(&[y])), [KernelClass::RowReduction]);
    }
}

fn layernorm(dtype: DType) -> Graph {
    let mut b = B::new("layernorm");
    let x = b.param("x", ty(dtype, &[8, 32]));
    let gamma = b.param("gamma", ty(dtype, &[32]));
    let beta = b.param("beta", ty(dtype, &[32]));
    let mean = b.reduce(ReduceOp::Mean, x, &[1], true);
    let xc = b.bin(BinaryOp::Sub, x, mean);
    let sq = b.bin(BinaryOp::Mul, xc, xc);
    let var = b.reduce(ReduceOp::Mean, sq, &[1], true);
    let eps = b.konst(1e-5, dtype);
    let ve = b.bin(BinaryOp::Add, var, eps);
    let r = b.un(UnaryOp::Rsqrt, ve);
    let n = b.bin(BinaryOp::Mul, xc, r);
    let s = b.bin(BinaryOp::Mul, n, gamma);
    let y = b.bin(BinaryOp::Add, s, beta);
    b.out(&[y])
}

#[test]
fn layernorm_is_one_row_kernel() {
    assert_eq!(classes(&layernorm(DType::F32)), [KernelClass::RowReduction]);
    assert_eq!(classes(&layernorm(DType::F16)), [KernelClass::RowReduction]);
}

#[test]
fn rmsnorm_is_one_row_kernel() {
    let mut b = B::new("rmsnorm");
    let x = b.param("x", f32t(&[8, 32]));
    let gamma = b.param("gamma", f32t(&[32]));
    let sq = b.bin(BinaryOp::Mul, x, x);
    let ms = b.reduce(ReduceOp::Mean, sq, &[1], true);
    let eps = b.konst(1e-6, DType::F32);
    let me = b.bin(BinaryOp::Add, ms, eps);
    let r = b.un(UnaryOp::Rsqrt, me);
    let n = b.bin(BinaryOp::Mul, x, r);
    let y = b.bin(BinaryOp::Mul, n, gamma);
    assert_eq!(classes(&b.out(&[y])), [KernelClass::RowReduction]);
}

#[test]
fn relu_of_linear_is_one_matmul_kernel() {
    for dtype in [DType::F32, DType::F16] {
        let mut b = B::new("linear_relu");
        let x = b.param("x", ty(dtype, &[16, 32]));
        let w = b.param("w", ty(dtype, &[32, 24]));
        let bias = b.param("b", ty(dtype, &[24]));
        let mm = b.matmul(x, w);
        let a = b.bin(BinaryOp::Add, mm, bias);
        let y = b.un(UnaryOp::Relu, a);
        assert_eq!(classes(&b.out(&[y])), [KernelClass::MatMul]);
    }
}

#[test]
fn gelu_of_linear_plus_residual_is_one_matmul_kernel() {
    let mut b = B::new("linear_gelu_residual");
    let x = b.param("x", f32t(&[16, 32]));
    let w = b.param("w", f32t(&[32, 24]));
    let bias = b.param("b", f32t(&[24]));
    let r = b.param("r", f32t(&[16, 24]));
    let mm = b.matmul(x, w);
    let a = b.bin(BinaryOp::Add, mm, bias);
    let gl = b.un(UnaryOp::Gelu, a);
    let y = b.bin(BinaryOp::Add, gl, r);
    let out = optimize_checked(&b.out(&[y]));
    assert_eq!(out.program.launches.len(), 1, "{}", out.report);
    let k = &out.report.kernels[0];
    assert_eq!(k.ops, ["matmul", "add", "gelu", "add"]);
    assert!(k.rules.iter().any(|r| r == "fuse-matmul-epilogue"), "{:?}", k.rules);
}

/// The suite's gemm_bias_gelu at 4096³: the epilogue is charged once per output element, not once
/// per tile load like a prologue, so every target fuses bias and gelu into the matmul.
#[test]
fn large_gemm_with_bias_and_gelu_is_one_matmul_kernel_on_every_target() {
    let n = 4096;
    for target in [TargetModel::cpu_host(), TargetModel::cpu_llvm(), TargetModel::sm_80(), TargetModel::sm_90a()] {
        for dtype in [DType::F16, DType::F32] {
            let mut b = B::new("gemm_bias_gelu");
            let x = b.param("a", ty(dtype, &[n, n]));
            let w = b.param("b", ty(dtype, &[n, n]));
            let bias = b.param("bias", ty(dtype, &[n]));
            let mm = b.matmul(x, w);
            let a = b.bin(BinaryOp::Add, mm, bias);
            let y = b.un(UnaryOp::Gelu, a);
            let out = optimize(&b.out(&[y]), &OptimizeOptions::new(target.clone())).unwrap();
            assert_eq!(out.program.launches.len(), 1, "{:?} {dtype:?}: {}", target.tier(), out.report);
            assert_eq!(out.report.kernels[0].ops, ["matmul", "add", "gelu"]);
        }
    }
}

#[test]
fn double_transpose_is_no_op() {
    let mut b = B::new("tt");
    let x = b.param("x", f32t(&[4, 6]));
    let t = b.t(x);
    let tt = b.t(t);
    let out = optimize_checked(&b.out(&[tt]));
    assert!(out.program.launches.is_empty(), "{}", out.report);
    assert_eq!(out.program.outputs, [ValueRef::Param(0)]);
}

#[test]
fn transposed_matmul_feeding_a_matmul_leaves_no_transpose_kernel() {
    // Both shapes: one where transposing the operands is cheaper, one where it is not.
    for (m, k, n) in [(16u64, 8u64, 16u64), (4, 32, 4)] {
        let mut b = B::new("mm_t_mm");
        let x = b.param("x", f32t(&[m, k]));
        let w = b.param("w", f32t(&[k, n]));
        let v = b.param("v", f32t(&[m, 8]));
        let mm = b.matmul(x, w);
        let t = b.t(mm);
        let y = b.matmul(t, v);
        let g = b.out(&[y]);
        let out = optimize_checked(&g);
        let transposes = out
            .program
            .launches
            .iter()
            .filter(|l| l.kernel.graph.nodes.iter().all(|n| matches!(n.op, Op::Input { .. } | Op::Permute { .. })))
            .count();
        assert_eq!(transposes, 0, "{}", out.report);
        assert!(out.program.launches.iter().all(|l| l.kernel.class == KernelClass::MatMul), "{}", out.report);
    }
}

#[test]
fn symbolic_dims_are_optimized() {
    let mut b = B::new("sym");
    let t = TensorType { dtype: DType::F32, shape: Shape(vec![tcc_ir::Dim::Var("M".into()), tcc_ir::Dim::Const(16)]) };
    let x = b.param("x", t);
    let y = b.softmax(x, 1);
    let g = b.out(&[y]);
    let out = tcc_passes::optimize(&g, &tcc_passes::OptimizeOptions::default()).unwrap();
    tcc_ir::verify::verify_program(&out.program).unwrap();
    assert_eq!(out.program.launches.len(), 1);
}

#[test]
fn transformer_block_fuses_and_computes_the_same() {
    use crate::transformer::{Dims, op_count, transformer_block};
    let g = transformer_block(Dims { heads: 2, seq: 8, head_dim: 4, ff: 16, dtype: DType::F32 });
    tcc_ir::verify::verify(&g).unwrap();
    for target in [TargetModel::cpu_host(), TargetModel::sm_90a()] {
        let out = optimize_checked_for(&g, target);
        assert!(out.program.launches.len() * 2 < op_count(&g), "{}", out.report);
    }
}

#[test]
fn layernorm_of_residual_sum_is_one_kernel() {
    let mut b = B::new("ln_residual");
    let x = b.param("x", f32t(&[8, 32]));
    let a = b.param("a", f32t(&[8, 32]));
    let h = b.bin(BinaryOp::Add, x, a);
    let mean = b.reduce(ReduceOp::Mean, h, &[1], true);
    let xc = b.bin(BinaryOp::Sub, h, mean);
    let sq = b.bin(BinaryOp::Mul, xc, xc);
    let var = b.reduce(ReduceOp::Mean, sq, &[1], true);
    let eps = b.konst(1e-5, DType::F32);
    let ve = b.bin(BinaryOp::Add, var, eps);
    let r = b.un(UnaryOp::Rsqrt, ve);
    let y = b.bin(BinaryOp::Mul, xc, r);
    let out = optimize_checked(&b.out(&[y, h]));
    assert_eq!(out.program.launches.len(), 2, "{}", out.report);
}

#[test]
fn layernorm_of_matmul_residual_with_residual_output_is_one_kernel() {
    let mut b = B::new("ln2");
    let x = b.param("x", f32t(&[8, 8]));
    let a = b.param("a", f32t(&[8, 8]));
    let wo = b.param("wo", f32t(&[8, 8]));
    let bo = b.param("bo", f32t(&[8]));
    let g = b.param("g", f32t(&[8]));
    let be = b.param("be", f32t(&[8]));
    let mm = b.matmul(a, wo);
    let o = b.bin(BinaryOp::Add, mm, bo);
    let h = b.bin(BinaryOp::Add, x, o);
    let mean = b.reduce(ReduceOp::Mean, h, &[1], true);
    let xc = b.bin(BinaryOp::Sub, h, mean);
    let sq = b.bin(BinaryOp::Mul, xc, xc);
    let var = b.reduce(ReduceOp::Mean, sq, &[1], true);
    let eps = b.konst(1e-5, DType::F32);
    let ve = b.bin(BinaryOp::Add, var, eps);
    let r = b.un(UnaryOp::Rsqrt, ve);
    let y = b.bin(BinaryOp::Mul, xc, r);
    let y = b.bin(BinaryOp::Mul, y, g);
    let y = b.bin(BinaryOp::Add, y, be);
    let z = b.bin(BinaryOp::Add, y, h);
    let out = optimize_checked(&b.out(&[z]));
    // The matmul, then one row kernel recomputing the residual sum for both of its uses.
    let classes: Vec<KernelClass> = out.program.launches.iter().map(|l| l.kernel.class).collect();
    assert_eq!(classes, [KernelClass::MatMul, KernelClass::RowReduction], "{}", out.report);
}

#[test]
fn a_tiny_budget_still_gives_a_correct_program() {
    let g = layernorm(DType::F32);
    for budget in [
        tcc_passes::Budget { max_nodes: 1, ..Default::default() },
        tcc_passes::Budget { max_iterations: 1, ..Default::default() },
        tcc_passes::Budget { time_limit: std::time::Duration::ZERO, ..Default::default() },
    ] {
        let opts = tcc_passes::OptimizeOptions { budget, ..tcc_passes::OptimizeOptions::default() };
        let out = tcc_passes::optimize(&g, &opts).unwrap();
        assert_ne!(out.report.stop_reason, tcc_passes::StopReason::Saturated, "{}", out.report);
        tcc_ir::verify::verify_program(&out.program).unwrap();
        check_program(&g, &out.program);
    }
}

#[test]
fn the_report_explains_each_fusion_and_draws_the_kernel_graph() {
    let out = optimize_checked(&softmax_graph(8, 16, 1));
    let text = out.report.to_string();
    assert!(text.contains("row-reduction"), "{text}");
    assert!(text.contains("formed by: "), "{text}");
    assert!(text.contains("fuse-reductions"), "{text}");
    assert!(text.contains("-bound"), "{text}");
    let dot = out.report.to_dot();
    assert!(dot.starts_with("digraph"), "{dot}");
    assert!(dot.contains("\"x\" -> \"k0_max_sub_exp_sum_div\""), "{dot}");
}

#[test]
fn lower_unfused_is_one_kernel_per_op_and_correct() {
    let g = layernorm(DType::F32);
    let p = tcc_passes::lower_unfused(&g);
    tcc_ir::verify::verify_program(&p).unwrap();
    let ops = g.nodes.iter().filter(|n| !matches!(n.op, Op::Input { .. })).count();
    assert_eq!(p.launches.len(), ops);
    check_program(&g, &p);
}

#[test]
fn egg_explanations_name_the_fusion_rules() {
    let g = softmax_graph(8, 16, 1);
    let opts = tcc_passes::OptimizeOptions { explain: true, ..tcc_passes::OptimizeOptions::default() };
    let out = tcc_passes::optimize(&g, &opts).unwrap();
    check_program(&g, &out.program);
    let proof = out.report.kernels[0].explanation.clone().unwrap();
    assert!(proof.iter().any(|r| r == "kernel-seed"), "{proof:?}");
    assert!(proof.iter().any(|r| r.starts_with("fuse-")), "{proof:?}");
    assert!(out.report.to_string().contains("egg explanation: "), "{}", out.report);
    // Explanations do not change the result.
    let plain = tcc_passes::optimize(&g, &tcc_passes::OptimizeOptions::default()).unwrap();
    assert_eq!(plain.program, out.program);
}

#[test]
fn explaining_a_long_chain_gives_every_kernel_a_proof() {
    // About 360 ops: explaining them flattened egg's proofs into trees that grow exponentially with
    // the depth (more than a minute for 100 ops); proofs are now walked as DAGs.
    let g = crate::chain::let_chain(180);
    let opts = tcc_passes::OptimizeOptions { explain: true, ..tcc_passes::OptimizeOptions::default() };
    let out = optimize(&g, &opts).unwrap();
    check_program(&g, &out.program);
    assert!(out.report.kernels.len() > 10, "{}", out.report);
    for k in &out.report.kernels {
        let proof = k.explanation.as_ref().unwrap_or_else(|| panic!("{} has no proof", k.name));
        assert!(proof.iter().any(|r| r == "kernel-seed"), "{}: {proof:?}", k.name);
    }
}
