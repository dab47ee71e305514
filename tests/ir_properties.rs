//! Properties of the IR over the shared generator's graphs: the text form round-trips, generated
//! graphs verify, and fingerprints are stable.

use proptest::prelude::*;
use tcc_ir::testing::{GenConfig, arb_graph};
use tcc_ir::text::{parse_graph, print_graph};

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn printed_graphs_parse_back_to_the_same_graph(p in arb_graph(GenConfig::default())) {
        let text = print_graph(&p.graph);
        let parsed = parse_graph(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        // The text form keeps every bit (NaN payloads included), so equal text means the same graph;
        // `==` on graphs would call a NaN constant unequal to itself.
        prop_assert_eq!(print_graph(&parsed), text);
        prop_assert_eq!(parsed.nodes.len(), p.graph.nodes.len());
        prop_assert_eq!(&parsed.params, &p.graph.params);
        prop_assert_eq!(&parsed.outputs, &p.graph.outputs);
    }

    #[test]
    fn generated_graphs_verify(p in arb_graph(GenConfig::default())) {
        tcc_ir::verify::verify(&p.graph).map_err(|e| TestCaseError::fail(format!("{e}")))?;
    }

    #[test]
    fn fingerprints_are_stable_across_a_round_trip(p in arb_graph(GenConfig::default())) {
        let parsed = parse_graph(&print_graph(&p.graph)).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        prop_assert_eq!(
            tcc_ir::fingerprint::fingerprint_graph(&parsed),
            tcc_ir::fingerprint::fingerprint_graph(&p.graph)
        );
    }

    #[test]
    fn generated_graphs_run_on_the_interpreter(p in arb_graph(GenConfig::default()), seed in any::<u64>()) {
        let inputs = tcc_ir::testing::random_inputs(&p.graph, &p.bindings, seed)
            .map_err(|e| TestCaseError::fail(format!("{e}")))?;
        let outputs = tcc_ir::interp::run_graph(&p.graph, &inputs)
            .map_err(|e| TestCaseError::fail(format!("{e}")))?;
        prop_assert_eq!(outputs.len(), p.graph.outputs.len());
        for (out, id) in outputs.iter().zip(&p.graph.outputs) {
            let ty = p.graph.ty(*id).unwrap();
            prop_assert_eq!(out.dtype, ty.dtype);
            prop_assert_eq!(Some(out.shape.clone()), ty.shape.resolve(&p.bindings));
        }
    }
}
