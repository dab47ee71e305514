//! LLVM IR text to PTX with LLVM's NVPTX backend (inkwell, LLVM 19).

use inkwell::OptimizationLevel;
use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetTriple};
use tcc_ir::{Bindings, Kernel, Program};

use super::arch::{CapsExt, GpuArch};
use super::error::PtxError;
use super::{PtxKernel, emit_llvm_ir, emit_program_llvm_ir};

const TRIPLE: &str = "nvptx64-nvidia-cuda";

/// Compiles one kernel, specialized to `bindings`, to PTX for `arch`.
pub fn compile_kernel(kernel: &Kernel, bindings: &Bindings, arch: GpuArch) -> Result<PtxKernel, PtxError> {
    let ir = emit_llvm_ir(kernel, bindings, arch)?;
    let ptx = ir_to_ptx(&ir.llvm_ir, arch, &kernel.name)?;
    Ok(PtxKernel { ptx, ir })
}

/// Compiles every kernel of `program` (one [`PtxKernel`] per launch, in launch order).
pub fn compile_program(program: &Program, bindings: &Bindings, arch: GpuArch) -> Result<Vec<PtxKernel>, PtxError> {
    program.launches.iter().map(|l| compile_kernel(&l.kernel, bindings, arch)).collect()
}

/// Compiles every kernel of `program` into ONE PTX module for `arch`: one `.version`/`.target`
/// header and one `.entry` per step of every kernel, in launch order, with clashing names made
/// unique as [`super::emit_program_module`] says (what `tcc compile --emit ptx` writes). The merged
/// LLVM module goes through NVPTX once. The runtime keeps loading the per-kernel modules of
/// [`compile_program`]; their text does not depend on this function.
pub fn compile_program_module(program: &Program, bindings: &Bindings, arch: GpuArch) -> Result<String, PtxError> {
    let ir = emit_program_llvm_ir(program, bindings, arch)?;
    ir_to_ptx(&ir, arch, &program.name)
}

/// Parses, verifies and optimizes (O3) an LLVM IR module and emits it as PTX for `arch`.
pub fn ir_to_ptx(text: &str, arch: GpuArch, kernel: &str) -> Result<String, PtxError> {
    let caps = arch.caps();
    let fail = |stage: &'static str, message: String| PtxError::Llvm { kernel: kernel.to_string(), stage, message };
    Target::initialize_nvptx(&InitializationConfig::default());
    let triple = TargetTriple::create(TRIPLE);
    let target = Target::from_triple(&triple).map_err(|e| fail("target", e.to_string()))?;
    let tm = target
        .create_target_machine(
            &triple,
            caps.name,
            &caps.llvm_features(),
            OptimizationLevel::Aggressive,
            RelocMode::Default,
            CodeModel::Default,
        )
        .ok_or_else(|| fail("target", format!("no target machine for {}", caps.name)))?;
    let context = Context::create();
    let buffer = MemoryBuffer::create_from_memory_range_copy(text.as_bytes(), kernel);
    let module = context.create_module_from_ir(buffer).map_err(|e| fail("parse", e.to_string()))?;
    module.set_triple(&triple);
    module.set_data_layout(&tm.get_target_data().get_data_layout());
    module.verify().map_err(|e| fail("verify", e.to_string()))?;
    module.run_passes("default<O3>", &tm, PassBuilderOptions::create()).map_err(|e| fail("optimize", e.to_string()))?;
    let out = tm.write_to_memory_buffer(&module, FileType::Assembly).map_err(|e| fail("emit", e.to_string()))?;
    Ok(String::from_utf8_lossy(out.as_slice()).trim_end_matches('\0').to_string())
}
