//! Generated programs of any size: a chain of `let`s mixing matmuls, row max/sum normalizations and
//! pointwise ops over f32[64, 64], each reading the previous value and one up to eight steps back
//! (the mix of `bench/let_chain.py`, about 2.3 IR ops per `let`). The compile-time benchmark's
//! workload and the work-bound test's.

use tcc_ir::{BinaryOp, DType, Graph, NodeId, Op, ReduceOp, Shape, TensorType, UnaryOp};

/// A deterministic xorshift generator (the chain must not depend on a crate's RNG version).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A uniform value in `0..n`.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The chain of `lets` `let`s, as the front end would lower it.
pub fn let_chain(lets: usize) -> Graph {
    let mut g = Graph::new("chain");
    let ty = |dims: &[u64]| TensorType { dtype: DType::F32, shape: Shape::from_consts(dims) };
    let x = g.add_param("x", ty(&[64, 64])).unwrap();
    let w = g.add_param("w", ty(&[64, 64])).unwrap();
    let b = g.add_param("b", ty(&[64])).unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ lets as u64);
    let mut values: Vec<NodeId> = vec![x];
    let push = |g: &mut Graph, op: Op| g.push(op).unwrap();
    for i in 1..=lets {
        let p = values[i - 1];
        let q = values[i - 1 - rng.below(i.min(8))];
        let v = match rng.below(20) {
            0 | 1 => push(&mut g, Op::MatMul(p, w)),
            2 | 3 => {
                let m = push(&mut g, Op::Reduce { op: ReduceOp::Max, input: p, axes: vec![1], keepdim: true });
                push(&mut g, Op::Binary(BinaryOp::Sub, p, m))
            }
            4 | 5 => {
                let s = push(&mut g, Op::Reduce { op: ReduceOp::Sum, input: p, axes: vec![1], keepdim: true });
                let one = g.constant(1.0, DType::F32).unwrap();
                let d = push(&mut g, Op::Binary(BinaryOp::Add, s, one));
                push(&mut g, Op::Binary(BinaryOp::Div, p, d))
            }
            6..=9 => {
                let t = push(&mut g, Op::Unary(UnaryOp::Tanh, p));
                push(&mut g, Op::Binary(BinaryOp::Add, t, q))
            }
            10..=13 => {
                let half = g.constant(0.5, DType::F32).unwrap();
                let h = push(&mut g, Op::Binary(BinaryOp::Mul, p, half));
                push(&mut g, Op::Binary(BinaryOp::Add, h, b))
            }
            14..=16 => {
                let r = push(&mut g, Op::Unary(UnaryOp::Relu, p));
                push(&mut g, Op::Binary(BinaryOp::Sub, r, q))
            }
            _ => {
                let s = push(&mut g, Op::Unary(UnaryOp::Sigmoid, p));
                push(&mut g, Op::Binary(BinaryOp::Mul, s, q))
            }
        };
        values.push(v);
    }
    g.outputs.push(values[lets]);
    g
}

/// The number of ops that compute something (not parameters or constants).
pub fn compute_ops(g: &Graph) -> usize {
    g.nodes.iter().filter(|n| !matches!(n.op, Op::Input { .. } | Op::Constant { .. })).count()
}
