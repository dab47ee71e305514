//! Integration tests of tcc-autotune (one test binary; it also serves as the worker and tuning
//! child process that some tests start: see `child`).

// Test code, helpers included, may unwrap and panic (the workspace denies it in library code).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cache;
mod child;
mod common;
mod concurrency;
mod faults;
mod process;
#[cfg(feature = "shared-cache")]
mod redis;
mod search;
