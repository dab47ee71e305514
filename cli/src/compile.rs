//! `tcc compile FILE --target T --emit STAGE -o OUT`: every stage of the pipeline can be dumped.

use std::fmt::Write as _;

use tcc_codegen::CraneliftBackend;
use tcc_ir::target::{CpuTier, GpuArch, Target};
use tcc_ir::{Bindings, Program, ScheduleSource};

use super::args::CompileArgs;
use super::atomic::write_output;
use super::error::CliError;
use super::load::{bind, load, select_fn};
use tcc::pipeline::{Pipeline, Plan, PlanOptions};

/// Runs `tcc compile`.
pub fn compile(args: &CompileArgs) -> Result<(), CliError> {
    let target = tcc::target::resolve(args.target)?;
    if target == Target::Interp {
        return Err(CliError::invalid("the interpreter runs graphs as they are; it has nothing to compile"));
    }
    let pipeline = Pipeline::new(target, &args.lock.setting())?;
    let loaded = load(&args.program.file)?;
    let graph = select_fn(&loaded, &args.program)?;
    let bindings = bind(graph, &args.dims)?;
    let plan = pipeline.plan(graph, &bindings, PlanOptions::default())?;
    let program = &plan.program;
    let text = match (args.emit.as_str(), target) {
        ("ir", _) => program_text(program, &plan),
        ("llvm", Target::Gpu(arch)) => gpu_llvm(program, &bindings, arch)?,
        ("ptx", Target::Gpu(arch)) => gpu_ptx(program, &bindings, arch)?,
        ("clif" | "asm", Target::Cpu(CpuTier::Cranelift)) => cranelift_code(program, &bindings, args.emit == "asm")?,
        ("llvm" | "asm", Target::Cpu(CpuTier::Llvm)) => {
            let tuned = plan.kernels.iter().any(|k| k.source != ScheduleSource::Default);
            llvm_cpu_code(program, &bindings, args.emit == "asm", tuned)?
        }
        (stage, _) => {
            return Err(CliError::invalid(format!(
                "cannot emit `{stage}` for `{target}`; stages: ir (every target), llvm and ptx (sm_80, sm_90a), \
                 clif and asm (cpu:cranelift), llvm and asm (cpu:llvm)"
            )));
        }
    };
    write_output(&args.out, text.as_bytes(), Some(&args.program.file))
}

/// The optimized program: each kernel's class, schedule (and its source) and fused graph in
/// canonical IR text.
fn program_text(program: &Program, plan: &Plan) -> String {
    let mut text = String::new();
    for (launch, kp) in program.launches.iter().zip(&plan.kernels) {
        let k = &launch.kernel;
        let _ = writeln!(text, "// kernel {} [{}] {} ({})", k.name, k.class.name(), kp.kind, kp.source);
        let _ = writeln!(text, "// reads {:?}, writes {:?}", launch.inputs, launch.outputs);
        text.push_str(&tcc_ir::text::print_graph(&k.graph));
        text.push('\n');
    }
    text
}

fn codegen_error(kernel: &str, e: impl std::fmt::Display) -> CliError {
    CliError::Environment(format!("code generation failed for kernel `{kernel}`: {e}"))
}

/// One LLVM IR module holding every kernel's entries (what `llc` accepts as it is).
fn gpu_llvm(program: &Program, bindings: &Bindings, arch: GpuArch) -> Result<String, CliError> {
    tcc_codegen::ptx::emit_program_llvm_ir(program, bindings, arch).map_err(|e| codegen_error(&program.name, e))
}

/// One PTX module, every kernel's entries in it (what `ptxas` accepts as it is).
#[cfg(feature = "llvm")]
fn gpu_ptx(program: &Program, bindings: &Bindings, arch: GpuArch) -> Result<String, CliError> {
    tcc_codegen::ptx::compile_program_module(program, bindings, arch).map_err(|e| codegen_error(&program.name, e))
}

#[cfg(not(feature = "llvm"))]
fn gpu_ptx(_: &Program, _: &Bindings, _: GpuArch) -> Result<String, CliError> {
    Err(CliError::invalid("PTX needs the `llvm` feature: rebuild tcc with `--features llvm` (LLVM 19, see the README)"))
}

fn cranelift_code(program: &Program, bindings: &Bindings, asm: bool) -> Result<String, CliError> {
    let backend = CraneliftBackend::new().map_err(|e| codegen_error(&program.name, e))?;
    let mut text = String::new();
    for launch in &program.launches {
        let k = &launch.kernel;
        let lk = backend.lower(k, bindings).map_err(|e| codegen_error(&k.name, e))?;
        let code = if asm { backend.disassemble(&lk) } else { backend.clif_text(&lk) };
        let _ = writeln!(text, "; kernel {} [{}]", k.name, k.class.name());
        text.push_str(&code.map_err(|e| codegen_error(&k.name, e))?);
        text.push('\n');
    }
    Ok(text)
}

/// The LLVM CPU tier's code, compiled as the engine would (matmul tiles from the schedules when
/// any kernel's schedule was tuned): one LLVM IR module of the whole program (what `llc` accepts),
/// or each kernel's assembly.
#[cfg(feature = "llvm")]
fn llvm_cpu_code(program: &Program, bindings: &Bindings, asm: bool, tuned: bool) -> Result<String, CliError> {
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let backend = tcc_codegen::LlvmCpuBackend::new()
        .map_err(|e| codegen_error(&program.name, e))?
        .with_threads(threads)
        .with_schedule_tiles(tuned);
    if !asm {
        return backend.program_llvm_ir(program, bindings).map_err(|e| codegen_error(&program.name, e));
    }
    let mut text = String::new();
    for launch in &program.launches {
        let k = &launch.kernel;
        let lk = backend.lower(k, bindings).map_err(|e| codegen_error(&k.name, e))?;
        let code = backend.assembly(&lk).map_err(|e| codegen_error(&k.name, e))?;
        let _ = writeln!(text, "; kernel {} [{}]", k.name, k.class.name());
        text.push_str(&code);
        text.push('\n');
    }
    Ok(text)
}

#[cfg(not(feature = "llvm"))]
fn llvm_cpu_code(_: &Program, _: &Bindings, _: bool, _: bool) -> Result<String, CliError> {
    Err(CliError::invalid("the LLVM CPU tier needs the `llvm` feature: rebuild tcc with `--features llvm`"))
}
