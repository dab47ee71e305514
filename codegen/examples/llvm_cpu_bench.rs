//! Times kernels of the CPU LLVM tier, calling the JIT'd phases on threads as the runtime does:
//! `cargo run --release -p tcc-codegen --features llvm --example llvm_cpu_bench [gemm|softmax|gelu]`.
//!
//! Environment: `SIZE=1024` (GEMM M=N=K), `ROWS=4096`, `COLS=4096` (softmax and gelu), `THREADS=1,2`, `TILES=MRxNRxMCxNCxKC` (register tile and
//! panels), `REPS=15`, `ASM=FILE` (writes the assembly to FILE and the emitted IR to FILE.ll). Prints the median time of each configuration. Run it while nothing else is
//! compiling: two cores are easily shared.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tcc_codegen::{Backend, BufKind, GemmTiles, LlvmCpuBackend, LlvmCpuKernel};
use tcc_ir::{
    BinaryOp, Bindings, DType, Graph, Kernel, KernelClass, Op, ReduceOp, Schedule, Shape, TensorType, Tier, UnaryOp,
};

type Entry = unsafe extern "C" fn(*const *mut u8, u64, u64);

fn env_list(name: &str, default: &str, sep: char) -> Vec<u64> {
    std::env::var(name).unwrap_or_else(|_| default.to_string()).split(sep).filter_map(|x| x.parse().ok()).collect()
}

fn ty(dims: &[u64]) -> TensorType {
    TensorType { dtype: DType::F32, shape: Shape::from_consts(dims) }
}

/// 64-byte aligned storage.
fn storage(bytes: usize) -> Vec<[f32; 16]> {
    vec![[0.0; 16]; bytes.div_ceil(64).max(1)]
}

/// Storage of every buffer, and `(buffer index, bytes)` of the call-local ones.
type Buffers = (Vec<Vec<[f32; 16]>>, Vec<(usize, usize)>);

/// Buffers for `k`: inputs filled with a deterministic pattern, everything else zero.
fn buffers(k: &LlvmCpuKernel) -> Buffers {
    let mut bufs = Vec::new();
    let mut locals = Vec::new();
    for (i, d) in k.buffers().iter().enumerate() {
        let bytes = d.len as usize * d.dtype.size_bytes();
        let mut s = storage(bytes);
        if let BufKind::Input(_) = d.kind {
            for (j, v) in s.iter_mut().flatten().enumerate() {
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
fn run(k: &LlvmCpuKernel, ptrs: &[usize], locals: &[(usize, usize)], threads: usize) {
    for p in k.phases() {
        // SAFETY: `entry` is a JIT'd function of the uniform ABI, alive while `k` is.
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
}

/// Nanoseconds this thread has spent on a CPU (Linux `schedstat`; 0 elsewhere).
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(0)
}

/// Median wall seconds of `reps` runs, and (with one thread) the mean seconds on a CPU.
fn median_seconds(k: &LlvmCpuKernel, threads: usize, reps: usize) -> (f64, f64) {
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

fn kernel(g: Graph, class: KernelClass) -> Kernel {
    Kernel { name: g.name.clone(), class, graph: g, schedule: Schedule::default_for(Tier::LlvmCpu) }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let what = std::env::args().nth(1).unwrap_or_else(|| "gemm".into());
    let threads = env_list("THREADS", "1,2", ',');
    let reps = env_list("REPS", "15", ',').first().copied().unwrap_or(15) as usize;
    let mut backend = LlvmCpuBackend::new()?;
    let tiles = env_list("TILES", "", 'x');
    if let [mr, nr, mc, nc, kc] = tiles[..] {
        backend =
            backend.with_tiles(GemmTiles { mr: mr as u32, nr: nr as u32, mc: mc as u32, nc: nc as u32, kc: kc as u32 });
    }
    let host = backend.host();
    println!("host: {} ({} f32 lanes, fma {}, f16c {})", host.cpu, host.lanes, host.fma, host.f16c);
    let size = env_list("SIZE", "1024", ',').first().copied().unwrap_or(1024);
    let (k, flops, bytes) = match what.as_str() {
        "gemm" => {
            let mut g = Graph::new("gemm");
            let a = g.add_param("a", ty(&[size, size]))?;
            let b = g.add_param("b", ty(&[size, size]))?;
            let c = g.push(Op::MatMul(a, b))?;
            g.outputs.push(c);
            (kernel(g, KernelClass::MatMul), 2.0 * (size as f64).powi(3), 0.0)
        }
        "softmax" => {
            let r = env_list("ROWS", "4096", ',').first().copied().unwrap_or(4096);
            let c = env_list("COLS", "4096", ',').first().copied().unwrap_or(4096);
            let mut g = Graph::new("softmax");
            let x = g.add_param("x", ty(&[r, c]))?;
            let m = g.push(Op::Reduce { op: ReduceOp::Max, input: x, axes: vec![1], keepdim: true })?;
            let d = g.push(Op::Binary(BinaryOp::Sub, x, m))?;
            let e = g.push(Op::Unary(UnaryOp::Exp, d))?;
            let s = g.push(Op::Reduce { op: ReduceOp::Sum, input: e, axes: vec![1], keepdim: true })?;
            let y = g.push(Op::Binary(BinaryOp::Div, e, s))?;
            g.outputs.push(y);
            (kernel(g, KernelClass::RowReduction), 0.0, 8.0 * (r * c) as f64)
        }
        _ => {
            let n = env_list("ROWS", "4096", ',').first().copied().unwrap_or(4096)
                * env_list("COLS", "4096", ',').first().copied().unwrap_or(4096);
            let mut g = Graph::new("gelu");
            let x = g.add_param("x", ty(&[n]))?;
            let y = g.push(Op::Unary(UnaryOp::Gelu, x))?;
            g.outputs.push(y);
            (kernel(g, KernelClass::Pointwise), 0.0, 8.0 * n as f64)
        }
    };
    if let Ok(path) = std::env::var("ASM") {
        let lk = backend.lower(&k, &Bindings::new())?;
        std::fs::write(&path, backend.assembly(&lk)?)?;
        std::fs::write(format!("{path}.ll"), backend.module_text(&lk)?.0)?;
    }
    let t = Instant::now();
    let compiled = backend.compile(&k, &Bindings::new())?;
    println!(
        "{what}: compiled in {:.1} ms; matmul tiles {:?}",
        t.elapsed().as_secs_f64() * 1e3,
        backend.tiles_for(&k, &Bindings::new())
    );
    for (i, p) in compiled.phases().iter().enumerate() {
        println!("phase {i}: entry {:#x}, rows {}", p.entry, p.rows);
    }
    for &th in &threads {
        let (s, cpu) = median_seconds(&compiled, th as usize, reps);
        // With one thread, also the rate per second actually spent on a CPU (the machine is shared).
        let on_cpu = if th == 1 && cpu > 0.0 {
            let rate = if flops > 0.0 { flops / cpu / 1e9 } else { bytes / cpu / 1e9 };
            format!(" (on-CPU {:.3} ms: {rate:.1})", cpu * 1e3)
        } else {
            String::new()
        };
        if flops > 0.0 {
            println!("{what} {size}^3, {th} thread(s): {:.3} ms, {:.1} GFLOP/s{on_cpu}", s * 1e3, flops / s / 1e9);
        } else {
            println!("{what}, {th} thread(s): {:.3} ms, {:.1} GB/s{on_cpu}", s * 1e3, bytes / s / 1e9);
        }
    }
    Ok(())
}
