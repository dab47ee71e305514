//! The property test over the shared generator's programs: the optimized program (and every
//! alternative) verifies and computes what the original computes on the interpreter; the graph
//! after the algebra and layout rewrites verifies too. Also: the optimizer is deterministic.

use proptest::prelude::*;
use tcc_ir::interp::{run_graph, run_program};
use tcc_ir::testing::{GenConfig, GeneratedProgram, Tolerance, arb_graph, compare_outputs};
use tcc_passes::{OptimizeOptions, TargetModel, optimize};

fn small() -> GenConfig {
    GenConfig { max_ops: 24, max_elements: 2_000, ..GenConfig::default() }
}

fn check(p: &GeneratedProgram, target: TargetModel) -> Result<(), TestCaseError> {
    let opts = OptimizeOptions { bindings: p.bindings.clone(), top_k: 2, ..OptimizeOptions::new(target) };
    let out = optimize(&p.graph, &opts).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert!(out.report.notes.is_empty(), "fallback taken: {:?}", out.report.notes);
    tcc_ir::verify::verify(&out.simplified).map_err(|e| TestCaseError::fail(format!("simplified graph: {e}")))?;
    let inputs = p.random_inputs(7).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let expected = run_graph(&p.graph, &inputs).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let simplified = run_graph(&out.simplified, &inputs).map_err(|e| TestCaseError::fail(e.to_string()))?;
    compare_outputs(&expected, &simplified, &Tolerance::default()).map_err(|e| {
        TestCaseError::fail(format!("simplified graph: {e:?}\n{}", tcc_ir::text::print_graph(&out.simplified)))
    })?;
    for program in std::iter::once(&out.program).chain(&out.alternatives) {
        tcc_ir::verify::verify_program(program).map_err(|e| TestCaseError::fail(format!("program: {e}")))?;
        let actual = run_program(program, &inputs).map_err(|e| TestCaseError::fail(e.to_string()))?;
        compare_outputs(&expected, &actual, &Tolerance::default())
            .map_err(|e| TestCaseError::fail(format!("{e:?}\n{}", out.report)))?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn optimized_programs_compute_the_same_values(p in arb_graph(small())) {
        check(&p, TargetModel::cpu_host())?;
        check(&p, TargetModel::sm_90a())?;
    }

    #[test]
    fn optimized_programs_with_positions_compute_the_same_values(p in arb_graph(GenConfig { max_ops: 24, max_elements: 2_000, ..GenConfig::with_positions() })) {
        check(&p, TargetModel::cpu_host())?;
        check(&p, TargetModel::sm_90a())?;
    }

    #[test]
    fn the_optimizer_is_deterministic(p in arb_graph(small())) {
        let target = TargetModel::sm_80();
        let opts = OptimizeOptions { bindings: p.bindings.clone(), top_k: 2, explain: true, ..OptimizeOptions::new(target) };
        let a = optimize(&p.graph, &opts).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let b = optimize(&p.graph, &opts).map_err(|e| TestCaseError::fail(e.to_string()))?;
        // Compared as text: derived equality would call a NaN constant unequal to itself.
        prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn long_programs_compute_the_same_values(p in arb_graph(GenConfig { max_ops: 120, ..GenConfig::long_chains() })) {
        check(&p, TargetModel::sm_90a())?;
    }
}
