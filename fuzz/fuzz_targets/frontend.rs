//! The front end on arbitrary bytes: never panics, never overflows the stack; and whatever it
//! accepts verifies and survives the IR text round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(module) = tcc_frontend::parse_bytes("fuzz.tc", data) else { return };
    for g in &module.functions {
        if let Err(e) = tcc_ir::verify::verify(g) {
            panic!("the front end built a graph that does not verify: {e}\n{g}");
        }
    }
    let text = tcc_ir::text::print_module(&module);
    match tcc_ir::text::parse_module(&text) {
        Ok(back) => assert_eq!(tcc_ir::text::print_module(&back), text, "the IR text does not round-trip"),
        Err(e) => panic!("the printed IR of an accepted program does not parse: {e}\n{text}"),
    }
});
