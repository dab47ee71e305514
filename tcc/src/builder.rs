//! A builder API for writing tcc programs in plain Rust:
//!
//! ```
//! use tcc::builder::{Builder, dims};
//! use tcc::DType;
//!
//! let b = Builder::new("mlp");
//! let x = b.input("x", DType::F32, dims!["M", 64]);
//! let w = b.input("w", DType::F32, dims![64, 128]);
//! let bias = b.input("bias", DType::F32, dims![128]);
//! let y = x.matmul(&w).add(&bias).gelu();
//! let graph = b.finish(&[y]).unwrap();
//! assert_eq!(graph.nodes.len(), 6);
//! ```
//!
//! Every operation returns a [`Tensor`] handle at once; the first ill-typed operation is remembered
//! and returned by [`Builder::finish`], naming the operation and the shapes involved.

use std::cell::RefCell;
use std::rc::Rc;

use tcc_ir::{BinaryOp, BuildError, CompareOp, DType, Dim, Graph, NodeId, Op, ReduceOp, Shape, TensorType, UnaryOp};

/// Builds one dimension list from integer literals and shape-variable names: `dims!["M", 64]`.
#[macro_export]
macro_rules! dims {
    ($($d:expr),* $(,)?) => { vec![$($crate::builder::IntoDim::into_dim($d)),*] };
}
pub use crate::dims;

/// Things that can stand for one dimension: integers (constants) and strings (shape variables).
pub trait IntoDim {
    /// The dimension.
    fn into_dim(self) -> Dim;
}

impl IntoDim for u64 {
    fn into_dim(self) -> Dim {
        Dim::Const(self)
    }
}

impl IntoDim for i32 {
    fn into_dim(self) -> Dim {
        // Negative sizes are meaningless; they become an impossible size the type rules reject.
        Dim::Const(u64::try_from(self).unwrap_or(u64::MAX))
    }
}

impl IntoDim for usize {
    fn into_dim(self) -> Dim {
        Dim::Const(self as u64)
    }
}

impl IntoDim for &str {
    fn into_dim(self) -> Dim {
        Dim::Var(self.to_string())
    }
}

/// An error from building a program with the builder API.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("in `{op}`: {source}")]
pub struct BuilderError {
    /// The operation that failed (`add`, `matmul`, ...).
    pub op: String,
    /// Why it failed.
    #[source]
    pub source: BuildError,
}

#[derive(Debug, Default)]
struct State {
    graph: Graph,
    first_error: Option<BuilderError>,
}

/// Builds one function's graph.
#[derive(Debug, Clone)]
pub struct Builder {
    state: Rc<RefCell<State>>,
}

/// A value of the program under construction; operations on it add nodes to its builder.
#[derive(Debug, Clone)]
pub struct Tensor {
    state: Rc<RefCell<State>>,
    /// The node, or `None` when an earlier error poisoned this value.
    id: Option<NodeId>,
}

impl Builder {
    /// A builder for a function named `name`.
    pub fn new(name: &str) -> Builder {
        Builder { state: Rc::new(RefCell::new(State { graph: Graph::new(name), first_error: None })) }
    }

    /// Declares a parameter.
    pub fn input(&self, name: &str, dtype: DType, dims: Vec<Dim>) -> Tensor {
        let ty = TensorType { dtype, shape: Shape(dims) };
        let result = self.state.borrow_mut().graph.add_param(name, ty);
        self.record("input", result)
    }

    /// A scalar constant of `dtype`.
    pub fn constant(&self, value: f64, dtype: DType) -> Tensor {
        let result = self.state.borrow_mut().graph.constant(value, dtype);
        self.record("constant", result)
    }

    /// The positions `0, 1, ..., len-1` as an `i32[len]` vector (`iota(len)` in the DSL): masks
    /// and biases written as math of positions, e.g. a causal mask
    /// `iota(S).reshape([S, 1]) >= iota(S)`.
    pub fn iota(&self, len: impl IntoDim) -> Tensor {
        let result = self.state.borrow_mut().graph.iota(len.into_dim());
        self.record("iota", result)
    }

    /// Finishes the function with `outputs`, returning the graph or the first error.
    pub fn finish(self, outputs: &[Tensor]) -> Result<Graph, BuilderError> {
        let mut state = self.state.borrow_mut();
        if let Some(error) = state.first_error.take() {
            return Err(error);
        }
        let mut ids = Vec::with_capacity(outputs.len());
        for t in outputs {
            match t.id {
                Some(id) if Rc::ptr_eq(&t.state, &self.state) => ids.push(id),
                _ => {
                    return Err(BuilderError {
                        op: "finish".into(),
                        source: BuildError::Type(tcc_ir::TypeError::UnknownOperand(t.id.unwrap_or(NodeId(u32::MAX)))),
                    });
                }
            }
        }
        state.graph.outputs = ids;
        Ok(std::mem::take(&mut state.graph))
    }

    fn record(&self, op: &str, result: Result<NodeId, BuildError>) -> Tensor {
        record(&self.state, op, result)
    }
}

fn record(state: &Rc<RefCell<State>>, op: &str, result: Result<NodeId, BuildError>) -> Tensor {
    match result {
        Ok(id) => Tensor { state: Rc::clone(state), id: Some(id) },
        Err(source) => {
            let mut s = state.borrow_mut();
            if s.first_error.is_none() {
                s.first_error = Some(BuilderError { op: op.to_string(), source });
            }
            Tensor { state: Rc::clone(state), id: None }
        }
    }
}

impl Tensor {
    /// The value's type, unless an earlier error poisoned it.
    pub fn ty(&self) -> Option<TensorType> {
        let id = self.id?;
        self.state.borrow().graph.ty(id).cloned()
    }

    fn apply(&self, name: &str, make: impl FnOnce(&mut Graph, NodeId) -> Result<NodeId, BuildError>) -> Tensor {
        let Some(id) = self.id else { return self.poisoned() };
        let result = make(&mut self.state.borrow_mut().graph, id);
        record(&self.state, name, result)
    }

    fn apply2(&self, other: &Tensor, name: &str, op: impl FnOnce(NodeId, NodeId) -> Op) -> Tensor {
        let (Some(a), Some(b)) = (self.id, other.id) else { return self.poisoned() };
        if !Rc::ptr_eq(&self.state, &other.state) {
            let error = BuildError::Type(tcc_ir::TypeError::UnknownOperand(b));
            return record(&self.state, name, Err(error));
        }
        let result = self.state.borrow_mut().graph.push(op(a, b));
        record(&self.state, name, result)
    }

    fn poisoned(&self) -> Tensor {
        Tensor { state: Rc::clone(&self.state), id: None }
    }

    fn unary(&self, u: UnaryOp) -> Tensor {
        self.apply(u.name(), |g, a| g.push(Op::Unary(u, a)))
    }

    /// `-self`.
    pub fn neg(&self) -> Tensor {
        self.unary(UnaryOp::Neg)
    }
    /// `|self|`.
    pub fn abs(&self) -> Tensor {
        self.unary(UnaryOp::Abs)
    }
    /// `e^self`.
    pub fn exp(&self) -> Tensor {
        self.unary(UnaryOp::Exp)
    }
    /// Natural logarithm.
    pub fn log(&self) -> Tensor {
        self.unary(UnaryOp::Log)
    }
    /// Square root.
    pub fn sqrt(&self) -> Tensor {
        self.unary(UnaryOp::Sqrt)
    }
    /// `1 / sqrt(self)`.
    pub fn rsqrt(&self) -> Tensor {
        self.unary(UnaryOp::Rsqrt)
    }
    /// Hyperbolic tangent.
    pub fn tanh(&self) -> Tensor {
        self.unary(UnaryOp::Tanh)
    }
    /// Logistic sigmoid.
    pub fn sigmoid(&self) -> Tensor {
        self.unary(UnaryOp::Sigmoid)
    }
    /// `max(self, 0)`.
    pub fn relu(&self) -> Tensor {
        self.unary(UnaryOp::Relu)
    }
    /// GELU, tanh form.
    pub fn gelu(&self) -> Tensor {
        self.unary(UnaryOp::Gelu)
    }

    fn binary(&self, other: &Tensor, b: BinaryOp) -> Tensor {
        self.apply2(other, b.name(), |x, y| Op::Binary(b, x, y))
    }

    /// `self + other` (broadcasting).
    pub fn add(&self, other: &Tensor) -> Tensor {
        self.binary(other, BinaryOp::Add)
    }
    /// `self - other` (broadcasting).
    pub fn sub(&self, other: &Tensor) -> Tensor {
        self.binary(other, BinaryOp::Sub)
    }
    /// `self * other` (broadcasting).
    pub fn mul(&self, other: &Tensor) -> Tensor {
        self.binary(other, BinaryOp::Mul)
    }
    /// `self / other` (broadcasting).
    pub fn div(&self, other: &Tensor) -> Tensor {
        self.binary(other, BinaryOp::Div)
    }
    /// Elementwise maximum.
    pub fn maximum(&self, other: &Tensor) -> Tensor {
        self.binary(other, BinaryOp::Max)
    }
    /// Elementwise minimum.
    pub fn minimum(&self, other: &Tensor) -> Tensor {
        self.binary(other, BinaryOp::Min)
    }
    /// `self ^ other`.
    pub fn pow(&self, other: &Tensor) -> Tensor {
        self.binary(other, BinaryOp::Pow)
    }

    /// An elementwise comparison giving `bool`.
    pub fn compare(&self, other: &Tensor, c: CompareOp) -> Tensor {
        self.apply2(other, c.name(), |x, y| Op::Compare(c, x, y))
    }

    /// `self ? on_true : on_false` where `self` is `bool`.
    pub fn select(&self, on_true: &Tensor, on_false: &Tensor) -> Tensor {
        let (Some(cond), Some(t), Some(f)) = (self.id, on_true.id, on_false.id) else { return self.poisoned() };
        let result = self.state.borrow_mut().graph.push(Op::Select { cond, on_true: t, on_false: f });
        record(&self.state, "select", result)
    }

    /// The matrix product `self @ other`.
    pub fn matmul(&self, other: &Tensor) -> Tensor {
        self.apply2(other, "matmul", Op::MatMul)
    }

    /// Converts to `dtype`.
    pub fn cast(&self, dtype: DType) -> Tensor {
        self.apply("cast", |g, a| {
            let shape = g.ty(a).map(|t| t.shape.clone()).unwrap_or_default();
            g.push_typed(Op::Cast(a), TensorType { dtype, shape })
        })
    }

    fn reduce(&self, op: ReduceOp, axes: &[i64], keepdim: bool) -> Tensor {
        self.apply(&format!("reduce_{}", op.name()), |g, input| {
            let rank = g.ty(input).map_or(0, |t| t.shape.rank());
            let mut normalized = Vec::with_capacity(axes.len());
            for &axis in axes {
                let a = tcc_ir::shape::normalize_axis(axis, rank)
                    .ok_or(BuildError::Type(tcc_ir::TypeError::BadAxis { axis, rank }))?;
                normalized.push(a);
            }
            normalized.sort_unstable();
            g.push(Op::Reduce { op, input, axes: normalized, keepdim })
        })
    }

    /// Sum over `axes` (negative axes count from the end).
    pub fn sum(&self, axes: &[i64], keepdim: bool) -> Tensor {
        self.reduce(ReduceOp::Sum, axes, keepdim)
    }
    /// Mean over `axes`.
    pub fn mean(&self, axes: &[i64], keepdim: bool) -> Tensor {
        self.reduce(ReduceOp::Mean, axes, keepdim)
    }
    /// Maximum over `axes`.
    pub fn max(&self, axes: &[i64], keepdim: bool) -> Tensor {
        self.reduce(ReduceOp::Max, axes, keepdim)
    }
    /// Minimum over `axes`.
    pub fn min(&self, axes: &[i64], keepdim: bool) -> Tensor {
        self.reduce(ReduceOp::Min, axes, keepdim)
    }

    /// Reorders axes: output axis `i` is input axis `perm[i]`.
    pub fn permute(&self, perm: &[usize]) -> Tensor {
        self.apply("permute", |g, input| g.push(Op::Permute { input, perm: perm.to_vec() }))
    }

    /// Swaps the last two axes.
    pub fn t(&self) -> Tensor {
        self.apply("t", |g, input| {
            let rank = g.ty(input).map_or(0, |t| t.shape.rank());
            let mut perm: Vec<usize> = (0..rank).collect();
            if rank >= 2 {
                perm.swap(rank - 2, rank - 1);
            }
            g.push(Op::Permute { input, perm })
        })
    }

    /// Reinterprets the elements with a new shape.
    pub fn reshape(&self, dims: Vec<Dim>) -> Tensor {
        self.apply("reshape", |g, a| {
            let dtype = g.ty(a).map_or(DType::F32, |t| t.dtype);
            g.push_typed(Op::Reshape(a), TensorType { dtype, shape: Shape(dims) })
        })
    }

    /// Broadcasts to a larger shape (numpy rules).
    pub fn broadcast_to(&self, dims: Vec<Dim>) -> Tensor {
        self.apply("broadcast_to", |g, a| {
            let dtype = g.ty(a).map_or(DType::F32, |t| t.dtype);
            g.push_typed(Op::Broadcast(a), TensorType { dtype, shape: Shape(dims) })
        })
    }

    /// Takes `start..end` along `axis`.
    pub fn slice(&self, axis: usize, start: u64, end: u64) -> Tensor {
        self.apply("slice", |g, input| g.push(Op::Slice { input, axis, start, end }))
    }

    /// Joins `self` and `others` along `axis`.
    pub fn concat(&self, others: &[Tensor], axis: usize) -> Tensor {
        let mut inputs = vec![self.id];
        inputs.extend(others.iter().map(|t| t.id));
        let Some(inputs) = inputs.into_iter().collect::<Option<Vec<NodeId>>>() else { return self.poisoned() };
        let result = self.state.borrow_mut().graph.push(Op::Concat { inputs, axis });
        record(&self.state, "concat", result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_an_mlp() {
        let b = Builder::new("mlp");
        let x = b.input("x", DType::F16, dims!["M", 64]);
        let w = b.input("w", DType::F16, dims![64, 32]);
        let bias = b.input("b", DType::F16, dims![32]);
        let y = x.matmul(&w).add(&bias).gelu();
        assert_eq!(y.ty().map(|t| t.to_string()), Some("f16[M, 32]".to_string()));
        let g = b.finish(&[y]).unwrap();
        assert_eq!(g.params.len(), 3);
        assert_eq!(g.outputs.len(), 1);
    }

    #[test]
    fn first_error_names_the_op_and_shapes() {
        let b = Builder::new("bad");
        let x = b.input("x", DType::F32, dims![4, 5]);
        let y = b.input("y", DType::F32, dims![3]);
        let z = x.add(&y).exp();
        let err = b.finish(&[z]).unwrap_err();
        assert_eq!(err.op, "add");
        let text = err.to_string();
        assert!(text.contains("[4, 5]") && text.contains("[3]"), "{text}");
    }

    #[test]
    fn iota_gives_positions_for_masks() {
        let b = Builder::new("mask");
        let s = b.iota("S");
        assert_eq!(s.ty().map(|t| t.to_string()), Some("i32[S]".to_string()));
        let keep = s.reshape(dims!["S", 1]).compare(&b.iota("S"), CompareOp::Ge);
        assert_eq!(keep.ty().map(|t| t.to_string()), Some("bool[S, S]".to_string()));
        let x = b.input("x", DType::F32, dims!["S", "S"]);
        let y = keep.select(&x, &b.constant(f64::NEG_INFINITY, DType::F32));
        let g = b.finish(&[y]).unwrap();
        let input = tcc_ir::interp::Tensor::new(DType::F32, vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        let out = tcc_ir::interp::run_graph(&g, &[input]).unwrap();
        assert_eq!(out[0].data, vec![1.0, f64::NEG_INFINITY, 3.0, 4.0]);
    }

    #[test]
    fn reductions_normalize_negative_axes() {
        let b = Builder::new("r");
        let x = b.input("x", DType::F32, dims!["N", 8]);
        let s = x.sum(&[-1], true);
        assert_eq!(s.ty().map(|t| t.to_string()), Some("f32[N, 1]".to_string()));
        let bad = x.sum(&[2], false);
        assert!(bad.ty().is_none());
        assert!(b.finish(&[s]).is_err());
    }
}
