//! The runtime: devices, host tensors, compiled-program caches and launches; the only crate
//! with unsafe FFI (the calls into JIT'd code, in `cpu::kernel`).
//!
//! The CPU device compiles each kernel of a [`tcc_ir::Program`] with the cranelift tier for the
//! shapes bound from the inputs, caches the result by (program fingerprint, bindings), and runs the
//! kernels in order on a thread pool.

#![warn(missing_docs)]

pub mod bind;
pub mod ceilings;
pub mod cpu;
/// The CUDA runtime: devices, module cache, buffers, streams, events and program launches.
pub mod cuda;
pub mod error;
pub mod inputs;
pub mod tensor;

pub use cpu::{CompiledProgram, CpuDevice};
pub use error::RuntimeError;
pub use tensor::{Element, HostTensor, HostView};
