//! CPU backends: the cranelift JIT tier (default build) and, later, the LLVM x86 tier.

pub mod cranelift;
pub mod target;

pub use target::CpuCaps;
