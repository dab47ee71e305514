//! Type rules: the dtype and shape of every op's result, and every reason an op is ill-typed.
//!
//! This is the one place where the IR's typing rules live; the front end, the text parser, the
//! verifier, the generator and the optimizer all go through it.

use crate::dtype::DType;
use crate::graph::Graph;
use crate::limits;
use crate::op::{BinaryOp, NodeId, Op, TensorType, UnaryOp};
use crate::shape::{Dim, Shape};

/// Why an op is ill-typed. Messages name the shapes and dtypes involved.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TypeError {
    /// An operand id does not name an earlier node.
    #[error("operand {0} does not name an earlier node")]
    UnknownOperand(NodeId),
    /// An `Input` op names a parameter that does not exist.
    #[error("input index {0} names no parameter")]
    UnknownParam(usize),
    /// The op does not accept operands of this dtype.
    #[error("`{op}` does not accept {dtype} operands")]
    UnsupportedDType {
        /// The op's name.
        op: String,
        /// The operand dtype.
        dtype: DType,
    },
    /// Two operands that must share a dtype do not.
    #[error("dtype mismatch in `{op}`: {left} vs {right}")]
    DTypeMismatch {
        /// The op's name.
        op: String,
        /// The first operand's dtype.
        left: DType,
        /// The second operand's dtype.
        right: DType,
    },
    /// Two shapes cannot be broadcast together.
    #[error("shapes {left} and {right} cannot be broadcast together")]
    CannotBroadcast {
        /// The first shape.
        left: Shape,
        /// The second shape.
        right: Shape,
    },
    /// A shape cannot be broadcast to a target shape.
    #[error("shape {from} cannot be broadcast to {to}")]
    CannotBroadcastTo {
        /// The operand's shape.
        from: Shape,
        /// The requested shape.
        to: Shape,
    },
    /// The condition of a select is not `bool`.
    #[error("the condition of `select` must be bool, found {0}")]
    ConditionNotBool(DType),
    /// A tensor would have more than [`limits::MAX_RANK`] axes.
    #[error("rank {0} exceeds the limit of {max}", max = limits::MAX_RANK)]
    RankTooLarge(usize),
    /// A tensor would have too many elements, or a dimension is too large.
    #[error("shape {0} has 2^40 or more elements")]
    TooManyElements(Shape),
    /// An axis is out of range.
    #[error("axis {axis} is out of range for a tensor of rank {rank}")]
    BadAxis {
        /// The axis as written.
        axis: i64,
        /// The tensor's rank.
        rank: usize,
    },
    /// The same axis is listed twice.
    #[error("axis {0} is listed more than once")]
    DuplicateAxis(usize),
    /// A reduction has no axes.
    #[error("a reduction needs at least one axis")]
    NoReductionAxes,
    /// A reduction or matmul runs over an axis of size 0.
    #[error("reduction over an empty axis (size 0) in shape {0}")]
    EmptyReduction(Shape),
    /// A permutation is not a permutation of `0..rank`.
    #[error("{perm:?} is not a permutation of the {rank} axes")]
    BadPermutation {
        /// The permutation as given.
        perm: Vec<usize>,
        /// The operand's rank.
        rank: usize,
    },
    /// A slice's bounds are outside the axis.
    #[error("slice {start}..{end} is out of range for an axis of size {size}")]
    SliceOutOfRange {
        /// First index.
        start: u64,
        /// One past the last index.
        end: u64,
        /// The axis size.
        size: Dim,
    },
    /// Concat operands disagree outside the joined axis, or the joined axis is not constant.
    #[error("cannot concatenate {left} and {right} along axis {axis}")]
    ConcatMismatch {
        /// First shape.
        left: Shape,
        /// Second shape.
        right: Shape,
        /// The joined axis.
        axis: usize,
    },
    /// Concat with no operands.
    #[error("concat needs at least one operand")]
    EmptyConcat,
    /// A reshape changes the element count.
    #[error("cannot reshape {from} into {to}: element counts differ")]
    ReshapeMismatch {
        /// The operand's shape.
        from: Shape,
        /// The requested shape.
        to: Shape,
    },
    /// A matmul operand has rank below 2.
    #[error("matmul operands need rank 2 or more, found {0}")]
    MatMulRank(Shape),
    /// The inner dimensions of a matmul disagree.
    #[error("matmul inner dimensions differ: {left} @ {right}")]
    MatMulInner {
        /// Left operand shape.
        left: Shape,
        /// Right operand shape.
        right: Shape,
    },
    /// A constant is not a scalar.
    #[error("constants must be scalars, found shape {0}")]
    ConstantNotScalar(Shape),
    /// An `iota` is not an `i32` vector of at most `i32::MAX` positions.
    #[error("iota is an i32 vector of at most 2147483647 positions, found {0}")]
    IotaNotI32Vector(TensorType),
    /// A node's declared type differs from the type its op produces.
    #[error("declared type {declared} differs from the op's type {inferred}")]
    DeclaredMismatch {
        /// The declared type.
        declared: TensorType,
        /// The inferred type.
        inferred: TensorType,
    },
}

fn operand(graph: &Graph, id: NodeId) -> Result<&TensorType, TypeError> {
    graph.ty(id).ok_or(TypeError::UnknownOperand(id))
}

/// Checks that a tensor type is within the limits of contract §6.
pub fn check_limits(ty: &TensorType) -> Result<(), TypeError> {
    if ty.shape.rank() > limits::MAX_RANK {
        return Err(TypeError::RankTooLarge(ty.shape.rank()));
    }
    if !ty.shape.within_element_limit() {
        return Err(TypeError::TooManyElements(ty.shape.clone()));
    }
    Ok(())
}

/// Broadcasts two dimensions: equal ones, or 1 against anything.
pub fn broadcast_dim(a: &Dim, b: &Dim) -> Option<Dim> {
    if a == b || b.is_one() {
        Some(a.clone())
    } else if a.is_one() {
        Some(b.clone())
    } else {
        None
    }
}

/// The numpy broadcast of two shapes (aligned on the right), if they are compatible.
pub fn broadcast_shapes(a: &Shape, b: &Shape) -> Result<Shape, TypeError> {
    let rank = a.rank().max(b.rank());
    let one = Dim::Const(1);
    let mut dims = Vec::with_capacity(rank);
    for i in 0..rank {
        let da = (i + a.rank()).checked_sub(rank).and_then(|j| a.0.get(j)).unwrap_or(&one);
        let db = (i + b.rank()).checked_sub(rank).and_then(|j| b.0.get(j)).unwrap_or(&one);
        let d =
            broadcast_dim(da, db).ok_or_else(|| TypeError::CannotBroadcast { left: a.clone(), right: b.clone() })?;
        dims.push(d);
    }
    Ok(Shape(dims))
}

/// True if `from` broadcasts to exactly `to`.
pub fn broadcasts_to(from: &Shape, to: &Shape) -> bool {
    if from.rank() > to.rank() {
        return false;
    }
    let offset = to.rank() - from.rank();
    from.0.iter().enumerate().all(|(i, d)| d.is_one() || to.0.get(i + offset) == Some(d))
}

/// True if two shapes have the same element count for every binding of their variables.
pub fn same_numel(a: &Shape, b: &Shape) -> bool {
    let split = |s: &Shape| {
        let mut vars = s.vars_with_multiplicity();
        vars.sort();
        (s.0.iter().filter_map(Dim::as_const).try_fold(1u64, u64::checked_mul), vars)
    };
    let (ca, va) = split(a);
    let (cb, vb) = split(b);
    ca.is_some() && ca == cb && (va == vb || ca == Some(0))
}

impl Shape {
    fn vars_with_multiplicity(&self) -> Vec<String> {
        self.0
            .iter()
            .filter_map(|d| match d {
                Dim::Var(v) => Some(v.clone()),
                Dim::Const(_) => None,
            })
            .collect()
    }
}

fn require_same_dtype(op: &str, a: DType, b: DType) -> Result<(), TypeError> {
    if a == b { Ok(()) } else { Err(TypeError::DTypeMismatch { op: op.to_string(), left: a, right: b }) }
}

fn unsupported(op: &str, dtype: DType) -> TypeError {
    TypeError::UnsupportedDType { op: op.to_string(), dtype }
}

/// Infers the result type of `op` over the nodes already in `graph`.
///
/// Ops whose result type is a choice (`Cast`, `Broadcast`, `Reshape`, `Constant`, `Iota`) cannot be inferred:
/// for them this returns the operand's type, and [`check_declared`] checks the chosen type.
pub fn infer(graph: &Graph, op: &Op) -> Result<TensorType, TypeError> {
    let ty = infer_unchecked(graph, op)?;
    check_limits(&ty)?;
    Ok(ty)
}

fn infer_unchecked(graph: &Graph, op: &Op) -> Result<TensorType, TypeError> {
    match op {
        Op::Input { index } => graph.params.get(*index).map(|p| p.ty.clone()).ok_or(TypeError::UnknownParam(*index)),
        Op::Constant { .. } => Ok(TensorType { dtype: DType::F32, shape: Shape::scalar() }),
        Op::Iota => Ok(TensorType { dtype: DType::I32, shape: Shape::from_consts(&[1]) }),
        Op::Unary(u, a) => {
            let ta = operand(graph, *a)?;
            if !u.accepts(ta.dtype) {
                return Err(unsupported(u.name(), ta.dtype));
            }
            Ok(ta.clone())
        }
        Op::Cast(a) | Op::Broadcast(a) | Op::Reshape(a) => Ok(operand(graph, *a)?.clone()),
        Op::Binary(b, x, y) => {
            let (tx, ty) = (operand(graph, *x)?, operand(graph, *y)?);
            require_same_dtype(b.name(), tx.dtype, ty.dtype)?;
            if !b.accepts(tx.dtype) {
                return Err(unsupported(b.name(), tx.dtype));
            }
            Ok(TensorType { dtype: tx.dtype, shape: broadcast_shapes(&tx.shape, &ty.shape)? })
        }
        Op::Compare(c, x, y) => {
            let (tx, ty) = (operand(graph, *x)?, operand(graph, *y)?);
            require_same_dtype(c.name(), tx.dtype, ty.dtype)?;
            Ok(TensorType { dtype: DType::Bool, shape: broadcast_shapes(&tx.shape, &ty.shape)? })
        }
        Op::Select { cond, on_true, on_false } => {
            let tc = operand(graph, *cond)?;
            let (tt, tf) = (operand(graph, *on_true)?, operand(graph, *on_false)?);
            if tc.dtype != DType::Bool {
                return Err(TypeError::ConditionNotBool(tc.dtype));
            }
            require_same_dtype("select", tt.dtype, tf.dtype)?;
            let shape = broadcast_shapes(&broadcast_shapes(&tc.shape, &tt.shape)?, &tf.shape)?;
            Ok(TensorType { dtype: tt.dtype, shape })
        }
        Op::Permute { input, perm } => {
            let ta = operand(graph, *input)?;
            let rank = ta.shape.rank();
            let mut seen = vec![false; rank];
            let valid = perm.len() == rank
                && perm.iter().all(|&p| match seen.get_mut(p) {
                    Some(s) if !*s => {
                        *s = true;
                        true
                    }
                    _ => false,
                });
            if !valid {
                return Err(TypeError::BadPermutation { perm: perm.clone(), rank });
            }
            let dims = perm.iter().filter_map(|&p| ta.shape.0.get(p).cloned()).collect();
            Ok(TensorType { dtype: ta.dtype, shape: Shape(dims) })
        }
        Op::Slice { input, axis, start, end } => {
            let ta = operand(graph, *input)?;
            let size = ta
                .shape
                .0
                .get(*axis)
                .ok_or(TypeError::BadAxis { axis: i64::try_from(*axis).unwrap_or(i64::MAX), rank: ta.shape.rank() })?;
            let in_range = matches!(size, Dim::Const(n) if start < end && end <= n);
            if !in_range {
                return Err(TypeError::SliceOutOfRange { start: *start, end: *end, size: size.clone() });
            }
            let mut dims = ta.shape.0.clone();
            dims[*axis] = Dim::Const(end - start);
            Ok(TensorType { dtype: ta.dtype, shape: Shape(dims) })
        }
        Op::Concat { inputs, axis } => {
            let first = inputs.first().ok_or(TypeError::EmptyConcat)?;
            let t0 = operand(graph, *first)?.clone();
            if *axis >= t0.shape.rank() {
                return Err(TypeError::BadAxis {
                    axis: i64::try_from(*axis).unwrap_or(i64::MAX),
                    rank: t0.shape.rank(),
                });
            }
            let mut total: u64 = 0;
            for id in inputs {
                let t = operand(graph, *id)?;
                require_same_dtype("concat", t0.dtype, t.dtype)?;
                let mismatch =
                    || TypeError::ConcatMismatch { left: t0.shape.clone(), right: t.shape.clone(), axis: *axis };
                if t.shape.rank() != t0.shape.rank() {
                    return Err(mismatch());
                }
                for (i, (a, b)) in t0.shape.0.iter().zip(&t.shape.0).enumerate() {
                    if i != *axis && a != b {
                        return Err(mismatch());
                    }
                }
                let n = t.shape.0.get(*axis).and_then(Dim::as_const).ok_or_else(mismatch)?;
                total = total.checked_add(n).ok_or_else(|| TypeError::TooManyElements(t.shape.clone()))?;
            }
            let mut dims = t0.shape.0.clone();
            dims[*axis] = Dim::Const(total);
            Ok(TensorType { dtype: t0.dtype, shape: Shape(dims) })
        }
        Op::Reduce { op, input, axes, keepdim } => {
            let ta = operand(graph, *input)?;
            if !op.accepts(ta.dtype) {
                return Err(unsupported(&format!("reduce_{}", op.name()), ta.dtype));
            }
            if axes.is_empty() {
                return Err(TypeError::NoReductionAxes);
            }
            let rank = ta.shape.rank();
            for (i, &a) in axes.iter().enumerate() {
                if a >= rank {
                    return Err(TypeError::BadAxis { axis: i64::try_from(a).unwrap_or(i64::MAX), rank });
                }
                if axes[..i].contains(&a) {
                    return Err(TypeError::DuplicateAxis(a));
                }
                if ta.shape.0.get(a) == Some(&Dim::Const(0)) {
                    return Err(TypeError::EmptyReduction(ta.shape.clone()));
                }
            }
            let dims = ta
                .shape
                .0
                .iter()
                .enumerate()
                .filter_map(|(i, d)| match (axes.contains(&i), keepdim) {
                    (false, _) => Some(d.clone()),
                    (true, true) => Some(Dim::Const(1)),
                    (true, false) => None,
                })
                .collect();
            Ok(TensorType { dtype: ta.dtype, shape: Shape(dims) })
        }
        Op::MatMul(a, b) => {
            let (ta, tb) = (operand(graph, *a)?, operand(graph, *b)?);
            require_same_dtype("matmul", ta.dtype, tb.dtype)?;
            if !ta.dtype.is_float() {
                return Err(unsupported("matmul", ta.dtype));
            }
            let (ra, rb) = (ta.shape.rank(), tb.shape.rank());
            if ra < 2 {
                return Err(TypeError::MatMulRank(ta.shape.clone()));
            }
            if rb < 2 {
                return Err(TypeError::MatMulRank(tb.shape.clone()));
            }
            let (m, ka) = (&ta.shape.0[ra - 2], &ta.shape.0[ra - 1]);
            let (kb, n) = (&tb.shape.0[rb - 2], &tb.shape.0[rb - 1]);
            if ka != kb {
                return Err(TypeError::MatMulInner { left: ta.shape.clone(), right: tb.shape.clone() });
            }
            if ka == &Dim::Const(0) {
                return Err(TypeError::EmptyReduction(ta.shape.clone()));
            }
            let batch = broadcast_shapes(&Shape(ta.shape.0[..ra - 2].to_vec()), &Shape(tb.shape.0[..rb - 2].to_vec()))
                .map_err(|_| TypeError::CannotBroadcast { left: ta.shape.clone(), right: tb.shape.clone() })?;
            let mut dims = batch.0;
            dims.push(m.clone());
            dims.push(n.clone());
            Ok(TensorType { dtype: ta.dtype, shape: Shape(dims) })
        }
    }
}

/// Checks that `declared` is a valid result type for `op` (the inferred type for most ops; for
/// `Cast`, `Broadcast`, `Reshape`, `Constant` and `Iota`, a type the op can produce).
pub fn check_declared(graph: &Graph, op: &Op, declared: &TensorType) -> Result<(), TypeError> {
    check_limits(declared)?;
    let inferred = infer_unchecked(graph, op)?;
    let ok = match op {
        Op::Constant { .. } => {
            if declared.shape.rank() != 0 {
                return Err(TypeError::ConstantNotScalar(declared.shape.clone()));
            }
            true
        }
        Op::Iota => {
            let too_long = declared.shape.0.first().and_then(|d| d.as_const()).is_some_and(|n| n > i32::MAX as u64);
            if declared.dtype != DType::I32 || declared.shape.rank() != 1 || too_long {
                return Err(TypeError::IotaNotI32Vector(declared.clone()));
            }
            true
        }
        Op::Cast(_) => declared.shape == inferred.shape,
        Op::Broadcast(_) => {
            if declared.dtype == inferred.dtype && !broadcasts_to(&inferred.shape, &declared.shape) {
                return Err(TypeError::CannotBroadcastTo { from: inferred.shape, to: declared.shape.clone() });
            }
            declared.dtype == inferred.dtype
        }
        Op::Reshape(_) => {
            if declared.dtype == inferred.dtype && !same_numel(&inferred.shape, &declared.shape) {
                return Err(TypeError::ReshapeMismatch { from: inferred.shape, to: declared.shape.clone() });
            }
            declared.dtype == inferred.dtype
        }
        _ => *declared == inferred,
    };
    if ok { Ok(()) } else { Err(TypeError::DeclaredMismatch { declared: declared.clone(), inferred }) }
}

/// True for ops that compute elementwise from their operands (after broadcasting).
pub fn is_elementwise(op: &Op) -> bool {
    matches!(op, Op::Unary(..) | Op::Cast(_) | Op::Binary(..) | Op::Compare(..) | Op::Select { .. })
}

/// The unary ops that act on every float dtype (used by generators and rule tables).
pub fn float_unary_ops() -> &'static [UnaryOp] {
    &UnaryOp::ALL
}

/// The binary ops that act on i32 (used by generators and rule tables).
pub fn int_binary_ops() -> Vec<BinaryOp> {
    BinaryOp::ALL.into_iter().filter(|b| b.accepts(DType::I32)).collect()
}
