//! What the optimizer is asked to do: the target, the saturation budget and how many alternatives
//! to return.

use std::time::Duration;

use tcc_ir::Bindings;

use crate::target::TargetModel;

/// Hard limits on equality saturation. Node and iteration limits decide results; the time limit is
/// only a safety net (a run that hits it is reported, and may differ between machines).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Stop a phase once the e-graph holds this many e-nodes.
    pub max_nodes: usize,
    /// Stop a phase after this many iterations.
    pub max_iterations: usize,
    /// Stop a phase after this much wall time (safety net only).
    pub time_limit: Duration,
}

impl Default for Budget {
    fn default() -> Budget {
        Budget { max_nodes: 20_000, max_iterations: 12, time_limit: Duration::from_millis(500) }
    }
}

/// Options of [`crate::optimize`].
#[derive(Debug, Clone, PartialEq)]
pub struct OptimizeOptions {
    /// The target whose cost model ranks the candidates.
    pub target: TargetModel,
    /// The saturation budget.
    pub budget: Budget,
    /// How many alternative programs to return for the autotuner (besides the best).
    pub top_k: usize,
    /// Sizes of shape variables for the cost model; unbound variables count as
    /// [`DEFAULT_DIM`](crate::cost::DEFAULT_DIM).
    pub bindings: Bindings,
    /// Record egg's explanations in the fusion phase and report, per kernel, the rules on the
    /// proof that the kernel equals the ops it replaces (slower; for `tcc explain`).
    pub explain: bool,
}

impl OptimizeOptions {
    /// Default budget, no alternatives, no bindings and no explanations, for `target`.
    pub fn new(target: TargetModel) -> OptimizeOptions {
        OptimizeOptions { target, budget: Budget::default(), top_k: 0, bindings: Bindings::new(), explain: false }
    }
}

impl Default for OptimizeOptions {
    fn default() -> OptimizeOptions {
        OptimizeOptions::new(TargetModel::cpu_host())
    }
}
