//! Workspace-level integration tests (one test binary, DESIGN §0): properties that span crates,
//! over the shared random program generator of `tcc_ir::testing`.

mod ir_properties;
