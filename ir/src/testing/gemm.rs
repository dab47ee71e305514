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

/// A joined product (the optimizer's `join-sibling-products`): `a @ concat([w_1.t(), ..,
/// w_n.t()], -1)` for weights `w_i` stored `[parts[i], k]`, `a` of `[m, k]`.
pub fn joined_gemm_graph(dtype: DType, (m, k): (u64, u64), parts: &[u64]) -> Result<Graph, BuildError> {
    let mut g = Graph::new("joined");
    let a = g.add_param("a", t(dtype, &[m, k]))?;
    let mut bs = Vec::new();
    for (i, &n) in parts.iter().enumerate() {
        let w = g.add_param(format!("w{i}"), t(dtype, &[n, k]))?;
        bs.push(g.push(Op::Permute { input: w, perm: vec![1, 0] })?);
    }
    let b = g.push(Op::Concat { inputs: bs, axis: 1 })?;
    let y = g.push(Op::MatMul(a, b))?;
    g.outputs.push(y);
    Ok(g)
}

/// F32 products with the pointwise epilogues a CPU tier computes in the product's register tiles,
/// of `batch`-batched operands (B stored `[k, n]`): `relu(a @ b + bias)`; `(a @ b) * 0.5 + r` (a
/// residual) cast to f16; `x * sigmoid(x)` for `x = a @ b` (the product read twice); and
/// `tanh(a @ b)` returned beside the product itself (which must then not be fused).
pub fn gemm_epilogue_graphs(batch: &[u64], (m, n, k): (u64, u64, u64)) -> Result<Vec<Graph>, BuildError> {
    let dims: Vec<u64> = batch.iter().copied().chain([m, n]).collect();
    let mut graphs = Vec::new();
    for variant in 0..4 {
        let (mut g, x) = build(DType::F32, batch, (m, n, k), false, false)?;
        let y = match variant {
            0 => {
                let bias = g.add_param("bias", t(DType::F32, &[n]))?;
                let s = g.push(Op::Binary(BinaryOp::Add, x, bias))?;
                g.push(Op::Unary(UnaryOp::Relu, s))?
            }
            1 => {
                let r = g.add_param("r", t(DType::F32, &dims))?;
                let half = g.constant(0.5, DType::F32)?;
                let s = g.push(Op::Binary(BinaryOp::Mul, x, half))?;
                let s = g.push(Op::Binary(BinaryOp::Add, s, r))?;
                g.push_typed(Op::Cast(s), t(DType::F16, &dims))?
            }
            2 => {
                let s = g.push(Op::Unary(UnaryOp::Sigmoid, x))?;
                g.push(Op::Binary(BinaryOp::Mul, x, s))?
            }
            _ => {
                let y = g.push(Op::Unary(UnaryOp::Tanh, x))?;
                g.outputs.push(y);
                x
            }
        };
        g.outputs = if variant == 3 { vec![g.outputs[1], y] } else { vec![y] };
        g.name = format!("gemm_epilogue{variant}");
        graphs.push(g);
    }
    Ok(graphs)
}
