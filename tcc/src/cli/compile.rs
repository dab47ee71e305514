//! `tcc compile FILE --target T --emit STAGE -o OUT`: every stage of the pipeline can be dumped.

use std::fmt::Write as _;

use tcc_codegen::CraneliftBackend;
use tcc_codegen::ptx::GpuArch;
use tcc_ir::{Bindings, Program};
use tcc_passes::{OptimizeOptions, TargetModel, optimize};

use super::args::CompileArgs;
use super::atomic::write_output;
use super::error::CliError;
use super::load::{bind, load, select_fn};
use crate::device::with_tuned_schedules;
use crate::tuning::{TuneTarget, host_device};

/// Runs `tcc compile`.
pub fn compile(args: &CompileArgs) -> Result<(), CliError> {
    let model = TargetModel::for_target_name(&args.target).ok_or_else(|| {
        CliError::invalid(format!("unknown target `{}`; expected cpu, cpu:cranelift, sm_80 or sm_90a", args.target))
    })?;
    let gpu = GpuArch::from_name(&args.target);
    let is_cpu = matches!(args.target.as_str(), "cpu" | "cpu:cranelift");
    if gpu.is_none() && !is_cpu {
        return Err(CliError::invalid(format!("`tcc compile` has no code generator for `{}` yet", args.target)));
    }
    let loaded = load(&args.program.file)?;
    let graph = select_fn(&loaded, &args.program)?;
    let bindings = bind(graph, &args.dims)?;
    let mut options = OptimizeOptions::new(model);
    options.bindings = bindings.clone();
    let program = optimize(graph, &options)
        .map_err(|e| CliError::Environment(format!("the optimizer failed on `{}`: {e}", graph.name)))?
        .program;
    let program = with_cached_schedules(&graph.name, program, &bindings, gpu);
    let text = match (args.emit.as_str(), gpu) {
        ("ir", _) => program_text(&program),
        ("llvm", Some(arch)) => gpu_llvm(&program, &bindings, arch)?,
        ("ptx", Some(arch)) => gpu_ptx(&program, &bindings, arch)?,
        ("clif" | "asm", None) => cpu_code(&program, &bindings, args.emit == "asm")?,
        (stage, _) => {
            return Err(CliError::invalid(format!(
                "cannot emit `{stage}` for `{}`; stages: ir, llvm and ptx (GPU targets), clif and asm (CPU targets)",
                args.target
            )));
        }
    };
    write_output(&args.out, text.as_bytes(), Some(&args.program.file))
}

/// `program` with the locked or cached winners of `tcc tune` for this target (no trials run with a
/// warm cache, so the output is the same on every run). For a GPU target the records of the GPU
/// in this machine are used when it is of that architecture; without one the optimizer's
/// schedules stay.
fn with_cached_schedules(name: &str, program: Program, bindings: &Bindings, gpu: Option<GpuArch>) -> Program {
    let (target, device) = match gpu {
        None => (TuneTarget::Cranelift, host_device()),
        Some(arch) => match crate::tuning::gpu::probe() {
            Ok(info) if info.arch == arch => (TuneTarget::Gpu(arch), crate::tuning::gpu::device_key(&info)),
            Ok(info) => {
                tracing::debug!("the GPU here is {}, not {arch}: the optimizer's schedules stay", info.arch);
                return program;
            }
            Err(e) => {
                tracing::debug!("no tuning records for {arch} without a GPU of it here: {e}");
                return program;
            }
        },
    };
    with_tuned_schedules(name, &program, bindings, target, device)
}

/// The optimized program: each kernel's class, schedule and fused graph in canonical IR text.
fn program_text(program: &Program) -> String {
    let mut text = String::new();
    for launch in &program.launches {
        let k = &launch.kernel;
        let _ = writeln!(text, "// kernel {} [{}] {}", k.name, k.class.name(), k.schedule);
        let _ = writeln!(text, "// reads {:?}, writes {:?}", launch.inputs, launch.outputs);
        text.push_str(&tcc_ir::text::print_graph(&k.graph));
        text.push('\n');
    }
    text
}

fn codegen_error(kernel: &str, e: impl std::fmt::Display) -> CliError {
    CliError::Environment(format!("code generation failed for kernel `{kernel}`: {e}"))
}

fn gpu_llvm(program: &Program, bindings: &Bindings, arch: GpuArch) -> Result<String, CliError> {
    let mut text = String::new();
    for launch in &program.launches {
        let ir = tcc_codegen::ptx::emit_llvm_ir(&launch.kernel, bindings, arch)
            .map_err(|e| codegen_error(&launch.kernel.name, e))?;
        text.push_str(&ir.llvm_ir);
        text.push('\n');
    }
    Ok(text)
}

#[cfg(feature = "llvm")]
fn gpu_ptx(program: &Program, bindings: &Bindings, arch: GpuArch) -> Result<String, CliError> {
    let kernels =
        tcc_codegen::ptx::compile_program(program, bindings, arch).map_err(|e| codegen_error(&program.name, e))?;
    Ok(kernels.into_iter().map(|k| k.ptx).collect::<Vec<_>>().join("\n"))
}

#[cfg(not(feature = "llvm"))]
fn gpu_ptx(_: &Program, _: &Bindings, _: GpuArch) -> Result<String, CliError> {
    Err(CliError::Environment("PTX needs LLVM: rebuild tcc with `--features llvm` (LLVM 19, see the README)".into()))
}

fn cpu_code(program: &Program, bindings: &Bindings, asm: bool) -> Result<String, CliError> {
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
