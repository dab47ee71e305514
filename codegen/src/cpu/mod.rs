//! CPU backends: the cranelift JIT tier (default build) and, later, the LLVM x86 tier.

pub mod cranelift;
/// The LLVM x86 tier (wide vectors, O3, MCJIT).
#[cfg(feature = "llvm")]
pub mod llvm;
pub mod target;

pub use target::CpuCaps;
