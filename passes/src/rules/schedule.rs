//! Schedule choices as alternatives: every unscheduled kernel node gets one scheduled variant per
//! candidate of [`crate::schedule::candidates`] (which respects the target's limits), all in the
//! kernel's class; extraction picks one by the cost model.

use egg::Id;

use super::{Rule, Term};
use crate::analysis::EG;
use crate::lang::{TNode, TOp};
use crate::schedule::candidates;

/// Every rule of the family.
pub fn rules() -> Vec<Rule> {
    vec![Rule { name: "schedule-candidates", find: schedule_candidates }]
}

/// `kernel(body) = kernel(body) @ schedule` for each candidate schedule.
fn schedule_candidates(egraph: &EG, _: Id, node: &TNode) -> Vec<Term> {
    let TOp::Kernel { body, sched: None } = node.op else {
        return Vec::new();
    };
    let (Some(b), Some(target)) = (egraph.analysis.body(body), egraph.analysis.target.as_ref()) else {
        return Vec::new();
    };
    candidates(b, target, &egraph.analysis.bindings)
        .into_iter()
        .map(|schedule| Term::Scheduled { body, schedule, inputs: node.children.clone() })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::rules::testkit::graph;
    use crate::{OptimizeOptions, TargetModel, optimize};

    #[test]
    fn schedule_candidates_become_alternatives() {
        let g = graph("a: f16[256, 128]; b: f16[128, 256]", &["(matmul a b)"]);
        let opts = OptimizeOptions { top_k: 3, ..OptimizeOptions::new(TargetModel::sm_80()) };
        let out = optimize(&g, &opts).unwrap();
        let applied = out.report.phases.iter().flat_map(|p| &p.rules_applied).find(|(r, _)| r == "schedule-candidates");
        assert!(applied.is_some_and(|(_, n)| *n > 1), "{}", out.report);
        assert_eq!(out.alternatives.len(), 3);
        for alt in &out.alternatives {
            assert_ne!(alt.launches[0].kernel.schedule, out.program.launches[0].kernel.schedule);
        }
    }
}
