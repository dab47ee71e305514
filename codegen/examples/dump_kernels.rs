//! Prints the LLVM IR and PTX (sm_80, sm_90a) of the optimizer's kernels for the examples and
//! the code generators' test shapes (each program's merged module too), and the LLVM CPU tier's
//! (as emitted, then optimized) and cranelift's code: the text two builds are compared by
//! (`cargo run --example dump_kernels --features llvm > FILE`, then diff).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use tcc_codegen::ptx::{GpuArch, compile_kernel, emit_llvm_ir, emit_program_llvm_ir};
use tcc_codegen::{CraneliftBackend, LlvmCpuBackend};
use tcc_ir::{Bindings, Graph};
use tcc_passes::{OptimizeOptions, TargetModel, optimize};

fn graphs() -> Vec<(Graph, Bindings)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut files: Vec<_> = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).collect();
    files.retain(|p| p.extension().is_some_and(|e| e == "tc"));
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let module = tcc_frontend::parse_source(&file.display().to_string(), &text).unwrap();
        for g in &module.functions {
            // Ragged sizes, then large ones (the warpgroup GEMM's big tiles, block-per-row rows).
            for sizes in [[100, 37, 96], [4096, 4096, 2048]] {
                let bindings: Bindings = g
                    .shape_vars()
                    .into_iter()
                    .map(|v| {
                        let size = match v.as_str() {
                            "M" => sizes[0],
                            "N" => sizes[1],
                            _ => sizes[2],
                        };
                        (v, size)
                    })
                    .collect();
                out.push((g.clone(), bindings));
            }
        }
    }
    out
}

fn main() {
    let ptx_targets = [(TargetModel::sm_80(), GpuArch::Sm80), (TargetModel::sm_90a(), GpuArch::Sm90a)];
    for (g, bindings) in graphs() {
        for (model, arch) in &ptx_targets {
            let mut opts = OptimizeOptions::new(model.clone());
            opts.bindings = bindings.clone();
            let program = optimize(&g, &opts).unwrap().program;
            println!("==== {} {:?} {} program module", g.name, bindings, arch.name());
            match emit_program_llvm_ir(&program, &bindings, *arch) {
                Ok(ir) => println!("{ir}"),
                Err(e) => println!("error: {e}"),
            }
            for l in &program.launches {
                let k = &l.kernel;
                println!("==== {} {:?} {} {:?} {}", g.name, bindings, arch.name(), k.class, k.schedule);
                match emit_llvm_ir(k, &bindings, *arch) {
                    Ok(ir) => println!("{}", ir.llvm_ir),
                    Err(e) => println!("error: {e}"),
                }
                match compile_kernel(k, &bindings, *arch) {
                    Ok(p) => println!("{}", p.ptx),
                    Err(e) => println!("error: {e}"),
                }
            }
        }
        let cpu = [(TargetModel::cpu_host(), false), (TargetModel::cpu_llvm(), true)];
        for (model, llvm) in cpu {
            let mut opts = OptimizeOptions::new(model);
            opts.bindings = bindings.clone();
            let program = optimize(&g, &opts).unwrap().program;
            if llvm {
                println!("==== {} {:?} cpu:llvm program module", g.name, bindings);
                let b = LlvmCpuBackend::new().unwrap().with_threads(2);
                println!("{}", b.program_module_text(&program, &bindings).unwrap().0);
            }
            for l in &program.launches {
                let k = &l.kernel;
                println!(
                    "==== {} {} {:?} {}",
                    g.name,
                    if llvm { "cpu:llvm" } else { "cpu:cranelift" },
                    k.class,
                    k.schedule
                );
                if llvm {
                    let b = LlvmCpuBackend::new().unwrap().with_threads(2);
                    let lk = b.lower(k, &bindings).unwrap();
                    // As emitted (what the text writer wrote), then after O3.
                    println!("{}", b.module_text(&lk).unwrap().0);
                    println!("{}", b.llvm_ir(&lk).unwrap());
                } else {
                    let b = CraneliftBackend::new().unwrap();
                    let lk = b.lower(k, &bindings).unwrap();
                    println!("{}", b.clif_text(&lk).unwrap());
                }
            }
        }
    }
}
