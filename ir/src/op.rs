//! The operations of the tensor IR.

use std::fmt;

use crate::dtype::DType;
use crate::shape::Shape;

/// Index of a node in its [`crate::Graph`]; operands always have smaller ids than their users.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The position of the node in [`crate::Graph::nodes`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// Elementwise operations of one operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum UnaryOp {
    /// `-x` (floats and i32, wrapping).
    Neg,
    /// `|x|` (floats and i32, wrapping at `i32::MIN`).
    Abs,
    /// `e^x` (floats).
    Exp,
    /// Natural logarithm (floats).
    Log,
    /// Square root (floats).
    Sqrt,
    /// `1 / sqrt(x)` (floats).
    Rsqrt,
    /// Hyperbolic tangent (floats).
    Tanh,
    /// `1 / (1 + e^-x)` (floats).
    Sigmoid,
    /// `max(x, 0)`, propagating NaN (floats and i32).
    Relu,
    /// GELU, tanh form: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` (floats).
    Gelu,
}

impl UnaryOp {
    /// Every unary op, in a fixed order.
    pub const ALL: [UnaryOp; 10] = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Relu,
        UnaryOp::Gelu,
    ];

    /// Name in source and IR text.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Relu => "relu",
            UnaryOp::Gelu => "gelu",
        }
    }

    /// Looks an op up by its name.
    pub fn from_name(name: &str) -> Option<UnaryOp> {
        UnaryOp::ALL.into_iter().find(|o| o.name() == name)
    }

    /// True if the op accepts operands of `dtype`.
    pub fn accepts(self, dtype: DType) -> bool {
        match self {
            UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Relu => dtype.is_float() || dtype == DType::I32,
            _ => dtype.is_float(),
        }
    }
}

/// Elementwise operations of two operands of the same dtype, with numpy broadcasting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum BinaryOp {
    /// `a + b` (floats and i32, wrapping).
    Add,
    /// `a - b` (floats and i32, wrapping).
    Sub,
    /// `a * b` (floats and i32, wrapping).
    Mul,
    /// `a / b` (floats; i32 truncates toward zero, and division by zero gives 0).
    Div,
    /// Elementwise maximum, propagating NaN.
    Max,
    /// Elementwise minimum, propagating NaN.
    Min,
    /// `a ^ b` (floats).
    Pow,
}

impl BinaryOp {
    /// Every binary op, in a fixed order.
    pub const ALL: [BinaryOp; 7] =
        [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Max, BinaryOp::Min, BinaryOp::Pow];

    /// Name in source and IR text.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Max => "max",
            BinaryOp::Min => "min",
            BinaryOp::Pow => "pow",
        }
    }

    /// Looks an op up by its name.
    pub fn from_name(name: &str) -> Option<BinaryOp> {
        BinaryOp::ALL.into_iter().find(|o| o.name() == name)
    }

    /// True if the op accepts operands of `dtype`.
    pub fn accepts(self, dtype: DType) -> bool {
        match self {
            BinaryOp::Pow => dtype.is_float(),
            _ => dtype.is_float() || dtype == DType::I32,
        }
    }
}

/// Elementwise comparisons; the result is `bool`, and any comparison with NaN is false
/// (except `ne`, which is true, as IEEE defines).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum CompareOp {
    /// `a == b`.
    Eq,
    /// `a != b`.
    Ne,
    /// `a < b`.
    Lt,
    /// `a <= b`.
    Le,
    /// `a > b`.
    Gt,
    /// `a >= b`.
    Ge,
}

impl CompareOp {
    /// Every comparison, in a fixed order.
    pub const ALL: [CompareOp; 6] =
        [CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge];

    /// Name in IR text.
    pub fn name(self) -> &'static str {
        match self {
            CompareOp::Eq => "eq",
            CompareOp::Ne => "ne",
            CompareOp::Lt => "lt",
            CompareOp::Le => "le",
            CompareOp::Gt => "gt",
            CompareOp::Ge => "ge",
        }
    }

    /// Looks a comparison up by its name.
    pub fn from_name(name: &str) -> Option<CompareOp> {
        CompareOp::ALL.into_iter().find(|o| o.name() == name)
    }
}

/// Reductions over a set of axes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum ReduceOp {
    /// Sum (floats and i32, wrapping).
    Sum,
    /// Maximum, propagating NaN.
    Max,
    /// Minimum, propagating NaN.
    Min,
    /// Arithmetic mean (floats).
    Mean,
}

impl ReduceOp {
    /// Every reduction, in a fixed order.
    pub const ALL: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Mean];

    /// Name in IR text.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Mean => "mean",
        }
    }

    /// Looks a reduction up by its name.
    pub fn from_name(name: &str) -> Option<ReduceOp> {
        ReduceOp::ALL.into_iter().find(|o| o.name() == name)
    }

    /// True if the reduction accepts operands of `dtype`.
    pub fn accepts(self, dtype: DType) -> bool {
        match self {
            ReduceOp::Mean => dtype.is_float(),
            _ => dtype.is_float() || dtype == DType::I32,
        }
    }
}

/// One operation: what a node computes from its operands. The node carries the result's dtype and
/// shape; [`crate::infer`] computes them from the operands and checks every rule.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Op {
    /// The `index`-th parameter of the function.
    Input {
        /// Position in [`crate::Graph::params`].
        index: usize,
    },
    /// A scalar constant (shape `[]`) of the node's dtype; broadcasts like any tensor.
    Constant {
        /// The value, already representable in the node's dtype. In serde formats a non-finite
        /// value is text (`"inf"`, `"-inf"`, `"nan(0x..)"`), since JSON has no number for it.
        #[serde(with = "any_f64")]
        value: f64,
    },
    /// The positions `0, 1, ..., n-1` as an `i32[n]` vector (the node's type says `n`, a constant
    /// or a shape variable): masks and biases written as math of positions (`iota(S)`), which no
    /// kernel needs to read from memory.
    Iota,
    /// An elementwise op of one operand.
    Unary(UnaryOp, NodeId),
    /// Conversion to the node's dtype (round to nearest even, saturating float → int, NaN → 0).
    Cast(NodeId),
    /// An elementwise op of two operands, broadcast together.
    Binary(BinaryOp, NodeId, NodeId),
    /// An elementwise comparison giving `bool`.
    Compare(CompareOp, NodeId, NodeId),
    /// `cond ? on_true : on_false`, all three broadcast together.
    Select {
        /// The `bool` condition.
        cond: NodeId,
        /// Taken where `cond` holds.
        on_true: NodeId,
        /// Taken elsewhere.
        on_false: NodeId,
    },
    /// Broadcasts the operand to the node's shape (numpy rules).
    Broadcast(NodeId),
    /// Reinterprets the operand (row-major) with the node's shape; element counts must match.
    Reshape(NodeId),
    /// Reorders axes: output axis `i` is input axis `perm[i]`.
    Permute {
        /// The operand.
        input: NodeId,
        /// A permutation of `0..rank`.
        perm: Vec<usize>,
    },
    /// Takes `start..end` along one axis.
    Slice {
        /// The operand.
        input: NodeId,
        /// The axis sliced (its size must be constant).
        axis: usize,
        /// First index kept.
        start: u64,
        /// One past the last index kept.
        end: u64,
    },
    /// Joins operands along one axis; all other dimensions must agree.
    Concat {
        /// The operands, at least one.
        inputs: Vec<NodeId>,
        /// The axis joined (its sizes must be constant).
        axis: usize,
    },
    /// Reduces over `axes` (sorted, distinct, non-empty), keeping them as size 1 when `keepdim`.
    Reduce {
        /// Which reduction.
        op: ReduceOp,
        /// The operand.
        input: NodeId,
        /// Axes reduced.
        axes: Vec<usize>,
        /// Keep reduced axes as size 1.
        keepdim: bool,
    },
    /// Matrix product `[..., m, k] @ [..., k, n] -> [..., m, n]` with broadcast batch axes; floats,
    /// accumulated in at least f32 and rounded once at the output.
    MatMul(NodeId, NodeId),
}

impl Op {
    /// The operands, in order.
    pub fn operands(&self) -> Vec<NodeId> {
        match self {
            Op::Input { .. } | Op::Constant { .. } | Op::Iota => Vec::new(),
            Op::Unary(_, a) | Op::Cast(a) | Op::Broadcast(a) | Op::Reshape(a) => vec![*a],
            Op::Permute { input, .. } | Op::Slice { input, .. } | Op::Reduce { input, .. } => {
                vec![*input]
            }
            Op::Binary(_, a, b) | Op::Compare(_, a, b) | Op::MatMul(a, b) => vec![*a, *b],
            Op::Select { cond, on_true, on_false } => vec![*cond, *on_true, *on_false],
            Op::Concat { inputs, .. } => inputs.clone(),
        }
    }

    /// A copy of the op with every operand replaced by `f(operand)`.
    pub fn map_operands(&self, mut f: impl FnMut(NodeId) -> NodeId) -> Op {
        match self {
            Op::Input { index } => Op::Input { index: *index },
            Op::Constant { value } => Op::Constant { value: *value },
            Op::Iota => Op::Iota,
            Op::Unary(u, a) => Op::Unary(*u, f(*a)),
            Op::Cast(a) => Op::Cast(f(*a)),
            Op::Binary(b, x, y) => {
                let x = f(*x);
                Op::Binary(*b, x, f(*y))
            }
            Op::Compare(c, x, y) => {
                let x = f(*x);
                Op::Compare(*c, x, f(*y))
            }
            Op::Select { cond, on_true, on_false } => {
                let cond = f(*cond);
                let on_true = f(*on_true);
                Op::Select { cond, on_true, on_false: f(*on_false) }
            }
            Op::Broadcast(a) => Op::Broadcast(f(*a)),
            Op::Reshape(a) => Op::Reshape(f(*a)),
            Op::Permute { input, perm } => Op::Permute { input: f(*input), perm: perm.clone() },
            Op::Slice { input, axis, start, end } => {
                Op::Slice { input: f(*input), axis: *axis, start: *start, end: *end }
            }
            Op::Concat { inputs, axis } => Op::Concat { inputs: inputs.iter().map(|&i| f(i)).collect(), axis: *axis },
            Op::Reduce { op, input, axes, keepdim } => {
                Op::Reduce { op: *op, input: f(*input), axes: axes.clone(), keepdim: *keepdim }
            }
            Op::MatMul(a, b) => {
                let a = f(*a);
                Op::MatMul(a, f(*b))
            }
        }
    }

    /// A short name of the op kind (`add`, `matmul`, `reduce_sum`, ...), for tables and coverage.
    pub fn kind_name(&self) -> String {
        match self {
            Op::Input { .. } => "input".into(),
            Op::Constant { .. } => "const".into(),
            Op::Iota => "iota".into(),
            Op::Unary(u, _) => u.name().into(),
            Op::Cast(_) => "cast".into(),
            Op::Binary(b, _, _) => b.name().into(),
            Op::Compare(c, _, _) => c.name().into(),
            Op::Select { .. } => "select".into(),
            Op::Broadcast(_) => "broadcast".into(),
            Op::Reshape(_) => "reshape".into(),
            Op::Permute { .. } => "permute".into(),
            Op::Slice { .. } => "slice".into(),
            Op::Concat { .. } => "concat".into(),
            Op::Reduce { op, .. } => format!("reduce_{}", op.name()),
            Op::MatMul(..) => "matmul".into(),
        }
    }
}

/// The type of a tensor value: element dtype and shape.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct TensorType {
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Shape,
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, self.shape)
    }
}

/// Serde for an f64 that may be infinite or NaN: a number when finite, else its IR text form
/// (`inf`, `-inf`, `nan(0x<bits>)`), so that a graph with a `-inf` mask fill survives JSON.
mod any_f64 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_f64(*v)
        } else if v.is_nan() {
            s.serialize_str(&format!("nan(0x{:x})", v.to_bits()))
        } else if *v > 0.0 {
            s.serialize_str("inf")
        } else {
            s.serialize_str("-inf")
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumberOrText {
        Number(f64),
        Text(String),
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        match NumberOrText::deserialize(d)? {
            NumberOrText::Number(v) => Ok(v),
            NumberOrText::Text(t) => match t.as_str() {
                "inf" => Ok(f64::INFINITY),
                "-inf" => Ok(f64::NEG_INFINITY),
                "nan" => Ok(f64::NAN),
                _ => t
                    .strip_prefix("nan(0x")
                    .and_then(|h| h.strip_suffix(')'))
                    .and_then(|h| u64::from_str_radix(h, 16).ok())
                    .map(f64::from_bits)
                    .filter(|v| v.is_nan())
                    .ok_or_else(|| serde::de::Error::custom(format!("not a number: {t:?}"))),
            },
        }
    }
}

#[cfg(test)]
mod serde_tests {
    use super::Op;

    #[test]
    fn non_finite_constants_survive_json() {
        for value in [f64::NEG_INFINITY, f64::INFINITY, f64::from_bits(0x7ff8_0000_0000_0001), -0.0, 1.5] {
            let text = serde_json::to_string(&Op::Constant { value }).unwrap();
            let Op::Constant { value: back } = serde_json::from_str(&text).unwrap() else { panic!("{text}") };
            assert_eq!(back.to_bits(), value.to_bits(), "{text}");
        }
    }
}
