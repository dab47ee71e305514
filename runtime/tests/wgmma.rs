//! Warpgroup (wgmma) GEMMs on an sm_90a device (feature `gpu-tests`): every variant against the
//! interpreter on random shapes (off the tile grid, rows not 16-byte aligned), both B layouts,
//! f16 and bf16, a fused bias + gelu epilogue, batches; large products against the f64
//! reference on sampled entries; and (ignored unless asked) timings against cuBLAS in the same
//! process. On other devices the tests return early (nothing to run).

#![cfg(feature = "gpu-tests")]

use tcc_codegen::ptx::wgmma::{default_wgmma_schedule, validate_wgmma_schedule, wgmma_schedule_space};
use tcc_codegen::ptx::{self, GpuArch};
use tcc_ir::testing::random_inputs;
use tcc_ir::{Bindings, DType, Schedule};
use tcc_runtime::HostTensor;
use tcc_runtime::cuda::{Cublas, TimingOptions};

use crate::gemm::{SweepShape, check, device, gemm_graph, problem, program, reference, sampled_rel_err};

fn hopper() -> bool {
    device().info().arch == GpuArch::Sm90a
}

/// A schedule's variant key, `{tile_m}x{tile_n}w{warps}v{vector_width}` (as `TCC_WG_SKIP` /
/// `TCC_WG_ONLY` name it; `v64` copies by TMA, `v8` by cp.async).
fn key(s: &Schedule) -> String {
    format!("{}x{}w{}v{}", s.tile_m, s.tile_n, s.warps, s.vector_width)
}

/// Whether the environment leaves variant `s` in: `TCC_WG_SKIP` and `TCC_WG_ONLY` are
/// comma-separated keys (see [`key`]), so that a device run can take one variant at a time.
fn selected(s: &Schedule) -> bool {
    let listed = |var: &str| std::env::var(var).ok().map(|v| v.split(',').any(|x| x == key(s)));
    listed("TCC_WG_SKIP") != Some(true) && listed("TCC_WG_ONLY") != Some(false)
}

/// One schedule per (consumers, tile_n, producer, copy engine) of the space, at `stages` stages.
fn variants(stages: u32) -> Vec<Schedule> {
    let p = problem(DType::F16, 4096, 4096, 4096, false);
    let mut out: Vec<Schedule> = Vec::new();
    // The listed (TMA) schedules and their cp.async twins (valid, not listed).
    let listed = wgmma_schedule_space(&p, GpuArch::Sm90a);
    let twins: Vec<Schedule> = listed
        .iter()
        .map(|s| Schedule { vector_width: 8, ..*s })
        .filter(|s| validate_wgmma_schedule(&p, s, GpuArch::Sm90a).is_ok())
        .collect();
    for s in listed.into_iter().chain(twins) {
        if s.stages == stages && selected(&s) && s.swizzle == 8 && !out.iter().any(|o| key(o) == key(&s)) {
            out.push(s);
        }
    }
    out
}

#[test]
fn wgmma_gemms_match_the_interpreter() {
    if !hopper() {
        return;
    }
    let shapes: [(u64, u64, u64); 6] =
        [(1, 1, 1), (77, 50, 33), (128, 256, 64), (200, 136, 520), (129, 257, 31), (300, 520, 200)];
    let mut failures = Vec::new();
    let mut case = 0u64;
    // Every variant meets four cases (dtype, shape, B layout and epilogue cycling) and a batch.
    for s in variants(4).into_iter().chain(variants(3).into_iter().take(4)) {
        for _ in 0..4 {
            case += 1;
            let dtype = if case.is_multiple_of(2) { DType::F16 } else { DType::BF16 };
            let (m, n, k) = shapes[(case as usize * 5) % shapes.len()];
            let nk = (case / 2) % 2 == 1;
            let epilogue = (case / 3).is_multiple_of(2);
            let g = gemm_graph(dtype, &[], m, n, k, nk, epilogue);
            if let Err(e) = check(&g, Some(s), case) {
                failures.push(format!("{dtype} {m}x{n}x{k} nk={nk} epi={epilogue} [{s}]: {e}"));
            }
        }
        let nk = case.is_multiple_of(2);
        let g = gemm_graph(DType::F16, &[3], 40, 24, 64, nk, true);
        if let Err(e) = check(&g, Some(s), 5) {
            failures.push(format!("batched nk={nk} [{s}]: {e}"));
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// `(batch, m, n, k, B stored [n, k], dtype, fused bias + gelu)` of a test product.
type SeveralTiles = (&'static [u64], u64, u64, u64, bool, DType, bool);

/// Persistent blocks walk several tiles when there are more tiles than SMs, and copy each next
/// tile's first k-tiles while they store the current one (with as few as 2 k-tiles per tile).
/// Products of 144 to 240 tiles of 128 x 256 (more of the smaller tiles), ragged, with and
/// without the fused bias + gelu, f16 and bf16, a batch, both B layouts, for every 8-warp
/// schedule of 4 stages.
#[test]
fn persistent_blocks_of_several_tiles_match_the_interpreter() {
    if !hopper() {
        return;
    }
    let p = problem(DType::F16, 4096, 4096, 4096, false);
    let schedules: Vec<Schedule> = wgmma_schedule_space(&p, GpuArch::Sm90a)
        .into_iter()
        .filter(|s| s.warps == 8 && s.stages == 4 && s.swizzle == 8 && selected(s))
        .collect();
    let cases: [SeveralTiles; 5] = [
        (&[], 1100, 4100, 72, false, DType::F16, true),
        (&[], 520, 8200, 300, true, DType::BF16, true),
        (&[], 1030, 4200, 264, false, DType::BF16, true),
        (&[5], 300, 4000, 136, true, DType::F16, true),
        (&[], 1100, 4100, 200, true, DType::F16, false),
    ];
    let mut failures = Vec::new();
    for (i, (batch, m, n, k, nk, dtype, epilogue)) in cases.into_iter().enumerate() {
        let g = gemm_graph(dtype, batch, m, n, k, nk, epilogue);
        for s in &schedules {
            if let Err(e) = check(&g, Some(*s), 11 + i as u64) {
                failures.push(format!("{dtype} {batch:?} {m}x{n}x{k} nk={nk} epi={epilogue} [{s}]: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// `(m, n, k, B stored [n, k])` of a test product.
type GemmShape = (u64, u64, u64, bool);

#[test]
fn large_wgmma_gemms_match_the_f64_reference_on_sampled_entries() {
    if !hopper() {
        return;
    }
    let mut failures = Vec::new();
    // Every variant on three large shapes; the untuned defaults of smaller products (64 x 128
    // and 128 x 128 blocks).
    let large = [(2048u64, 2048u64, 1024u64, false), (1999, 3001, 1000, true), (4096, 4096, 256, false)];
    let mut cases: Vec<(GemmShape, Vec<Schedule>)> = large.into_iter().map(|shape| (shape, variants(4))).collect();
    for (m, n, k) in [(1024u64, 1024u64, 1024u64), (1536, 1536, 512), (1100, 1030, 200)] {
        match default_wgmma_schedule(&problem(DType::F16, m, n, k, false), GpuArch::Sm90a) {
            Some(s) => cases.push(((m, n, k, false), vec![s])),
            None => failures.push(format!("{m}x{n}x{k}: no default warpgroup schedule")),
        }
    }
    for ((m, n, k, nk), schedules) in cases {
        let g = gemm_graph(DType::F16, &[], m, n, k, nk, false);
        let inputs = random_inputs(&g, &Bindings::new(), 3).unwrap();
        let host: Vec<HostTensor> = inputs.iter().map(|t| HostTensor::from_interp(t).unwrap()).collect();
        let want = reference(&inputs[0], &inputs[1], m as usize, n as usize, k as usize, nk, 512);
        for s in schedules {
            let out = device().run_program(&program(&g, Some(s)), &host).unwrap()[0].to_interp();
            let err = sampled_rel_err(&out, &want);
            if err.is_nan() || err > 2e-3 {
                failures.push(format!("{m}x{n}x{k} nk={nk} [{s}]: relative error {err:.2e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Times the large benchmark shapes with wgmma schedules, the mma.sync default and cuBLAS;
/// prints one line per measurement. Run with `--ignored --nocapture` on an H100.
#[test]
#[ignore]
fn wgmma_sweep_against_cublas() {
    if !hopper() {
        return;
    }
    let dev = device();
    let blas = Cublas::new(dev).unwrap();
    // `TCC_SWEEP_REPS=n` times n repetitions (sustained runs, to read clocks and power beside).
    let repetitions = std::env::var("TCC_SWEEP_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let opts = TimingOptions { warmup: 3, repetitions, flush_l2: true };
    let shapes: &[(&str, DType, u64, u64, u64, bool, bool)] = &[
        ("gemm_f16_4096", DType::F16, 4096, 4096, 4096, false, false),
        ("gemm_bf16_4096", DType::BF16, 4096, 4096, 4096, false, false),
        ("gemm_f16_4096_bt", DType::F16, 4096, 4096, 4096, true, false),
        ("gemm_bias_gelu_f16_4096", DType::F16, 4096, 4096, 4096, false, true),
        ("gemm_f16_8192", DType::F16, 8192, 8192, 8192, false, false),
        ("gemm_f16_llm_up", DType::F16, 8192, 14336, 4096, false, false),
        ("gemm_f16_ragged", DType::F16, 1999, 3001, 997, false, false),
    ];
    // `TCC_SWEEP_SHAPES=MxNxK,...` adds plain f16 products (`[k, n]` B) of those shapes.
    let extra: Vec<(String, u64, u64, u64)> = std::env::var("TCC_SWEEP_SHAPES")
        .unwrap_or_default()
        .split(',')
        .filter_map(|x| {
            let d: Vec<u64> = x.split('x').filter_map(|v| v.parse().ok()).collect();
            (d.len() == 3).then(|| (format!("f16_{x}"), d[0], d[1], d[2]))
        })
        .collect();
    let extra: Vec<(&str, DType, u64, u64, u64, bool, bool)> =
        extra.iter().map(|(name, m, n, k)| (name.as_str(), DType::F16, *m, *n, *k, false, false)).collect();
    let only = std::env::var("TCC_SWEEP_ONLY").ok();
    // `TCC_WG_MIN_TILE=E`: the smallest block tile (elements) timed (default 128 x 128).
    let min_tile: u32 = std::env::var("TCC_WG_MIN_TILE").ok().and_then(|v| v.parse().ok()).unwrap_or(128 * 128);
    let stages: Vec<u32> = std::env::var("TCC_WG_STAGES")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| vec![4]);
    for &(name, dtype, m, n, k, nk, epi) in shapes.iter().chain(&extra) {
        if only.as_ref().is_some_and(|o| !o.split(',').any(|x| x == name)) {
            continue;
        }
        let shape = SweepShape::new(dev, &blas, name, dtype, (m, n, k), nk, epi, opts);
        let p = problem(dtype, m, n, k, nk);
        let mut schedules = vec![("mma.sync default".to_string(), ptx::default_matmul_schedule(&p, GpuArch::Sm90a))];
        if let Some(s) = default_wgmma_schedule(&p, GpuArch::Sm90a) {
            schedules.push((format!("wgmma default {s}"), s));
        }
        for st in &stages {
            for s in variants(*st) {
                if s.tile_m * s.tile_n >= min_tile {
                    schedules.push((format!("{s}"), s));
                }
            }
        }
        for (label, s) in schedules {
            shape.time(dev, &label, Some(s), opts);
        }
    }
}
