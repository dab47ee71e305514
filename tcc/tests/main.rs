//! Integration tests of the `tcc` crate: the command line and the examples.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli;
mod device_args;
mod examples;
mod faults;
mod macro_kernel;
mod macro_ui;
mod pipeline;
mod tune;
mod tune_targets;
