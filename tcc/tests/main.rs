//! Integration tests of the `tcc` crate: the command line and the examples.

mod cli;
mod examples;
mod macro_kernel;
mod macro_ui;
