//! The loop-level kernel IR shared by the backends, the lowering of kernel graphs to it, and the
//! row splitting that lets the runtime run rows on several threads.

pub mod ir;
pub mod lower;
pub mod parallel;

pub use ir::{
    AccId, BufDecl, BufId, BufKind, Combine, Expr, ExprArena, ExprId, Extent, Index, LoopKernel, LoopRanges,
    MicroKernel, Phase, Stmt, VarId,
};
pub use lower::{GemmTiles, LowerOptions, lower_graph, resolve_dims};
pub use parallel::split_rows;
