//! The GEMM graphs the code generators' tests share: a product with B stored `[k, n]` or
//! `[n, k]` (a permuted parameter), an optional batch, an optional `gelu(. + bias)` epilogue,
//! a two-output variant, and a dual product (a gated MLP's two products).

use crate::dtype::DType;
use crate::graph::{BuildError, Graph};
use crate::op::{BinaryOp, NodeId, Op, TensorType, UnaryOp};
use crate::shape::Shape;

fn t(dtype: DType, dims: &[u64]) -> TensorType {
    TensorType { dtype, shape: Shape::from_consts(dims) }
}

/// `gelu(a @ b + bias)` (with `epilogue`, else the plain product) of `batch`-batched operands,
/// B stored `[k, n]`, or `[n, k]` and permuted when `nk`.
pub fn gemm_graph(
    dtype: DType,
    batch: &[u64],
    mnk: (u64, u64, u64),
    nk: bool,
    epilogue: bool,
) -> Result<Graph, BuildError> {
    build(dtype, batch, mnk, nk, epilogue).map(|(g, _)| g)
}

/// [`gemm_graph`] and its product node.
fn build(
    dtype: DType,
    batch: &[u64],
    (m, n, k): (u64, u64, u64),
    nk: bool,
    epilogue: bool,
) -> Result<(Graph, NodeId), BuildError> {
    let mut g = Graph::new("gemm");
    let dims = |r: u64, c: u64| -> Vec<u64> { batch.iter().copied().chain([r, c]).collect() };
    let a = g.add_param("a", t(dtype, &dims(m, k)))?;
    let b = if nk {
        let raw = g.add_param("b", t(dtype, &dims(n, k)))?;
        let r = batch.len() + 2;
        let mut perm: Vec<usize> = (0..r).collect();
        perm.swap(r - 2, r - 1);
        g.push(Op::Permute { input: raw, perm })?
    } else {
        g.add_param("b", t(dtype, &dims(k, n)))?
    };
    let product = g.push(Op::MatMul(a, b))?;
    let mut y = product;
    if epilogue {
        let bias = g.add_param("bias", t(dtype, &[n]))?;
        y = g.push(Op::Binary(BinaryOp::Add, y, bias))?;
        y = g.push(Op::Unary(UnaryOp::Gelu, y))?;
    }
    g.outputs.push(y);
    Ok((g, product))
}

/// Two outputs of one product: `gelu(a @ b + bias) * 0.5 + r` (a residual of the output's
/// shape) and the product cast to f32.
pub fn gemm_two_outputs_graph(
    dtype: DType,
    batch: &[u64],
    (m, n, k): (u64, u64, u64),
    nk: bool,
) -> Result<Graph, BuildError> {
    let (mut g, product) = build(dtype, batch, (m, n, k), nk, true)?;
    let dims: Vec<u64> = batch.iter().copied().chain([m, n]).collect();
    let y = g.outputs[0];
    let r = g.add_param("r", t(dtype, &dims))?;
    let half = g.constant(0.5, dtype)?;
    let y = g.push(Op::Binary(BinaryOp::Mul, y, half))?;
    let y = g.push(Op::Binary(BinaryOp::Add, y, r))?;
    let c = g.push_typed(Op::Cast(product), t(DType::F32, &dims))?;
    g.outputs = vec![y, c];
    Ok(g)
}

/// A dual product ([`crate::DualProduct`]): `silu(a @ g) * (a @ u)` (silu as `x * sigmoid(x)`)
/// of `batch`-batched operands, both Bs stored `[k, n]`, or `[n, k]` and permuted when `nk`.
pub fn dual_gemm_graph(dtype: DType, batch: &[u64], (m, n, k): (u64, u64, u64), nk: bool) -> Result<Graph, BuildError> {
    let mut g = Graph::new("dual");
    let dims = |r: u64, c: u64| -> Vec<u64> { batch.iter().copied().chain([r, c]).collect() };
    let a = g.add_param("a", t(dtype, &dims(m, k)))?;
    let mut products = Vec::new();
    for name in ["g", "u"] {
        let b = if nk {
            let raw = g.add_param(name, t(dtype, &dims(n, k)))?;
            let r = batch.len() + 2;
            let mut perm: Vec<usize> = (0..r).collect();
            perm.swap(r - 2, r - 1);
            g.push(Op::Permute { input: raw, perm })?
        } else {
            g.add_param(name, t(dtype, &dims(k, n)))?
        };
        products.push(g.push(Op::MatMul(a, b))?);
    }
    let gate = g.push(Op::Unary(UnaryOp::Sigmoid, products[0]))?;
    let silu = g.push(Op::Binary(BinaryOp::Mul, products[0], gate))?;
    let y = g.push(Op::Binary(BinaryOp::Mul, silu, products[1]))?;
    g.outputs.push(y);
    Ok(g)
}
