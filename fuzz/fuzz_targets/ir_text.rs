//! The IR text parser on arbitrary text: never panics; what it accepts is well typed (it may hold a
//! constant its dtype cannot represent: the text form keeps every f64 bit, and `verify` reports
//! it), and printing it and parsing the print gives the same text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcc_ir::verify::{VerifyError, verify};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = tcc_ir::text::parse_graph(text);
    let Ok(module) = tcc_ir::text::parse_module(text) else { return };
    for g in &module.functions {
        match verify(g) {
            Ok(()) | Err(VerifyError::Constant { .. }) => {}
            Err(e) => panic!("the parser accepted a graph that does not verify: {e}\n{g}"),
        }
    }
    let printed = tcc_ir::text::print_module(&module);
    match tcc_ir::text::parse_module(&printed) {
        Ok(back) => assert_eq!(tcc_ir::text::print_module(&back), printed, "the IR text does not round-trip"),
        Err(e) => panic!("printed IR does not parse: {e}\n{printed}"),
    }
});
