//! Warpgroup tensor-core GEMM for `sm_90a` (`wgmma.mma_async`, f16/bf16 in, f32 accumulation).
//!
//! ```text
//!  operands (as the mma.sync lowering prepares them: direct, or packed to scratch)
//!     ──TMA boxes from tensor maps (or cp.async) + mbarriers, by one thread, every thread or
//!       a producer warpgroup──▶ 128B-swizzled stages
//!     ──wgmma.mma_async m64n{64,128,256}k16 per consumer warpgroup──▶ f32 accumulators
//!     ──▶ fused epilogue (bias, activation, residual, cast) ──▶ staged subtiles ──TMA stores──▶
//! ```
//!
//! The matmul lowering (`mma/mod.rs`) dispatches here when the target has wgmma and the
//! kernel's schedule is a valid wgmma schedule ([`validate_wgmma_schedule`]); the encoding is
//! described in [`config`]. The autotuner draws from [`wgmma_schedule_space`];
//! [`default_wgmma_schedule`] is the untuned pick for large products.

pub(crate) mod asm;
pub mod config;
pub(crate) mod kernel;
mod store;

pub use config::{default_wgmma_schedule, is_wgmma_schedule, validate_wgmma_schedule, wgmma_schedule_space};
