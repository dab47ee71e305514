//! The CUDA runtime: device discovery, a module cache, device buffers, a stream, events for
//! timing, copies, and running whole programs compiled by the PTX backend.
//!
//! cudarc loads libcuda at run time, so this is always built; with no driver every entry point
//! returns [`CudaError::NoDriver`] (the driver is probed before any CUDA call, which would panic
//! inside cudarc otherwise). Compiling programs ([`CudaDevice::compile`], `run_program`,
//! `time_program`) needs feature `llvm`.

mod ceilings;
#[cfg(feature = "llvm")]
mod cublas;
mod device;
mod error;
#[cfg(feature = "llvm")]
mod program;
mod tensor_map;

pub use ceilings::GpuCeilings;
#[cfg(feature = "llvm")]
pub use cublas::{Cublas, CublasError, GemmShape};
pub use device::{CudaDevice, DeviceBuffer, DeviceInfo, LoadedKernel};
pub use error::CudaError;
#[cfg(feature = "llvm")]
pub use program::{GpuProgram, Timing, TimingOptions};
