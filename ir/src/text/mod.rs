//! The canonical text form of a [`Graph`] and a [`Module`], and its parser.
//!
//! One function prints as a header, one node per line, and a `return` line:
//!
//! ```text
//! fn softmax(x: f32[M, 128]) -> (f32[M, 128]) {
//!   %0 = input 0 : f32[M, 128]
//!   %1 = reduce_max %0 axes=[1] keepdim : f32[M, 1]
//!   %2 = sub %0, %1 : f32[M, 128]
//!   %3 = exp %2 : f32[M, 128]
//!   %4 = reduce_sum %3 axes=[1] keepdim : f32[M, 1]
//!   %5 = div %3, %4 : f32[M, 128]
//!   return %5
//! }
//! ```
//!
//! The header lists the parameters (name and type) and the types of the outputs; node `%i` is
//! `graph.nodes[i]`, written as `%i = OP OPERANDS ATTRIBUTES : TYPE`. Every op is listed here:
//!
//! | op | text |
//! |----|------|
//! | `Input` | `input 0` |
//! | `Constant` | `const 1.5`, `const -0.0`, `const inf`, `const -inf`, `const nan`, `const nan(0x7ff8000000000001)` |
//! | `Iota` | `iota` (the length is the node type's: `%0 = iota : i32[S]`) |
//! | `Unary` | `exp %0` (any [`crate::UnaryOp`] name) |
//! | `Cast`, `Broadcast`, `Reshape` | `cast %0`, `broadcast %0`, `reshape %0` (the target is the node type) |
//! | `Binary`, `Compare` | `add %0, %1`, `lt %0, %1` |
//! | `Select` | `select %0, %1, %2` |
//! | `Permute` | `permute %0 perm=[1, 0]` |
//! | `Slice` | `slice %0 axis=1 start=0 end=4` |
//! | `Concat` | `concat %0, %1 axis=0` |
//! | `Reduce` | `reduce_sum %0 axes=[0, 1]`, with a trailing `keepdim` when it is set |
//! | `MatMul` | `matmul %0, %1` |
//!
//! Names (of functions, parameters and shape variables) print bare when they are identifiers
//! (a letter or `_`, then letters, digits or `_`, Unicode included) and as a quoted string with
//! `\"`, `\\`, `\n`, `\t`, `\r` and `\u{..}` escapes otherwise. Constants print with Rust's
//! shortest round-tripping form, so `parse(print(g))` reproduces every bit, NaN payloads included.
//! A module prints its functions separated by a blank line. `//` starts a comment that runs to the
//! end of the line.
//!
//! The parser is iterative (it never recurses), reports `line:column` positions, and rebuilds the
//! graph through [`Graph::push_typed`], so every node's declared type is checked by [`crate::infer`].

mod lex;
mod parse;
mod print;
#[cfg(test)]
pub(crate) mod tests;

use std::fmt;

use crate::graph::{BuildError, Graph, Module};
use crate::infer::TypeError;
use crate::op::TensorType;

pub use print::{write_f64, write_name};

/// Prints the canonical text of one function; never panics, even on a graph that does not verify.
pub fn print_graph(g: &Graph) -> String {
    let mut out = String::new();
    print::graph(&mut out, g);
    out
}

/// Prints the canonical text of every function of a module, separated by blank lines.
pub fn print_module(m: &Module) -> String {
    let mut out = String::new();
    for (i, g) in m.functions.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        print::graph(&mut out, g);
    }
    out
}

/// Parses the text of exactly one function.
pub fn parse_graph(s: &str) -> Result<Graph, TextError> {
    parse::Parser::new(s)?.graph_only()
}

/// Parses the text of a module: zero or more functions.
pub fn parse_module(s: &str) -> Result<Module, TextError> {
    parse::Parser::new(s)?.module()
}

impl fmt::Display for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print_graph(self))
    }
}

impl fmt::Display for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print_module(self))
    }
}

/// A parse error: where (1-based line and column, in characters) and what.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{line}:{col}: {kind}")]
pub struct TextError {
    /// Line of the offending token, from 1.
    pub line: usize,
    /// Column of the offending token, from 1, counted in characters.
    pub col: usize,
    /// What is wrong.
    pub kind: TextErrorKind,
}

/// What is wrong in a [`TextError`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TextErrorKind {
    /// A character that starts no token.
    #[error("unexpected character {0:?}")]
    UnexpectedChar(char),
    /// A string literal without its closing quote on the same line.
    #[error("unterminated string")]
    UnterminatedString,
    /// A malformed escape in a string literal.
    #[error("bad escape `{0}` in string")]
    BadEscape(String),
    /// `%` not followed by digits.
    #[error("`%` must be followed by a node number")]
    BadValue,
    /// Another token was expected.
    #[error("expected {expected}, found {found}")]
    Expected {
        /// What the grammar allows here.
        expected: String,
        /// What the text holds.
        found: String,
    },
    /// An integer that does not parse or does not fit its field.
    #[error("`{0}` is not an integer in range")]
    BadInteger(String),
    /// A constant that does not parse as a number.
    #[error("`{0}` is not a number")]
    BadFloat(String),
    /// The bits given in `nan(..)` are not those of a NaN.
    #[error("0x{0:016x} are not the bits of a NaN")]
    NotNan(u64),
    /// An unknown dtype name.
    #[error("unknown dtype `{0}`")]
    UnknownDType(String),
    /// An unknown op name.
    #[error("unknown op `{0}`")]
    UnknownOp(String),
    /// Nodes must be numbered `%0, %1, ...` in order.
    #[error("expected node %{expected}, found %{found}")]
    NodeOutOfOrder {
        /// The number the next node must have.
        expected: usize,
        /// The number written.
        found: String,
    },
    /// A parameter's type breaks a limit.
    #[error("parameter {index}: {source}")]
    Param {
        /// Position of the parameter.
        index: usize,
        /// Why its type is invalid.
        source: TypeError,
    },
    /// A node is ill-typed or its declared type disagrees with its op.
    #[error("node %{node}: {source}")]
    Node {
        /// The node's number.
        node: usize,
        /// Why it was refused.
        source: BuildError,
    },
    /// `return` names a node that does not exist.
    #[error("return names %{0}, which is not a node")]
    UnknownOutput(u32),
    /// The header declares a different number of outputs than `return` returns.
    #[error("the header declares {declared} outputs but `return` has {found}")]
    OutputCount {
        /// Outputs in the header.
        declared: usize,
        /// Values after `return`.
        found: usize,
    },
    /// An output's type differs from the one in the header.
    #[error("output {index} has type {actual} but the header declares {declared}")]
    OutputType {
        /// Position of the output.
        index: usize,
        /// The type in the header.
        declared: TensorType,
        /// The returned node's type.
        actual: TensorType,
    },
}
