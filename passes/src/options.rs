//! What the optimizer is asked to do: the target, the saturation budget and how many alternatives
//! to return.

use std::time::Duration;

use tcc_ir::Bindings;

use crate::target::TargetModel;

/// Hard limits on equality saturation. Node and iteration limits decide results; the time limit is
/// only a safety net (a run that hits it is reported, and may differ between machines).
///
/// The node limit grows with the program: a phase may hold [`Budget::BASE_NODES`] plus
/// `nodes_per_value` e-nodes per value of the program, and never more than `max_nodes`. Fusion
/// saturates at about 10 e-nodes per value (one kernel per step of each lineage), so a program of
/// 10,000 ops is fused as fully as one of 100.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// E-nodes a phase may hold per value of the program, above [`Budget::BASE_NODES`].
    pub nodes_per_value: usize,
    /// E-nodes a phase may never exceed, whatever the program's size (a memory guard).
    pub max_nodes: usize,
    /// Stop a phase after this many iterations.
    pub max_iterations: usize,
    /// Stop a phase after this much wall time (safety net only).
    pub time_limit: Duration,
}

impl Budget {
    /// The e-nodes every phase may hold, however small the program.
    pub const BASE_NODES: usize = 20_000;

    /// The node limit of a phase over a program of `values` values.
    pub fn node_limit(&self, values: usize) -> usize {
        Budget::BASE_NODES.saturating_add(self.nodes_per_value.saturating_mul(values)).min(self.max_nodes)
    }
}

impl Default for Budget {
    fn default() -> Budget {
        Budget { nodes_per_value: 32, max_nodes: 2_000_000, max_iterations: 30, time_limit: Duration::from_secs(20) }
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
