//! The tcc DSL front end: one parser for `.tc` files and the `tcc::kernel!` proc-macro.
//!
//! ```text
//!  .tc bytes ──utf-8, NUL──▶ text ──proc-macro2 lexer──▶ tokens ◀── kernel! { ... } tokens
//!                                                          │
//!        items: split at top-level `fn`, nesting and literal prechecks (iterative)
//!                                                          │
//!        parser: syn ParseStream + hand-written precedence ─▶ arena AST per fn
//!                                                          │
//!        lower: call graph (recursion), frames on an explicit stack (inlining),
//!               tcc_ir::Graph::push for every node (the IR's type rules decide)
//!                                                          │
//!                          tcc_ir::Module   or   every error with its span
//! ```
//!
//! Nothing here recurses on the input's size: expressions live in arenas, binary chains are parsed
//! with an operator stack, nesting is bounded before syn sees it, and inlining runs on a frame stack.

#![warn(missing_docs)]

mod ast;
mod diag;
mod diagnostics;
mod items;
mod line_index;
mod lower;
mod parser;
mod pipeline;
mod source;
mod span;
mod suggest;
mod tokens;

pub use diagnostics::{Diagnostic, Diagnostics, Label, MAX_SHOWN};
pub use source::{MAX_SOURCE_BYTES, parse_bytes, parse_source};
pub use tokens::parse_tokens;
