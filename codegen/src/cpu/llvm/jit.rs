//! LLVM IR text to machine code: parse, verify, optimize (`default<O3>` for the host CPU), then
//! either JIT it into this process (MCJIT) or print it (optimized IR, assembly).

use std::ptr::NonNull;

use inkwell::OptimizationLevel;
use inkwell::context::Context;
use inkwell::execution_engine::ExecutionEngine;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{CodeModel, FileType, RelocMode, Target, TargetMachine};

use super::host::{HostCpu, init_llvm};
use crate::error::CodegenError;

fn fail(kernel: &str, stage: &'static str, message: impl ToString) -> CodegenError {
    CodegenError::Llvm { kernel: kernel.to_string(), stage, message: message.to_string() }
}

/// A target machine for the host CPU (used for the optimization pipeline and assembly output).
fn host_machine(host: &HostCpu, kernel: &str) -> Result<TargetMachine, CodegenError> {
    init_llvm()?;
    let triple = TargetMachine::get_default_triple();
    let target = Target::from_triple(&triple).map_err(|e| fail(kernel, "target", e))?;
    target
        .create_target_machine(
            &triple,
            &host.cpu,
            &host.features,
            OptimizationLevel::Aggressive,
            RelocMode::Default,
            CodeModel::Default,
        )
        .ok_or_else(|| fail(kernel, "target", format!("no target machine for {}", host.cpu)))
}

/// Parses, verifies and optimizes `text` in `context`.
fn optimized_module<'c>(
    context: &'c Context,
    text: &str,
    tm: &TargetMachine,
    kernel: &str,
) -> Result<Module<'c>, CodegenError> {
    let buffer = MemoryBuffer::create_from_memory_range_copy(text.as_bytes(), kernel);
    let module = context.create_module_from_ir(buffer).map_err(|e| fail(kernel, "parse", e))?;
    module.set_triple(&tm.get_triple());
    module.set_data_layout(&tm.get_target_data().get_data_layout());
    module.verify().map_err(|e| fail(kernel, "verify", e))?;
    module.run_passes("default<O3>", tm, PassBuilderOptions::create()).map_err(|e| fail(kernel, "optimize", e))?;
    Ok(module)
}

/// The optimized LLVM IR of `text`.
pub fn optimized_ir(text: &str, host: &HostCpu, kernel: &str) -> Result<String, CodegenError> {
    let tm = host_machine(host, kernel)?;
    let context = Context::create();
    let module = optimized_module(&context, text, &tm, kernel)?;
    Ok(module.print_to_string().to_string())
}

/// The host assembly of `text`, optimized.
pub fn assembly(text: &str, host: &HostCpu, kernel: &str) -> Result<String, CodegenError> {
    let tm = host_machine(host, kernel)?;
    let context = Context::create();
    let module = optimized_module(&context, text, &tm, kernel)?;
    let out = tm.write_to_memory_buffer(&module, FileType::Assembly).map_err(|e| fail(kernel, "emit", e))?;
    Ok(String::from_utf8_lossy(out.as_slice()).trim_end_matches('\0').to_string())
}

/// Machine code JIT-compiled into this process: the execution engine that owns it and the LLVM
/// context the engine was built in. Dropping it frees the code.
pub struct JitCode {
    /// Dropped before `context` (see `Drop`).
    engine: Option<ExecutionEngine<'static>>,
    /// Owned: created by `Box::into_raw` in [`jit`], freed in `Drop`.
    context: NonNull<Context>,
}

impl std::fmt::Debug for JitCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JitCode").finish_non_exhaustive()
    }
}

// SAFETY: a `JitCode` is only ever moved between threads, never used from two at once: it has no
// method, so after `jit` returns nothing reads or writes the engine or the context except `Drop`,
// which has exclusive access. The engine's reference counts are not shared with anything outside
// this value (the module's clone was dropped inside `jit`), and LLVM contexts may be used from
// any thread as long as it is one thread at a time.
unsafe impl Send for JitCode {}

impl Drop for JitCode {
    fn drop(&mut self) {
        // The engine (and the module and code it owns) must go before its context.
        drop(self.engine.take());
        // SAFETY: `context` came from `Box::into_raw` in `jit` and is freed only here; every
        // value borrowing it (module, engine) is gone: the module was dropped in `jit`, the
        // engine just above.
        drop(unsafe { Box::from_raw(self.context.as_ptr()) });
    }
}

/// JIT-compiles `text` (optimized for `host`) and returns the code with the addresses of the
/// functions `names`; calls to `@tcc_powf` go to `powf`.
pub fn jit(
    text: &str,
    names: &[String],
    host: &HostCpu,
    kernel: &str,
    powf: usize,
) -> Result<(JitCode, Vec<usize>), CodegenError> {
    let tm = host_machine(host, kernel)?;
    let raw = Box::into_raw(Box::new(Context::create()));
    let mut code = JitCode {
        engine: None,
        // `Box::into_raw` never returns null.
        context: NonNull::new(raw).ok_or_else(|| fail(kernel, "context", "null context"))?,
    };
    // SAFETY: the context lives until `code` is dropped; `module` (declared after `code`) is
    // dropped before it, and the engine is stored in `code` and dropped first by its `Drop`.
    let context: &'static Context = unsafe { &*raw };
    let module = optimized_module(context, text, &tm, kernel)?;
    let engine =
        module.create_jit_execution_engine(OptimizationLevel::Aggressive).map_err(|e| fail(kernel, "jit", e))?;
    if let Some(pow) = module.get_function("tcc_powf") {
        engine.add_global_mapping(&pow, powf);
    }
    let entries = names
        .iter()
        .map(|n| engine.get_function_address(n).map_err(|e| fail(kernel, "jit", format!("{n}: {e}"))))
        .collect::<Result<Vec<_>, _>>();
    code.engine = Some(engine);
    let entries = entries?;
    drop(module);
    Ok((code, entries))
}
