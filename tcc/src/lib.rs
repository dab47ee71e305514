//! tcc, a tensor compiler: the user-facing library.
//!
//! Programs come from `.tc` files ([`frontend`]), the [`builder`] API, or the [`kernel!`] macro;
//! they lower to the tensor IR ([`ir`]), which the reference interpreter runs ([`ir::interp`]).
//! The `tcc` binary is the `tcc-cli` crate (folder `cli/`): this library builds without its
//! command-line dependencies.

#![warn(missing_docs)]

#[cfg(feature = "ndarray")]
pub mod arrays;
pub mod builder;
#[cfg(feature = "candle")]
pub mod candle;
pub mod device;
pub mod engine;
pub mod error;
pub mod kernel;
pub mod memory;
pub mod pipeline;
pub mod target;

/// The autotuner wired to every tunable target (crate `tcc-autotune`): the tuning cache and
/// lockfile the pipeline reads, and what `tcc tune` measures with.
pub use tcc_autotune::tuning;
pub use tcc_frontend as frontend;
pub use tcc_ir as ir;
pub use tcc_ir::{DType, Dim, Graph, Module, Shape};
/// Random input values (crate `tcc-runtime`): one sampler for `tcc run`, the benchmarks and the
/// tuner.
pub use tcc_runtime::inputs;

/// The `candle-core` crate tcc kernels apply to (feature `candle`).
#[cfg(feature = "candle")]
pub use candle_core;
pub use device::{Device, DeviceKind, DeviceTensor};
pub use error::Error;
pub use half::{bf16, f16};
pub use kernel::{IntoTensor, Kernel, TensorArg};
/// The `ndarray` crate tensor arguments may be given as (feature `ndarray`).
#[cfg(feature = "ndarray")]
pub use ndarray;
pub use tcc_macros::kernel;
pub use tcc_runtime as runtime;
pub use tcc_runtime::{Element, HostTensor};

/// Expands to the items it is given when `tcc` has feature `ndarray`, else to nothing: the
/// `kernel!` macro wraps the `array` functions it generates in it, so they follow a feature of
/// `tcc`, not of the crate that calls the macro.
#[cfg(feature = "ndarray")]
#[doc(hidden)]
#[macro_export]
macro_rules! __with_ndarray {
    ($($items:tt)*) => { $($items)* };
}

/// Expands to the items it is given when `tcc` has feature `ndarray`, else to nothing (this build
/// has not).
#[cfg(not(feature = "ndarray"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __with_ndarray {
    ($($items:tt)*) => {};
}
