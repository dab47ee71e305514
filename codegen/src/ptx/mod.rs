//! PTX code generation: kernels to LLVM IR (text), then LLVM's NVPTX backend (feature `llvm`) to
//! PTX for `sm_80` or `sm_90a`.
//!
//! ```text
//!  Kernel + Bindings ──plan──▶ stages (elementwise │ rows │ reduce │ matmul), scratch layout
//!        ──emit──▶ LLVM IR text (one entry per stage) ──inkwell: parse, verify, O3──▶ PTX
//! ```
//!
//! Kernel ABI (every entry of a kernel has the same parameters, in this order): one
//! `.global` pointer per kernel input (the kernel graph's params), one per kernel output, then
//! one scratch pointer (`scratch_bytes` long; may be null when 0). Every pointer must be 16-byte
//! aligned; entries that load through TMA take tensor maps after it ([`PtxStep::tensor_maps`]);
//! sizes are specialized into the code (the kernel is compiled for one binding of its
//! shape variables). Elements are stored densely in row-major order: f32, f16, bf16 and i32 in
//! their own formats, bool as one byte 0 or 1. The runtime launches the entries in order on one
//! stream; each is a grid-stride loop, so any grid size from 1 up is correct.
//!
//! The runtime loads one module per kernel (`compile_program`). For a file that tools read as
//! it is (`tcc compile --emit llvm|ptx`), `emit_program_module` and `compile_program_module`
//! put every entry of every kernel of a program into ONE module, names made unique where two
//! kernels would clash (see `program.rs`).

mod arch;
mod attention;
mod error;
mod expr;
#[cfg(feature = "llvm")]
mod llvm;
mod math;
mod mma;
mod module;
mod plan;
mod program;
mod ptxas;
mod rows;
mod stages;
pub(crate) mod tma;
pub mod wgmma;

pub use arch::{CapsExt, Feature, GpuArch, GpuCaps};
pub use error::PtxError;
#[cfg(feature = "llvm")]
pub use llvm::{compile_kernel, compile_program, compile_program_module, ir_to_ptx};
pub use mma::{BLayout, MatmulProblem, default_matmul_schedule, matmul_schedule_space, validate_matmul_schedule};
pub use program::{ModuleKernel, ProgramModule, emit_program_llvm_ir, emit_program_module};
pub use ptxas::{EntryReport, PtxasError, PtxasReport, assemble, find_ptxas};
pub use stages::simt_schedule_runs;
pub use tma::{TensorMapSpec, TmaBuffer};

use tcc_ir::{Bindings, Kernel};

use module::ModuleText;
use plan::Stage;
use stages::StageCx;

/// How to launch one entry of a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Threads per block (the entry is compiled for exactly this many: `maxntid`).
    pub block_threads: u32,
    /// Blocks beyond which more add no work (at least 1).
    pub max_blocks: u64,
    /// Resident blocks per SM worth launching (grid = SMs x this, at most `max_blocks`).
    pub blocks_per_sm: u32,
    /// Static shared memory per block, in bytes (declared in the PTX; for information).
    pub shared_bytes: u32,
    /// Dynamic shared memory per block, in bytes: the launch must pass it (and, above 48 KiB,
    /// raise the function's `MAX_DYNAMIC_SHARED_SIZE_BYTES` attribute to it first).
    pub dynamic_shared_bytes: u32,
}

impl LaunchConfig {
    /// The grid size for a device with `sm_count` SMs: enough blocks to fill it, no more than
    /// useful, at least 1.
    pub fn grid(&self, sm_count: u32) -> u32 {
        let fill = u64::from(sm_count.max(1)) * u64::from(self.blocks_per_sm.max(1));
        let blocks = self.max_blocks.clamp(1, fill);
        u32::try_from(blocks).unwrap_or(u32::MAX)
    }
}

/// One entry (stage) of a kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxStep {
    /// The entry's name in the PTX module.
    pub entry: String,
    /// Which lowering it uses (`elementwise`, `rows`, `reduce`, `matmul`, or one of the tensor-core
    /// GEMM's `matmul-pack`, `matmul-mma`, `matmul-reduce`).
    pub lowering: &'static str,
    /// How to launch it.
    pub launch: LaunchConfig,
    /// Tensor maps the entry takes by value after the scratch pointer, in order (see [`tma`]).
    pub tensor_maps: Vec<TensorMapSpec>,
}

/// The LLVM IR of one kernel and how to launch its entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelIr {
    /// The kernel's name.
    pub name: String,
    /// The target.
    pub arch: GpuArch,
    /// The LLVM IR module, as text.
    pub llvm_ir: String,
    /// Entries in launch order.
    pub steps: Vec<PtxStep>,
    /// Number of input pointers (the kernel graph's params).
    pub inputs: usize,
    /// Number of output pointers.
    pub outputs: usize,
    /// Bytes of the scratch buffer the entries share.
    pub scratch_bytes: u64,
}

/// A compiled kernel: PTX text and how to launch its entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxKernel {
    /// The PTX module (one `.entry` per step).
    pub ptx: String,
    /// Everything else: names, launches, ABI sizes and the LLVM IR it came from.
    pub ir: KernelIr,
}

/// Plans `kernel` under `bindings` and writes its LLVM IR for `arch` (no LLVM needed).
pub fn emit_llvm_ir(kernel: &Kernel, bindings: &Bindings, arch: GpuArch) -> Result<KernelIr, PtxError> {
    emit_llvm_ir_with_caps(kernel, bindings, arch, &arch.caps())
}

/// [`emit_llvm_ir`] for a target with capabilities `caps` (a subset of `arch`'s, e.g. without
/// tensor cores, so an emulator or a comparison can take the SIMT paths).
pub fn emit_llvm_ir_with_caps(
    kernel: &Kernel,
    bindings: &Bindings,
    arch: GpuArch,
    caps: &GpuCaps,
) -> Result<KernelIr, PtxError> {
    let (mut ir, module) = emit_module(kernel, bindings, arch, caps)?;
    ir.llvm_ir = module.finish();
    Ok(ir)
}

/// Plans and emits `kernel` into a module of its own: the [`KernelIr`] (with `llvm_ir` still
/// empty) and the module, which [`emit_llvm_ir_with_caps`] prints and [`program`] merges with
/// the other kernels' modules.
fn emit_module(
    kernel: &Kernel,
    bindings: &Bindings,
    arch: GpuArch,
    caps: &GpuCaps,
) -> Result<(KernelIr, ModuleText), PtxError> {
    let caps = caps.clone();
    let tensor_cores = caps.has(Feature::MmaM16N8K16) && caps.has(Feature::CpAsync);
    let plan = plan::plan(kernel, bindings, tensor_cores)?;
    let g = &kernel.graph;
    let mut params: Vec<String> =
        (0..g.params.len()).map(|i| format!("ptr addrspace(1) noalias readonly align 16 %in{i}")).collect();
    params.extend((0..g.outputs.len()).map(|k| format!("ptr addrspace(1) noalias align 16 %out{k}")));
    params.push("ptr addrspace(1) align 16 %scratch".to_string());
    let cx = StageCx { g, plan: &plan, caps: &caps, schedule: &kernel.schedule, params: &params };
    let mut module = ModuleText::default();
    let base = crate::symbols::symbol(&kernel.name);
    let mut steps = Vec::new();
    let mut scratch_bytes = plan.scratch_bytes;
    for (i, stage) in plan.stages.iter().enumerate() {
        let entry = format!("{base}_s{i}");
        let tensor_core = match stage {
            Stage::MatMul { node, outs } => {
                mma::lower(&cx, &mut module, &entry, *node, None, outs, plan.scratch_bytes)?
            }
            Stage::DualMatMul { products: [first, second], outs } => {
                mma::lower(&cx, &mut module, &entry, *first, Some(*second), outs, plan.scratch_bytes)?
            }
            _ => None,
        };
        if matches!(stage, Stage::Attention) {
            let (entries, end) = attention::lower(&cx, &mut module, &entry, plan.scratch_bytes)?;
            scratch_bytes = scratch_bytes.max(end);
            for e in entries {
                steps.push(PtxStep {
                    entry: format!("{entry}{}", e.suffix),
                    lowering: e.lowering,
                    launch: e.launch,
                    tensor_maps: e.tensor_maps,
                });
            }
            continue;
        }
        if let Some(low) = tensor_core {
            scratch_bytes = scratch_bytes.max(low.scratch_end);
            for e in low.entries {
                steps.push(PtxStep {
                    entry: format!("{entry}{}", e.suffix),
                    lowering: e.lowering,
                    launch: e.launch,
                    tensor_maps: e.tensor_maps,
                });
            }
            continue;
        }
        let (lowering, launch) = match stage {
            Stage::Elementwise { shape, outs } => {
                ("elementwise", stages::elementwise(&cx, &mut module, &entry, shape, outs)?)
            }
            Stage::Rows { prefix, row_dims, reduces, outs } => {
                ("rows", rows::rows(&cx, &mut module, &entry, *prefix, row_dims, reduces, outs)?)
            }
            Stage::Reduce { node, dest } => ("reduce", stages::reduce(&cx, &mut module, &entry, *node, *dest)?),
            Stage::MatMul { node, outs } => ("matmul", stages::matmul(&cx, &mut module, &entry, *node, outs)?),
            Stage::DualMatMul { .. } | Stage::Attention => {
                return Err(PtxError::InvalidGraph {
                    kernel: kernel.name.clone(),
                    reason: "a stage lowered on its own reached the generic lowerings".into(),
                });
            }
        };
        steps.push(PtxStep { entry, lowering, launch, tensor_maps: Vec::new() });
    }
    let ir = KernelIr {
        name: kernel.name.clone(),
        arch,
        llvm_ir: String::new(),
        steps,
        inputs: g.params.len(),
        outputs: g.outputs.len(),
        scratch_bytes,
    };
    Ok((ir, module))
}
