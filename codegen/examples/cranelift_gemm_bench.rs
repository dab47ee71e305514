//! Times the cranelift tier's GEMM, calling the JIT'd phases on threads as the runtime does:
//! `cargo run --release -p tcc-codegen --example cranelift_gemm_bench`.
//!
//! Environment: `SIZE=1024` (M=N=K), `THREADS=1,2`, `TILES=MRxNRxMCxNCxKC` (register tile and panels,
//! as a schedule's `micro_m x micro_n` and `tile_m x tile_n x tile_k`; default 4x12x128x128x512, the
//! optimizer's pick for 1024^3), `REPS=9`, `ASM=FILE` (writes the machine code to FILE, the cranelift IR to FILE.clif). Prints the median wall time of
//! each configuration (and of each of its phases) and, with one thread, the rate per second actually spent on a CPU (read from
//! the scheduler's accounting), which stays meaningful while other processes share the cores.

#[path = "harness/mod.rs"]
mod harness;

use harness::{env_list, median_phase_seconds, median_seconds};
use std::time::Instant;
use tcc_codegen::CraneliftBackend;
use tcc_ir::{Bindings, DType, Graph, Kernel, KernelClass, Op, Schedule, Shape, TensorType, Tier};

fn ty(dims: &[u64]) -> TensorType {
    TensorType { dtype: DType::F32, shape: Shape::from_consts(dims) }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let threads = env_list("THREADS", "1,2", ',');
    let reps = env_list("REPS", "9", ',').first().copied().unwrap_or(9) as usize;
    let size = env_list("SIZE", "1024", ',').first().copied().unwrap_or(1024);
    let mut schedule = Schedule::default_for(Tier::Cranelift);
    if let [mr, nr, mc, nc, kc] = env_list("TILES", "4x12x128x128x512", 'x')[..] {
        (schedule.micro_m, schedule.micro_n) = (mr as u32, nr as u32);
        (schedule.tile_m, schedule.tile_n, schedule.tile_k) = (mc as u32, nc as u32, kc as u32);
    }
    let backend = CraneliftBackend::new()?;
    let mut g = Graph::new("gemm");
    let a = g.add_param("a", ty(&[size, size]))?;
    let b = g.add_param("b", ty(&[size, size]))?;
    let c = g.push(Op::MatMul(a, b))?;
    g.outputs.push(c);
    let k = Kernel { name: g.name.clone(), class: KernelClass::MatMul, graph: g, schedule };
    let lk = backend.lower(&k, &Bindings::new())?;
    if let Ok(path) = std::env::var("ASM") {
        std::fs::write(&path, backend.disassemble(&lk)?)?;
        std::fs::write(format!("{path}.clif"), backend.clif_text(&lk)?)?;
    }
    let t = Instant::now();
    let compiled = backend.compile_loops(&lk)?;
    println!("gemm {size}^3: schedule {schedule}, compiled in {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    let flops = 2.0 * (size as f64).powi(3);
    for &th in &threads {
        let (s, cpu) = median_seconds(&compiled, th as usize, reps);
        let on_cpu = if th == 1 && cpu > 0.0 {
            format!(" (on-CPU {:.3} ms: {:.1} GFLOP/s)", cpu * 1e3, flops / cpu / 1e9)
        } else {
            String::new()
        };
        println!("{th} thread(s): {:.3} ms, {:.1} GFLOP/s{on_cpu}", s * 1e3, flops / s / 1e9);
        let phases = median_phase_seconds(&compiled, th as usize, reps);
        let ms: Vec<String> = phases.iter().map(|s| format!("{:.3}", s * 1e3)).collect();
        println!("  phases (median ms): {}", ms.join(" + "));
    }
    Ok(())
}
