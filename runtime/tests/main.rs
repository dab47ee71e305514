//! Integration tests of the runtime's CPU device (one test binary; modules below).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod cuda;
mod differential;
mod hand;
mod math;
mod tensors;
