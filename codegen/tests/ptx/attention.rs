//! The GPU attention kernel assembled by ptxas for sm_80 and sm_90a: every schedule of the
//! tuner's space at every head dimension it runs (16 to 128), with every score form and mask,
//! grouped-query heads, lengths off the blocks, f16 and bf16, in both forms (one `attention`
//! entry, or the split form's `attention-split` and `attention-combine`), no spills; and the
//! split form (flash-decoding: packed grouped heads, key splits, the row log-sum-exp) run by the
//! emulator against the interpreter. Runs on a GPU are the runtime's `gpu-tests`
//! (`runtime/tests/attention_gpu.rs`).

use tcc_codegen::ptx::{self, GpuArch};
use tcc_ir::attention::GpuAttention;
use tcc_ir::schedule::{AttentionDevice, GpuAttentionSchedule};
use tcc_ir::testing::attention::{AttentionCase, MaskForm, ScoreForm};
use tcc_ir::testing::{compare_outputs, random_inputs};
use tcc_ir::{Bindings, DType, Kernel, KernelClass, TensorType};

use super::{check_kernel, kernel, lowerings, on_every_core, sim, sim_tolerance};

/// The entries of the one-kernel form.
const ONE: [&str; 1] = ["attention"];
/// The entries of the split form.
const SPLIT: [&str; 2] = ["attention-split", "attention-combine"];

fn case(dtype: DType, head_dim: u64, score: ScoreForm, mask: MaskForm) -> AttentionCase {
    AttentionCase { dtype, score, mask, ..AttentionCase::grouped_heads(200, 333, head_dim) }
}

fn attention_kernel(c: &AttentionCase, schedule: GpuAttentionSchedule) -> Kernel {
    let mut k = kernel("attn", KernelClass::Attention, c.graph().unwrap());
    k.schedule = schedule.encode();
    k
}

/// The schedule spaces of case `c` (its head dimensions and the tensors its score function reads)
/// on sm_80 and sm_90a together, with the producer variants they leave out (the warpgroup
/// schedules run as the default on sm_80).
fn space(c: &AttentionCase) -> Vec<GpuAttentionSchedule> {
    let shape = GpuAttention::find(&c.graph().unwrap()).expect("an attention the GPU kernel runs").shape();
    let mut all = Vec::new();
    for arch in GpuArch::ALL {
        for s in GpuAttentionSchedule::space_and_variants(&shape, AttentionDevice::of(&arch.caps())) {
            if !all.contains(&s) {
                all.push(s);
            }
        }
    }
    all
}

/// The warpgroup schedules of case `c`'s space on sm_90a without a producer.
fn warpgroup_space(c: &AttentionCase) -> Vec<GpuAttentionSchedule> {
    let shape = GpuAttention::find(&c.graph().unwrap()).expect("an attention the GPU kernel runs").shape();
    let space = GpuAttentionSchedule::space(&shape, AttentionDevice::of(&GpuArch::Sm90a.caps()));
    space.into_iter().filter(|s| s.wgmma && !s.producer).collect()
}

/// The score forms and masks every emulated warpgroup variant runs beside its plain causal case:
/// a sliding window, ALiBi with a causal mask, a soft cap without a mask.
const SCORE_FORMS: [(ScoreForm, MaskForm); 3] = [
    (ScoreForm::Plain, MaskForm::Window(60)),
    (ScoreForm::Alibi(0.125), MaskForm::Causal),
    (ScoreForm::SoftCap(30.0), MaskForm::None),
];

#[test]
fn every_schedule_of_the_space_assembles_without_spills() {
    // The plain score function in f16 and bf16, and a bias tensor (the most registers), at every
    // head dim; every schedule of the space with the producer, ping-pong and TMA variants of the
    // warpgroup ones, and at head dims 64 and 128 the one-kernel form of each too.
    let mut jobs = Vec::new();
    for head_dim in (16..=128u64).step_by(16) {
        let forms = [
            (DType::F16, ScoreForm::Plain, MaskForm::Causal),
            (DType::BF16, ScoreForm::Plain, MaskForm::None),
            (DType::F16, ScoreForm::BiasTensor, MaskForm::Causal),
        ];
        for (dtype, score, mask) in forms {
            let c = case(dtype, head_dim, score, mask);
            let space = space(&c);
            assert!(space.len() >= 2, "head dim {head_dim}, {score:?}: {space:?}");
            for s in space {
                jobs.push((c.clone(), s, false));
                if matches!(head_dim, 64 | 128) {
                    jobs.push((c.clone(), GpuAttentionSchedule { splits: 1, ..s }, true));
                }
            }
        }
    }
    on_every_core(&jobs, |(c, s, one_kernel)| {
        for compiled in check_kernel(&attention_kernel(c, *s), &Bindings::new()) {
            let l = lowerings(&compiled);
            assert!(if *one_kernel { l == ONE } else { l == ONE || l == SPLIT }, "{s:?}: {l:?}");
        }
    });
}

#[test]
fn every_score_form_and_mask_assembles_with_the_default_schedule() {
    let forms = [
        (ScoreForm::Plain, MaskForm::None),
        (ScoreForm::Plain, MaskForm::Window(100)),
        (ScoreForm::Alibi(0.125), MaskForm::Causal),
        (ScoreForm::SoftCap(30.0), MaskForm::None),
        (ScoreForm::BiasTensor, MaskForm::Causal),
        (ScoreForm::Plain, MaskForm::Tensor),
    ];
    for head_dim in [32u64, 80, 128] {
        for (score, mask) in forms {
            let c = case(DType::BF16, head_dim, score, mask);
            // The kernel's schedule is not one of the space: it runs the default.
            let k = kernel("attn", KernelClass::Attention, c.graph().unwrap());
            for compiled in check_kernel(&k, &Bindings::new()) {
                assert_eq!(lowerings(&compiled), ONE, "{c:?}");
            }
        }
    }
}

#[test]
fn f32_attention_and_other_head_dims_keep_the_generic_plan() {
    for (dtype, head_dim) in [(DType::F32, 64u64), (DType::F16, 40)] {
        let c = case(dtype, head_dim, ScoreForm::Plain, MaskForm::Causal);
        assert!(GpuAttention::find(&c.graph().unwrap()).is_none(), "{c:?}");
        let k = kernel("attn", KernelClass::Attention, c.graph().unwrap());
        for compiled in check_kernel(&k, &Bindings::new()) {
            assert!(!lowerings(&compiled).contains(&"attention"), "{c:?}");
        }
    }
}

/// A decoding case: `q_len` queries over `kv_len` keys, 8 query heads over `kv_heads` K/V heads,
/// two sequences.
fn decode_case(dtype: DType, head_dim: u64, (q_len, kv_len): (u64, u64), kv_heads: u64) -> AttentionCase {
    AttentionCase { dtype, heads: 8, kv_heads, ..AttentionCase::grouped_heads(q_len, kv_len, head_dim) }
}

#[test]
fn every_decode_schedule_assembles_without_spills() {
    let mut jobs = Vec::new();
    for head_dim in [32u64, 64, 80, 128] {
        for (dtype, mask, lse) in [(DType::F16, MaskForm::Causal, false), (DType::BF16, MaskForm::None, true)] {
            let c = AttentionCase { mask, log_sum_exp: lse, ..decode_case(dtype, head_dim, (1, 4100), 2) };
            let space = space(&c);
            assert!(space.iter().all(|s| s.block[0] <= 64), "{space:?}");
            jobs.extend(space.into_iter().map(|s| (c.clone(), s)));
        }
    }
    on_every_core(&jobs, |(c, s)| {
        // Decoding runs the split form, even in one split (it packs the heads).
        for compiled in check_kernel(&attention_kernel(c, *s), &Bindings::new()) {
            assert_eq!(lowerings(&compiled), SPLIT, "{s:?}");
        }
    });
}

/// Emulates case `c` under `schedule` (compiled for sm_80: `mma.sync`, `ldmatrix`, `cp.async`)
/// on random inputs (`keep` rewrites the inputs first) and compares with the interpreter; returns
/// the entries' lowerings.
fn emulate(
    c: &AttentionCase,
    schedule: GpuAttentionSchedule,
    seed: u64,
    keep: impl Fn(&mut [tcc_ir::interp::Tensor]),
) -> Result<Vec<&'static str>, String> {
    emulate_on(GpuArch::Sm80, c, schedule, seed, keep)
}

/// [`emulate`] compiled for `arch` (sm_90a: the warpgroup schedules' `wgmma`s).
fn emulate_on(
    arch: GpuArch,
    c: &AttentionCase,
    schedule: GpuAttentionSchedule,
    seed: u64,
    keep: impl Fn(&mut [tcc_ir::interp::Tensor]),
) -> Result<Vec<&'static str>, String> {
    let k = attention_kernel(c, schedule);
    let bindings = Bindings::new();
    let mut inputs = random_inputs(&k.graph, &bindings, seed).map_err(|e| e.to_string())?;
    keep(&mut inputs);
    let expected = tcc_ir::interp::run_graph(&k.graph, &inputs).map_err(|e| e.to_string())?;
    let ir = ptx::emit_llvm_ir(&k, &bindings, arch).map_err(|e| e.to_string())?;
    if schedule.producer && !ir.llvm_ir.contains("mbarrier.try_wait") {
        return Err(format!("{schedule:?} {c:?}: no producer warpgroup in the kernel"));
    }
    if schedule.pingpong && !ir.llvm_ir.contains("bar.arrive") {
        return Err(format!("{schedule:?} {c:?}: no turns in the kernel"));
    }
    let types: Vec<TensorType> = k.graph.outputs.iter().map(|o| k.graph.nodes[o.index()].ty.clone()).collect();
    let actual = sim::run(&ir, &inputs, &types, &bindings, 2);
    let l: Vec<&'static str> = ir.steps.iter().map(|s| s.lowering).collect();
    let tol = sim_tolerance().with_accumulation(c.kv_len.max(c.head_dim));
    compare_outputs(&expected, &actual, &tol).map_err(|m| format!("{schedule:?} {c:?} ({l:?}): {m}"))?;
    Ok(l)
}

fn decode_default(c: &AttentionCase) -> GpuAttentionSchedule {
    let shape = GpuAttention::find(&c.graph().unwrap()).expect("an attention the GPU kernel runs").shape();
    GpuAttentionSchedule::default_for(&shape, AttentionDevice::of(&GpuArch::Sm80.caps()))
}

#[test]
fn emulated_key_splits_over_packed_heads_match_the_interpreter() {
    let mut failures = Vec::new();
    let mut run = |c: AttentionCase, s: GpuAttentionSchedule, seed: u64| match emulate(&c, s, seed, |_| {}) {
        // Many queries in few splits chosen from the shape: the one-kernel form.
        Ok(l) if l == SPLIT || (s.splits == 0 && c.q_len > 3 && l == ONE) => {}
        Ok(l) => failures.push(format!("{s:?} {c:?}: lowered as {l:?}")),
        Err(e) => failures.push(e),
    };
    // One to a few queries, keys off the blocks, 4 and 8 heads per K/V head, causal with fewer
    // queries than keys; the default (splits chosen from the shape) and fixed splits.
    for (i, (q_len, kv_len, kv_heads)) in [(1u64, 333u64, 2u64), (3, 200, 1), (2, 65, 2)].into_iter().enumerate() {
        let c = decode_case(DType::F16, 64, (q_len, kv_len), kv_heads);
        let d = decode_default(&c);
        assert_eq!(d.block[0], 16, "{d:?}");
        run(c.clone(), d, i as u64);
        run(c.clone(), GpuAttentionSchedule { splits: 3, ..d }, i as u64 + 10);
    }
    // bf16, no mask, head dim 128 and a value dim of 32, a window, ALiBi per position.
    let c = AttentionCase { mask: MaskForm::None, value_dim: 32, ..decode_case(DType::BF16, 128, (2, 150), 2) };
    run(c.clone(), GpuAttentionSchedule { splits: 4, ..decode_default(&c) }, 20);
    let c = AttentionCase {
        mask: MaskForm::Window(50),
        score: ScoreForm::Alibi(0.25),
        ..decode_case(DType::F16, 32, (3, 300), 4)
    };
    run(c.clone(), GpuAttentionSchedule { splits: 5, ..decode_default(&c) }, 21);
    // Many queries: packed heads in 64-row blocks of 4 warps, split in two.
    let c = AttentionCase { dtype: DType::F16, ..AttentionCase::grouped_heads(45, 130, 64) };
    run(
        c,
        GpuAttentionSchedule { block: [64, 64], warps: 4, stages: 2, splits: 2, ..GpuAttentionSchedule::plain() },
        22,
    );
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn emulated_row_log_sum_exp_and_fully_masked_rows_match_the_interpreter() {
    let mut failures = Vec::new();
    // The log-sum-exp beside the output, in one split and in several.
    for (i, splits) in [1u32, 4].into_iter().enumerate() {
        let c = AttentionCase { log_sum_exp: true, ..decode_case(DType::F16, 64, (2, 270), 2) };
        let s = GpuAttentionSchedule { splits, ..decode_default(&c) };
        if let Err(e) = emulate(&c, s, 30 + i as u64, |_| {}) {
            failures.push(e);
        }
    }
    // Causal with more queries than keys: the first rows see no key (NaN output and
    // log-sum-exp), and a split whose keys are all masked adds nothing.
    let c = AttentionCase { log_sum_exp: true, ..decode_case(DType::F16, 64, (5, 3), 2) };
    if let Err(e) = emulate(&c, GpuAttentionSchedule { splits: 2, ..decode_default(&c) }, 40, |_| {}) {
        failures.push(e);
    }
    // A mask tensor keeping nothing in row 0 and only the last keys elsewhere: whole splits and
    // whole rows masked, with a -inf and a finite fill.
    for fill in [f64::NEG_INFINITY, -10000.0] {
        let c = AttentionCase { fill, mask: MaskForm::Tensor, ..decode_case(DType::F16, 64, (3, 300), 2) };
        let keep = |inputs: &mut [tcc_ir::interp::Tensor]| {
            if let Some(k) = inputs.last_mut() {
                for (i, x) in k.data.iter_mut().enumerate() {
                    let (row, col) = (i / 300, i % 300);
                    *x = if row == 0 || col < 250 { 0.0 } else { 1.0 };
                }
            }
        };
        if let Err(e) = emulate(&c, GpuAttentionSchedule { splits: 4, ..decode_default(&c) }, 41, keep) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn emulated_warpgroup_attention_matches_the_interpreter() {
    let mut failures = Vec::new();
    let mut run = |c: &AttentionCase, s: GpuAttentionSchedule, seed: u64| {
        if let Err(e) = emulate_on(GpuArch::Sm90a, c, s, seed, |_| {}) {
            failures.push(e);
        }
    };
    // Two query heads over one K/V head, causal with fewer queries than keys, lengths off the
    // blocks (the emulator runs a thread per GPU thread: small cases).
    let small = |head_dim: u64, dtype: DType| AttentionCase {
        batch: vec![1],
        heads: 2,
        kv_heads: 1,
        dtype,
        ..AttentionCase::grouped_heads(100, 150, head_dim)
    };
    // Every warpgroup schedule at head dim 64; the first and the last at 128, bf16, no mask.
    let c = small(64, DType::F16);
    let space = warpgroup_space(&c);
    assert_eq!(space.len(), 8, "{space:?}");
    for (j, &s) in space.iter().enumerate() {
        run(&c, s, j as u64);
    }
    let wide = AttentionCase { mask: MaskForm::None, ..small(128, DType::BF16) };
    let wide_space = warpgroup_space(&wide);
    for (j, s) in [wide_space[0], wide_space[wide_space.len() - 1]].into_iter().enumerate() {
        run(&wide, s, 10 + j as u64);
    }
    // Each score form and mask; a value dim of 64 beside a head dim of 128; more queries than
    // keys (fully masked rows); the row log-sum-exp (the split form) in one split and in three.
    let first = space[0];
    for (k, (score, mask)) in SCORE_FORMS.into_iter().enumerate() {
        run(&AttentionCase { score, mask, ..c.clone() }, first, 20 + k as u64);
    }
    let narrow = AttentionCase { value_dim: 64, ..small(128, DType::F16) };
    run(&narrow, warpgroup_space(&narrow)[0], 30);
    let over = AttentionCase { q_len: 140, kv_len: 70, ..small(64, DType::BF16) };
    run(&over, first, 31);
    for (k, splits) in [1u32, 3].into_iter().enumerate() {
        let lse = AttentionCase { log_sum_exp: true, ..c.clone() };
        run(&lse, GpuAttentionSchedule { splits, ..first }, 40 + k as u64);
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn emulated_producer_attention_matches_the_interpreter() {
    let mut failures = Vec::new();
    let mut run = |c: &AttentionCase, s: GpuAttentionSchedule, seed: u64| {
        assert!(s.producer, "{s:?}");
        if let Err(e) = emulate_on(GpuArch::Sm90a, c, s, seed, |_| {}) {
            failures.push(e);
        }
    };
    // A producer warpgroup copies the ring on mbarriers: every such schedule of the space at head
    // dim 64 (grouped heads, causal with fewer queries than keys, lengths off the blocks), two at
    // 128, each score form and mask, fully masked rows and the split form.
    let small = |head_dim: u64, dtype: DType| AttentionCase {
        batch: vec![2],
        heads: 2,
        kv_heads: 1,
        dtype,
        ..AttentionCase::grouped_heads(100, 150, head_dim)
    };
    let producers = |c: &AttentionCase| -> Vec<GpuAttentionSchedule> {
        warpgroup_space(c).iter().filter_map(GpuAttentionSchedule::with_producer).collect()
    };
    let c = small(64, DType::F16);
    let space = producers(&c);
    assert_eq!(space.len(), 8, "{space:?}");
    for (j, &s) in space.iter().enumerate() {
        run(&c, s, 50 + j as u64);
    }
    let wide = AttentionCase { mask: MaskForm::None, ..small(128, DType::BF16) };
    let wide_space = producers(&wide);
    for (j, s) in [wide_space[0], wide_space[wide_space.len() - 1]].into_iter().enumerate() {
        run(&wide, s, 60 + j as u64);
    }
    let first = space[0];
    for (k, (score, mask)) in SCORE_FORMS.into_iter().enumerate() {
        run(&AttentionCase { score, mask, ..c.clone() }, first, 70 + k as u64);
    }
    let over = AttentionCase { q_len: 140, kv_len: 70, ..small(64, DType::BF16) };
    run(&over, first, 80);
    let lse = AttentionCase { log_sum_exp: true, ..c.clone() };
    run(&lse, GpuAttentionSchedule { splits: 3, ..first }, 81);
    // Ping-pong (two consumer warpgroups taking turns): every such schedule at head dim 64, one
    // at 128, soft cap, and the split form.
    let pingpong: Vec<GpuAttentionSchedule> = space.iter().filter_map(GpuAttentionSchedule::with_pingpong).collect();
    assert_eq!(pingpong.len(), 4, "{pingpong:?}");
    for (j, &s) in pingpong.iter().enumerate() {
        assert!(s.pingpong);
        run(&c, s, 90 + j as u64);
    }
    if let Some(s) = wide_space.iter().find_map(GpuAttentionSchedule::with_pingpong) {
        run(&wide, s, 95);
    }
    run(&AttentionCase { score: ScoreForm::SoftCap(30.0), mask: MaskForm::None, ..c.clone() }, pingpong[0], 96);
    run(&lse, GpuAttentionSchedule { splits: 3, ..pingpong[0] }, 97);
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn tma_producers_describe_keys_and_values_by_tensor_maps() {
    // Head-major K/V `[2, 2, T, d]` read by 4 query heads (the K/V heads broadcast), and
    // token-major `[2, T, 2 * d]` read through reshape and permute: per operand a 3-D map
    // `[d, T, slabs]` in boxes of 64 columns by the key block.
    let (t, d) = (150u64, 128u64);
    let head_major = AttentionCase { dtype: DType::BF16, ..AttentionCase::grouped_heads(100, t, d) };
    let token = token_major(DType::F16, d, (100, t), (4, 2));
    for (c, strides, slabs) in
        [(&head_major, [d * 2, t * d * 2], 4), (&token, [2 * d * 2, d * 2], (t * 2 * d + d) / d + 1)]
    {
        let s = warpgroup_space(c)[0].with_tma().unwrap();
        assert!(s.tma && s.producer && !s.pingpong, "{s:?}");
        let ir = ptx::emit_llvm_ir(&attention_kernel(c, s), &Bindings::new(), GpuArch::Sm90a).unwrap();
        let maps = &ir.steps[0].tensor_maps;
        assert_eq!(maps.len(), 2, "{c:?}");
        for m in maps {
            assert_eq!(m.dims, vec![d, t, slabs], "{c:?}");
            assert_eq!(m.strides, strides.to_vec(), "{c:?}");
            assert_eq!(m.box_dims, vec![64, s.block[1], 1]);
        }
        assert!(ir.llvm_ir.contains("cp.async.bulk.tensor.3d"), "{c:?}");
        // The cp.async producer of the same schedule takes no map.
        let plain = GpuAttentionSchedule { tma: false, ..s };
        let ir = ptx::emit_llvm_ir(&attention_kernel(c, plain), &Bindings::new(), GpuArch::Sm90a).unwrap();
        assert!(ir.steps[0].tensor_maps.is_empty());
    }
}

/// K and V as a model's projections write them, token-major `[.., T, kv_heads * d]`, read
/// through `reshape` and `permute` as `[.., kv_heads, T, d]` (no permute kernel before the
/// attention).
fn token_major(dtype: DType, head_dim: u64, (q_len, kv_len): (u64, u64), heads: (u64, u64)) -> AttentionCase {
    let (heads, kv_heads) = heads;
    AttentionCase { dtype, heads, kv_heads, token_major: true, ..AttentionCase::grouped_heads(q_len, kv_len, head_dim) }
}

#[test]
fn token_major_keys_and_values_assemble_without_spills() {
    for head_dim in [64u64, 128] {
        for (dtype, q_len) in [(DType::BF16, 200u64), (DType::F16, 1)] {
            let c = token_major(dtype, head_dim, (q_len, 333), (8, 2));
            assert!(GpuAttention::find(&c.graph().unwrap()).is_some(), "{c:?}");
            let d = decode_default(&c);
            for s in [d, GpuAttentionSchedule { splits: 2, ..d }] {
                for compiled in check_kernel(&attention_kernel(&c, s), &Bindings::new()) {
                    let l = lowerings(&compiled);
                    assert!(l == ONE || l == SPLIT, "{s:?}: {l:?}");
                }
            }
        }
    }
}

#[test]
fn emulated_token_major_keys_and_values_match_the_interpreter() {
    let mut failures = Vec::new();
    let cases = [
        // Prefill in the one-kernel form: 4 query heads per K/V head, lengths off the blocks.
        (token_major(DType::BF16, 64, (70, 70), (8, 2)), 1u32),
        (token_major(DType::F16, 32, (33, 90), (4, 4)), 1),
        // The split form over packed heads, and decoding.
        (token_major(DType::F16, 64, (45, 130), (4, 2)), 2),
        (token_major(DType::BF16, 128, (1, 200), (8, 1)), 0),
    ];
    for (i, (c, splits)) in cases.into_iter().enumerate() {
        let s = GpuAttentionSchedule { splits, ..decode_default(&c) };
        if let Err(e) = emulate(&c, s, 50 + i as u64, |_| {}) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn emulated_token_major_outputs_are_stored_in_place() {
    // The output `[.., heads, S, d]` stored as `[.., S, heads * d]` (an output projection's
    // rows): through the staged epilogue (sm_80), from the accumulators (a producer warpgroup,
    // sm_90a), and by the split form's combine entry.
    let mut failures = Vec::new();
    let out = |c: AttentionCase| AttentionCase { token_major_output: true, ..c };
    let prefill = out(token_major(DType::BF16, 64, (70, 70), (8, 2)));
    let batch = out(AttentionCase { dtype: DType::F16, ..AttentionCase::grouped_heads(45, 130, 32) });
    let decode = out(token_major(DType::BF16, 128, (1, 200), (8, 1)));
    for (i, c) in [&prefill, &batch, &decode].into_iter().enumerate() {
        assert!(GpuAttention::find(&c.graph().unwrap()).is_some_and(|g| g.attention.layout.is_some()), "{c:?}");
        let d = decode_default(c);
        for (j, s) in [d, GpuAttentionSchedule { splits: 2, ..d }].into_iter().enumerate() {
            if let Err(e) = emulate(c, s, 70 + 2 * i as u64 + j as u64, |_| {}) {
                failures.push(e);
            }
        }
    }
    let wide =
        out(AttentionCase { dtype: DType::F16, heads: 2, kv_heads: 1, ..AttentionCase::grouped_heads(100, 150, 64) });
    let producer = warpgroup_space(&wide).iter().find_map(GpuAttentionSchedule::with_producer).expect("a producer");
    for (k, s) in [producer, warpgroup_space(&wide)[0]].into_iter().enumerate() {
        if let Err(e) = emulate_on(GpuArch::Sm90a, &wide, s, 80 + k as u64, |_| {}) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
