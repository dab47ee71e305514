//! The CPU attention kernel against the interpreter: random attention programs (every score form
//! and mask, grouped heads, lengths off the blocks, f16/bf16) with random query and key blocks (every
//! schedule of the space must be right), the head dimensions that matter (64, 128) and an odd one,
//! and rows whose every key is masked (NaN with a `-inf` fill, the average of V with a finite one).
//! On the cranelift tier, and on the LLVM tier with the `llvm` feature.

use proptest::prelude::*;
use tcc_ir::interp::{Tensor, run_graph};
use tcc_ir::testing::attention::{AttentionCase, MaskForm, ScoreForm, arb_attention};
use tcc_ir::testing::{Tolerance, compare_outputs, random_inputs};
use tcc_ir::{Bindings, DType, KernelClass, Program};
use tcc_runtime::CpuDevice;

use crate::common::{device, run_on, whole};

/// The whole attention graph as one attention kernel with blocks of `bq` queries and `bk` keys.
fn program(case: &AttentionCase, [bq, bk]: [u32; 2]) -> Program {
    let g = case.graph().unwrap();
    let mut p = whole(&g, KernelClass::Attention);
    for l in &mut p.launches {
        l.kernel.schedule.tile_m = bq;
        l.kernel.schedule.tile_n = bk;
    }
    p
}

fn tolerance(case: &AttentionCase) -> Tolerance {
    // An online softmax sums in another order and keeps p in f32 where the formula may round it.
    let accumulated = Tolerance::default().with_accumulation(case.kv_len.max(case.head_dim));
    if case.dtype == DType::F32 {
        accumulated.scaled(8.0)
    } else {
        // The f32 log-sum-exp comes from scores the formula rounds to f16/bf16 and the kernel
        // keeps in f32: it carries that dtype's error.
        let low = accumulated.scaled(2.0);
        Tolerance { f32: low.bound(case.dtype), ..low }
    }
}

fn devices() -> Vec<(&'static str, &'static CpuDevice)> {
    use std::sync::OnceLock;
    static LOOPS: OnceLock<CpuDevice> = OnceLock::new();
    let loops = LOOPS.get_or_init(|| {
        CpuDevice::with_options(tcc_codegen::LowerOptions { gemm: None, ..Default::default() }, 0).unwrap()
    });
    #[allow(unused_mut)]
    let mut out = vec![("cranelift, register tiles", device()), ("cranelift, loops", loops)];
    #[cfg(feature = "llvm")]
    {
        static LLVM: OnceLock<CpuDevice> = OnceLock::new();
        out.push(("llvm", LLVM.get_or_init(|| CpuDevice::with_llvm(0).unwrap())));
    }
    out
}

fn check_with(case: &AttentionCase, inputs: &[Tensor], blocks: [u32; 2]) -> Result<(), String> {
    let g = case.graph().map_err(|e| e.to_string())?;
    let expected = run_graph(&g, inputs).map_err(|e| e.to_string())?;
    let p = program(case, blocks);
    for (tier, dev) in devices() {
        let actual = run_on(dev, &p, inputs);
        compare_outputs(&expected, &actual, &tolerance(case))
            .map_err(|e| format!("{tier}, blocks {blocks:?}: {e}\n{case:?}"))?;
    }
    Ok(())
}

fn check(case: &AttentionCase, seed: u64, blocks: [u32; 2]) -> Result<(), String> {
    let g = case.graph().map_err(|e| e.to_string())?;
    let inputs = random_inputs(&g, &Bindings::new(), seed).map_err(|e| e.to_string())?;
    check_with(case, &inputs, blocks)
}

/// `PROPTEST_CASES` overrides the case counts (for deeper runs by hand).
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(48), ..ProptestConfig::default() })]

    #[test]
    fn random_attention_programs_match_the_interpreter(case in arb_attention(), seed in any::<u64>(), bq in 1u32..40, bk in 1u32..80) {
        check(&case, seed, [bq, bk]).map_err(TestCaseError::fail)?;
    }
}

fn case(head_dim: u64, q_len: u64, kv_len: u64, score: ScoreForm, mask: MaskForm) -> AttentionCase {
    AttentionCase { score, mask, ..AttentionCase::grouped_heads(q_len, kv_len, head_dim) }
}

#[test]
fn head_dims_64_128_and_40_with_every_form_off_the_blocks() {
    let forms = [
        (ScoreForm::Plain, MaskForm::None),
        (ScoreForm::Plain, MaskForm::Causal),
        (ScoreForm::Plain, MaskForm::Window(19)),
        (ScoreForm::Alibi(0.125), MaskForm::Causal),
        (ScoreForm::SoftCap(30.0), MaskForm::Causal),
        (ScoreForm::BiasTensor, MaskForm::Causal),
        (ScoreForm::Plain, MaskForm::Tensor),
    ];
    for head_dim in [64, 128, 40] {
        for (i, &(score, mask)) in forms.iter().enumerate() {
            let c = case(head_dim, 37, 101, score, mask);
            check(&c, i as u64, [16, 32]).unwrap();
        }
    }
    for dtype in [DType::F16, DType::BF16] {
        let c = AttentionCase { dtype, ..case(64, 33, 70, ScoreForm::Plain, MaskForm::Causal) };
        check(&c, 9, [16, 64]).unwrap();
    }
}

#[test]
fn rows_whose_every_key_is_masked_are_nan_with_minus_inf_and_an_average_with_a_finite_fill() {
    for (fill, log_sum_exp) in
        [(f64::NEG_INFINITY, false), (-10000.0, false), (f64::NEG_INFINITY, true), (-10000.0, true)]
    {
        let c = AttentionCase { fill, log_sum_exp, ..case(16, 12, 40, ScoreForm::Plain, MaskForm::Tensor) };
        let g = c.graph().unwrap();
        let mut inputs = random_inputs(&g, &Bindings::new(), 3).unwrap();
        // keep[S, T]: rows 0 and 5 keep nothing, the others everything from key 30 on.
        let keep = inputs.last_mut().unwrap();
        for (i, x) in keep.data.iter_mut().enumerate() {
            let (row, col) = (i / 40, i % 40);
            *x = if row == 0 || row == 5 || col < 30 { 0.0 } else { 1.0 };
        }
        let expected = run_graph(&g, &inputs).unwrap();
        for out in &expected {
            let nan_rows = out.data.iter().filter(|x| x.is_nan()).count();
            assert_eq!(nan_rows > 0, fill.is_infinite(), "the written formula's NaN rows");
        }
        check_with(&c, &inputs, [4, 8]).unwrap();
    }
}

#[test]
fn causal_blocks_are_skipped_without_changing_results_for_every_block_shape() {
    for (bq, bk) in [(1, 1), (3, 5), (16, 64), (64, 16), (128, 128)] {
        let c = case(32, 77, 77, ScoreForm::Plain, MaskForm::Causal);
        check(&c, 1, [bq, bk]).unwrap();
        let shorter = case(32, 20, 77, ScoreForm::Plain, MaskForm::Window(9));
        check(&shorter, 2, [bq, bk]).unwrap();
    }
}

#[test]
fn the_scores_never_get_a_buffer_and_masked_key_blocks_are_skipped() {
    use tcc_codegen::LowerOptions;
    use tcc_codegen::loops::{BufKind, Stmt, lower_graph};
    let c = AttentionCase { kv_heads: 4, ..case(64, 300, 300, ScoreForm::Plain, MaskForm::Causal) };
    let g = c.graph().unwrap();
    let options = LowerOptions { attention: Some([16, 64]), ..LowerOptions::default() };
    let k = lower_graph("attn", &g, &Bindings::new(), &options).unwrap();
    let scores = 2 * 4 * 300 * 300; // batch x heads x queries x keys
    let scratch = k.bufs.iter().filter(|b| b.kind == BufKind::Scratch);
    assert!(scratch.clone().all(|b| b.len < scores), "a buffer as large as the scores: {:?}", k.bufs);
    let locals: Vec<u64> = k.bufs.iter().filter(|b| b.kind == BufKind::Local).map(|b| b.len).collect();
    assert!(locals.contains(&(16 * 64)), "no block buffer: {locals:?}");
    let (mut conditionals, mut tiles) = (0, 0);
    for phase in &k.phases {
        for s in &phase.body {
            s.for_each_root(&mut |st| {
                conditionals += usize::from(matches!(st, Stmt::If { .. }));
                tiles += usize::from(matches!(st, Stmt::MicroKernel(_)));
            });
        }
    }
    assert_eq!(conditionals, 1, "the causal mask skips key blocks");
    assert_eq!(tiles, 2, "both products as register tiles");
}

#[test]
fn grouped_heads_read_k_and_v_through_their_reshapes_without_copies() {
    use tcc_codegen::LowerOptions;
    use tcc_codegen::loops::{BufKind, lower_graph};
    let c = AttentionCase { batch: vec![2], heads: 8, kv_heads: 2, ..AttentionCase::causal(40, 70, 16) };
    let g = c.graph().unwrap();
    for gemm in [Some(tcc_codegen::GemmTiles::default()), None] {
        let options = LowerOptions { attention: Some([16, 32]), gemm, ..LowerOptions::default() };
        let k = lower_graph("attn", &g, &Bindings::new(), &options).unwrap();
        // The only scratch: K and V packed for the register tiles, once per K/V head (2 x 2 of
        // them, 70 keys padded to whole panels, 16 wide), not once per query head (2 x 8).
        let copies: Vec<u64> = k.bufs.iter().filter(|b| b.kind == BufKind::Scratch).map(|b| b.len).collect();
        let per_kv_head = 2 * 2 * 72 * 16;
        match gemm {
            Some(_) => assert!(copies.len() == 2 && copies.iter().all(|&n| n <= per_kv_head), "{copies:?}"),
            None => assert!(copies.is_empty(), "K or V copied: {copies:?}"),
        }
    }
    check(&c, 4, [16, 32]).unwrap();
}

#[test]
fn the_row_log_sum_exp_is_written_by_the_attention_nest() {
    use tcc_codegen::LowerOptions;
    use tcc_codegen::loops::{BufKind, lower_graph};
    let c = AttentionCase { log_sum_exp: true, ..case(64, 70, 130, ScoreForm::SoftCap(30.0), MaskForm::Causal) };
    let g = c.graph().unwrap();
    let options = LowerOptions { attention: Some([16, 32]), ..LowerOptions::default() };
    let k = lower_graph("attn", &g, &Bindings::new(), &options).unwrap();
    let scores = 2 * 4 * 70 * 130;
    assert!(k.bufs.iter().all(|b| b.len < scores), "the scores were materialized: {:?}", k.bufs);
    let outputs = k.bufs.iter().filter(|b| matches!(b.kind, BufKind::Output(_))).count();
    assert_eq!(outputs, 2);
    for (seed, blocks) in [(5, [16, 32]), (6, [7, 100]), (7, [64, 16])] {
        check(&c, seed, blocks).unwrap();
    }
}

#[test]
fn threads_get_rows_of_heads_and_query_blocks_when_the_batch_is_short() {
    use tcc_codegen::LowerOptions;
    use tcc_codegen::loops::{lower_graph, split_rows};
    // Two heads and no batch axis: the attention nest's outer loop has two iterations; its rows
    // become (head, query block) pairs: 2 x ceil(300 / 16).
    let c = AttentionCase { heads: 2, kv_heads: 2, ..AttentionCase::causal(300, 300, 64) };
    let g = c.graph().unwrap();
    let options = LowerOptions { attention: Some([16, 64]), ..LowerOptions::default() };
    let mut k = lower_graph("attn", &g, &Bindings::new(), &options).unwrap();
    split_rows(&mut k, 4096);
    let attention = k.phases.iter().max_by_key(|p| p.work()).unwrap();
    assert_eq!(attention.rows, 2 * 19, "{:?}", attention.row_parts);
    assert_eq!(attention.row_parts.iter().map(|p| p.1).collect::<Vec<_>>(), [2, 19]);
    check(&c, 11, [16, 64]).unwrap();
}
