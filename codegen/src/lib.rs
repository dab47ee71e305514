//! Code generation: lowers the kernels of optimized programs to machine code. Codegen never
//! launches anything; the runtime loads and calls what it produces.
//!
//! ```text
//!  tcc_ir::Kernel (fused graph + schedule) + Bindings
//!        |  loops::lower_graph     materialize / inline each node -> loop nests
//!        v
//!  loops::LoopKernel  (buffers, loops, stores, accumulators, affine loads)
//!        |  loops::split_rows      strip-mine, fuse nests into a row loop when rows are disjoint
//!        v
//!  cpu::cranelift::emit            scalar loops; f32x4 innermost loops with tails; polynomials
//!        v
//!  cpu::cranelift::CpuKernel       JIT'd fn(bufs, row_begin, row_end) + buffer list
//! ```
//!
//! With feature `llvm` the same loop kernels also go to `cpu::llvm` (wide vectors, an AVX-512
//! GEMM micro-kernel), and `ptx` lowers kernels to PTX for sm_80/sm_90a: pointwise and row stages,
//! the tensor-core (`mma.sync`) GEMM in `ptx::mma` and the sm_90a warpgroup GEMM in `ptx::wgmma`
//! (their module docs hold the GEMM detail).

#![warn(missing_docs)]

pub mod backend;
pub mod cpu;
pub mod error;
mod llvm_text;
pub mod loops;
/// PTX code generation (LLVM NVPTX; the compiler itself needs feature `llvm`).
pub mod ptx;
mod symbols;

pub use backend::Backend;
pub use cpu::cranelift::{CpuKernel, CraneliftBackend};
#[cfg(feature = "llvm")]
pub use cpu::llvm::{HostCpu, LlvmCpuBackend, LlvmCpuKernel};
pub use cpu::{CpuCaps, PhaseFn};
pub use error::CodegenError;
pub use loops::{BufDecl, BufKind, GemmTiles, LoopKernel, LowerOptions};
