//! One module for a whole program (`tcc compile --emit llvm|ptx`): the optimizer's programs of
//! several kernels for sm_80 and sm_90a (a matmul feeding a softmax, a matmul of ragged depth
//! whose operand is packed first, a skinny matmul; on sm_90a the first is a wgmma kernel loading
//! by TMA), plus a kernel whose schedule splits k (matmul-mma + matmul-reduce), and the same
//! programs with every launch twice so that every name clashes. Each is written as ONE LLVM IR
//! module that `llc` accepts and whose PTX `ptxas` assembles with every entry exactly once; with
//! feature `llvm` also the PTX module of `compile_program_module` and the CPU LLVM tier's program
//! module. The per-kernel modules the runtime loads stay as they were.
//!
//! `llc` (`TCC_LLC`, `/usr/lib/llvm-19/bin/llc`, then `llc-19`/`llc` on `PATH`) and `ptxas`
//! ([`ptx::find_ptxas`]) are external tools: a check that needs one that is missing is skipped
//! with a note on stderr (CI installs both).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use tcc_codegen::ptx::{self, CapsExt, GpuArch, ProgramModule};
use tcc_ir::{BinaryOp, Bindings, DType, Graph, Op, Program, ReduceOp, Schedule, TensorType, UnaryOp};
use tcc_passes::{OptimizeOptions, TargetModel, optimize};

fn t(dtype: DType, dims: &[u64]) -> TensorType {
    TensorType { dtype, shape: tcc_ir::Shape::from_consts(dims) }
}

/// `softmax(a @ b)`, a product of ragged depth 33 (operands packed first) and a skinny product
/// of depth 4096, each its own output.
fn graph(dtype: DType) -> Graph {
    let mut g = Graph::new("mm_softmax_and_more");
    let a = g.add_param("a", t(dtype, &[1024, 256])).unwrap();
    let b = g.add_param("b", t(dtype, &[256, 1024])).unwrap();
    let s = g.push(Op::MatMul(a, b)).unwrap();
    let m = g.push(Op::Reduce { op: ReduceOp::Max, input: s, axes: vec![1], keepdim: true }).unwrap();
    let d = g.push(Op::Binary(BinaryOp::Sub, s, m)).unwrap();
    let e = g.push(Op::Unary(UnaryOp::Exp, d)).unwrap();
    let z = g.push(Op::Reduce { op: ReduceOp::Sum, input: e, axes: vec![1], keepdim: true }).unwrap();
    let y = g.push(Op::Binary(BinaryOp::Div, e, z)).unwrap();
    g.outputs.push(y);
    let c = g.add_param("c", t(dtype, &[100, 33])).unwrap();
    let w = g.add_param("w", t(dtype, &[33, 72])).unwrap();
    let p = g.push(Op::MatMul(c, w)).unwrap();
    g.outputs.push(p);
    let x = g.add_param("x", t(dtype, &[16, 4096])).unwrap();
    let v = g.add_param("v", t(dtype, &[4096, 256])).unwrap();
    let q = g.push(Op::MatMul(x, v)).unwrap();
    g.outputs.push(q);
    g
}

fn model(arch: GpuArch) -> TargetModel {
    match arch {
        GpuArch::Sm80 => TargetModel::sm_80(),
        GpuArch::Sm90a => TargetModel::sm_90a(),
    }
}

/// The optimizer's program of [`graph`] for `arch`.
fn program(arch: GpuArch) -> Program {
    let g = graph(DType::F16);
    optimize(&g, &OptimizeOptions::new(model(arch))).unwrap().program
}

/// `p` with every launch twice (so every name of the second copy clashes with the first's).
fn doubled(p: &Program) -> Program {
    let mut d = p.clone();
    d.launches.extend(p.launches.iter().cloned());
    d
}

/// `p` with one more launch: a `gemm` kernel whose schedule splits k (matmul-mma +
/// matmul-reduce), so some kernel has several entries whatever the optimizer chose.
fn with_split_k(p: &Program) -> Program {
    let mut d = p.clone();
    let g = tcc_ir::testing::gemm_graph(DType::BF16, &[], (16, 256, 2048), true, true).unwrap();
    let problem =
        ptx::MatmulProblem { m: 16, n: 256, k: 2048, batch: 1, dtype: DType::BF16, b_layout: ptx::BLayout::NK };
    let schedule = Schedule { split_k: 8, ..ptx::default_matmul_schedule(&problem, GpuArch::Sm80) };
    ptx::validate_matmul_schedule(&problem, &schedule, GpuArch::Sm80).unwrap();
    let kernel = tcc_ir::Kernel { name: "gemm.split-k".into(), class: tcc_ir::KernelClass::MatMul, graph: g, schedule };
    d.launches.push(tcc_ir::Launch { kernel, inputs: Vec::new(), outputs: Vec::new() });
    d
}

/// The programs every check runs on, for `arch`.
fn programs(arch: GpuArch) -> Vec<Program> {
    let p = with_split_k(&program(arch));
    vec![p.clone(), doubled(&p)]
}

// ---- external tools ----

fn llc() -> Option<PathBuf> {
    let runs = |p: &Path| Command::new(p).arg("--version").output().is_ok_and(|o| o.status.success());
    let candidates = std::env::var_os("TCC_LLC")
        .map(PathBuf::from)
        .into_iter()
        .chain(["/usr/lib/llvm-19/bin/llc", "llc-19", "llc"].map(PathBuf::from));
    let found = candidates.into_iter().find(|p| runs(p));
    if found.is_none() {
        eprintln!("note: llc not found (set TCC_LLC): skipping the llc checks");
    }
    found
}

fn ptxas() -> Option<PathBuf> {
    match ptx::find_ptxas() {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("note: skipping the ptxas checks: {e}");
            None
        }
    }
}

/// A fresh temporary path ending in `ext`.
fn temp(ext: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("tcc-program-module-{}-{n}.{ext}", std::process::id()))
}

/// Runs `llc` on `ir` with `args`; returns what it printed to its output file (the assembly), or
/// panics with llc's message.
fn run_llc(llc: &Path, ir: &str, args: &[&str], what: &str) -> String {
    let input = temp("ll");
    let output = temp("s");
    std::fs::write(&input, ir).unwrap();
    let out = Command::new(llc).args(args).arg("-o").arg(&output).arg(&input).output().unwrap();
    let asm = std::fs::read_to_string(&output).unwrap_or_default();
    let _ = std::fs::remove_file(&input);
    let _ = std::fs::remove_file(&output);
    assert!(out.status.success(), "llc {args:?} rejected {what}:\n{}", String::from_utf8_lossy(&out.stderr));
    asm
}

// ---- checks ----

/// Entry names of `module` in launch order.
fn entry_names(module: &ProgramModule) -> Vec<String> {
    module.kernels.iter().flat_map(|k| k.steps.iter().map(|s| s.entry.clone())).collect()
}

/// Occurrences of `needle` in `text`.
fn count(text: &str, needle: &str) -> usize {
    text.matches(needle).count()
}

/// One PTX module holding each of `entries` exactly once, assembled by ptxas for `arch` (which
/// reports each of them exactly once).
fn check_ptx_module(ptxas: &Path, ptx_text: &str, entries: &[String], arch: GpuArch, what: &str) {
    assert_eq!(count(ptx_text, ".version"), 1, "{what}: one header");
    assert_eq!(count(ptx_text, ".target"), 1, "{what}: one header");
    assert_eq!(count(ptx_text, ".address_size"), 1, "{what}: one header");
    assert_eq!(count(ptx_text, ".entry "), entries.len(), "{what}: entries {entries:?}");
    for e in entries {
        assert_eq!(count(ptx_text, &format!(".entry {e}(")), 1, "{what}: entry {e}");
    }
    let report =
        ptx::assemble(ptxas, ptx_text, arch).unwrap_or_else(|e| panic!("{what}: ptxas -arch={}: {e}", arch.name()));
    let mut reported: Vec<&str> = report.entries.iter().map(|e| e.name.as_str()).collect();
    let mut expected: Vec<&str> = entries.iter().map(String::as_str).collect();
    reported.sort_unstable();
    expected.sort_unstable();
    assert_eq!(reported, expected, "{what}: {}", report.output);
}

/// The merged LLVM IR: every entry defined and annotated as a kernel exactly once, every
/// shared-memory array defined once, one `nvvm.annotations`.
fn check_llvm_module(module: &ProgramModule, what: &str) {
    let ir = &module.llvm_ir;
    assert_eq!(count(ir, "target triple"), 1, "{what}");
    assert_eq!(count(ir, "!nvvm.annotations = "), 1, "{what}");
    let entries = entry_names(module);
    assert_eq!(count(ir, "define void @"), entries.len(), "{what}");
    assert_eq!(count(ir, "!\"kernel\", i32 1}"), entries.len(), "{what}");
    for e in &entries {
        assert_eq!(count(ir, &format!("define void @{e}(")), 1, "{what}: {e}");
        assert_eq!(count(ir, &format!("{{ptr @{e}, !\"kernel\", i32 1}}")), 1, "{what}: {e}");
    }
    let mut globals = BTreeMap::new();
    for line in ir.lines().filter(|l| l.starts_with('@')) {
        let name = line.split_whitespace().next().unwrap();
        *globals.entry(name).or_insert(0) += 1;
    }
    assert!(globals.values().all(|&n| n == 1), "{what}: {globals:?}");
    let mut decls = BTreeMap::new();
    for line in ir.lines().filter(|l| l.starts_with("declare ")) {
        let name = line.split('@').nth(1).and_then(|r| r.split('(').next()).unwrap();
        *decls.entry(name).or_insert(0) += 1;
    }
    assert!(decls.values().all(|&n| n == 1), "{what}: {decls:?}");
}

#[test]
fn programs_have_several_kernels_one_with_several_entries_and_wgmma_by_tma_on_sm90a() {
    for arch in GpuArch::ALL {
        let p = program(arch);
        assert!(p.launches.len() >= 3, "{arch}: {:?}", p.launches.iter().map(|l| &l.kernel.name).collect::<Vec<_>>());
        for p in programs(arch) {
            let module = ptx::emit_program_module(&p, &Bindings::new(), arch).unwrap();
            assert_eq!(module.kernels.len(), p.launches.len());
            let lowerings: Vec<&str> = module.kernels.iter().flat_map(|k| k.steps.iter().map(|s| s.lowering)).collect();
            assert!(lowerings.contains(&"rows"), "{arch}: {lowerings:?}");
            assert!(lowerings.contains(&"matmul-pack"), "{arch}: {lowerings:?}");
            assert!(lowerings.contains(&"matmul-reduce"), "{arch}: {lowerings:?}");
            assert!(module.kernels.iter().any(|k| k.steps.len() >= 2), "{arch}: {lowerings:?}");
            if arch == GpuArch::Sm90a {
                assert!(lowerings.contains(&"matmul-wgmma"), "{arch}: {lowerings:?}");
                let tma = module.kernels.iter().flat_map(|k| &k.steps).any(|s| !s.tensor_maps.is_empty());
                assert!(tma, "{arch}: no entry loads by TMA: {lowerings:?}");
            }
        }
    }
}

#[test]
fn one_llvm_module_per_program_with_unique_names_that_llc_and_ptxas_accept() {
    let llc = llc();
    let ptxas = ptxas();
    for arch in GpuArch::ALL {
        for p in programs(arch) {
            let what = format!("{} ({} launches) for {arch}", p.name, p.launches.len());
            let module = ptx::emit_program_module(&p, &Bindings::new(), arch).unwrap();
            assert_eq!(ptx::emit_program_llvm_ir(&p, &Bindings::new(), arch).unwrap(), module.llvm_ir);
            check_llvm_module(&module, &what);
            let entries = entry_names(&module);
            let Some(llc) = &llc else { continue };
            let caps = arch.caps();
            let mcpu = format!("-mcpu={}", caps.name);
            let mattr = format!("-mattr={}", caps.llvm_features());
            let ptx_text =
                run_llc(llc, &module.llvm_ir, &["-O3", "-mtriple=nvptx64-nvidia-cuda", &mcpu, &mattr], &what);
            if let Some(ptxas) = &ptxas {
                check_ptx_module(ptxas, &ptx_text, &entries, arch, &format!("llc's PTX of {what}"));
            }
        }
    }
}

#[test]
fn clashing_names_get_the_launch_index_and_the_first_kernel_keeps_its_own() {
    let arch = GpuArch::Sm90a;
    let p = with_split_k(&program(arch));
    let single = ptx::emit_program_module(&p, &Bindings::new(), arch).unwrap();
    let double = ptx::emit_program_module(&doubled(&p), &Bindings::new(), arch).unwrap();
    let n = p.launches.len();
    for (j, launch) in p.launches.iter().enumerate() {
        let own = ptx::emit_llvm_ir(&launch.kernel, &Bindings::new(), arch).unwrap();
        let names = |k: &ptx::ModuleKernel| k.steps.iter().map(|s| s.entry.clone()).collect::<Vec<_>>();
        let own_names: Vec<String> = own.steps.iter().map(|s| s.entry.clone()).collect();
        assert_eq!(names(&single.kernels[j]), own_names);
        assert_eq!(names(&double.kernels[j]), own_names);
        let renamed: Vec<String> = own_names.iter().map(|e| format!("{e}_k{}", n + j)).collect();
        assert_eq!(names(&double.kernels[n + j]), renamed);
        // The renamed copy's shared-memory arrays are renamed with it, and referenced by it.
        for line in own.llvm_ir.lines().filter(|l| l.starts_with('@')) {
            let g = line.split_whitespace().next().unwrap();
            assert!(double.llvm_ir.contains(&format!("{g}_k{} = ", n + j)), "{g}");
        }
    }
}

#[test]
fn a_program_of_one_kernel_is_that_kernels_module_plus_comments() {
    for arch in GpuArch::ALL {
        let p = program(arch);
        for launch in &p.launches {
            let own = ptx::emit_llvm_ir(&launch.kernel, &Bindings::new(), arch).unwrap();
            let one = Program { launches: vec![launch.clone()], ..p.clone() };
            let merged = ptx::emit_program_llvm_ir(&one, &Bindings::new(), arch).unwrap();
            // Byte for byte the kernel's own module, with comment lines after the triple.
            let header = "target triple = \"nvptx64-nvidia-cuda\"\n\n";
            let own_rest = own.llvm_ir.strip_prefix(header).unwrap();
            let (comments, rest) = merged.strip_prefix(header).unwrap().split_once("\n\n").unwrap();
            assert!(comments.lines().all(|l| l.starts_with("; ")), "{comments}");
            assert_eq!(comments.lines().count(), 2, "{comments}");
            assert_eq!(rest, own_rest, "{}", launch.kernel.name);
        }
    }
}

#[cfg(feature = "llvm")]
mod llvm {
    use super::*;
    use tcc_codegen::LlvmCpuBackend;

    #[test]
    fn one_ptx_module_per_program_assembles_with_every_entry_once() {
        let Some(ptxas) = ptxas() else { return };
        for arch in GpuArch::ALL {
            for p in programs(arch) {
                let what = format!("{} ({} launches) for {arch}", p.name, p.launches.len());
                let module = ptx::emit_program_module(&p, &Bindings::new(), arch).unwrap();
                let text = ptx::compile_program_module(&p, &Bindings::new(), arch).unwrap();
                check_ptx_module(&ptxas, &text, &entry_names(&module), arch, &what);
            }
        }
    }

    #[test]
    fn per_kernel_ptx_is_unchanged_by_the_program_module() {
        for arch in GpuArch::ALL {
            let p = with_split_k(&program(arch));
            let before = ptx::compile_program(&p, &Bindings::new(), arch).unwrap();
            let _ = ptx::compile_program_module(&p, &Bindings::new(), arch).unwrap();
            let after = ptx::compile_program(&p, &Bindings::new(), arch).unwrap();
            assert_eq!(before, after);
            for (launch, k) in p.launches.iter().zip(&before) {
                assert_eq!(k, &ptx::compile_kernel(&launch.kernel, &Bindings::new(), arch).unwrap());
                assert_eq!(count(&k.ptx, ".version"), 1, "{}", launch.kernel.name);
                assert_eq!(count(&k.ptx, ".entry "), k.ir.steps.len(), "{}", launch.kernel.name);
                assert!(!k.ir.llvm_ir.contains("; kernel"), "no program comments in a kernel's module");
                // The same kernel alone as a program: the same PTX.
                let one = Program { launches: vec![launch.clone()], ..p.clone() };
                assert_eq!(ptx::compile_program_module(&one, &Bindings::new(), arch).unwrap(), k.ptx);
            }
        }
    }

    /// The CPU optimizer's program of [`graph`] in f32 (matmul, softmax rows, two more matmuls).
    fn cpu_program() -> Program {
        let g = graph(DType::F32);
        optimize(&g, &OptimizeOptions::new(TargetModel::cpu_host())).unwrap().program
    }

    #[test]
    fn one_cpu_llvm_module_per_program_that_llc_accepts() {
        let backend = LlvmCpuBackend::new().unwrap();
        let p = cpu_program();
        for p in [p.clone(), doubled(&p)] {
            assert!(p.launches.len() >= 2, "{:?}", p.launches.iter().map(|l| &l.kernel.name).collect::<Vec<_>>());
            let (text, names) = backend.program_module_text(&p, &Bindings::new()).unwrap();
            assert_eq!(names.len(), p.launches.len());
            let all: Vec<&String> = names.iter().flatten().collect();
            for (launch, kernel_names) in p.launches.iter().zip(&names) {
                let lk = backend.lower(&launch.kernel, &Bindings::new()).unwrap();
                assert_eq!(kernel_names.len(), lk.phases.len(), "{}", launch.kernel.name);
            }
            for n in &all {
                assert_eq!(count(&text, &format!("define void @{n}(")), 1, "{n}");
            }
            assert_eq!(count(&text, "define void @"), all.len());
            assert_eq!(count(&text, "attributes #0 ="), 1);
            let optimized = backend.program_llvm_ir(&p, &Bindings::new()).unwrap();
            for n in &all {
                assert_eq!(count(&optimized, &format!("@{n}(")), 1, "{n}");
            }
            let half = cpu_program().launches.len();
            for (j, kernel_names) in names.iter().enumerate().skip(half) {
                assert!(kernel_names.iter().all(|n| n.ends_with(&format!("_k{j}"))), "{kernel_names:?}");
            }
            let Some(llc) = llc() else { continue };
            let what = format!("{} ({} launches) for the host", p.name, p.launches.len());
            let asm = run_llc(&llc, &optimized, &["-O2"], &what);
            for n in &all {
                assert!(asm.contains(&format!("{n}:")), "{what}: {n} missing from the assembly");
            }
            run_llc(&llc, &text, &["-O0"], &format!("unoptimized {what}"));
        }
    }

    #[test]
    fn cpu_per_kernel_modules_keep_their_phase_names() {
        let backend = LlvmCpuBackend::new().unwrap();
        for launch in &cpu_program().launches {
            let lk = backend.lower(&launch.kernel, &Bindings::new()).unwrap();
            let (text, names) = backend.module_text(&lk).unwrap();
            let expected: Vec<String> = (0..lk.phases.len()).map(|i| format!("phase{i}")).collect();
            assert_eq!(names, expected);
            assert!(text.starts_with(&format!("; kernel {}\n", lk.name)));
        }
    }
}
