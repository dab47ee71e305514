//! The host CPU's measured ceilings for benchmark reports (never datasheet numbers): copy bandwidth
//! from a large multi-threaded memory copy, and compute from back-to-back vector FMAs on every core.

use std::time::Instant;

/// Measured ceilings of the host CPU.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuCeilings {
    /// Copy bandwidth, GB/s of bytes read plus written.
    pub copy_gbps: f64,
    /// Bytes copied per repetition.
    pub copy_bytes: usize,
    /// f32 FMA throughput on all threads, GFLOP/s (an FMA counts 2 flops).
    pub fma_gflops: f64,
    /// The vector width used for the FMA measurement (`avx512`, `avx2`, `scalar`).
    pub fma_isa: &'static str,
    /// f32 FMA throughput with 128-bit vectors (4 lanes) on all threads, GFLOP/s: the ceiling of
    /// code limited to 128-bit vectors, as the cranelift tier's; `None` without x86 FMA.
    pub fma128_gflops: Option<f64>,
    /// f32 FMA throughput with 256-bit vectors (8 lanes) on all threads, GFLOP/s: the ceiling of
    /// the cranelift tier's assembled `ymm` register tiles; `None` without AVX2 and FMA.
    pub fma256_gflops: Option<f64>,
    /// Threads used.
    pub threads: usize,
}

/// One FMA measurement routine: runs `iters` iterations, returns a sink value and the flops done.
type FmaKernel = fn(u64) -> (f32, f64);

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Measures copy bandwidth with `bytes`-sized buffers split across `threads` threads (median of 7).
pub fn measure_copy_gbps(bytes: usize, threads: usize) -> f64 {
    let threads = threads.max(1);
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    let chunk = bytes.div_ceil(threads).max(1);
    let mut times = Vec::new();
    for _ in 0..8 {
        let start = Instant::now();
        std::thread::scope(|s| {
            for (d, c) in dst.chunks_mut(chunk).zip(src.chunks(chunk)) {
                s.spawn(move || d.copy_from_slice(c));
            }
        });
        times.push(start.elapsed().as_secs_f64());
    }
    // The first repetition faults pages in; it is not a copy measurement.
    times.remove(0);
    std::hint::black_box(&dst);
    2.0 * bytes as f64 / median(times) / 1e9
}

/// Measures f32 FMA throughput on `threads` threads (median of 5), with the widest vector ISA the
/// CPU has.
pub fn measure_fma_gflops(threads: usize) -> (f64, &'static str) {
    let (kernel, isa) = pick_fma_kernel();
    (measure_with(kernel, threads), isa)
}

/// Measures f32 FMA throughput with 128-bit vectors (`vfmadd` on xmm registers, 12 independent
/// chains per thread) on `threads` threads (median of 5); `None` where the CPU has no FMA.
pub fn measure_fma128_gflops(threads: usize) -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("fma") {
            return Some(measure_with(x86::fma_128, threads));
        }
    }
    let _ = threads;
    None
}

/// Measures f32 FMA throughput with 256-bit vectors (`vfmadd` on ymm registers, 12 independent
/// chains per thread) on `threads` threads (median of 5); `None` where the CPU has no AVX2 and FMA.
pub fn measure_fma256_gflops(threads: usize) -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            return Some(measure_with(x86::fma_avx2, threads));
        }
    }
    let _ = threads;
    None
}

/// The median of 5 rates of `kernel` run at once on `threads` threads, GFLOP/s.
fn measure_with(kernel: FmaKernel, threads: usize) -> f64 {
    let threads = threads.max(1);
    let iters: u64 = 20_000_000;
    let mut rates = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let flops: f64 = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads).map(|_| s.spawn(move || kernel(iters))).collect();
            handles.into_iter().map(|h| h.join().map_or(0.0, |(sink, f)| f + f64::from(sink) * 0.0)).sum()
        });
        rates.push(flops / start.elapsed().as_secs_f64() / 1e9);
    }
    median(rates)
}

/// Measures both ceilings on every core.
pub fn measure_cpu_ceilings() -> CpuCeilings {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let copy_bytes = 256 << 20;
    let copy_gbps = measure_copy_gbps(copy_bytes, threads);
    let (fma_gflops, fma_isa) = measure_fma_gflops(threads);
    let fma128_gflops = measure_fma128_gflops(threads);
    // On an AVX2 host the widest measurement is the 256-bit one already.
    let fma256_gflops = if fma_isa == "avx2" { Some(fma_gflops) } else { measure_fma256_gflops(threads) };
    CpuCeilings { copy_gbps, copy_bytes, fma_gflops, fma_isa, fma128_gflops, fma256_gflops, threads }
}

fn pick_fma_kernel() -> (FmaKernel, &'static str) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return (x86::fma_avx512, "avx512");
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            return (x86::fma_avx2, "avx2");
        }
    }
    (fma_scalar, "scalar")
}

/// Portable fallback: independent scalar FMA chains.
fn fma_scalar(iters: u64) -> (f32, f64) {
    let mut acc = [0.0f32; 8];
    for _ in 0..iters {
        for a in &mut acc {
            *a = a.mul_add(1.000_000_1, 0.999_999_9);
        }
    }
    (acc.iter().sum(), 2.0 * 8.0 * iters as f64)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Chains kept in flight: enough to cover FMA latency on two ports.
    const CHAINS: usize = 12;

    pub fn fma_avx512(iters: u64) -> (f32, f64) {
        // SAFETY: chosen by `pick_fma_kernel` only when the CPU reports avx512f.
        let sink = unsafe { avx512(iters) };
        (sink, 2.0 * 16.0 * CHAINS as f64 * iters as f64)
    }

    pub fn fma_avx2(iters: u64) -> (f32, f64) {
        // SAFETY: chosen by `pick_fma_kernel` and `measure_fma256_gflops` only when the CPU
        // reports avx2 and fma.
        let sink = unsafe { avx2(iters) };
        (sink, 2.0 * 8.0 * CHAINS as f64 * iters as f64)
    }

    pub fn fma_128(iters: u64) -> (f32, f64) {
        // SAFETY: chosen by `measure_fma128_gflops` only when the CPU reports fma.
        let sink = unsafe { sse_fma(iters) };
        (sink, 2.0 * 4.0 * CHAINS as f64 * iters as f64)
    }

    #[target_feature(enable = "fma")]
    fn sse_fma(iters: u64) -> f32 {
        let a = _mm_set1_ps(1.000_000_1);
        let b = _mm_set1_ps(0.999_999_9);
        let mut acc = [_mm_set1_ps(0.0); CHAINS];
        for _ in 0..iters {
            for x in &mut acc {
                *x = _mm_fmadd_ps(*x, a, b);
            }
        }
        let mut total = _mm_set1_ps(0.0);
        for x in acc {
            total = _mm_add_ps(total, x);
        }
        let mut out = [0.0f32; 4];
        // SAFETY: `out` holds exactly 4 f32, the width of one __m128.
        unsafe { _mm_storeu_ps(out.as_mut_ptr(), total) };
        out.iter().sum()
    }

    #[target_feature(enable = "avx512f")]
    fn avx512(iters: u64) -> f32 {
        let a = _mm512_set1_ps(1.000_000_1);
        let b = _mm512_set1_ps(0.999_999_9);
        let mut acc = [_mm512_set1_ps(0.0); CHAINS];
        for _ in 0..iters {
            for x in &mut acc {
                *x = _mm512_fmadd_ps(*x, a, b);
            }
        }
        let mut total = _mm512_set1_ps(0.0);
        for x in acc {
            total = _mm512_add_ps(total, x);
        }
        _mm512_reduce_add_ps(total)
    }

    #[target_feature(enable = "avx2,fma")]
    fn avx2(iters: u64) -> f32 {
        let a = _mm256_set1_ps(1.000_000_1);
        let b = _mm256_set1_ps(0.999_999_9);
        let mut acc = [_mm256_set1_ps(0.0); CHAINS];
        for _ in 0..iters {
            for x in &mut acc {
                *x = _mm256_fmadd_ps(*x, a, b);
            }
        }
        let mut out = [0.0f32; 8];
        let mut total = _mm256_set1_ps(0.0);
        for x in acc {
            total = _mm256_add_ps(total, x);
        }
        // SAFETY: `out` holds exactly 8 f32, the width of one __m256.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), total) };
        out.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceilings_are_positive_and_finite() {
        let gbps = measure_copy_gbps(1 << 20, 2);
        assert!(gbps.is_finite() && gbps > 0.0, "{gbps}");
        let (kernel, _) = pick_fma_kernel();
        let (sink, flops) = kernel(1000);
        assert!(sink.is_finite() && flops > 0.0);
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("fma") {
            let (sink, flops) = x86::fma_128(1000);
            assert!(sink.is_finite() && flops > 0.0);
        }
    }
}
