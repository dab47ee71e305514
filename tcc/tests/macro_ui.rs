//! trybuild cases of `tcc::kernel!`: programs the macro must reject, with the caret under the
//! right DSL tokens (`ui/fail/*.rs` and their `.stderr`), and programs it must accept and run
//! (`ui/pass/*.rs`).
//!
//! The expected `.stderr` files are tied to the rustc version (1.95, the workspace's
//! `rust-version`); regenerate them with `TRYBUILD=overwrite cargo test -p tcc --test main macro_ui`
//! and review every change.

#[test]
fn kernel_macro_ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
