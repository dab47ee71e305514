//! Integration tests of code generation (one test binary; modules below).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod loops;
#[cfg(feature = "llvm")]
mod ptx;
