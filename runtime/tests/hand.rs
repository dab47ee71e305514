//! Hand-written kernels for the fast paths (pointwise chains, row reductions, matmul) on shapes 1,
//! primes and sizes off the tile grid, plus the device's shape checks and cache.

use tcc_ir::interp::Tensor;
use tcc_ir::testing::{Tolerance, dual_gemm_graph, gemm_epilogue_graphs, random_inputs};
use tcc_ir::{BinaryOp, Bindings, DType, Dim, Graph, KernelClass, NodeId, Op, ReduceOp, Shape, TensorType, UnaryOp};
use tcc_runtime::{CpuDevice, HostTensor, RuntimeError};

use crate::common::{check, device, materializing_device, per_op, whole};

fn ty(dtype: DType, dims: &[u64]) -> TensorType {
    TensorType { dtype, shape: Shape::from_consts(dims) }
}

fn var_ty(dtype: DType, dims: &[&str]) -> TensorType {
    TensorType { dtype, shape: Shape(dims.iter().map(|d| Dim::Var((*d).to_string())).collect()) }
}

fn bind(pairs: &[(&str, u64)]) -> Bindings {
    pairs.iter().map(|(k, v)| ((*k).to_string(), *v)).collect()
}

/// Checks the whole graph as one kernel of `class` (fused and materialized) and one kernel per op.
fn check_all(g: &Graph, class: KernelClass, bindings: &Bindings, tol: &Tolerance) {
    for seed in 0..2 {
        let inputs = random_inputs(g, bindings, seed).unwrap();
        check(device(), g, &whole(g, class), &inputs, tol)
            .unwrap_or_else(|e| panic!("fused {class:?} {bindings:?}: {e}"));
        check(materializing_device(), g, &whole(g, class), &inputs, tol)
            .unwrap_or_else(|e| panic!("materialized {bindings:?}: {e}"));
        check(device(), g, &per_op(g), &inputs, tol).unwrap_or_else(|e| panic!("per op {bindings:?}: {e}"));
    }
}

fn reduce(g: &mut Graph, op: ReduceOp, input: NodeId, axis: usize) -> NodeId {
    g.push(Op::Reduce { op, input, axes: vec![axis], keepdim: true }).unwrap()
}

/// `gelu(x * w + b)` with `b` broadcast along rows, then cast back to the input dtype.
fn pointwise_graph(dtype: DType) -> Graph {
    let mut g = Graph::new("bias_gelu");
    let x = g.add_param("x", var_ty(dtype, &["M", "N"])).unwrap();
    let b = g.add_param("b", var_ty(dtype, &["N"])).unwrap();
    let w = g.constant(0.5, dtype).unwrap();
    let xw = g.push(Op::Binary(BinaryOp::Mul, x, w)).unwrap();
    let s = g.push(Op::Binary(BinaryOp::Add, xw, b)).unwrap();
    let y = g.push(Op::Unary(UnaryOp::Gelu, s)).unwrap();
    let t = g.push(Op::Unary(UnaryOp::Tanh, y)).unwrap();
    let z = g.push(Op::Binary(BinaryOp::Max, t, y)).unwrap();
    g.outputs.push(z);
    g
}

fn softmax_graph(dtype: DType) -> Graph {
    let mut g = Graph::new("softmax");
    let x = g.add_param("x", var_ty(dtype, &["R", "C"])).unwrap();
    let m = reduce(&mut g, ReduceOp::Max, x, 1);
    let d = g.push(Op::Binary(BinaryOp::Sub, x, m)).unwrap();
    let e = g.push(Op::Unary(UnaryOp::Exp, d)).unwrap();
    let s = reduce(&mut g, ReduceOp::Sum, e, 1);
    let y = g.push(Op::Binary(BinaryOp::Div, e, s)).unwrap();
    g.outputs.push(y);
    g
}

fn layernorm_graph(dtype: DType, rms: bool) -> Graph {
    let mut g = Graph::new(if rms { "rmsnorm" } else { "layernorm" });
    let x = g.add_param("x", var_ty(dtype, &["R", "C"])).unwrap();
    let gamma = g.add_param("gamma", var_ty(dtype, &["C"])).unwrap();
    let centered = if rms {
        x
    } else {
        let mean = reduce(&mut g, ReduceOp::Mean, x, 1);
        g.push(Op::Binary(BinaryOp::Sub, x, mean)).unwrap()
    };
    let sq = g.push(Op::Binary(BinaryOp::Mul, centered, centered)).unwrap();
    let var = reduce(&mut g, ReduceOp::Mean, sq, 1);
    let eps = g.constant(1e-5, dtype).unwrap();
    let ve = g.push(Op::Binary(BinaryOp::Add, var, eps)).unwrap();
    let r = g.push(Op::Unary(UnaryOp::Rsqrt, ve)).unwrap();
    let n = g.push(Op::Binary(BinaryOp::Mul, centered, r)).unwrap();
    let y = g.push(Op::Binary(BinaryOp::Mul, n, gamma)).unwrap();
    g.outputs.push(y);
    g
}

fn matmul_graph(dtype: DType, batch: Option<u64>) -> Graph {
    let mut g = Graph::new("linear");
    let a_ty = match batch {
        Some(b) => TensorType { dtype, shape: Shape(vec![Dim::Const(b), Dim::Var("M".into()), Dim::Var("K".into())]) },
        None => var_ty(dtype, &["M", "K"]),
    };
    let a = g.add_param("a", a_ty).unwrap();
    let w = g.add_param("w", var_ty(dtype, &["K", "N"])).unwrap();
    let bias = g.add_param("bias", var_ty(dtype, &["N"])).unwrap();
    let mm = g.push(Op::MatMul(a, w)).unwrap();
    let s = g.push(Op::Binary(BinaryOp::Add, mm, bias)).unwrap();
    let y = g.push(Op::Unary(UnaryOp::Relu, s)).unwrap();
    g.outputs.push(y);
    g
}

/// `(a * 0.5) @ transpose(wt)` with `wt: [N, K]`: a pointwise prologue on one operand and a
/// strided (transposed) read of the other, both folded into packing.
fn prologue_matmul_graph(dtype: DType) -> Graph {
    let mut g = Graph::new("prologue");
    let a = g.add_param("a", var_ty(dtype, &["M", "K"])).unwrap();
    let wt = g.add_param("wt", var_ty(dtype, &["N", "K"])).unwrap();
    let half = g.constant(0.5, dtype).unwrap();
    let scaled = g.push(Op::Binary(BinaryOp::Mul, a, half)).unwrap();
    let w = g.push(Op::Permute { input: wt, perm: vec![1, 0] }).unwrap();
    let y = g.push(Op::MatMul(scaled, w)).unwrap();
    let t = g.push(Op::Unary(UnaryOp::Tanh, y)).unwrap();
    g.outputs.extend([y, t]);
    g
}

const ROWS_COLS: [(u64, u64); 6] = [(1, 1), (1, 7), (3, 4), (13, 33), (31, 1000), (2, 5003)];

#[test]
fn pointwise_chains_with_broadcasting() {
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let g = pointwise_graph(dtype);
        for (m, n) in ROWS_COLS {
            check_all(&g, KernelClass::Pointwise, &bind(&[("M", m), ("N", n)]), &Tolerance::default().scaled(2.0));
        }
    }
}

#[test]
fn softmax_rows() {
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let g = softmax_graph(dtype);
        for (r, c) in ROWS_COLS {
            check_all(&g, KernelClass::RowReduction, &bind(&[("R", r), ("C", c)]), &Tolerance::default().scaled(2.0));
        }
    }
}

#[test]
fn layernorm_and_rmsnorm_rows() {
    for rms in [false, true] {
        for dtype in [DType::F32, DType::BF16] {
            let g = layernorm_graph(dtype, rms);
            for (r, c) in ROWS_COLS {
                check_all(
                    &g,
                    KernelClass::RowReduction,
                    &bind(&[("R", r), ("C", c)]),
                    &Tolerance::default().scaled(4.0),
                );
            }
        }
    }
}

#[test]
fn matmul_with_epilogue() {
    let shapes = [(1, 1, 1), (1, 13, 1), (7, 13, 5), (17, 33, 65), (64, 64, 64), (65, 31, 67), (3, 200, 9)];
    for dtype in [DType::F32, DType::F16] {
        for batch in [None, Some(3)] {
            let g = matmul_graph(dtype, batch);
            for (m, k, n) in shapes {
                check_all(
                    &g,
                    KernelClass::MatMul,
                    &bind(&[("M", m), ("K", k), ("N", n)]),
                    &Tolerance::default().scaled(4.0),
                );
            }
        }
    }
}

/// Products whose pointwise consumer is computed in the register tiles' store, and one whose
/// product is also returned (not fused): sizes 1, odd primes, off the blocking grid, a depth of
/// several blocks, batched.
#[test]
fn matmul_epilogues_in_the_tiles() {
    let cases: [(Option<u64>, (u64, u64, u64)); 5] =
        [(None, (1, 1, 1)), (None, (1, 7, 13)), (None, (13, 35, 17)), (None, (67, 131, 97)), (Some(2), (37, 29, 11))];
    for (batch, mnk) in cases {
        let batch: &[u64] = &batch.into_iter().collect::<Vec<_>>();
        let mut graphs = gemm_epilogue_graphs(batch, mnk).unwrap();
        graphs.push(dual_gemm_graph(DType::F32, batch, mnk, false).unwrap());
        for g in graphs {
            check_all(&g, KernelClass::MatMul, &Bindings::new(), &Tolerance::default().scaled(4.0));
        }
    }
}

/// Every register tile of the cranelift tier's tuning space (and some past the registers), on
/// depth blocks that end in the tile loop's single steps (7 deep) and ones of several unrolled
/// iterations: as assembled x86-64 kernels where the host has AVX and FMA (256-bit where the
/// columns are a multiple of 8, 128-bit otherwise; 1 x 28 is seven xmm vectors, and 3 x 32, one
/// row past the ymm registers, is rounded to 2 x 32), with sizes 1, odd primes and edges in both
/// dimensions.
#[test]
fn every_register_tile_of_the_cranelift_tier_matches_the_interpreter() {
    let tiles =
        [(6, 16), (4, 24), (4, 16), (8, 8), (2, 32), (4, 12), (3, 16), (6, 8), (8, 4), (1, 4), (1, 28), (3, 32)];
    let shapes = [(1, 1, 1), (13, 37, 29), (70, 33, 600), (9, 12, 8)];
    for (mr, nr) in tiles {
        for tile_k in [7, 256] {
            for (m, n, k) in shapes {
                let g = tcc_ir::testing::gemm_graph(DType::F32, &[], (m, n, k), false, true).unwrap();
                let mut program = whole(&g, KernelClass::MatMul);
                let s = &mut program.launches[0].kernel.schedule;
                (s.micro_m, s.micro_n, s.tile_m, s.tile_k) = (mr, nr, 2 * mr, tile_k);
                let inputs = random_inputs(&g, &Bindings::new(), m * n + k).unwrap();
                let tol = Tolerance::default().with_accumulation(k);
                check(device(), &g, &program, &inputs, &tol)
                    .unwrap_or_else(|e| panic!("tile {mr}x{nr}, depth blocks of {tile_k}, {m}x{n}x{k}: {e}"));
            }
        }
    }
}

/// In a fused kernel, a reduction over the axes a broadcast repeated is that value (its sum
/// `count` times it), exactly: an f32 mean of equal values lands an ulp off for about one value
/// in six (these three among them), and comparing it with the broadcast repeated the flip along
/// the whole axis (a differential case of session 17). (Kernel by kernel, the reduction reads a
/// materialized tensor whose equal elements it cannot know of: that case stays approximate.)
#[test]
fn reductions_over_a_broadcast_axis_are_exact() {
    let values = [0.8132702112197876, 0.42268723249435425, 0.38367754220962524];
    for op in [ReduceOp::Mean, ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min] {
        let mut g = Graph::new("r");
        let x = g.add_param("x", ty(DType::F32, &[3])).unwrap();
        let b = g.push(Op::Broadcast(x)).unwrap();
        g.nodes[b.index()].ty = ty(DType::F32, &[3, 100, 3]);
        let r = g.push(Op::Reduce { op, input: b, axes: vec![0, 1], keepdim: true }).unwrap();
        let lt = g.push(Op::Compare(tcc_ir::CompareOp::Lt, r, b)).unwrap();
        g.outputs.extend([r, lt]);
        let inputs = [Tensor::new(DType::F32, vec![3], values.to_vec()).unwrap()];
        check(device(), &g, &whole(&g, KernelClass::Generic), &inputs, &Tolerance::default())
            .unwrap_or_else(|e| panic!("{op:?}: {e}"));
    }
}

#[test]
fn matmul_with_prologue_and_transposed_operand() {
    for dtype in [DType::F32, DType::BF16] {
        let g = prologue_matmul_graph(dtype);
        for (m, k, n) in [(1, 1, 1), (5, 300, 3), (67, 17, 130)] {
            check_all(
                &g,
                KernelClass::MatMul,
                &bind(&[("M", m), ("K", k), ("N", n)]),
                &Tolerance::default().scaled(4.0),
            );
        }
    }
}

#[test]
fn large_rows_are_split_across_threads() {
    let g = softmax_graph(DType::F32);
    let kernel = whole(&g, KernelClass::RowReduction).launches.remove(0).kernel;
    let lk = device().backend().lower(&kernel, &bind(&[("R", 64), ("C", 300)])).unwrap();
    assert_eq!(lk.phases.len(), 1);
    assert_eq!(lk.phases[0].rows, 64);
    let flat = pointwise_graph(DType::F32);
    let kernel = whole(&flat, KernelClass::Pointwise).launches.remove(0).kernel;
    let lk = device().backend().lower(&kernel, &bind(&[("M", 1), ("N", 100_000)])).unwrap();
    // One row of 100000 elements: split into strips.
    assert!(lk.phases[0].rows > 1, "{:?}", lk.phases);
    let two = CpuDevice::with_threads(2).unwrap();
    let inputs = random_inputs(&flat, &bind(&[("M", 1), ("N", 100_000)]), 3).unwrap();
    check(&two, &flat, &whole(&flat, KernelClass::Pointwise), &inputs, &Tolerance::default()).unwrap();
}

#[test]
fn shape_mismatch_names_the_parameter_and_both_shapes() {
    let g = softmax_graph(DType::F32);
    let p = whole(&g, KernelClass::RowReduction);
    let x = HostTensor::from_vec(vec![2, 3, 4], vec![0f32; 24]).unwrap();
    let err = device().run(&p, &[x]).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, RuntimeError::ShapeMismatch { .. }), "{msg}");
    assert!(msg.contains("`x`") && msg.contains("[R, C]") && msg.contains("[2, 3, 4]"), "{msg}");

    let g = matmul_graph(DType::F32, None);
    let p = whole(&g, KernelClass::MatMul);
    let a = HostTensor::from_vec(vec![2, 3], vec![0f32; 6]).unwrap();
    let w = HostTensor::from_vec(vec![4, 5], vec![0f32; 20]).unwrap();
    let bias = HostTensor::from_vec(vec![5], vec![0f32; 5]).unwrap();
    let msg = device().run(&p, &[a, w, bias]).unwrap_err().to_string();
    assert!(msg.contains("`w`") && msg.contains("K=3") && msg.contains("[4, 5]"), "{msg}");

    let bad = HostTensor::from_vec(vec![2, 3], vec![0i32; 6]).unwrap();
    let msg = device().run(&whole(&softmax_graph(DType::F32), KernelClass::Generic), &[bad]).unwrap_err().to_string();
    assert!(msg.contains("`x`") && msg.contains("f32") && msg.contains("i32"), "{msg}");
}

#[test]
fn compiled_programs_are_cached_per_bindings() {
    let dev = CpuDevice::with_threads(1).unwrap();
    let g = softmax_graph(DType::F32);
    let p = whole(&g, KernelClass::RowReduction);
    let x = |r: usize, c: usize| HostTensor::from_vec(vec![r, c], vec![1f32; r * c]).unwrap();
    let a = dev.run(&p, &[x(2, 3)]).unwrap();
    dev.run(&p, &[x(2, 3)]).unwrap();
    assert_eq!(dev.cache_len(), 1);
    dev.run(&p, &[x(4, 3)]).unwrap();
    assert_eq!(dev.cache_len(), 2);
    assert_eq!(a[0].to_vec::<f32>().unwrap(), vec![1.0 / 3.0; 6]);
    let compiled = dev.compile(&p, &bind(&[("R", 2), ("C", 3)])).unwrap();
    let err = compiled.run(&[x(4, 3)]).unwrap_err().to_string();
    assert!(err.contains("R=2") && err.contains("[4, 3]"), "{err}");
}

#[test]
fn integer_and_bool_semantics() {
    // i32 division by zero gives 0, MIN / -1 wraps, float -> int casts saturate with NaN -> 0.
    let mut g = Graph::new("ints");
    let a = g.add_param("a", ty(DType::I32, &[6])).unwrap();
    let b = g.add_param("b", ty(DType::I32, &[6])).unwrap();
    let f = g.add_param("f", ty(DType::F32, &[6])).unwrap();
    let q = g.push(Op::Binary(BinaryOp::Div, a, b)).unwrap();
    let c = g.push_typed(Op::Cast(f), ty(DType::I32, &[6])).unwrap();
    let lt = g.push(Op::Compare(tcc_ir::CompareOp::Lt, q, c)).unwrap();
    let s = g.push(Op::Select { cond: lt, on_true: q, on_false: c }).unwrap();
    g.outputs.extend([q, c, lt, s]);
    let inputs = vec![
        Tensor::new(DType::I32, vec![6], vec![7.0, -7.0, f64::from(i32::MIN), 5.0, 0.0, 9.0]).unwrap(),
        Tensor::new(DType::I32, vec![6], vec![2.0, 2.0, -1.0, 0.0, 0.0, -3.0]).unwrap(),
        Tensor::new(DType::F32, vec![6], vec![f64::NAN, 1e20, -1e20, -2.7, 2.7, f64::INFINITY]).unwrap(),
    ];
    for (dev, p) in [(device(), whole(&g, KernelClass::Generic)), (materializing_device(), per_op(&g))] {
        check(dev, &g, &p, &inputs, &Tolerance::exact()).unwrap();
    }
}
