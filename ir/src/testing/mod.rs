//! THE shared random program generator (contract §9): every property test of the project (front end,
//! optimizer, each backend, reliability) draws its programs from [`arb_graph`].
//!
//! A generated program is built deterministically from a *recipe*: parameter shapes and a list of
//! small steps (an op selector and raw picks of operands, axes, permutations and dtypes). Each step
//! is turned into a well-typed node through [`Graph::push`] / [`Graph::push_typed`], choosing
//! operands that fit (or skipping the step when none does). Proptest shrinks the recipe, so a
//! failing program shrinks to fewer, simpler steps.
//!
//! Also here: [`random_inputs`] for a generated graph, [`coverage`] of op kinds × dtypes, and
//! [`compare_outputs`] with per-dtype tolerances.

pub mod attention;
mod build;
mod compare;
mod config;
mod gemm;
mod inputs;
mod recipe;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use crate::dtype::DType;
use crate::graph::Graph;
use crate::interp::{InterpError, Tensor};
use crate::shape::Bindings;

pub use compare::{Bound, Mismatch, Tolerance, compare_outputs};
pub use config::{GenConfig, OpSet};
pub use gemm::{dual_gemm_graph, gemm_epilogue_graphs, gemm_graph, gemm_two_outputs_graph, joined_gemm_graph};
pub use inputs::{SplitMix64, random_inputs};

/// A generated program: the graph and the values of the shape variables it uses.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedProgram {
    /// The function (every node well typed; outputs are never empty).
    pub graph: Graph,
    /// A value for every shape variable of the graph.
    pub bindings: Bindings,
}

impl GeneratedProgram {
    /// Random inputs for the graph under its bindings (see [`random_inputs`]).
    pub fn random_inputs(&self, seed: u64) -> Result<Vec<Tensor>, InterpError> {
        random_inputs(&self.graph, &self.bindings, seed)
    }
}

/// Random well-typed programs under `cfg`, shrinking toward fewer and simpler ops.
pub fn arb_graph(cfg: GenConfig) -> impl Strategy<Value = GeneratedProgram> {
    let cfg = Arc::new(cfg.normalized());
    recipe::arb_recipe(&cfg).prop_map(move |r| build::build(&cfg, &r))
}

/// The one program [`arb_graph`] draws for `seed` under `cfg`: the same seed, configuration and
/// dependency versions (Cargo.lock pins proptest) always give the same program, so a failing seed
/// of a long random run can be replayed alone. Fails only if the strategy rejects every attempt
/// (it has no filters, so it does not).
pub fn generate(cfg: &GenConfig, seed: u64) -> Result<GeneratedProgram, String> {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &key);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    arb_graph(cfg.clone()).new_tree(&mut runner).map(|tree| tree.current()).map_err(|e| e.to_string())
}

/// How many nodes of each op kind ([`crate::Op::kind_name`]) × result dtype the graphs contain.
pub fn coverage(graphs: &[Graph]) -> BTreeMap<(String, DType), usize> {
    let mut counts = BTreeMap::new();
    for node in graphs.iter().flat_map(|g| &g.nodes) {
        *counts.entry((node.op.kind_name(), node.ty.dtype)).or_insert(0) += 1;
    }
    counts
}
