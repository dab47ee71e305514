//! Errors of the optimizer.

/// Why the optimizer could not produce a program. Every variant but `InvalidInput` is a bug in
/// tcc-passes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PassError {
    /// The input graph does not verify.
    #[error("the input graph is invalid: {0}")]
    InvalidInput(String),
    /// A rewrite produced an ill-typed or inconsistent e-graph (a bug).
    #[error("internal optimizer error: {0}")]
    Internal(String),
    /// Building a kernel or program failed (a bug).
    #[error("could not build the optimized program: {0}")]
    Build(#[from] tcc_ir::BuildError),
}
