//! Integration tests of the `tcc` binary: the command line, its exit codes and files, the one
//! pipeline as the commands show it, tuning and the tuning cache.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli;
mod common;
mod decoder_layer;
mod faults;
mod pipeline;
mod plan;
mod snapshots;
mod tune;
mod tune_targets;
