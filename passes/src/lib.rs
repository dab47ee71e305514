//! The optimizer: equality saturation with egg that fuses ops into kernels and chooses their
//! layouts and schedules.
//!
//! ```text
//!  Graph ──▶ e-graph ──algebra+layout rules──▶ extract (per-op cost, DAG-aware) ──▶ Graph
//!        ──▶ e-graph ──fusion rules (kernel nodes)──▶ schedule rules (variants) ──▶
//!            extract (kernel cost model, DAG-aware) ──▶ Program + top-k alternatives + Report
//! ```
//!
//! Rules live in [`rules`], one family per file; `rules/README.md` says how to write one.

#![warn(missing_docs)]

pub mod analysis;
pub mod body;
pub mod classify;
pub mod convert;
pub mod cost;
mod costset;
pub mod error;
pub mod extract;
pub mod fold;
pub mod lang;
pub mod optimize;
pub mod options;
pub mod program;
pub mod report;
pub mod rules;
pub mod schedule;
pub mod target;
pub mod types;

pub use cost::Estimate;
pub use error::PassError;
pub use optimize::{Optimized, optimize};
pub use options::{Budget, OptimizeOptions};
pub use program::{lower_unfused, lower_unfused_for};
pub use report::{KernelReport, PhaseReport, Report, StopReason};
pub use target::{MmaShape, TargetModel};
pub use tcc_ir::target::{CpuTier, GpuArch, Target, TargetSpec};
