//! A transformer block (pre-norm attention with explicit per-head slices, then an MLP) as the front
//! end would lower it: the benchmark's workload and an end-to-end test.

use tcc_ir::{BinaryOp, DType, Graph, NodeId, Op, ReduceOp, Shape, TensorType, UnaryOp};

/// Sizes of the block.
#[derive(Debug, Clone, Copy)]
pub struct Dims {
    pub heads: u64,
    pub seq: u64,
    pub head_dim: u64,
    pub ff: u64,
    pub dtype: DType,
}

struct G {
    g: Graph,
}

impl G {
    fn param(&mut self, name: &str, dtype: DType, dims: &[u64]) -> NodeId {
        self.g.add_param(name, TensorType { dtype, shape: Shape::from_consts(dims) }).unwrap()
    }
    fn push(&mut self, op: Op) -> NodeId {
        self.g.push(op).unwrap()
    }
    fn bin(&mut self, b: BinaryOp, x: NodeId, y: NodeId) -> NodeId {
        self.push(Op::Binary(b, x, y))
    }
    fn layernorm(&mut self, x: NodeId, gamma: NodeId, beta: NodeId, dtype: DType) -> NodeId {
        let mean = self.push(Op::Reduce { op: ReduceOp::Mean, input: x, axes: vec![1], keepdim: true });
        let xc = self.bin(BinaryOp::Sub, x, mean);
        let sq = self.bin(BinaryOp::Mul, xc, xc);
        let var = self.push(Op::Reduce { op: ReduceOp::Mean, input: sq, axes: vec![1], keepdim: true });
        let eps = self.g.constant(1e-5, dtype).unwrap();
        let ve = self.bin(BinaryOp::Add, var, eps);
        let r = self.push(Op::Unary(UnaryOp::Rsqrt, ve));
        let n = self.bin(BinaryOp::Mul, xc, r);
        let s = self.bin(BinaryOp::Mul, n, gamma);
        self.bin(BinaryOp::Add, s, beta)
    }
    fn linear(&mut self, x: NodeId, w: NodeId, b: NodeId) -> NodeId {
        let mm = self.push(Op::MatMul(x, w));
        self.bin(BinaryOp::Add, mm, b)
    }
}

/// The block: `x + attn(ln1(x))`, then `h + mlp(ln2(h))`, attention with a causal mask input.
pub fn transformer_block(d: Dims) -> Graph {
    let model = d.heads * d.head_dim;
    let dt = d.dtype;
    let mut g = G { g: Graph::new("transformer_block") };
    let x = g.param("x", dt, &[d.seq, model]);
    let mask = g.param("mask", dt, &[d.seq, d.seq]);
    let ln1_g = g.param("ln1_g", dt, &[model]);
    let ln1_b = g.param("ln1_b", dt, &[model]);
    let wq = g.param("wq", dt, &[model, model]);
    let bq = g.param("bq", dt, &[model]);
    let wk = g.param("wk", dt, &[model, model]);
    let bk = g.param("bk", dt, &[model]);
    let wv = g.param("wv", dt, &[model, model]);
    let bv = g.param("bv", dt, &[model]);
    let wo = g.param("wo", dt, &[model, model]);
    let bo = g.param("bo", dt, &[model]);
    let ln2_g = g.param("ln2_g", dt, &[model]);
    let ln2_b = g.param("ln2_b", dt, &[model]);
    let w1 = g.param("w1", dt, &[model, d.ff]);
    let b1 = g.param("b1", dt, &[d.ff]);
    let w2 = g.param("w2", dt, &[d.ff, model]);
    let b2 = g.param("b2", dt, &[model]);

    let h = g.layernorm(x, ln1_g, ln1_b, dt);
    let q = g.linear(h, wq, bq);
    let k = g.linear(h, wk, bk);
    let v = g.linear(h, wv, bv);
    let scale = g.g.constant(1.0 / (d.head_dim as f64).sqrt(), dt).unwrap();
    let mut heads = Vec::new();
    for i in 0..d.heads {
        let (start, end) = (i * d.head_dim, (i + 1) * d.head_dim);
        let qi = g.push(Op::Slice { input: q, axis: 1, start, end });
        let ki = g.push(Op::Slice { input: k, axis: 1, start, end });
        let vi = g.push(Op::Slice { input: v, axis: 1, start, end });
        let kt = g.push(Op::Permute { input: ki, perm: vec![1, 0] });
        let s = g.push(Op::MatMul(qi, kt));
        let s = g.bin(BinaryOp::Mul, s, scale);
        let s = g.bin(BinaryOp::Add, s, mask);
        let m = g.push(Op::Reduce { op: ReduceOp::Max, input: s, axes: vec![1], keepdim: true });
        let e = g.bin(BinaryOp::Sub, s, m);
        let e = g.push(Op::Unary(UnaryOp::Exp, e));
        let z = g.push(Op::Reduce { op: ReduceOp::Sum, input: e, axes: vec![1], keepdim: true });
        let p = g.bin(BinaryOp::Div, e, z);
        heads.push(g.push(Op::MatMul(p, vi)));
    }
    let attn = g.push(Op::Concat { inputs: heads, axis: 1 });
    let o = g.linear(attn, wo, bo);
    let h1 = g.bin(BinaryOp::Add, x, o);
    let h2 = g.layernorm(h1, ln2_g, ln2_b, dt);
    let f = g.linear(h2, w1, b1);
    let f = g.push(Op::Unary(UnaryOp::Gelu, f));
    let f = g.linear(f, w2, b2);
    let y = g.bin(BinaryOp::Add, h1, f);
    g.g.outputs = vec![y];
    g.g
}

/// Compute ops (not inputs or constants) in a graph.
pub fn op_count(g: &Graph) -> usize {
    g.nodes.iter().filter(|n| !matches!(n.op, Op::Input { .. } | Op::Constant { .. })).count()
}
