//! The attention rewrite's property test: random attention-shaped programs (every score form and
//! mask, grouped heads, lengths off any block, fully masked rows) are recognized by the matcher,
//! become exactly one attention kernel on the CPU (no product or reduction left outside it), and
//! the optimized program computes what the original computes on the interpreter. Then the online
//! softmax itself: an f64 model of the kernel's algorithm (blocks of keys, the running maximum and
//! sum, blocks skipped by the mask) agrees with the written formula for random block sizes,
//! including NaN exactly where the formula gives NaN.

use proptest::prelude::*;
use tcc_ir::attention::Attention;
use tcc_ir::interp::{run_graph, run_program};
use tcc_ir::testing::attention::{AttentionCase, arb_attention, online_softmax_product};
use tcc_ir::testing::{Tolerance, compare_outputs, random_inputs};
use tcc_ir::{Bindings, DType, KernelClass, Op};
use tcc_passes::{OptimizeOptions, TargetModel, optimize};

fn fail(e: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}

/// The optimizer forms one attention kernel that computes what the program computes.
fn check_rewrite(case: &AttentionCase, seed: u64, target: TargetModel) -> Result<(), TestCaseError> {
    let g = case.graph().map_err(fail)?;
    prop_assert!(Attention::find(&g).is_some(), "the matcher misses {case:?}");
    let out = optimize(&g, &OptimizeOptions::new(target)).map_err(fail)?;
    let kernels: Vec<_> = out.program.launches.iter().map(|l| &l.kernel).collect();
    let attention = kernels.iter().filter(|k| k.class == KernelClass::Attention).count();
    prop_assert_eq!(attention, 1, "{}", out.report);
    for k in kernels.iter().filter(|k| k.class != KernelClass::Attention) {
        let heavy = k.graph.nodes.iter().any(|n| matches!(n.op, Op::MatMul(..) | Op::Reduce { .. }));
        prop_assert!(!heavy, "a product or reduction outside the attention kernel:\n{}", out.report);
    }
    let inputs = random_inputs(&g, &Bindings::new(), seed).map_err(fail)?;
    let expected = run_graph(&g, &inputs).map_err(fail)?;
    let actual = run_program(&out.program, &inputs).map_err(fail)?;
    compare_outputs(&expected, &actual, &Tolerance::default()).map_err(|e| fail(format!("{e:?}\n{}", out.report)))?;
    Ok(())
}

/// The online softmax over blocks (with the mask's skipped blocks) against the written formula.
fn check_online(case: &AttentionCase, seed: u64, blocks: (usize, usize)) -> Result<(), TestCaseError> {
    let g = case.graph().map_err(fail)?;
    let a = Attention::find(&g).ok_or_else(|| fail("no attention"))?;
    let Op::MatMul(_, values) = g.nodes[a.output.index()].op else {
        return Err(fail("the output is not a product"));
    };
    let mut probe = g.clone();
    probe.outputs = vec![a.logits, values, a.normalized_output()];
    let inputs = random_inputs(&g, &Bindings::new(), seed).map_err(fail)?;
    let [logits, values, written] =
        run_graph(&probe, &inputs).map_err(fail)?.try_into().map_err(|_| fail("outputs"))?;
    let r = logits.shape.len();
    let (queries, keys, width) = (logits.shape[r - 2], logits.shape[r - 1], values.shape[r - 1]);
    let rows = logits.data.len() / keys.max(1);
    let model =
        online_softmax_product(&logits.data, &values.data, (rows, queries, keys, width), blocks, a.mask.as_ref());
    // The formula may round p (and the product) to f16/bf16; the model keeps f64.
    let tol = if case.dtype == DType::F32 { 1e-5 } else { 2e-2 };
    let scale = values.data.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    for (i, (m, w)) in model.iter().zip(&written.data).enumerate() {
        if w.is_nan() || m.is_nan() {
            prop_assert!(w.is_nan() && m.is_nan(), "element {i}: model {m}, formula {w} ({case:?}, blocks {blocks:?})");
            continue;
        }
        prop_assert!((m - w).abs() <= tol * scale, "element {i}: model {m}, formula {w} ({case:?}, blocks {blocks:?})");
    }
    Ok(())
}

/// `PROPTEST_CASES` overrides the case counts (for deeper runs by hand).
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(48), ..ProptestConfig::default() })]

    #[test]
    fn written_attention_becomes_one_attention_kernel(case in arb_attention(), seed in any::<u64>()) {
        check_rewrite(&case, seed, TargetModel::cpu_host())?;
    }

    #[test]
    fn the_online_softmax_agrees_with_the_formula(case in arb_attention(), seed in any::<u64>(), bq in 1usize..20, bk in 1usize..40) {
        check_online(&case, seed, (bq, bk))?;
    }
}

#[test]
fn gpu_targets_keep_attention_as_separate_kernels_until_they_have_an_attention_kernel() {
    let g = AttentionCase::causal(16, 16, 8).graph().unwrap();
    let out = optimize(&g, &OptimizeOptions::new(TargetModel::sm_90a())).unwrap();
    assert!(out.program.launches.iter().all(|l| l.kernel.class != KernelClass::Attention), "{}", out.report);
}

#[test]
fn explain_names_the_attention_rule() {
    let g = AttentionCase::causal(16, 24, 8).graph().unwrap();
    let out = optimize(&g, &OptimizeOptions { explain: true, ..OptimizeOptions::default() }).unwrap();
    let kernel = out.report.kernels.iter().find(|k| k.class == KernelClass::Attention).expect("an attention kernel");
    assert!(kernel.rules.iter().any(|r| r == "fuse-attention"), "{}", out.report);
}

#[test]
fn a_token_major_output_is_stored_by_the_attention_kernel_itself() {
    // The decoder layer's `o.permute(..).reshape([S, H * d])` before the output projection: the
    // kernel stores each row where the token-major output has it, so no layout kernel remains.
    let c = AttentionCase {
        heads: 8,
        kv_heads: 2,
        dtype: DType::BF16,
        token_major_output: true,
        ..AttentionCase::causal(96, 96, 64)
    };
    let g = c.graph().unwrap();
    assert!(Attention::find(&g).and_then(|a| a.layout).is_some());
    for target in [TargetModel::cpu_host(), TargetModel::sm_80(), TargetModel::sm_90a()] {
        let opts = OptimizeOptions { explain: true, ..OptimizeOptions::new(target) };
        let out = optimize(&g, &opts).unwrap();
        let [launch] = out.program.launches.as_slice() else {
            panic!("one kernel expected:\n{}", out.report);
        };
        assert_eq!(launch.kernel.class, KernelClass::Attention, "{}", out.report);
        let k = &out.report.kernels[0];
        assert!(k.rules.iter().any(|r| r == "fuse-attention-epilogue"), "{}", out.report);
        let inputs = random_inputs(&g, &Bindings::new(), 7).unwrap();
        let expected = run_graph(&g, &inputs).unwrap();
        let actual = run_program(&out.program, &inputs).unwrap();
        compare_outputs(&expected, &actual, &Tolerance::default()).unwrap();
    }
}

#[test]
fn grouped_query_attention_in_bf16_is_one_kernel_on_the_cpu() {
    // The decoder layer's form: bf16 operands, f32 softmax, P rounded to bf16 before V.
    let c = AttentionCase { heads: 8, kv_heads: 2, dtype: DType::BF16, ..AttentionCase::causal(512, 512, 128) };
    let g = c.graph().unwrap();
    let out = optimize(&g, &OptimizeOptions::default()).unwrap();
    let attention = out.program.launches.iter().filter(|l| l.kernel.class == KernelClass::Attention).count();
    assert_eq!(attention, 1, "{}", out.report);
}

#[test]
fn the_row_log_sum_exp_is_a_second_output_of_the_one_attention_kernel() {
    for divide_after in [false, true] {
        let c = AttentionCase { log_sum_exp: true, divide_after, ..AttentionCase::causal(40, 72, 16) };
        let g = c.graph().unwrap();
        let out = optimize(&g, &OptimizeOptions { explain: true, ..OptimizeOptions::default() }).unwrap();
        let [launch] = out.program.launches.as_slice() else {
            panic!("one kernel expected:\n{}", out.report);
        };
        assert_eq!(launch.kernel.class, KernelClass::Attention);
        assert_eq!(launch.outputs.len(), 2, "{}", out.report);
        assert_eq!(launch.kernel.graph.outputs.len(), 2);
        let a = Attention::find(&launch.kernel.graph).expect("the kernel is an attention");
        assert_eq!(a.statistics.len(), 1);
        // The program's outputs are the kernel's, in the program's order, and the report names
        // each output of the one kernel apart.
        assert_eq!(out.program.outputs, launch.outputs);
        let name = &launch.kernel.name;
        assert_eq!(out.report.outputs, [format!("{name}.0"), format!("{name}.1")], "{}", out.report);
        let inputs = random_inputs(&g, &Bindings::new(), 7).unwrap();
        let expected = run_graph(&g, &inputs).unwrap();
        let actual = run_program(&out.program, &inputs).unwrap();
        compare_outputs(&expected, &actual, &Tolerance::default()).unwrap();
    }
}

#[test]
fn on_a_gpu_an_attention_that_returns_its_log_sum_exp_is_one_kernel_writing_both() {
    let runnable = AttentionCase { dtype: DType::F16, ..AttentionCase::causal(64, 64, 64) };
    let with_lse = AttentionCase { log_sum_exp: true, ..runnable.clone() };
    let attention_outputs = |c: &AttentionCase| {
        let out = optimize(&c.graph().unwrap(), &OptimizeOptions::new(TargetModel::sm_90a())).unwrap();
        let kernels: Vec<usize> = out
            .program
            .launches
            .iter()
            .filter(|l| l.kernel.class == KernelClass::Attention)
            .map(|l| l.kernel.graph.outputs.len())
            .collect();
        kernels
    };
    assert_eq!(attention_outputs(&runnable), [1]);
    // The GPU kernel's split form writes the row log-sum-exp beside the output.
    assert_eq!(attention_outputs(&with_lse), [2]);
}

#[test]
fn on_a_gpu_token_major_keys_and_values_are_read_by_the_attention_kernel_in_place() {
    // K and V as projections write them, [T, kv_heads * d], viewed as [kv_heads, T, d]: the
    // views join the attention kernel (no permute kernel before it) on both GPU targets, and
    // the optimized program computes what the written one does.
    for (target, q_len) in [(TargetModel::sm_90a(), 40u64), (TargetModel::sm_80(), 1)] {
        let c = AttentionCase {
            heads: 8,
            kv_heads: 2,
            batch: vec![],
            dtype: DType::BF16,
            token_major: true,
            ..AttentionCase::causal(q_len, 72, 64)
        };
        let g = c.graph().unwrap();
        let out = optimize(&g, &OptimizeOptions::new(target)).unwrap();
        let [launch] = out.program.launches.as_slice() else {
            panic!("one kernel expected:\n{}", out.report);
        };
        assert_eq!(launch.kernel.class, KernelClass::Attention, "{}", out.report);
        assert!(tcc_ir::attention::GpuAttention::find(&launch.kernel.graph).is_some(), "{}", out.report);
        let inputs = random_inputs(&g, &Bindings::new(), 11).unwrap();
        let expected = run_graph(&g, &inputs).unwrap();
        let actual = run_program(&out.program, &inputs).unwrap();
        compare_outputs(&expected, &actual, &Tolerance::default()).unwrap();
    }
}
