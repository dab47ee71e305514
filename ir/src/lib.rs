//! The tensor IR of tcc: pure data, no I/O, no CUDA, no LLVM.
//!
//! A [`Graph`] is a tensor-level SSA dataflow graph of one function: nodes in topological order, each
//! an [`Op`] with its result [`TensorType`] (a [`DType`] and a [`Shape`] whose dimensions are
//! constants or named shape variables). [`infer`] holds the typing rules, [`verify`] checks a whole
//! graph, [`text`] prints and parses the canonical text form, [`fingerprint`] hashes it, and [`interp`]
//! is the f64 reference interpreter that defines the semantics every backend must match.

#![warn(missing_docs)]

pub mod accuracy;
pub mod attention;
pub mod dtype;
pub mod dual;
pub mod fingerprint;
pub mod graph;
pub mod infer;
pub mod interp;
pub mod limits;
pub mod op;
pub mod program;
pub mod schedule;
pub mod shape;
pub mod target;
#[cfg(feature = "testing")]
pub mod testing;
pub mod text;
pub mod verify;

pub use dtype::DType;
pub use dual::DualProduct;
pub use graph::{BuildError, Graph, Module, Node, Param};
pub use infer::TypeError;
pub use op::{BinaryOp, CompareOp, NodeId, Op, ReduceOp, TensorType, UnaryOp};
pub use program::{Kernel, KernelClass, Launch, Program, Schedule, ScheduleSource, Tier, ValueRef};
pub use schedule::{
    AttentionDevice, AttentionShape, CODEGEN_VERSION, GpuAttentionSchedule, SCHEDULE_FORMAT, ScheduleKind, SimtTiles,
    WgmmaSchedule,
};
pub use shape::{Bindings, Dim, Shape};
pub use target::{CpuTier, GpuArch, Target, TargetSpec};
