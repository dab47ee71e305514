//! The e-graph language: one e-node per IR op (attributes inline, operands as children) plus the
//! kernel node that stands for a fused group of ops.

use std::fmt;

use egg::{Id, Language};
use tcc_ir::{BinaryOp, CompareOp, DType, Dim, NodeId, Op, ReduceOp, Shape, UnaryOp};

/// The operator of an e-node, with every attribute the IR op carries.
///
/// Ops whose result type is a choice (constants, casts, broadcasts, reshapes) carry that choice, so
/// an e-node's type is a function of the operator and its children's types.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TOp {
    /// The `index`-th parameter of the function (a leaf).
    Input(usize),
    /// A scalar constant of `dtype`; `bits` is the f64 bit pattern of the (already rounded) value.
    Const {
        /// The constant's dtype.
        dtype: DType,
        /// `f64::to_bits` of its value.
        bits: u64,
    },
    /// The positions `0..len` as an `i32[len]` vector (a leaf).
    Iota(Dim),
    /// An elementwise op of one operand.
    Unary(UnaryOp),
    /// A conversion to the given dtype.
    Cast(DType),
    /// An elementwise op of two operands.
    Binary(BinaryOp),
    /// An elementwise comparison.
    Compare(CompareOp),
    /// `cond ? on_true : on_false`.
    Select,
    /// A broadcast to the given shape.
    Broadcast(Shape),
    /// A reshape to the given shape.
    Reshape(Shape),
    /// An axis permutation.
    Permute(Vec<usize>),
    /// A slice of one axis.
    Slice {
        /// The axis.
        axis: usize,
        /// First index kept.
        start: u64,
        /// One past the last index kept.
        end: u64,
    },
    /// A concatenation along an axis.
    Concat(usize),
    /// A reduction.
    Reduce {
        /// Which reduction.
        op: ReduceOp,
        /// The axes reduced.
        axes: Vec<usize>,
        /// Whether reduced axes stay as size 1.
        keepdim: bool,
    },
    /// A (batched) matmul.
    MatMul,
    /// A fused kernel: `body` indexes the analysis' body table; children are its external inputs.
    /// `sched` indexes the schedule table once a schedule has been chosen for it.
    Kernel {
        /// Index of the kernel body.
        body: u32,
        /// Index of the schedule, if any.
        sched: Option<u32>,
    },
    /// The `index`-th output of the kernel in its one child class, a *tuple*: the class of a
    /// kernel whose body has side outputs ([`crate::body::Body::side_outputs`]).
    Output(usize),
}

impl TOp {
    /// The IR op for this operator over the given operands, or `None` for kernel nodes.
    pub fn to_ir(&self, operands: &[NodeId]) -> Option<Op> {
        let arg = |i: usize| operands.get(i).copied();
        Some(match self {
            TOp::Input(index) => Op::Input { index: *index },
            TOp::Const { bits, .. } => Op::Constant { value: f64::from_bits(*bits) },
            TOp::Iota(_) => Op::Iota,
            TOp::Unary(u) => Op::Unary(*u, arg(0)?),
            TOp::Cast(_) => Op::Cast(arg(0)?),
            TOp::Binary(b) => Op::Binary(*b, arg(0)?, arg(1)?),
            TOp::Compare(c) => Op::Compare(*c, arg(0)?, arg(1)?),
            TOp::Select => Op::Select { cond: arg(0)?, on_true: arg(1)?, on_false: arg(2)? },
            TOp::Broadcast(_) => Op::Broadcast(arg(0)?),
            TOp::Reshape(_) => Op::Reshape(arg(0)?),
            TOp::Permute(perm) => Op::Permute { input: arg(0)?, perm: perm.clone() },
            TOp::Slice { axis, start, end } => Op::Slice { input: arg(0)?, axis: *axis, start: *start, end: *end },
            TOp::Concat(axis) => Op::Concat { inputs: operands.to_vec(), axis: *axis },
            TOp::Reduce { op, axes, keepdim } => {
                Op::Reduce { op: *op, input: arg(0)?, axes: axes.clone(), keepdim: *keepdim }
            }
            TOp::MatMul => Op::MatMul(arg(0)?, arg(1)?),
            TOp::Kernel { .. } | TOp::Output(_) => return None,
        })
    }

    /// The operator of an IR op whose result type is `ty` (the type supplies the attributes of
    /// casts, broadcasts, reshapes and constants).
    pub fn from_ir(op: &Op, ty: &tcc_ir::TensorType) -> TOp {
        match op {
            Op::Input { index } => TOp::Input(*index),
            Op::Constant { value } => TOp::Const { dtype: ty.dtype, bits: value.to_bits() },
            Op::Iota => TOp::Iota(ty.shape.0.first().cloned().unwrap_or(Dim::Const(0))),
            Op::Unary(u, _) => TOp::Unary(*u),
            Op::Cast(_) => TOp::Cast(ty.dtype),
            Op::Binary(b, _, _) => TOp::Binary(*b),
            Op::Compare(c, _, _) => TOp::Compare(*c),
            Op::Select { .. } => TOp::Select,
            Op::Broadcast(_) => TOp::Broadcast(ty.shape.clone()),
            Op::Reshape(_) => TOp::Reshape(ty.shape.clone()),
            Op::Permute { perm, .. } => TOp::Permute(perm.clone()),
            Op::Slice { axis, start, end, .. } => TOp::Slice { axis: *axis, start: *start, end: *end },
            Op::Concat { axis, .. } => TOp::Concat(*axis),
            Op::Reduce { op, axes, keepdim, .. } => TOp::Reduce { op: *op, axes: axes.clone(), keepdim: *keepdim },
            Op::MatMul(..) => TOp::MatMul,
        }
    }

    /// A constant of `dtype` holding `value` rounded to that dtype.
    pub fn constant(value: f64, dtype: DType) -> TOp {
        TOp::Const { dtype, bits: dtype.round(value).to_bits() }
    }

    /// The constant's value, for constant operators.
    pub fn const_value(&self) -> Option<f64> {
        match self {
            TOp::Const { bits, .. } => Some(f64::from_bits(*bits)),
            _ => None,
        }
    }

    /// True for leaves that compute their values from nothing: scalar constants and `iota`.
    pub fn is_generator(&self) -> bool {
        matches!(self, TOp::Const { .. } | TOp::Iota(_))
    }

    /// True for elementwise ops (unary, cast, binary, compare, select).
    pub fn is_elementwise(&self) -> bool {
        matches!(self, TOp::Unary(_) | TOp::Cast(_) | TOp::Binary(_) | TOp::Compare(_) | TOp::Select)
    }

    /// True for ops that only move data (broadcast, reshape, permute, slice, concat).
    pub fn is_index_only(&self) -> bool {
        matches!(self, TOp::Broadcast(_) | TOp::Reshape(_) | TOp::Permute(_) | TOp::Slice { .. } | TOp::Concat(_))
    }

    /// True for ops that compute something (everything but inputs, constants, kernels and their
    /// outputs).
    pub fn is_compute(&self) -> bool {
        !matches!(self, TOp::Input(_) | TOp::Const { .. } | TOp::Kernel { .. } | TOp::Output(_))
    }

    /// A short name of the op kind, as [`Op::kind_name`] spells it (`kernel` for kernels).
    pub fn kind_name(&self) -> String {
        match self {
            TOp::Input(_) => "input".into(),
            TOp::Const { .. } => "const".into(),
            TOp::Iota(_) => "iota".into(),
            TOp::Unary(u) => u.name().into(),
            TOp::Cast(_) => "cast".into(),
            TOp::Binary(b) => b.name().into(),
            TOp::Compare(c) => c.name().into(),
            TOp::Select => "select".into(),
            TOp::Broadcast(_) => "broadcast".into(),
            TOp::Reshape(_) => "reshape".into(),
            TOp::Permute(_) => "permute".into(),
            TOp::Slice { .. } => "slice".into(),
            TOp::Concat(_) => "concat".into(),
            TOp::Reduce { op, .. } => format!("reduce_{}", op.name()),
            TOp::MatMul => "matmul".into(),
            TOp::Kernel { .. } => "kernel".into(),
            TOp::Output(_) => "output".into(),
        }
    }

    fn code(&self) -> u8 {
        match self {
            TOp::Input(_) => 0,
            TOp::Const { .. } => 1,
            TOp::Unary(_) => 2,
            TOp::Cast(_) => 3,
            TOp::Binary(_) => 4,
            TOp::Compare(_) => 5,
            TOp::Select => 6,
            TOp::Broadcast(_) => 7,
            TOp::Reshape(_) => 8,
            TOp::Permute(_) => 9,
            TOp::Slice { .. } => 10,
            TOp::Concat(_) => 11,
            TOp::Reduce { .. } => 12,
            TOp::MatMul => 13,
            TOp::Kernel { .. } => 14,
            TOp::Iota(_) => 15,
            TOp::Output(_) => 16,
        }
    }
}

impl fmt::Display for TOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TOp::Input(i) => write!(f, "input{i}"),
            TOp::Const { dtype, bits } => write!(f, "{}:{dtype}", f64::from_bits(*bits)),
            TOp::Cast(d) => write!(f, "cast:{d}"),
            TOp::Iota(n) => write!(f, "iota:{n}"),
            TOp::Broadcast(s) => write!(f, "broadcast:{s}"),
            TOp::Reshape(s) => write!(f, "reshape:{s}"),
            TOp::Permute(p) => write!(f, "permute:{p:?}"),
            TOp::Slice { axis, start, end } => write!(f, "slice:{axis}:{start}..{end}"),
            TOp::Concat(a) => write!(f, "concat:{a}"),
            TOp::Reduce { op, axes, keepdim } => write!(f, "reduce_{}:{axes:?}:{keepdim}", op.name()),
            TOp::Kernel { body, sched } => match sched {
                Some(s) => write!(f, "kernel{body}@{s}"),
                None => write!(f, "kernel{body}"),
            },
            TOp::Output(i) => write!(f, "output{i}"),
            other => f.write_str(&other.kind_name()),
        }
    }
}

/// One e-node: an operator and its operand classes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TNode {
    /// The operator.
    pub op: TOp,
    /// The operand classes, in the IR op's operand order.
    pub children: Vec<Id>,
}

impl TNode {
    /// A node of `op` over `children`.
    pub fn new(op: TOp, children: Vec<Id>) -> TNode {
        TNode { op, children }
    }
}

impl Language for TNode {
    type Discriminant = u8;

    fn discriminant(&self) -> u8 {
        self.op.code()
    }

    fn matches(&self, other: &Self) -> bool {
        self.op == other.op && self.children.len() == other.children.len()
    }

    fn children(&self) -> &[Id] {
        &self.children
    }

    fn children_mut(&mut self) -> &mut [Id] {
        &mut self.children
    }
}

impl fmt::Display for TNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.op, f)
    }
}
