//! The GPU's rows stage (feature `gpu-tests`, a CUDA device) against the interpreter: softmax,
//! layernorm, rmsnorm and a row normalization with its row sums, in every float dtype, on rows
//! of awkward lengths (1, primes, lengths off the vector width, rows held in registers by a
//! warp or a block, rows too long for registers) and random row counts.

#[cfg(feature = "gpu-tests")]
mod gpu {
    use proptest::prelude::*;
    use tcc_ir::interp::{Tensor, run_graph};
    use tcc_ir::testing::{Tolerance, compare_outputs, random_inputs};
    use tcc_ir::{BinaryOp, Bindings, DType, Graph, KernelClass, NodeId, Op, ReduceOp, Shape, TensorType, UnaryOp};
    use tcc_runtime::HostTensor;
    use tcc_runtime::cuda::CudaDevice;

    use crate::common::whole;

    fn device() -> &'static CudaDevice {
        static D: std::sync::OnceLock<CudaDevice> = std::sync::OnceLock::new();
        D.get_or_init(|| CudaDevice::open(0).unwrap_or_else(|e| panic!("feature `gpu-tests` needs a CUDA device: {e}")))
    }

    fn t(dtype: DType, dims: &[u64]) -> TensorType {
        TensorType { dtype, shape: Shape::from_consts(dims) }
    }

    fn reduce(g: &mut Graph, op: ReduceOp, x: NodeId) -> NodeId {
        g.push(Op::Reduce { op, input: x, axes: vec![1], keepdim: true }).unwrap()
    }

    fn bin(g: &mut Graph, op: BinaryOp, a: NodeId, b: NodeId) -> NodeId {
        g.push(Op::Binary(op, a, b)).unwrap()
    }

    /// One of the four row programs of `[m, n]` rows of `dtype`.
    fn program(kind: usize, dtype: DType, m: u64, n: u64) -> Graph {
        let mut g = Graph::new(format!("rows{kind}"));
        let x = g.add_param("x", t(dtype, &[m, n])).unwrap();
        let y = match kind {
            0 => {
                let mx = reduce(&mut g, ReduceOp::Max, x);
                let d = bin(&mut g, BinaryOp::Sub, x, mx);
                let e = g.push(Op::Unary(UnaryOp::Exp, d)).unwrap();
                let s = reduce(&mut g, ReduceOp::Sum, e);
                bin(&mut g, BinaryOp::Div, e, s)
            }
            1 => {
                let w = g.add_param("w", t(dtype, &[n])).unwrap();
                let b = g.add_param("b", t(dtype, &[n])).unwrap();
                let mean = reduce(&mut g, ReduceOp::Mean, x);
                let xc = bin(&mut g, BinaryOp::Sub, x, mean);
                let sq = bin(&mut g, BinaryOp::Mul, xc, xc);
                let var = reduce(&mut g, ReduceOp::Mean, sq);
                let eps = g.constant(1e-5, dtype).unwrap();
                let ve = bin(&mut g, BinaryOp::Add, var, eps);
                let r = g.push(Op::Unary(UnaryOp::Rsqrt, ve)).unwrap();
                let xn = bin(&mut g, BinaryOp::Mul, xc, r);
                let xw = bin(&mut g, BinaryOp::Mul, xn, w);
                bin(&mut g, BinaryOp::Add, xw, b)
            }
            2 => {
                let w = g.add_param("w", t(dtype, &[n])).unwrap();
                let sq = bin(&mut g, BinaryOp::Mul, x, x);
                let ms = reduce(&mut g, ReduceOp::Mean, sq);
                let eps = g.constant(1e-6, dtype).unwrap();
                let ve = bin(&mut g, BinaryOp::Add, ms, eps);
                let r = g.push(Op::Unary(UnaryOp::Rsqrt, ve)).unwrap();
                let xn = bin(&mut g, BinaryOp::Mul, x, r);
                bin(&mut g, BinaryOp::Mul, xn, w)
            }
            _ => {
                let s = reduce(&mut g, ReduceOp::Sum, x);
                g.outputs.push(s);
                bin(&mut g, BinaryOp::Div, x, s)
            }
        };
        g.outputs.push(y);
        g
    }

    fn check(g: &Graph, seed: u64) -> Result<(), String> {
        let inputs = random_inputs(g, &Bindings::new(), seed).map_err(|e| e.to_string())?;
        let expected = run_graph(g, &inputs).map_err(|e| format!("interp: {e}"))?;
        let host: Vec<HostTensor> = inputs.iter().map(|t| HostTensor::from_interp(t).unwrap()).collect();
        let out = device().run_program(&whole(g, KernelClass::RowReduction), &host).map_err(|e| e.to_string())?;
        let actual: Vec<Tensor> = out.iter().map(HostTensor::to_interp).collect();
        let tol = Tolerance { outlier_fraction: 0.02, ..Tolerance::default() }.scaled(4.0);
        compare_outputs(&expected, &actual, &tol).map_err(|m| m.to_string())
    }

    /// Row lengths that exercise every path of the rows stage.
    const LENGTHS: &[u64] = &[1, 2, 3, 7, 31, 32, 97, 257, 1000, 1021, 1500, 2048, 4096, 4099, 8192, 12_289, 40_000];

    #[test]
    fn rows_of_awkward_lengths_match_the_interpreter_on_the_gpu() {
        for (i, &n) in LENGTHS.iter().enumerate() {
            for (d, dtype) in [DType::F32, DType::F16, DType::BF16].into_iter().enumerate() {
                let m = [1, 3, 37, 130][(i + d) % 4];
                for kind in 0..4 {
                    let g = program(kind, dtype, m, n);
                    check(&g, n ^ m).unwrap_or_else(|e| panic!("{} {dtype} [{m}, {n}]: {e}", g.name));
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        #[test]
        fn random_rows_match_the_interpreter_on_the_gpu(kind in 0usize..4, d in 0usize..3, m in 1u64..300, n in 1u64..20_000, seed in any::<u64>()) {
            let dtype = [DType::F32, DType::F16, DType::BF16][d];
            let g = program(kind, dtype, m, n);
            check(&g, seed).map_err(|e| TestCaseError::fail(format!("{} {dtype} [{m}, {n}]: {e}", g.name)))?;
        }
    }
}
