//! The GPU's measured ceilings for benchmark reports (never datasheet numbers): bandwidth from a
//! large device-to-device copy, and compute from issue-rate microbenchmarks — back-to-back
//! `mma.sync.m16n8k16` (f16 in, f32 accumulate) from registers, and back-to-back f32 FMA.
//!
//! The microbenchmarks are small hand-written PTX modules loaded through the driver (no LLVM
//! needed): they measure the machine, not tcc's code generator, so they stay independent of the
//! kernels being judged.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;

use super::device::CudaDevice;
use super::error::CudaError;

/// Measured ceilings of one GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuCeilings {
    /// Device-to-device copy bandwidth, GB/s of bytes read plus written.
    pub copy_gbps: f64,
    /// Bytes copied per repetition.
    pub copy_bytes: u64,
    /// Back-to-back `mma.sync.m16n8k16` f16→f32 from registers, GFLOP/s (best launch shape).
    pub mma_f16_gflops: f64,
    /// Back-to-back f32 FMA (`fma.rn.f32`), GFLOP/s (an FMA counts 2 flops).
    pub fma_f32_gflops: f64,
    /// Warps per block of the best `mma.sync` launch.
    pub mma_warps: u32,
}

/// Independent accumulator chains per thread (enough to hide the instruction latency).
const CHAINS: usize = 8;
/// Chains' steps unrolled per loop iteration.
const UNROLL: usize = 4;
/// Loop iterations of a timed launch.
const ITERS: u32 = 2048;
/// Flops of one `mma.sync.m16n8k16`.
const MMA_FLOPS: f64 = 2.0 * 16.0 * 8.0 * 16.0;

/// The PTX of both microbenchmarks: `tcc_mma_ceiling(out, iters)` and `tcc_fma_ceiling(out, iters)`.
fn ceiling_ptx() -> String {
    let mut s = String::from(".version 7.0\n.target sm_80\n.address_size 64\n\n");
    // mma.sync: every thread holds CHAINS independent f32x4 accumulators; A and B fragments are
    // arbitrary register values (the rate does not depend on them).
    s.push_str(".visible .entry tcc_mma_ceiling(.param .u64 out, .param .u32 iters)\n{\n");
    s.push_str("  .reg .pred %p;\n  .reg .b32 %a<6>;\n  .reg .b32 %i, %n, %t, %idx;\n  .reg .b64 %o, %off;\n");
    s.push_str(&format!("  .reg .f32 %d<{}>;\n  .reg .f32 %s;\n", CHAINS * 4));
    s.push_str("  ld.param.u64 %o, [out];\n  ld.param.u32 %n, [iters];\n  mov.u32 %t, %tid.x;\n");
    for (k, m) in [1u32, 3, 5, 7, 11, 13].iter().enumerate() {
        s.push_str(&format!("  mul.lo.u32 %a{k}, %t, {m};\n"));
    }
    for r in 0..CHAINS * 4 {
        s.push_str(&format!("  mov.f32 %d{r}, 0f00000000;\n"));
    }
    s.push_str("  mov.u32 %i, 0;\nMMA_LOOP:\n");
    for _ in 0..UNROLL {
        for c in 0..CHAINS {
            let d = format!("{{%d{}, %d{}, %d{}, %d{}}}", 4 * c, 4 * c + 1, 4 * c + 2, 4 * c + 3);
            s.push_str(&format!(
                "  mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {d}, {{%a0, %a1, %a2, %a3}}, {{%a4, %a5}}, {d};\n"
            ));
        }
    }
    s.push_str("  add.u32 %i, %i, 1;\n  setp.lt.u32 %p, %i, %n;\n  @%p bra MMA_LOOP;\n");
    push_sum_and_store(&mut s);
    // FMA: CHAINS*4 independent chains d = d * a + b per thread.
    s.push_str(".visible .entry tcc_fma_ceiling(.param .u64 out, .param .u32 iters)\n{\n");
    s.push_str("  .reg .pred %p;\n  .reg .b32 %i, %n, %t, %idx;\n  .reg .b64 %o, %off;\n  .reg .f32 %x, %y;\n");
    s.push_str(&format!("  .reg .f32 %d<{}>;\n  .reg .f32 %s;\n", CHAINS * 4));
    s.push_str("  ld.param.u64 %o, [out];\n  ld.param.u32 %n, [iters];\n  mov.u32 %t, %tid.x;\n");
    s.push_str("  cvt.rn.f32.u32 %x, %t;\n  mov.f32 %y, 0f3F7FFFFF;\n");
    for r in 0..CHAINS * 4 {
        s.push_str(&format!("  add.f32 %d{r}, %x, 0f3F800000;\n"));
    }
    s.push_str("  mov.u32 %i, 0;\nFMA_LOOP:\n");
    for _ in 0..UNROLL {
        for r in 0..CHAINS * 4 {
            s.push_str(&format!("  fma.rn.f32 %d{r}, %d{r}, %y, %x;\n"));
        }
    }
    s.push_str("  add.u32 %i, %i, 1;\n  setp.lt.u32 %p, %i, %n;\n  @%p bra FMA_LOOP;\n");
    push_sum_and_store(&mut s);
    s
}

/// Sums the accumulators and stores one f32 per thread (so nothing is dead code), then returns.
fn push_sum_and_store(s: &mut String) {
    s.push_str("  mov.f32 %s, %d0;\n");
    for r in 1..CHAINS * 4 {
        s.push_str(&format!("  add.f32 %s, %s, %d{r};\n"));
    }
    s.push_str("  mov.u32 %idx, %ctaid.x;\n  mov.u32 %i, %ntid.x;\n  mad.lo.u32 %idx, %idx, %i, %t;\n");
    s.push_str("  mul.wide.u32 %off, %idx, 4;\n  add.u64 %o, %o, %off;\n  st.global.f32 [%o], %s;\n  ret;\n}\n\n");
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

impl CudaDevice {
    /// Measures this GPU's ceilings: a `copy_bytes` device-to-device copy (median of 9 after a
    /// warm-up), and the best of a few launch shapes of each issue-rate microbenchmark.
    pub fn measure_ceilings(&self, copy_bytes: u64) -> Result<GpuCeilings, CudaError> {
        let copy_gbps = self.measure_copy_gbps(copy_bytes)?;
        let module = self
            .context()
            .load_module(Ptx::from_src(ceiling_ptx()))
            .map_err(|e| CudaError::driver("loading the ceiling microbenchmarks", e))?;
        let mma =
            module.load_function("tcc_mma_ceiling").map_err(|e| CudaError::driver("finding tcc_mma_ceiling", e))?;
        let fma =
            module.load_function("tcc_fma_ceiling").map_err(|e| CudaError::driver("finding tcc_fma_ceiling", e))?;
        let mut best_mma = (0.0f64, 0u32);
        for warps in [4u32, 8, 16] {
            let ops_per_warp = (CHAINS * UNROLL) as f64 * f64::from(ITERS);
            let rate = self.issue_rate(&mma, warps, ops_per_warp * MMA_FLOPS, "tcc_mma_ceiling")?;
            if rate > best_mma.0 {
                best_mma = (rate, warps);
            }
        }
        let mut best_fma = 0.0f64;
        for warps in [8u32, 16, 32] {
            let flops_per_warp = 32.0 * (CHAINS * 4 * UNROLL) as f64 * f64::from(ITERS) * 2.0;
            best_fma = best_fma.max(self.issue_rate(&fma, warps, flops_per_warp, "tcc_fma_ceiling")?);
        }
        Ok(GpuCeilings {
            copy_gbps,
            copy_bytes,
            mma_f16_gflops: best_mma.0,
            fma_f32_gflops: best_fma,
            mma_warps: best_mma.1,
        })
    }

    /// GB/s (read plus written) of a device-to-device copy of `bytes`.
    fn measure_copy_gbps(&self, bytes: u64) -> Result<f64, CudaError> {
        let n = usize::try_from(bytes.max(1)).map_err(|_| CudaError::Internal(format!("{bytes} bytes")))?;
        let stream = self.stream();
        let oom = |e| CudaError::driver(format!("allocating {bytes} bytes for the copy ceiling"), e);
        let src = stream.alloc_zeros::<u8>(n).map_err(oom)?;
        let mut dst = stream.alloc_zeros::<u8>(n).map_err(oom)?;
        let mut times = Vec::new();
        for rep in 0..10 {
            let start = self.record_event()?;
            stream.memcpy_dtod(&src, &mut dst).map_err(|e| CudaError::driver("copying for the copy ceiling", e))?;
            let end = self.record_event()?;
            let ms = f64::from(self.elapsed_ms(&start, &end)?);
            if rep > 0 {
                times.push(ms);
            }
        }
        let ms = median(times);
        Ok(2.0 * bytes as f64 / (ms * 1e-3) / 1e9)
    }

    /// GFLOP/s of one microbenchmark launched with 4 blocks per SM of `warps` warps each
    /// (median of 5 timed launches after a warm-up); `flops_per_warp` is one warp's work.
    fn issue_rate(&self, func: &CudaFunction, warps: u32, flops_per_warp: f64, name: &str) -> Result<f64, CudaError> {
        let blocks = self.info().sm_count.max(1) * 4;
        let threads = warps * 32;
        let stream: &Arc<_> = self.stream();
        let mut out = stream
            .alloc_zeros::<f32>((blocks * threads) as usize)
            .map_err(|e| CudaError::driver("allocating the microbenchmark output", e))?;
        let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
        let mut times = Vec::new();
        for rep in 0..6 {
            let iters = if rep == 0 { 16u32 } else { ITERS };
            let start = self.record_event()?;
            let mut args = stream.launch_builder(func);
            args.arg(&mut out);
            args.arg(&iters);
            // SAFETY: the entry takes (a pointer to blocks*threads f32, a u32), which `out` and
            // `iters` are; `out` lives until the stream is synchronized by `elapsed_ms`.
            unsafe { args.launch(cfg) }.map_err(|source| CudaError::Launch {
                kernel: name.to_string(),
                entry: name.to_string(),
                source,
            })?;
            let end = self.record_event()?;
            let ms = f64::from(self.elapsed_ms(&start, &end)?);
            if rep > 0 {
                times.push(ms);
            }
        }
        let ms = median(times);
        Ok(flops_per_warp * f64::from(warps) * f64::from(blocks) / (ms * 1e-3) / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microbenchmark_ptx_declares_both_entries_and_balanced_braces() {
        let ptx = ceiling_ptx();
        assert!(ptx.contains(".visible .entry tcc_mma_ceiling("));
        assert!(ptx.contains(".visible .entry tcc_fma_ceiling("));
        assert_eq!(ptx.matches("mma.sync.aligned.m16n8k16").count(), CHAINS * UNROLL);
        assert_eq!(ptx.matches('{').count(), ptx.matches('}').count());
    }

    /// With feature `llvm` (where CI installs ptxas), the PTX assembles for every target tcc
    /// supports, without spills.
    #[cfg(feature = "llvm")]
    #[test]
    fn microbenchmark_ptx_assembles_with_ptxas() {
        use tcc_codegen::ptx::{GpuArch, assemble, find_ptxas};
        let ptxas = find_ptxas().unwrap_or_else(|e| panic!("feature `llvm` tests need ptxas: {e}"));
        for arch in GpuArch::ALL {
            let report = assemble(&ptxas, &ceiling_ptx(), arch).unwrap_or_else(|e| panic!("{arch}: {e}"));
            assert_eq!(report.spill_bytes(), 0, "{arch}");
        }
    }
}
