//! Workspace-level integration tests (one test binary, contract §9): properties that span crates,
//! over the shared random program generator of `tcc_ir::testing`, and the differential suite.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests")]

mod differential;
mod ir_properties;
