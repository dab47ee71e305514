//! Property tests: random programs from the shared generator, partitioned simply, run through the
//! cranelift tier and compared with the interpreter.

use proptest::prelude::*;
use tcc_ir::KernelClass;
use tcc_ir::testing::{GenConfig, GeneratedProgram, Tolerance, arb_graph};

use crate::common::{check, device, materializing_device, per_op, whole};

fn tolerance() -> Tolerance {
    // Fused kernels keep f32 intermediates and use polynomial transcendentals: allow a rare flip of
    // a nearly tied comparison.
    Tolerance { outlier_fraction: 0.02, ..Tolerance::default() }.scaled(4.0)
}

fn run_case(gp: &GeneratedProgram, seed: u64) -> Result<(), TestCaseError> {
    let inputs = gp.random_inputs(seed).map_err(|e| TestCaseError::reject(e.to_string()))?;
    let g = &gp.graph;
    let tol = tolerance();
    let text = format!("{g:#?}");
    let programs = [
        ("fused whole graph", device(), whole(g, KernelClass::Generic)),
        ("materialized whole graph", materializing_device(), whole(g, KernelClass::Generic)),
        ("one kernel per op", device(), per_op(g)),
    ];
    for (what, dev, program) in &programs {
        if let Err(e) = check(dev, g, program, &inputs, &tol) {
            return Err(TestCaseError::fail(format!("{what}: {e}\n{text}")));
        }
        dev.clear_cache();
    }
    Ok(())
}

/// `PROPTEST_CASES` overrides the case counts (for deeper runs by hand).
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(96), ..ProptestConfig::default() })]

    #[test]
    fn random_programs_match_the_interpreter(gp in arb_graph(GenConfig { max_ops: 24, max_elements: 6_000, ..GenConfig::default() }), seed in any::<u64>()) {
        run_case(&gp, seed)?;
    }

    #[test]
    fn random_pointwise_programs_match_the_interpreter(gp in arb_graph(GenConfig { max_ops: 32, ..GenConfig::pointwise_only() }), seed in any::<u64>()) {
        run_case(&gp, seed)?;
    }

    #[test]
    fn random_programs_with_positions_match_the_interpreter(gp in arb_graph(GenConfig { max_ops: 24, max_elements: 6_000, ..GenConfig::with_positions() }), seed in any::<u64>()) {
        run_case(&gp, seed)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(16), ..ProptestConfig::default() })]

    #[test]
    fn long_random_programs_match_the_interpreter(gp in arb_graph(GenConfig { max_ops: 120, max_elements: 2_000, ..GenConfig::long_chains() }), seed in any::<u64>()) {
        run_case(&gp, seed)?;
    }
}
