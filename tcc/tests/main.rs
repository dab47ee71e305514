//! Integration tests of the `tcc` crate: the command line and the examples.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli;
mod examples;
mod macro_kernel;
mod macro_ui;
mod tune;
