//! Integration tests of the runtime's CPU device (one test binary; modules below).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod attention;
mod attention_gpu;
mod common;
mod cuda;
mod cuda_rows;
mod differential;
mod dual_gpu;
#[cfg(feature = "gpu-tests")]
mod faults_gpu;
mod gemm;
mod hand;
mod math;
mod tensors;
mod wgmma;
