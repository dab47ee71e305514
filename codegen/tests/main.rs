//! Integration tests of code generation (one test binary; modules below).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[cfg(feature = "llvm")]
mod cpu_llvm;
mod loops;
mod loops_shared;
mod program_module;
#[cfg(feature = "llvm")]
mod ptx;
