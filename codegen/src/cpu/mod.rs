//! CPU backends: the cranelift JIT tier (default build) and the LLVM x86 tier (feature `llvm`).

pub mod cranelift;
/// The LLVM x86 tier (wide vectors, O3, MCJIT).
#[cfg(feature = "llvm")]
pub mod llvm;
pub mod target;

pub use target::CpuCaps;
