//! Dual products on a CUDA device (feature `gpu-tests`): `silu(a @ g) * (a @ u)` as one
//! tensor-core kernel against the interpreter on random shapes (1, off the tile grid), both B
//! layouts, f16 and bf16, a batch; under the default `mma.sync` schedule, sampled schedules of the
//! dual kernel's space, and on sm_90a its warpgroup (TMA) schedules, persistent blocks that walk
//! several tiles included.

#![cfg(feature = "gpu-tests")]

use tcc_codegen::ptx::{self, BLayout, GpuArch, MatmulProblem};
use tcc_ir::testing::dual_gemm_graph;
use tcc_ir::{DType, Schedule, WgmmaSchedule};

use crate::gemm::{check, device};

/// A batch and an `(m, n, k)`.
type Case = (&'static [u64], (u64, u64, u64));

#[test]
fn dual_products_match_the_interpreter() {
    let arch = device().info().arch;
    let shapes: [Case; 5] =
        [(&[], (1, 1, 1)), (&[], (77, 50, 33)), (&[], (256, 384, 512)), (&[], (129, 136, 520)), (&[3], (40, 24, 64))];
    let p = MatmulProblem { m: 512, n: 1024, k: 512, batch: 1, dtype: DType::BF16, b_layout: BLayout::NK };
    let space: Vec<Schedule> =
        ptx::matmul_schedule_space(&p, arch).into_iter().filter(tcc_ir::dual::runs_schedule).collect();
    let mut schedules: Vec<Option<Schedule>> = vec![None];
    schedules.extend(space.iter().step_by(space.len().max(1).div_ceil(6)).map(|s| Some(*s)));
    if arch == GpuArch::Sm90a {
        // Every tiling of the dual kernel's warpgroup space at four stages, and the other stage
        // counts of the tiles whose blocks are persistent and store by TMA.
        for (consumers, bn) in [(2, 256), (2, 128), (1, 128), (1, 64)] {
            for stages in [3, 4, 5, 6] {
                if stages != 4 && bn == 64 {
                    continue;
                }
                let w = WgmmaSchedule {
                    consumers,
                    producer: false,
                    pingpong: false,
                    bn,
                    stages,
                    swizzle: 8,
                    tma: true,
                    splits: 1,
                };
                schedules.push(Some(Schedule { threads: 0, ..w.encode() }));
            }
        }
        // A producer warpgroup beside one or two consumers, or two taking alternate tiles (the
        // 64-wide tile runs without its producer).
        for (consumers, bn, pingpong) in
            [(2, 256, false), (2, 128, false), (1, 128, false), (2, 64, false), (2, 256, true)]
        {
            let w =
                WgmmaSchedule { consumers, producer: true, pingpong, bn, stages: 4, swizzle: 8, tma: true, splits: 1 };
            schedules.push(Some(Schedule { threads: 0, ..w.encode() }));
        }
    }
    let mut failures = Vec::new();
    let mut case = 0u64;
    for s in &schedules {
        for (batch, (m, n, k)) in shapes {
            for nk in [true, false] {
                case += 1;
                let dtype = if case.is_multiple_of(2) { DType::F16 } else { DType::BF16 };
                let g = dual_gemm_graph(dtype, batch, (m, n, k), nk).unwrap();
                if let Err(e) = check(&g, *s, case) {
                    failures.push(format!("{dtype} {batch:?} {m}x{n}x{k} nk={nk} [{s:?}]: {e}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// Persistent warpgroup dual blocks that walk several tiles (more tiles than SMs): the ring runs
/// on from each tile into the next while the TMA stores of the last one drain.
#[test]
fn persistent_warpgroup_dual_products_match_the_interpreter() {
    if device().info().arch != GpuArch::Sm90a {
        return;
    }
    let mut failures = Vec::new();
    // 64 x 64 and 128 x 64 output tiles: 170 and 85 tiles per product, batches of 2 and 3; with
    // a producer, two consumers sharing a tile or taking alternate ones.
    let cases = [
        (1u32, 3u32, false, false, &[][..]),
        (1, 6, false, false, &[2][..]),
        (2, 4, false, false, &[2][..]),
        (2, 3, false, false, &[3][..]),
        (2, 4, true, false, &[2][..]),
        (2, 3, true, true, &[][..]),
    ];
    for (case, (consumers, stages, producer, pingpong, batch)) in cases.into_iter().enumerate() {
        let w = WgmmaSchedule { consumers, producer, pingpong, bn: 128, stages, swizzle: 8, tma: true, splits: 1 };
        let s = Schedule { threads: 0, ..w.encode() };
        let (m, n, k) = (640, 1088, 392);
        let dtype = if case % 2 == 0 { DType::BF16 } else { DType::F16 };
        let g = dual_gemm_graph(dtype, batch, (m, n, k), true).unwrap();
        if let Err(e) = check(&g, Some(s), case as u64 + 100) {
            failures.push(format!("{dtype} {batch:?} {m}x{n}x{k} [{s}]: {e}"));
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
