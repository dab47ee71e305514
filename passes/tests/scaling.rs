//! The optimizer's work grows linearly with the program: on a generated chain of 600 `let`s (about
//! 1,200 ops) every phase saturates inside the default budget, the e-graph holds a bounded number
//! of e-nodes per value, and twice the program makes about twice the e-nodes. Explaining walks egg's
//! proofs, whose size is bounded too. These bound work, not time, so a regression fails here on any
//! machine.

use std::time::Duration;

use tcc_passes::{Budget, OptimizeOptions, StopReason, TargetModel, optimize};

use crate::chain::{compute_ops, let_chain};

/// Options as `tcc compile` uses them, with the time limit out of the way (work is what is
/// bounded here, and a debug build on a loaded machine is slow).
fn options(explain: bool) -> OptimizeOptions {
    let budget = Budget { time_limit: Duration::from_secs(3600), ..Budget::default() };
    OptimizeOptions { budget, explain, ..OptimizeOptions::new(TargetModel::cpu_host()) }
}

#[test]
fn a_large_program_saturates_with_bounded_work() {
    let g = let_chain(600);
    let ops = compute_ops(&g);
    assert!(ops > 1_100, "{ops} ops");
    let out = optimize(&g, &options(false)).unwrap();
    for phase in &out.report.phases {
        assert_eq!(phase.stop_reason, StopReason::Saturated, "{}", out.report);
        assert!(phase.iterations <= 20, "{} took {} iterations", phase.name, phase.iterations);
    }
    let fusion = out.report.phases.iter().find(|p| p.name == "fusion").unwrap();
    assert!(fusion.nodes <= 12 * fusion.classes, "fusion: {} e-nodes in {} classes", fusion.nodes, fusion.classes);
    assert!(out.report.egraph_nodes <= 32 * fusion.classes, "{} e-nodes", out.report.egraph_nodes);
    // Fused as fully as a small program: about one kernel per eight ops (the saturated
    // 1,000-`let` chain has 292 kernels for 2,314 ops).
    let kernels = out.program.launches.len();
    assert!(kernels * 6 <= ops, "{kernels} kernels for {ops} ops");
}

#[test]
fn explaining_a_large_program_walks_a_bounded_proof() {
    let g = let_chain(300);
    let ops = compute_ops(&g);
    let out = optimize(&g, &options(true)).unwrap();
    assert!(out.report.kernels.iter().all(|k| k.explanation.is_some()), "{}", out.report);
    // Each kernel's proof is walked as a DAG, once per step. egg rebuilds the terms behind each
    // kernel for every query, so the total grows with the square of the program (25,472 steps for
    // 599 ops, 96,996 for 1,202), never exponentially as the flattened trees did.
    let steps = out.report.proof_steps;
    assert!(steps <= ops * ops / 8, "{steps} proof steps for {ops} ops");
}

#[test]
fn a_larger_program_costs_proportionally_more_work() {
    // Twice the program, about twice the e-nodes (linear, not quadratic).
    let nodes = |lets| optimize(&let_chain(lets), &options(false)).unwrap().report.egraph_nodes;
    let (small, large) = (nodes(150), nodes(300));
    assert!(large <= 3 * small, "150 lets: {small} e-nodes, 300 lets: {large}");
}
