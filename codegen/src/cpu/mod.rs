//! CPU backends: the cranelift JIT tier (default build) and the LLVM x86 tier (feature `llvm`),
//! and what both tiers share: how a kernel is lowered for them (`lower_kernel`, rows strip-mined
//! by [`STRIP`]), the loop analyses their emitters run (`analysis`), the values an emitter has
//! computed (`memo`), the constants of their f32 approximations (`approx`), the register class a
//! dtype computes in (`Class`), the shape of a compiled phase ([`PhaseFn`]) and `powf` for JIT'd
//! code (`tcc_powf`).
//!
//! Every phase of a kernel becomes one function with the uniform ABI
//! `extern "C" fn(bufs: *const *mut u8, row_begin: u64, row_end: u64)`: `bufs` holds one pointer
//! per [`BufDecl`](crate::loops::BufDecl) of the artifact (inputs, outputs, scratch and
//! call-local buffers, in declared order), and the call computes rows `row_begin..row_end` of that
//! phase (see [`Phase`](crate::loops::Phase)). Phases run in order, each after the previous one
//! finished on every thread.

pub(crate) mod analysis;
pub(crate) mod approx;
pub mod cranelift;
/// The LLVM x86 tier (wide vectors, O3, MCJIT).
#[cfg(feature = "llvm")]
pub mod llvm;
pub(crate) mod memo;
pub mod target;

use tcc_ir::{Bindings, DType, Kernel};

pub use target::CpuCaps;

use crate::error::CodegenError;
use crate::loops::{GemmTiles, LoopKernel, LowerOptions, lower_graph, split_rows};

/// Rows of a strip-mined flat loop: the unit of work a thread takes.
pub const STRIP: u64 = 4096;

/// One compiled phase: its function's address, its rows and its amount of work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseFn {
    /// Address of the function with the uniform ABI; valid while its kernel lives.
    pub entry: usize,
    /// Rows the phase may be split into (1: call it once with `(0, 1)`).
    pub rows: u64,
    /// Innermost iterations of all rows: how much work the phase is.
    pub work: u64,
}

/// The register class a dtype computes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// f32 registers (f16 and bf16 values too, rounded after every operation).
    Float,
    /// i32 registers.
    Int,
    /// Conditions.
    Bool,
}

/// The register class `d` computes in.
pub(crate) fn class(d: DType) -> Class {
    match d {
        DType::F32 | DType::F16 | DType::BF16 => Class::Float,
        DType::I32 => Class::Int,
        DType::Bool => Class::Bool,
    }
}

/// Lowers `kernel` to the loop IR a CPU tier emits: matmuls in register tiles from `tiles` when
/// `options` asks for tiles at all, an attention kernel as one online-softmax nest with its
/// schedule's blocks, then rows split (strip-mined by [`STRIP`]) where that is safe.
pub(crate) fn lower_kernel(
    kernel: &Kernel,
    bindings: &Bindings,
    mut options: LowerOptions,
    tiles: impl FnOnce() -> GemmTiles,
) -> Result<LoopKernel, CodegenError> {
    if options.gemm.is_some() {
        options.gemm = Some(tiles());
    }
    if kernel.class == tcc_ir::KernelClass::Attention {
        options.attention = Some(tcc_ir::schedule::attention_blocks(&kernel.schedule));
    }
    let mut lk = lower_graph(&kernel.name, &kernel.graph, bindings, &options)?;
    split_rows(&mut lk, STRIP);
    Ok(lk)
}

/// `powf` for JIT'd code, imported as `tcc_powf` by both tiers: cranelift has no `pow`
/// instruction, and LLVM's `pow` would need the C library's symbol resolved at run time.
pub(crate) extern "C" fn tcc_powf(a: f32, b: f32) -> f32 {
    a.powf(b)
}
