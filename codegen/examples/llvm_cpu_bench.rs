//! Times kernels of the CPU LLVM tier, calling the JIT'd phases on threads as the runtime does:
//! `cargo run --release -p tcc-codegen --features llvm --example llvm_cpu_bench [gemm|softmax|gelu]`.
//!
//! Environment: `SIZE=1024` (GEMM M=N=K), `ROWS=4096`, `COLS=4096` (softmax and gelu), `THREADS=1,2`, `TILES=MRxNRxMCxNCxKC` (register tile and
//! panels), `REPS=15`, `ASM=FILE` (writes the assembly to FILE and the emitted IR to FILE.ll). Prints the median time of each configuration, and of each of its phases. Run it while nothing else is
//! compiling: two cores are easily shared.

#[path = "harness/mod.rs"]
mod harness;

use harness::{env_list, median_phase_seconds, median_seconds};
use std::time::Instant;
use tcc_codegen::{Backend, GemmTiles, LlvmCpuBackend};
use tcc_ir::{
    BinaryOp, Bindings, DType, Graph, Kernel, KernelClass, Op, ReduceOp, Schedule, Shape, TensorType, Tier, UnaryOp,
};

fn ty(dims: &[u64]) -> TensorType {
    TensorType { dtype: DType::F32, shape: Shape::from_consts(dims) }
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
        let phases = median_phase_seconds(&compiled, th as usize, reps);
        let ms: Vec<String> = phases.iter().map(|s| format!("{:.3}", s * 1e3)).collect();
        println!("  phases (median ms): {}", ms.join(" + "));
    }
    Ok(())
}
