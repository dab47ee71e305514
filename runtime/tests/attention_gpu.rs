//! The GPU attention kernel on a CUDA device (feature `gpu-tests`) against the f64 interpreter:
//! every schedule of the tuner's space at head dimensions 64 and 128 (with and without a bias
//! tensor, whose space is smaller), every score form and mask (causal, sliding window, ALiBi, soft
//! cap, a bias tensor, a mask tensor) at head dimensions 32, 64, 80 and 128 in f16 and bf16,
//! grouped-query heads (K and V also token-major, as projections write them, read in place, and
//! the output stored token-major, as the output projection reads it),
//! query and key lengths off the blocks and different from each other (more
//! queries than keys too), one query, and rows whose every key is masked (NaN with a `-inf` fill,
//! the average of V with a finite one). Each case checks that the kernel really is the
//! `attention` lowering (one entry, or the split form's `attention-split` and
//! `attention-combine`). Decoding (flash-decoding: query heads of a K/V group packed as the rows
//! of a block, key splits combined by their log-sum-exp): every schedule of the decode space at
//! head dimensions 64 and 128, one to a few queries, the row log-sum-exp as a second output,
//! whole splits and rows masked.

#![cfg(feature = "gpu-tests")]

use tcc_codegen::ptx;
use tcc_ir::attention::GpuAttention;
use tcc_ir::interp::{Tensor, run_graph};
use tcc_ir::schedule::{AttentionDevice, GpuAttentionSchedule};
use tcc_ir::testing::attention::{AttentionCase, MaskForm, ScoreForm};
use tcc_ir::testing::{Tolerance, compare_outputs, random_inputs};
use tcc_ir::{Bindings, DType, KernelClass, Program};
use tcc_runtime::HostTensor;

use crate::common::whole;
use crate::gemm::device;

fn program(case: &AttentionCase, schedule: GpuAttentionSchedule) -> Program {
    let g = case.graph().unwrap();
    let mut p = whole(&g, KernelClass::Attention);
    p.launches[0].kernel.schedule = schedule.encode();
    p
}

fn tolerance(case: &AttentionCase) -> Tolerance {
    // As the CPU kernel's: an online softmax sums in another order and rounds p to the operands'
    // dtype unnormalized, where the formula rounds it normalized.
    Tolerance::default().with_accumulation(case.kv_len.max(case.head_dim)).scaled(2.0)
}

fn check_with(case: &AttentionCase, inputs: &[Tensor], schedule: GpuAttentionSchedule) -> Result<(), String> {
    let dev = device();
    let p = program(case, schedule);
    let lowering = ptx::emit_llvm_ir(&p.launches[0].kernel, &Bindings::new(), dev.info().arch)
        .map_err(|e| e.to_string())?
        .steps
        .iter()
        .map(|s| s.lowering)
        .collect::<Vec<_>>();
    if lowering != ["attention"] && lowering != ["attention-split", "attention-combine"] {
        return Err(format!("lowered as {lowering:?}, not the attention kernel: {case:?}"));
    }
    let g = case.graph().map_err(|e| e.to_string())?;
    let expected = run_graph(&g, inputs).map_err(|e| e.to_string())?;
    let host: Vec<HostTensor> = inputs.iter().map(|t| HostTensor::from_interp(t).unwrap()).collect();
    let actual: Vec<Tensor> =
        dev.run_program(&p, &host).map_err(|e| e.to_string())?.iter().map(HostTensor::to_interp).collect();
    compare_outputs(&expected, &actual, &tolerance(case)).map_err(|e| format!("{schedule:?}: {e}\n{case:?}"))
}

fn check(case: &AttentionCase, seed: u64, schedule: GpuAttentionSchedule) -> Result<(), String> {
    let g = case.graph().map_err(|e| e.to_string())?;
    let inputs = random_inputs(&g, &Bindings::new(), seed).map_err(|e| e.to_string())?;
    check_with(case, &inputs, schedule)
}

fn case(dtype: DType, head_dim: u64, (q_len, kv_len): (u64, u64), score: ScoreForm, mask: MaskForm) -> AttentionCase {
    AttentionCase { dtype, score, mask, ..AttentionCase::grouped_heads(q_len, kv_len, head_dim) }
}

fn shared() -> AttentionDevice {
    AttentionDevice::of(&device().info().arch.caps())
}

/// The schedule space of case `c` on this device (its head dimensions and the tensors its score
/// function reads).
fn space(c: &AttentionCase) -> Vec<GpuAttentionSchedule> {
    let shape = GpuAttention::find(&c.graph().unwrap()).expect("an attention the GPU kernel runs").shape();
    GpuAttentionSchedule::space(&shape, shared())
}

/// The space of case `c` with the producer variants it leaves out.
fn space_and_variants(c: &AttentionCase) -> Vec<GpuAttentionSchedule> {
    let shape = GpuAttention::find(&c.graph().unwrap()).expect("an attention the GPU kernel runs").shape();
    GpuAttentionSchedule::space_and_variants(&shape, shared())
}

/// The default schedule of case `c` on this device.
fn default(c: &AttentionCase) -> GpuAttentionSchedule {
    let shape = GpuAttention::find(&c.graph().unwrap()).expect("an attention the GPU kernel runs").shape();
    GpuAttentionSchedule::default_for(&shape, shared())
}

/// Every failure of `cases`, each a line.
fn all(results: impl IntoIterator<Item = Result<(), String>>) {
    let failures: Vec<String> = results.into_iter().filter_map(Result::err).collect();
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn every_schedule_of_the_space_matches_the_interpreter() {
    let mut results = Vec::new();
    for head_dim in [64u64, 128] {
        for (lens, score, mask) in [
            ((200, 333), ScoreForm::Plain, MaskForm::Causal),
            ((130, 70), ScoreForm::Plain, MaskForm::None),
            ((130, 70), ScoreForm::BiasTensor, MaskForm::Causal),
        ] {
            let c = case(DType::F16, head_dim, lens, score, mask);
            for s in space_and_variants(&c) {
                results.push(check(&c, 1, s));
                // The one-kernel form of the same schedule (its splits chosen from the shape may
                // be several at these sizes).
                results.push(check(&c, 2, GpuAttentionSchedule { splits: 1, ..s }));
            }
        }
    }
    all(results);
}

#[test]
fn every_score_form_and_mask_at_several_head_dims_and_both_dtypes() {
    let forms = [
        (ScoreForm::Plain, MaskForm::None),
        (ScoreForm::Plain, MaskForm::Causal),
        (ScoreForm::Plain, MaskForm::Window(37)),
        (ScoreForm::Alibi(0.125), MaskForm::Causal),
        (ScoreForm::SoftCap(30.0), MaskForm::None),
        (ScoreForm::BiasTensor, MaskForm::Causal),
        (ScoreForm::Plain, MaskForm::Tensor),
    ];
    let mut results = Vec::new();
    for head_dim in [32u64, 64, 80, 128] {
        for dtype in [DType::F16, DType::BF16] {
            for (i, &(score, mask)) in forms.iter().enumerate() {
                let c = case(dtype, head_dim, (77, 150), score, mask);
                results.push(check(&c, i as u64, default(&c)));
            }
        }
    }
    all(results);
}

#[test]
fn more_queries_than_keys_one_query_and_grouped_heads() {
    let mut results = Vec::new();
    // Causal with 150 queries over 70 keys: the first 80 rows see no key (NaN).
    let more = case(DType::F16, 128, (150, 70), ScoreForm::Plain, MaskForm::Causal);
    results.push(check(&more, 3, default(&more)));
    let one = case(DType::BF16, 128, (1, 1000), ScoreForm::Plain, MaskForm::Causal);
    results.push(check(&one, 4, default(&one)));
    let gqa =
        AttentionCase { heads: 8, kv_heads: 2, ..case(DType::F16, 64, (129, 257), ScoreForm::Plain, MaskForm::Causal) };
    results.push(check(&gqa, 5, default(&gqa)));
    let mqa = AttentionCase { heads: 4, kv_heads: 1, batch: vec![], ..gqa.clone() };
    results.push(check(&mqa, 6, default(&mqa)));
    all(results);
}

#[test]
fn token_major_keys_and_values_are_read_in_place() {
    // K and V as projections write them, [.., T, kv_heads * d], read through reshape and permute.
    let mut results = Vec::new();
    let tm = |c: AttentionCase| AttentionCase { token_major: true, ..c };
    // Llama-3-8B's heads: 32 query heads over 8 K/V heads of 128, one sequence.
    let llama = tm(AttentionCase {
        heads: 32,
        kv_heads: 8,
        batch: vec![],
        ..case(DType::BF16, 128, (300, 300), ScoreForm::Plain, MaskForm::Causal)
    });
    results.push(check(&llama, 11, default(&llama)));
    results.push(check(&llama, 12, GpuAttentionSchedule { splits: 2, ..default(&llama) }));
    let f16 = tm(case(DType::F16, 64, (129, 257), ScoreForm::Plain, MaskForm::None));
    results.push(check(&f16, 13, default(&f16)));
    let decode = tm(AttentionCase {
        heads: 8,
        kv_heads: 2,
        ..case(DType::BF16, 128, (1, 1000), ScoreForm::Plain, MaskForm::Causal)
    });
    results.push(check(&decode, 14, default(&decode)));
    // The output stored token-major, `[T, heads * d]`, as the output projection reads it (the
    // kernel's layout tail): the default (a producer warpgroup at head dim 128), the split form,
    // the staged epilogue of a schedule without a producer, and decoding.
    let out = |c: &AttentionCase| AttentionCase { token_major_output: true, ..c.clone() };
    let (llama_out, f16_out, decode_out) = (out(&llama), out(&f16), out(&decode));
    results.push(check(&llama_out, 15, default(&llama_out)));
    results.push(check(&llama_out, 16, GpuAttentionSchedule { splits: 2, ..default(&llama_out) }));
    if let Some(&plain) = space(&llama_out).iter().find(|s| !s.producer) {
        results.push(check(&llama_out, 17, plain));
    }
    results.push(check(&f16_out, 18, default(&f16_out)));
    results.push(check(&decode_out, 19, default(&decode_out)));
    all(results);
}

#[test]
fn rows_whose_every_key_is_masked_are_nan_with_minus_inf_and_an_average_with_a_finite_fill() {
    let mut results = Vec::new();
    for fill in [f64::NEG_INFINITY, -10000.0] {
        let c = AttentionCase { fill, ..case(DType::F16, 64, (70, 140), ScoreForm::Plain, MaskForm::Tensor) };
        let s = default(&c);
        let g = c.graph().unwrap();
        let mut inputs = random_inputs(&g, &Bindings::new(), 3).unwrap();
        // keep[S, T]: rows 0 and 65 keep nothing, the others every key from 100 on.
        let keep = inputs.last_mut().unwrap();
        for (i, x) in keep.data.iter_mut().enumerate() {
            let (row, col) = (i / 140, i % 140);
            *x = if row == 0 || row == 65 || col < 100 { 0.0 } else { 1.0 };
        }
        let expected = run_graph(&g, &inputs).unwrap();
        let nan = expected[0].data.iter().filter(|x| x.is_nan()).count();
        assert_eq!(nan > 0, fill.is_infinite(), "the written formula's NaN rows");
        results.push(check_with(&c, &inputs, s));
    }
    all(results);
}

/// A decoding case: `q_len` queries over `kv_len` keys, 8 query heads over `kv_heads`, two
/// sequences.
fn decode_case(dtype: DType, head_dim: u64, (q_len, kv_len): (u64, u64), kv_heads: u64) -> AttentionCase {
    AttentionCase { heads: 8, kv_heads, ..case(dtype, head_dim, (q_len, kv_len), ScoreForm::Plain, MaskForm::Causal) }
}

#[test]
fn every_decode_schedule_with_packed_heads_and_key_splits_matches_the_interpreter() {
    let mut results = Vec::new();
    for head_dim in [64u64, 128] {
        for (i, (q_len, kv_len, kv_heads)) in [(1u64, 4100u64, 2u64), (3, 1000, 1), (1, 70, 8)].into_iter().enumerate()
        {
            let c = decode_case(DType::F16, head_dim, (q_len, kv_len), kv_heads);
            for s in space(&c) {
                results.push(check(&c, i as u64, s));
            }
        }
    }
    // bf16, ALiBi in a window, the log-sum-exp beside the output.
    let c = AttentionCase {
        score: ScoreForm::Alibi(0.125),
        mask: MaskForm::Window(300),
        log_sum_exp: true,
        ..decode_case(DType::BF16, 128, (2, 2000), 2)
    };
    results.push(check(&c, 7, default(&c)));
    results.push(check(&c, 8, GpuAttentionSchedule { splits: 16, ..default(&c) }));
    // More queries than keys (rows that see no key: NaN output and log-sum-exp), split.
    let c = AttentionCase { log_sum_exp: true, ..decode_case(DType::F16, 64, (5, 3), 2) };
    results.push(check(&c, 9, GpuAttentionSchedule { splits: 2, ..default(&c) }));
    // Prefill with its log-sum-exp: the split form in one split.
    let c =
        AttentionCase { log_sum_exp: true, ..case(DType::F16, 128, (300, 700), ScoreForm::Plain, MaskForm::Causal) };
    results.push(check(&c, 10, default(&c)));
    all(results);
}

#[test]
fn decode_splits_whose_keys_are_all_masked_add_nothing() {
    let mut results = Vec::new();
    for fill in [f64::NEG_INFINITY, -10000.0] {
        let c = AttentionCase { fill, mask: MaskForm::Tensor, ..decode_case(DType::F16, 128, (3, 3000), 2) };
        let g = c.graph().unwrap();
        let mut inputs = random_inputs(&g, &Bindings::new(), 11).unwrap();
        // keep[S, T]: row 0 keeps nothing, the others only the last 100 keys.
        let keep = inputs.last_mut().unwrap();
        for (i, x) in keep.data.iter_mut().enumerate() {
            let (row, col) = (i / 3000, i % 3000);
            *x = if row == 0 || col < 2900 { 0.0 } else { 1.0 };
        }
        for splits in [0, 8] {
            results.push(check_with(&c, &inputs, GpuAttentionSchedule { splits, ..default(&c) }));
        }
    }
    all(results);
}

/// Times every schedule of the decode space on the suite's decode shape (b32, 32 query heads over
/// 8 K/V heads, one query over 8192 keys, d128, causal, f16; run with `--ignored --nocapture`),
/// and fixed splits of its small blocks, printing `SWEEP` lines with the bytes moved per second,
/// and checks each output against the default schedule's.
#[test]
#[ignore]
fn time_every_decode_schedule_on_the_suite_shape() {
    let dev = device();
    let opts = tcc_runtime::cuda::TimingOptions::default();
    let c = AttentionCase {
        batch: vec![32],
        heads: 32,
        kv_heads: 8,
        dtype: DType::F16,
        ..AttentionCase::causal(1, 8192, 128)
    };
    let g = c.graph().unwrap();
    let inputs = random_inputs(&g, &Bindings::new(), 1).unwrap();
    let host: Vec<HostTensor> = inputs.iter().map(|t| HostTensor::from_interp(t).unwrap()).collect();
    let reference = dev.run_program(&program(&c, default(&c)), &host).unwrap()[0].to_interp();
    // Q and O once, K and V once per K/V head.
    let bytes = 2.0 * (2.0 * 32.0 * 32.0 * 128.0 + 2.0 * 32.0 * 8.0 * 8192.0 * 128.0);
    // The space, then fixed splits for its small blocks (beyond the space, to see the trend).
    let mut schedules = space(&c);
    for (br, bc, warps) in [(16, 64, 1), (16, 32, 1), (32, 64, 2)] {
        for stages in [2, 3] {
            for splits in [4, 8, 16] {
                schedules.push(GpuAttentionSchedule {
                    block: [br, bc],
                    warps,
                    stages,
                    splits,
                    ..GpuAttentionSchedule::plain()
                });
            }
        }
    }
    for s in schedules {
        let p = program(&c, s);
        let t = dev.time_program(&p, &host, opts).unwrap();
        let out = dev.run_program(&p, &host).unwrap()[0].to_interp();
        compare_outputs(std::slice::from_ref(&reference), &[out], &tolerance(&c)).unwrap();
        println!("SWEEP decode {s:?} median_ms={:.4} GB/s={:.0}", t.median_ms, bytes / t.median_ms / 1e6);
    }
}

/// Times every schedule of the space on the suite's shapes (b8 h16 s4096 d128 f16, plain and
/// causal; b16 h16 s2048 d64 f16, plain; run with `--ignored --nocapture`), printing `SWEEP`
/// lines, and checks that each schedule's output equals the default schedule's within the
/// tolerance.
#[test]
#[ignore]
fn time_every_schedule_on_the_suite_shapes() {
    let dev = device();
    let opts = tcc_runtime::cuda::TimingOptions::default();
    for (batch, len, head_dim, mask) in
        [(8, 4096, 128, MaskForm::None), (8, 4096, 128, MaskForm::Causal), (16, 2048, 64, MaskForm::None)]
    {
        let c = AttentionCase {
            batch: vec![batch],
            heads: 16,
            kv_heads: 16,
            dtype: DType::F16,
            mask,
            ..AttentionCase::causal(len, len, head_dim)
        };
        let g = c.graph().unwrap();
        let inputs = random_inputs(&g, &Bindings::new(), 1).unwrap();
        let host: Vec<HostTensor> = inputs.iter().map(|t| HostTensor::from_interp(t).unwrap()).collect();
        let reference = dev.run_program(&program(&c, default(&c)), &host).unwrap()[0].to_interp();
        // The space, then the producer variants it leaves out.
        for s in space_and_variants(&c) {
            let p = program(&c, s);
            let t = dev.time_program(&p, &host, opts).unwrap();
            let out = dev.run_program(&p, &host).unwrap()[0].to_interp();
            compare_outputs(std::slice::from_ref(&reference), &[out], &tolerance(&c)).unwrap();
            println!("SWEEP d{head_dim} {mask:?} {s:?} median_ms={:.4}", t.median_ms);
        }
    }
}
