//! Helpers shared by the test modules.

use std::path::PathBuf;

use tcc_frontend::{Diagnostics, parse_source};
use tcc_ir::{Graph, Module};

/// The stack size cargo gives test threads by default.
pub const TEST_STACK: usize = 2 << 20;

/// Runs `f` on a thread with the default 2 MiB test stack (independent of `RUST_MIN_STACK`).
pub fn on_test_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new().stack_size(TEST_STACK).spawn(f).unwrap().join().unwrap()
}

/// Parses a source that must be valid, showing its diagnostics otherwise.
pub fn module(src: &str) -> Module {
    match parse_source("test.tc", src) {
        Ok(m) => m,
        Err(d) => panic!("expected a valid program, got:\n{}", d.render(false)),
    }
}

/// The only fn of a valid source.
pub fn graph(src: &str) -> Graph {
    let m = module(src);
    assert_eq!(m.functions.len(), 1, "expected one fn");
    m.functions.into_iter().next().unwrap()
}

/// Each node as `kind: type`, in order.
pub fn ops(g: &Graph) -> Vec<String> {
    g.nodes.iter().map(|n| format!("{}: {}", n.op.kind_name(), n.ty)).collect()
}

/// The messages of the diagnostics, in order.
pub fn messages(d: &Diagnostics) -> Vec<String> {
    d.iter().map(|x| x.message.clone()).collect()
}

/// The workspace's root folder.
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}
