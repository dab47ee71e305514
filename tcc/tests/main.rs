//! Integration tests of the `tcc` library: devices, `kernel!` and the examples.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[cfg(feature = "candle")]
mod candle;
mod device_args;
mod examples;
mod macro_kernel;
mod macro_ui;
mod memory;
#[cfg(feature = "ndarray")]
mod ndarray;
