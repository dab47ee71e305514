//! What an expression evaluates to while lowering.

use std::rc::Rc;

use tcc_ir::{DType, NodeId};

use crate::span::Sp;

/// A literal whose dtype is not decided yet: it adopts the dtype of the tensor it meets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Num {
    /// An integer literal (possibly negated).
    Int(i128),
    /// A float literal (possibly negated).
    Float(f64),
    /// `true` or `false`.
    Bool(bool),
}

impl Num {
    /// The dtype a literal takes when nothing else decides: i32, f32 or bool.
    pub fn default_dtype(self) -> DType {
        match self {
            Num::Int(_) => DType::I32,
            Num::Float(_) => DType::F32,
            Num::Bool(_) => DType::Bool,
        }
    }

    /// The literal as written (for messages).
    pub fn describe(self) -> String {
        match self {
            Num::Int(i) => format!("integer literal `{i}`"),
            Num::Float(f) => format!("float literal `{f:?}`"),
            Num::Bool(b) => format!("`{b}`"),
        }
    }
}

/// The value of an expression.
#[derive(Debug, Clone)]
pub(crate) enum Val {
    /// A tensor: a node of the graph being built.
    Tensor(NodeId),
    /// A literal, with where it is.
    Num(Num, Sp),
    /// A tuple (the result of a fn returning several tensors, or `(a, b)`); its elements are never
    /// tuples, and it is shared, so copying a binding is cheap.
    Tuple(Rc<[Val]>),
    /// A name with no binding: reported by whoever tries to use it as a value (it may be a
    /// `keepdim` flag or a shape variable in an argument, read from the syntax tree instead).
    Unbound,
    /// A list `[..]`: its elements are read by the builtin it is passed to.
    List,
    /// An error that was already reported; whatever uses it fails silently (no cascades).
    Error,
}

/// An operand of an operation: a tensor, or a literal still waiting for its dtype.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Operand {
    /// A tensor.
    Tensor(NodeId),
    /// A literal.
    Num(Num, Sp),
}
