//! The timing harness both CPU-tier examples share: buffers for a kernel's declared arguments,
//! its phases run on threads the way the runtime runs them, and the median of repeated runs.
//! Included with `#[path]` by `cranelift_gemm_bench` and `llvm_cpu_bench`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tcc_codegen::{BufDecl, BufKind, PhaseFn};

/// A JIT-compiled CPU kernel of either tier.
pub trait JitKernel {
    /// Its declared buffers.
    fn buffers(&self) -> &[BufDecl];
    /// Its phases, in order.
    fn phases(&self) -> &[PhaseFn];
}

impl JitKernel for tcc_codegen::CpuKernel {
    fn buffers(&self) -> &[BufDecl] {
        tcc_codegen::CpuKernel::buffers(self)
    }
    fn phases(&self) -> &[PhaseFn] {
        tcc_codegen::CpuKernel::phases(self)
    }
}

#[cfg(feature = "llvm")]
impl JitKernel for tcc_codegen::LlvmCpuKernel {
    fn buffers(&self) -> &[BufDecl] {
        tcc_codegen::LlvmCpuKernel::buffers(self)
    }
    fn phases(&self) -> &[PhaseFn] {
        tcc_codegen::LlvmCpuKernel::phases(self)
    }
}

/// The values of a `sep`-separated environment list (`default` when unset).
pub fn env_list(name: &str, default: &str, sep: char) -> Vec<u64> {
    std::env::var(name).unwrap_or_else(|_| default.to_string()).split(sep).filter_map(|x| x.parse().ok()).collect()
}

/// One cache line of f32s, aligned as one (a plain `[f32; 16]` is only 4-byte aligned, and
/// the allocator's 16-byte alignment splits every 64-byte vector load).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub struct Line(pub [f32; 16]);

/// 64-byte aligned storage.
pub fn storage(bytes: usize) -> Vec<Line> {
    vec![Line([0.0; 16]); bytes.div_ceil(64).max(1)]
}

pub type Entry = unsafe extern "C" fn(*const *mut u8, u64, u64);

/// Storage of every buffer, and `(buffer index, bytes)` of the call-local ones.
pub type Buffers = (Vec<Vec<Line>>, Vec<(usize, usize)>);

/// Buffers for `k`: inputs filled with a deterministic pattern, everything else zero.
pub fn buffers(k: &dyn JitKernel) -> Buffers {
    let mut bufs = Vec::new();
    let mut locals = Vec::new();
    for (i, d) in k.buffers().iter().enumerate() {
        let bytes = d.len as usize * d.dtype.size_bytes();
        let mut s = storage(bytes);
        if let BufKind::Input(_) = d.kind {
            for (j, v) in s.iter_mut().flat_map(|l| l.0.iter_mut()).enumerate() {
                *v = ((j * 7919 + i * 31) % 1000) as f32 / 1000.0 - 0.5;
            }
        }
        if d.kind == BufKind::Local {
            locals.push((i, bytes));
        }
        bufs.push(s);
    }
    (bufs, locals)
}

/// Runs every phase, rows split into `4 * threads` chunks taken dynamically by `threads` threads
/// (the runtime's scheme), each call with its own local buffers.
pub fn run(k: &dyn JitKernel, ptrs: &[usize], locals: &[(usize, usize)], threads: usize) {
    for p in k.phases() {
        run_phase(p, ptrs, locals, threads);
    }
}

/// Runs one phase the way [`run`] does.
pub fn run_phase(p: &PhaseFn, ptrs: &[usize], locals: &[(usize, usize)], threads: usize) {
    // SAFETY: `entry` is a JIT'd function of the uniform ABI, alive while its kernel is.
    let f: Entry = unsafe { std::mem::transmute::<usize, Entry>(p.entry) };
    let rows = p.rows.max(1);
    let chunks = (4 * threads as u64).min(rows);
    let next = AtomicU64::new(0);
    let work = || {
        let mut mine = ptrs.to_vec();
        let mut own = Vec::new();
        for &(slot, bytes) in locals {
            let mut s = storage(bytes);
            mine[slot] = s.as_mut_ptr() as usize;
            own.push(s);
        }
        loop {
            let c = next.fetch_add(1, Ordering::Relaxed);
            if c >= chunks {
                break;
            }
            // SAFETY: one pointer per declared buffer, each large enough; chunks cover
            // disjoint rows, which the lowering proved write disjoint memory.
            unsafe { f(mine.as_ptr().cast(), rows * c / chunks, rows * (c + 1) / chunks) };
        }
    };
    if threads <= 1 || chunks <= 1 {
        work();
    } else {
        std::thread::scope(|s| {
            for _ in 1..threads {
                s.spawn(work);
            }
            work();
        });
    }
}

/// Nanoseconds this thread has spent on a CPU (Linux `schedstat`; 0 elsewhere).
pub fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(0)
}

/// Median wall seconds of `reps` runs, and (with one thread) the mean seconds on a CPU.
pub fn median_seconds(k: &dyn JitKernel, threads: usize, reps: usize) -> (f64, f64) {
    let (mut bufs, locals) = buffers(k);
    let ptrs: Vec<usize> = bufs.iter_mut().map(|b| b.as_mut_ptr() as usize).collect();
    run(k, &ptrs, &locals, threads);
    let start = thread_cpu_ns();
    let mut wall: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            run(k, &ptrs, &locals, threads);
            t.elapsed().as_secs_f64()
        })
        .collect();
    // The CPU time is counted in scheduler ticks: only its mean over all runs is precise.
    let cpu = (thread_cpu_ns() - start) as f64 * 1e-9 / reps as f64;
    wall.sort_by(f64::total_cmp);
    (wall[wall.len() / 2], cpu)
}

/// Median wall seconds of each phase of `k` over `reps` runs of the whole kernel.
pub fn median_phase_seconds(k: &dyn JitKernel, threads: usize, reps: usize) -> Vec<f64> {
    let (mut bufs, locals) = buffers(k);
    let ptrs: Vec<usize> = bufs.iter_mut().map(|b| b.as_mut_ptr() as usize).collect();
    run(k, &ptrs, &locals, threads);
    let mut times = vec![Vec::with_capacity(reps); k.phases().len()];
    for _ in 0..reps {
        for (p, t) in k.phases().iter().zip(&mut times) {
            let start = Instant::now();
            run_phase(p, &ptrs, &locals, threads);
            t.push(start.elapsed().as_secs_f64());
        }
    }
    times
        .into_iter()
        .map(|mut t| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        })
        .collect()
}
