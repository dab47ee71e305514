//! One LLVM IR module for a whole program (`tcc compile --emit llvm|ptx`): every entry of every
//! kernel, so that the emitted file is one module that `llc` and, once through NVPTX, `ptxas`
//! accept as it is.
//!
//! Each kernel is planned and emitted into a module of its own exactly as for
//! [`super::emit_llvm_ir`] (the per-kernel modules the runtime loads do not change); the modules
//! are then merged structurally, in launch order:
//!
//! - declarations (intrinsics) are kept once; two different declarations of one name are an
//!   error (a bug of this backend);
//! - the names a kernel defines — its entries and its shared-memory arrays (static, and the
//!   `extern` array naming dynamic shared memory) — keep their names unless an earlier kernel or
//!   a declaration took one; a clashing name `s` of the kernel at launch `j` becomes `s_k{j}`
//!   (or `s_k{j}_2`, `_3`, ... if that is taken too), in its definition and every reference;
//! - `nvvm.annotations` (kernel, `maxntidx`, `minctasm`, `grid_constant`) are written once for
//!   every entry, numbered afresh; the module has no attribute groups or other metadata;
//! - a `;` comment per kernel names its entries in launch order.

use std::collections::{BTreeMap, BTreeSet};

use tcc_ir::{Bindings, Program};

use super::arch::GpuArch;
use super::error::PtxError;
use super::module::ModuleText;
use super::{PtxStep, emit_module};
use crate::symbols;

/// One kernel of a [`ProgramModule`]: where its entries are in the merged module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleKernel {
    /// The kernel's name.
    pub name: String,
    /// Its entries in launch order, named as in the merged module (a name only differs from the
    /// kernel's own module where it had to be made unique).
    pub steps: Vec<PtxStep>,
    /// Number of input pointers (the kernel graph's params).
    pub inputs: usize,
    /// Number of output pointers.
    pub outputs: usize,
    /// Bytes of the scratch buffer the kernel's entries share.
    pub scratch_bytes: u64,
}

/// The LLVM IR of every kernel of a program in one module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramModule {
    /// The program's name.
    pub name: String,
    /// The target.
    pub arch: GpuArch,
    /// The module, as text (one entry per step of every kernel).
    pub llvm_ir: String,
    /// One per launch of the program, in launch order.
    pub kernels: Vec<ModuleKernel>,
}

/// Plans every kernel of `program` under `bindings` and writes them into one LLVM IR module for
/// `arch` (no LLVM needed), with clashing names made unique (see the module documentation).
pub fn emit_program_module(program: &Program, bindings: &Bindings, arch: GpuArch) -> Result<ProgramModule, PtxError> {
    let caps = arch.caps();
    let parts = program
        .launches
        .iter()
        .map(|launch| emit_module(&launch.kernel, bindings, arch, &caps))
        .collect::<Result<Vec<_>, _>>()?;

    // Every declared name is reserved first: a definition never takes an intrinsic's name.
    let mut declared: BTreeMap<&str, &str> = BTreeMap::new();
    for (ir, module) in &parts {
        for decl in module.declarations() {
            let name = symbols::declared_name(decl).ok_or_else(|| link_error(&ir.name, format!("`{decl}`")))?;
            match declared.insert(name, decl) {
                Some(earlier) if earlier != decl => {
                    return Err(link_error(&ir.name, format!("`{earlier}` and `{decl}` declare one name twice")));
                }
                _ => {}
            }
        }
    }
    let mut taken: BTreeSet<String> = declared.keys().map(|n| (*n).to_string()).collect();

    let mut merged = ModuleText::default();
    merged.add_comment(&format!("program {} for {}: {} kernel(s)", program.name, arch.name(), parts.len()));
    let mut kernels = Vec::with_capacity(parts.len());
    for (launch, (ir, module)) in parts.into_iter().enumerate() {
        let map = symbols::renames(&module.defined_symbols(), launch, &mut taken);
        let steps: Vec<PtxStep> = ir
            .steps
            .into_iter()
            .map(|step| PtxStep { entry: map.get(&step.entry).cloned().unwrap_or(step.entry), ..step })
            .collect();
        let entries: Vec<&str> = steps.iter().map(|s| s.entry.as_str()).collect();
        merged.add_comment(&format!("kernel {} (launch {launch}): {}", ir.name, entries.join(", ")));
        merged.append_renamed(module, &map);
        kernels.push(ModuleKernel {
            name: ir.name,
            steps,
            inputs: ir.inputs,
            outputs: ir.outputs,
            scratch_bytes: ir.scratch_bytes,
        });
    }
    Ok(ProgramModule { name: program.name.clone(), arch, llvm_ir: merged.finish(), kernels })
}

/// The text of [`emit_program_module`]: one LLVM IR module holding every entry of every kernel
/// of `program` (what `tcc compile --emit llvm` writes for a GPU target).
pub fn emit_program_llvm_ir(program: &Program, bindings: &Bindings, arch: GpuArch) -> Result<String, PtxError> {
    emit_program_module(program, bindings, arch).map(|m| m.llvm_ir)
}

/// Two kernels' modules that cannot be merged (a bug of this backend: declarations are
/// intrinsics, whose names fix their signatures).
fn link_error(kernel: &str, message: String) -> PtxError {
    PtxError::Llvm { kernel: kernel.to_string(), stage: "link", message }
}
