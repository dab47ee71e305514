//! Helpers: graph building, deterministic random inputs, and comparison with the interpreter.

use tcc_ir::interp::{Tensor, run_graph, run_program};
use tcc_ir::{BinaryOp, DType, Graph, NodeId, Op, Program, ReduceOp, Shape, TensorType, UnaryOp};
use tcc_passes::{OptimizeOptions, Optimized, TargetModel, optimize};

pub fn ty(dtype: DType, dims: &[u64]) -> TensorType {
    TensorType { dtype, shape: Shape::from_consts(dims) }
}

pub fn f32t(dims: &[u64]) -> TensorType {
    ty(DType::F32, dims)
}

/// A tiny graph builder over `Graph::push`.
pub struct B {
    pub g: Graph,
}

impl B {
    pub fn new(name: &str) -> B {
        B { g: Graph::new(name) }
    }
    pub fn param(&mut self, name: &str, t: TensorType) -> NodeId {
        self.g.add_param(name, t).unwrap()
    }
    pub fn push(&mut self, op: Op) -> NodeId {
        self.g.push(op).unwrap()
    }
    pub fn konst(&mut self, v: f64, d: DType) -> NodeId {
        self.g.constant(v, d).unwrap()
    }
    pub fn un(&mut self, u: UnaryOp, a: NodeId) -> NodeId {
        self.push(Op::Unary(u, a))
    }
    pub fn bin(&mut self, b: BinaryOp, x: NodeId, y: NodeId) -> NodeId {
        self.push(Op::Binary(b, x, y))
    }
    pub fn reduce(&mut self, op: ReduceOp, x: NodeId, axes: &[usize], keepdim: bool) -> NodeId {
        self.push(Op::Reduce { op, input: x, axes: axes.to_vec(), keepdim })
    }
    pub fn matmul(&mut self, a: NodeId, b: NodeId) -> NodeId {
        self.push(Op::MatMul(a, b))
    }
    pub fn t(&mut self, x: NodeId) -> NodeId {
        let rank = self.g.ty(x).unwrap().shape.rank();
        let mut perm: Vec<usize> = (0..rank).collect();
        perm.swap(rank - 1, rank - 2);
        self.push(Op::Permute { input: x, perm })
    }
    pub fn out(mut self, outs: &[NodeId]) -> Graph {
        self.g.outputs = outs.to_vec();
        tcc_ir::verify::verify(&self.g).unwrap();
        self.g
    }

    /// `softmax(x)` over `axis` as the front end spells it: max, subtract, exp, sum, divide.
    pub fn softmax(&mut self, x: NodeId, axis: usize) -> NodeId {
        let m = self.reduce(ReduceOp::Max, x, &[axis], true);
        let d = self.bin(BinaryOp::Sub, x, m);
        let e = self.un(UnaryOp::Exp, d);
        let s = self.reduce(ReduceOp::Sum, e, &[axis], true);
        self.bin(BinaryOp::Div, e, s)
    }
}

/// Deterministic pseudo-random values in [lo, hi).
pub fn values(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let u = (s >> 11) as f64 / (1u64 << 53) as f64;
            lo + (hi - lo) * u
        })
        .collect()
}

/// Random inputs for a graph with constant shapes.
pub fn inputs(g: &Graph, seed: u64) -> Vec<Tensor> {
    g.params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let shape: Vec<usize> = p.ty.shape.0.iter().map(|d| d.as_const().unwrap() as usize).collect();
            let n = shape.iter().product();
            Tensor::new(p.ty.dtype, shape, values(n, seed + i as u64, -2.0, 2.0)).unwrap()
        })
        .collect()
}

/// Asserts that `actual` matches `expected` within a tolerance for the dtype.
pub fn assert_close(expected: &[Tensor], actual: &[Tensor]) {
    assert_eq!(expected.len(), actual.len());
    for (e, a) in expected.iter().zip(actual) {
        assert_eq!(e.shape, a.shape);
        assert_eq!(e.dtype, a.dtype);
        let tol = match e.dtype {
            DType::F32 => 1e-4,
            DType::F16 => 1e-2,
            DType::BF16 => 5e-2,
            _ => 0.0,
        };
        for (x, y) in e.data.iter().zip(&a.data) {
            let same = x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= tol * (1.0 + x.abs().max(y.abs()));
            assert!(same, "expected {x}, got {y}");
        }
    }
}

/// Optimizes `g` for the CPU host, checks the program verifies and computes what `g` computes.
pub fn optimize_checked(g: &Graph) -> Optimized {
    optimize_checked_for(g, TargetModel::cpu_host())
}

pub fn optimize_checked_for(g: &Graph, target: TargetModel) -> Optimized {
    let out = optimize(g, &OptimizeOptions::new(target)).unwrap();
    tcc_ir::verify::verify_program(&out.program).unwrap();
    check_program(g, &out.program);
    out
}

pub fn check_program(g: &Graph, p: &Program) {
    for seed in [1, 2] {
        let ins = inputs(g, seed);
        let expected = run_graph(g, &ins).unwrap();
        let actual = run_program(p, &ins).unwrap();
        assert_close(&expected, &actual);
    }
}
