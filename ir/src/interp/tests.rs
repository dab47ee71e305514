//! Hand-computed values for every op and dtype, and every error the interpreter reports.

use super::*;
use crate::dtype::DType;
use crate::op::{BinaryOp, CompareOp, Op, ReduceOp, TensorType, UnaryOp};
use crate::program::{Kernel, KernelClass, Launch, Program, Schedule, Tier, ValueRef};
use crate::shape::Shape;

fn ty(dtype: DType, dims: &[u64]) -> TensorType {
    TensorType { dtype, shape: Shape::from_consts(dims) }
}

fn var_ty(dtype: DType, dims: &[&str]) -> TensorType {
    let dims =
        dims.iter().map(|d| d.parse::<u64>().map(Dim::Const).unwrap_or_else(|_| Dim::Var(d.to_string()))).collect();
    TensorType { dtype, shape: Shape(dims) }
}

fn t(dtype: DType, shape: &[usize], data: &[f64]) -> Tensor {
    Tensor::new(dtype, shape.to_vec(), data.to_vec()).unwrap()
}

/// A graph of one parameter `x` and the op `f(x)` as its output.
fn unary_graph(dtype: DType, dims: &[u64], f: impl FnOnce(&mut Graph, NodeId) -> NodeId) -> Graph {
    let mut g = Graph::new("f");
    let x = g.add_param("x", ty(dtype, dims)).unwrap();
    let y = f(&mut g, x);
    g.outputs.push(y);
    g
}

/// Runs a one-input, one-output graph.
fn run1(g: &Graph, x: Tensor) -> Tensor {
    run_graph(g, &[x]).unwrap().remove(0)
}

fn unary(op: UnaryOp, dtype: DType, data: &[f64]) -> Vec<f64> {
    let g = unary_graph(dtype, &[data.len() as u64], |g, x| g.push(Op::Unary(op, x)).unwrap());
    run1(&g, t(dtype, &[data.len()], data)).data
}

fn binary(op: BinaryOp, dtype: DType, a: &[f64], b: &[f64]) -> Vec<f64> {
    let mut g = Graph::new("f");
    let x = g.add_param("a", ty(dtype, &[a.len() as u64])).unwrap();
    let y = g.add_param("b", ty(dtype, &[b.len() as u64])).unwrap();
    let z = g.push(Op::Binary(op, x, y)).unwrap();
    g.outputs.push(z);
    let out = run_graph(&g, &[t(dtype, &[a.len()], a), t(dtype, &[b.len()], b)]).unwrap();
    out[0].data.clone()
}

fn cast(from: DType, to: DType, data: &[f64]) -> Vec<f64> {
    let n = data.len() as u64;
    let g = unary_graph(from, &[n], |g, x| g.push_typed(Op::Cast(x), ty(to, &[n])).unwrap());
    run1(&g, t(from, &[data.len()], data)).data
}

fn f32r(x: f64) -> f64 {
    f64::from(x as f32)
}

fn same(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y || (x.is_nan() && y.is_nan()))
}

#[test]
fn unary_float_ops_match_their_formulas_rounded_to_f32() {
    let xs = [-1.5, -0.25, 0.0, 0.5, 2.0];
    type Formula = fn(f64) -> f64;
    let cases: [(UnaryOp, Formula); 10] = [
        (UnaryOp::Neg, |x| -x),
        (UnaryOp::Abs, f64::abs),
        (UnaryOp::Exp, f64::exp),
        (UnaryOp::Log, f64::ln),
        (UnaryOp::Sqrt, f64::sqrt),
        (UnaryOp::Rsqrt, |x| 1.0 / x.sqrt()),
        (UnaryOp::Tanh, f64::tanh),
        (UnaryOp::Sigmoid, |x| 1.0 / (1.0 + (-x).exp())),
        (UnaryOp::Relu, |x| if x > 0.0 { x } else { 0.0 }),
        (UnaryOp::Gelu, |x| {
            // 0.5 x (1 + tanh(u)) = x sigmoid(2u), which does not cancel for negative x.
            x / (1.0 + (-2.0 * (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).exp())
        }),
    ];
    for (op, f) in cases {
        let got = unary(op, DType::F32, &xs);
        let want: Vec<f64> = xs.iter().map(|&x| f32r(f(x))).collect();
        assert!(same(&got, &want), "{op:?}: {got:?} vs {want:?}");
    }
    // Spot values by hand.
    assert_eq!(unary(UnaryOp::Log, DType::F32, &[0.0, -1.0])[0], f64::NEG_INFINITY);
    assert!(unary(UnaryOp::Log, DType::F32, &[-1.0])[0].is_nan());
    assert_eq!(unary(UnaryOp::Rsqrt, DType::F32, &[4.0, 0.0]), vec![0.5, f64::INFINITY]);
    assert_eq!(unary(UnaryOp::Sigmoid, DType::F32, &[0.0, f64::INFINITY, f64::NEG_INFINITY]), vec![0.5, 1.0, 0.0]);
    assert_eq!(
        unary(UnaryOp::Gelu, DType::F32, &[0.0, f64::INFINITY, f64::NEG_INFINITY]),
        vec![0.0, f64::INFINITY, 0.0]
    );
    assert_eq!(unary(UnaryOp::Exp, DType::F16, &[12.0])[0], f64::INFINITY, "e^12 overflows f16");
    // Regression (differential seed 10536): gelu of a large negative x is a tiny negative number,
    // not the 0 that the tanh form cancels to, so rsqrt of it is NaN as on the compiled tiers.
    let g = unary(UnaryOp::Gelu, DType::F32, &[-8.0, -6.0, -10.0]);
    assert!(g.iter().all(|&v| v < 0.0 && v > -1e-9), "{g:?}");
    assert!((g[0] / -3.1e-21 - 1.0).abs() < 0.05, "{g:?}");
    assert!(unary(UnaryOp::Rsqrt, DType::F32, &g).iter().all(|v| v.is_nan()));
}

#[test]
fn relu_max_min_propagate_nan_and_comparisons_with_nan_are_false() {
    let nan = f64::NAN;
    assert!(unary(UnaryOp::Relu, DType::F32, &[nan])[0].is_nan());
    assert_eq!(unary(UnaryOp::Relu, DType::F32, &[-2.0, 3.0]), vec![0.0, 3.0]);
    assert!(same(&binary(BinaryOp::Max, DType::F32, &[nan, 1.0, 2.0], &[1.0, nan, -1.0]), &[nan, nan, 2.0]));
    assert!(same(&binary(BinaryOp::Min, DType::BF16, &[nan, 1.0, 2.0], &[1.0, nan, -1.0]), &[nan, nan, -1.0]));
    let ops = [CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge];
    let with_nan = [0.0, 1.0, 0.0, 0.0, 0.0, 0.0];
    let one_two = [0.0, 1.0, 1.0, 1.0, 0.0, 0.0];
    let equal = [1.0, 0.0, 0.0, 1.0, 0.0, 1.0];
    for (i, op) in ops.into_iter().enumerate() {
        let mut g = Graph::new("f");
        let a = g.add_param("a", ty(DType::F32, &[3])).unwrap();
        let b = g.add_param("b", ty(DType::F32, &[3])).unwrap();
        let c = g.push(Op::Compare(op, a, b)).unwrap();
        g.outputs.push(c);
        let out =
            run_graph(&g, &[t(DType::F32, &[3], &[nan, 1.0, 2.0]), t(DType::F32, &[3], &[1.0, 2.0, 2.0])]).unwrap();
        assert_eq!(out[0].dtype, DType::Bool);
        assert_eq!(out[0].data, vec![with_nan[i], one_two[i], equal[i]], "{op:?}");
    }
}

#[test]
fn i32_arithmetic_wraps_and_divides_toward_zero() {
    let (max, min) = (f64::from(i32::MAX), f64::from(i32::MIN));
    let i = DType::I32;
    assert_eq!(binary(BinaryOp::Add, i, &[max, 1.0], &[1.0, 2.0]), vec![min, 3.0]);
    assert_eq!(binary(BinaryOp::Sub, i, &[min, 5.0], &[1.0, 7.0]), vec![max, -2.0]);
    assert_eq!(binary(BinaryOp::Mul, i, &[65536.0, -3.0], &[65536.0, 4.0]), vec![0.0, -12.0]);
    assert_eq!(binary(BinaryOp::Div, i, &[7.0, -7.0, 5.0, min], &[-2.0, 2.0, 0.0, -1.0]), vec![-3.0, -3.0, 0.0, min]);
    assert_eq!(binary(BinaryOp::Max, i, &[3.0, -3.0], &[-4.0, 4.0]), vec![3.0, 4.0]);
    assert_eq!(binary(BinaryOp::Min, i, &[3.0, -3.0], &[-4.0, 4.0]), vec![-4.0, -3.0]);
    assert_eq!(unary(UnaryOp::Neg, i, &[min, 5.0]), vec![min, -5.0]);
    assert_eq!(unary(UnaryOp::Abs, i, &[min, -5.0]), vec![min, 5.0]);
    assert_eq!(unary(UnaryOp::Relu, i, &[-5.0, 6.0]), vec![0.0, 6.0]);
    let g = unary_graph(i, &[3], |g, x| {
        g.push(Op::Reduce { op: ReduceOp::Sum, input: x, axes: vec![0], keepdim: false }).unwrap()
    });
    assert_eq!(run1(&g, t(i, &[3], &[max, max, 3.0])).data, vec![1.0], "MAX + MAX + 3 wraps to 1");
}

#[test]
fn float_binary_ops_round_to_the_dtype() {
    let f = DType::F32;
    assert_eq!(binary(BinaryOp::Add, f, &[0.1], &[0.2]), vec![f32r(f32r(0.1) + f32r(0.2))]);
    assert_eq!(binary(BinaryOp::Sub, f, &[1.0], &[0.25]), vec![0.75]);
    assert_eq!(binary(BinaryOp::Mul, f, &[3.0], &[-0.5]), vec![-1.5]);
    assert_eq!(binary(BinaryOp::Div, f, &[1.0, 1.0, 0.0], &[3.0, 0.0, 0.0])[..2], [f32r(1.0 / 3.0), f64::INFINITY]);
    assert!(binary(BinaryOp::Div, f, &[0.0], &[0.0])[0].is_nan());
    assert_eq!(binary(BinaryOp::Pow, f, &[2.0, 9.0], &[10.0, 0.5]), vec![1024.0, 3.0]);
    assert!(binary(BinaryOp::Pow, f, &[-2.0], &[0.5])[0].is_nan());
    // f16: 1 + 2^-11 is a tie and rounds to even (1.0); 1 + 3 * 2^-11 rounds up to 1 + 2^-9.
    let h = DType::F16;
    let e = 2f64.powi(-11);
    assert_eq!(binary(BinaryOp::Add, h, &[1.0, 1.0], &[e, 3.0 * e]), vec![1.0, 1.0 + 2f64.powi(-9)]);
    assert_eq!(binary(BinaryOp::Mul, h, &[300.0], &[300.0]), vec![f64::INFINITY], "f16 overflow is inf");
    // bf16 has 8 significant bits: 1 + 2^-8 is a tie and rounds to 1.0; 1 + 2^-7 is exact.
    let b = DType::BF16;
    assert_eq!(binary(BinaryOp::Add, b, &[1.0, 1.0], &[2f64.powi(-8), 2f64.powi(-7)]), vec![1.0, 1.0 + 2f64.powi(-7)]);
}

#[test]
fn casts_round_to_nearest_even_and_saturate() {
    let (max, min) = (f64::from(i32::MAX), f64::from(i32::MIN));
    let nan = f64::NAN;
    // Float -> i32 truncates toward zero (`DType::round`), saturates, and maps NaN to 0.
    assert_eq!(cast(DType::F32, DType::I32, &[3e9, -3e9, nan, 2.7, -2.7]), vec![max, min, 0.0, 2.0, -2.0]);
    assert_eq!(cast(DType::F32, DType::Bool, &[0.0, -0.0, nan, 0.1, -3.0]), vec![0.0, 0.0, 0.0, 1.0, 1.0]);
    assert_eq!(cast(DType::Bool, DType::F16, &[1.0, 0.0]), vec![1.0, 0.0]);
    assert_eq!(cast(DType::I32, DType::F16, &[2049.0, 2051.0]), vec![2048.0, 2052.0], "ties to even");
    assert_eq!(cast(DType::I32, DType::Bool, &[-4.0, 0.0]), vec![1.0, 0.0]);
    assert_eq!(
        cast(DType::F32, DType::F16, &[65520.0, 1e-8, 0.1]),
        vec![f64::INFINITY, 0.0, f64::from(half::f16::from_f64(0.1))]
    );
    assert_eq!(cast(DType::F32, DType::BF16, &[1.0 + 3.0 * 2f64.powi(-9)]), vec![1.0 + 2f64.powi(-7)]);
    assert_eq!(cast(DType::F16, DType::F32, &[f64::NEG_INFINITY]), vec![f64::NEG_INFINITY]);
    assert_eq!(cast(DType::I32, DType::F32, &[16_777_217.0]), vec![16_777_216.0]);
}

#[test]
fn inputs_and_constants_are_rounded_and_constants_broadcast_as_scalars() {
    let g = unary_graph(DType::F16, &[2, 2], |g, x| {
        let c = g.constant(0.1, DType::F16).unwrap();
        g.push(Op::Binary(BinaryOp::Mul, x, c)).unwrap()
    });
    let x = Tensor { dtype: DType::F16, shape: vec![2, 2], data: vec![1.0, 2.0, 3.0, 1.0 + 1e-5] };
    let c = f64::from(half::f16::from_f64(0.1));
    let round = |v: f64| f64::from(half::f16::from_f64(v));
    assert_eq!(run1(&g, x).data, vec![round(c), round(2.0 * c), round(3.0 * c), round(c)]);
}

#[test]
fn select_and_binary_ops_broadcast_numpy_style() {
    let mut g = Graph::new("f");
    let a = g.add_param("a", ty(DType::F32, &[2, 1])).unwrap();
    let b = g.add_param("b", ty(DType::F32, &[3])).unwrap();
    let c = g.add_param("c", ty(DType::Bool, &[1, 3])).unwrap();
    let s = g.push(Op::Binary(BinaryOp::Add, a, b)).unwrap();
    let z = g.constant(-1.0, DType::F32).unwrap();
    let sel = g.push(Op::Select { cond: c, on_true: a, on_false: z }).unwrap();
    g.outputs = vec![s, sel];
    let out = run_graph(
        &g,
        &[
            t(DType::F32, &[2, 1], &[10.0, 20.0]),
            t(DType::F32, &[3], &[1.0, 2.0, 3.0]),
            t(DType::Bool, &[1, 3], &[1.0, 0.0, 1.0]),
        ],
    )
    .unwrap();
    assert_eq!(out[0].shape, vec![2, 3]);
    assert_eq!(out[0].data, vec![11.0, 12.0, 13.0, 21.0, 22.0, 23.0]);
    assert_eq!(out[1].shape, vec![2, 3]);
    assert_eq!(out[1].data, vec![10.0, -1.0, 10.0, 20.0, -1.0, 20.0]);
}

#[test]
fn broadcast_and_reshape_follow_the_declared_shape() {
    let g = unary_graph(DType::I32, &[3, 1], |g, x| {
        let b = g.push_typed(Op::Broadcast(x), ty(DType::I32, &[2, 3, 2])).unwrap();
        g.push_typed(Op::Reshape(b), ty(DType::I32, &[4, 3])).unwrap()
    });
    let out = run1(&g, t(DType::I32, &[3, 1], &[1.0, 2.0, 3.0]));
    assert_eq!(out.shape, vec![4, 3]);
    assert_eq!(out.data, vec![1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0]);
}

#[test]
fn reductions_over_axes_with_and_without_keepdim() {
    let data: Vec<f64> = (0..12).map(f64::from).collect(); // shape [2, 3, 2]
    let reduce = |op, axes: &[usize], keepdim| {
        let g = unary_graph(DType::F32, &[2, 3, 2], |g, x| {
            g.push(Op::Reduce { op, input: x, axes: axes.to_vec(), keepdim }).unwrap()
        });
        run1(&g, t(DType::F32, &[2, 3, 2], &data))
    };
    let s = reduce(ReduceOp::Sum, &[0, 2], true);
    assert_eq!(s.shape, vec![1, 3, 1]);
    assert_eq!(s.data, vec![0.0 + 1.0 + 6.0 + 7.0, 2.0 + 3.0 + 8.0 + 9.0, 4.0 + 5.0 + 10.0 + 11.0]);
    let s = reduce(ReduceOp::Sum, &[0, 2], false);
    assert_eq!(s.shape, vec![3]);
    let m = reduce(ReduceOp::Mean, &[1], false);
    assert_eq!(m.shape, vec![2, 2]);
    assert_eq!(m.data, vec![2.0, 3.0, 8.0, 9.0]);
    let m = reduce(ReduceOp::Max, &[2], true);
    assert_eq!(m.shape, vec![2, 3, 1]);
    assert_eq!(m.data, vec![1.0, 3.0, 5.0, 7.0, 9.0, 11.0]);
    let m = reduce(ReduceOp::Min, &[0, 1, 2], false);
    assert_eq!((m.shape, m.data), (vec![], vec![0.0]));
    // f16 sums accumulate in f64 and round once: per step, 1 + 2048 would round back to 2048.
    let g = unary_graph(DType::F16, &[3], |g, x| {
        g.push(Op::Reduce { op: ReduceOp::Sum, input: x, axes: vec![0], keepdim: false }).unwrap()
    });
    assert_eq!(run1(&g, t(DType::F16, &[3], &[1.0, 2048.0, 1.0])).data, vec![2050.0]);
    // NaN propagates through max and min.
    let g = unary_graph(DType::F32, &[3], |g, x| {
        g.push(Op::Reduce { op: ReduceOp::Max, input: x, axes: vec![0], keepdim: false }).unwrap()
    });
    assert!(run1(&g, t(DType::F32, &[3], &[1.0, f64::NAN, 2.0])).data[0].is_nan());
    // Zeros of both signs: max ends on +0 and min on -0 in every order (contract §5).
    for op in [ReduceOp::Max, ReduceOp::Min] {
        let g = unary_graph(DType::F32, &[3], |g, x| {
            g.push(Op::Reduce { op, input: x, axes: vec![0], keepdim: false }).unwrap()
        });
        for zeros in [[-0.0, 0.0, -0.0], [0.0, -0.0, -0.0], [-0.0, -0.0, 0.0], [0.0, -0.0, 0.0], [-0.0, 0.0, 0.0]] {
            let r = run1(&g, t(DType::F32, &[3], &zeros)).data[0];
            assert_eq!(r.is_sign_negative(), op == ReduceOp::Min, "{op:?} of {zeros:?} gave {r:?}");
        }
    }
}

#[test]
fn permute_slice_and_concat_move_elements_as_typed() {
    let data: Vec<f64> = (0..24).map(f64::from).collect();
    let g = unary_graph(DType::F32, &[2, 3, 4], |g, x| g.push(Op::Permute { input: x, perm: vec![2, 0, 1] }).unwrap());
    let p = run1(&g, t(DType::F32, &[2, 3, 4], &data));
    assert_eq!(p.shape, vec![4, 2, 3]);
    // out[i][j][k] = in[j][k][i] = 12 j + 4 k + i
    assert_eq!(p.get(&[1, 1, 2]), Some(12.0 + 8.0 + 1.0));
    assert_eq!(&p.data[..6], &[0.0, 4.0, 8.0, 12.0, 16.0, 20.0]);

    let g = unary_graph(DType::F32, &[2, 4], |g, x| g.push(Op::Slice { input: x, axis: 1, start: 1, end: 3 }).unwrap());
    let s = run1(&g, t(DType::F32, &[2, 4], &data[..8]));
    assert_eq!((s.shape, s.data), (vec![2, 2], vec![1.0, 2.0, 5.0, 6.0]));

    let mut g = Graph::new("f");
    let a = g.add_param("a", ty(DType::Bool, &[2, 1])).unwrap();
    let b = g.add_param("b", ty(DType::Bool, &[2, 2])).unwrap();
    let c = g.push(Op::Concat { inputs: vec![a, b, a], axis: 1 }).unwrap();
    g.outputs.push(c);
    let out =
        run_graph(&g, &[t(DType::Bool, &[2, 1], &[1.0, 0.0]), t(DType::Bool, &[2, 2], &[0.0, 0.0, 1.0, 1.0])]).unwrap();
    assert_eq!(out[0].shape, vec![2, 4]);
    assert_eq!(out[0].data, vec![1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0]);
}

#[test]
fn batched_matmul_broadcasts_batch_axes_and_rounds_once() {
    let mut g = Graph::new("f");
    let a = g.add_param("a", ty(DType::F32, &[1, 2, 2])).unwrap();
    let b = g.add_param("b", ty(DType::F32, &[3, 2, 1])).unwrap();
    let c = g.push(Op::MatMul(a, b)).unwrap();
    g.outputs.push(c);
    let out = run_graph(
        &g,
        &[t(DType::F32, &[1, 2, 2], &[1.0, 2.0, 3.0, 4.0]), t(DType::F32, &[3, 2, 1], &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0])],
    )
    .unwrap();
    assert_eq!(out[0].shape, vec![3, 2, 1]);
    assert_eq!(out[0].data, vec![1.0, 3.0, 2.0, 4.0, 3.0, 7.0]);

    // f16 accumulation happens in f64: 2048 + 1 + 1 would lose both ones if rounded per step.
    let mut g = Graph::new("f");
    let a = g.add_param("a", ty(DType::F16, &[1, 3])).unwrap();
    let b = g.add_param("b", ty(DType::F16, &[3, 1])).unwrap();
    let c = g.push(Op::MatMul(a, b)).unwrap();
    g.outputs.push(c);
    let out = run_graph(&g, &[t(DType::F16, &[1, 3], &[2048.0, 1.0, 1.0]), t(DType::F16, &[3, 1], &[1.0, 1.0, 1.0])])
        .unwrap();
    assert_eq!(out[0].data, vec![2050.0]);
}

#[test]
fn shape_variables_bind_from_inputs() {
    let mut g = Graph::new("f");
    let x = g.add_param("x", var_ty(DType::F32, &["M", "4"])).unwrap();
    let y = g.add_param("y", var_ty(DType::F32, &["M", "1"])).unwrap();
    let z = g.push(Op::Binary(BinaryOp::Sub, x, y)).unwrap();
    g.outputs.push(z);
    let xs = t(DType::F32, &[2, 4], &[1.0; 8]);
    let ys = t(DType::F32, &[2, 1], &[1.0, 2.0]);
    let bindings = bind_shapes(&g, &[xs.clone(), ys.clone()]).unwrap();
    assert_eq!(bindings.get("M"), Some(&2));
    let out = run_graph(&g, &[xs.clone(), ys]).unwrap();
    assert_eq!(out[0].data, vec![0.0, 0.0, 0.0, 0.0, -1.0, -1.0, -1.0, -1.0]);

    let err = run_graph(&g, &[xs.clone(), t(DType::F32, &[3, 1], &[0.0; 3])]).unwrap_err();
    assert!(matches!(err, InterpError::ConflictingBinding { ref var, first: 2, second: 3, .. } if var == "M"), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("`M`") && msg.contains("`y`"), "{msg}");
}

#[test]
fn input_errors_name_the_parameter_and_both_shapes() {
    let g = unary_graph(DType::F32, &[2, 3], |g, x| g.push(Op::Unary(UnaryOp::Neg, x)).unwrap());
    let err = run_graph(&g, &[]).unwrap_err();
    assert_eq!(err, InterpError::InputCount { function: "f".into(), expected: 1, got: 0 });
    let err = run_graph(&g, &[t(DType::F32, &[3, 2], &[0.0; 6])]).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("`x`") && msg.contains("f32[2, 3]") && msg.contains("f32[3, 2]"), "{msg}");
    let err = run_graph(&g, &[t(DType::F16, &[2, 3], &[0.0; 6])]).unwrap_err();
    assert!(err.to_string().contains("f16[2, 3]"), "{err}");
    let bad = Tensor { dtype: DType::F32, shape: vec![2, 3], data: vec![0.0; 5] };
    assert!(matches!(run_graph(&g, &[bad]).unwrap_err(), InterpError::DataLength { expected: 6, got: 5, .. }));
    assert!(matches!(Tensor::new(DType::F32, vec![2], vec![1.0]), Err(InterpError::DataLength { .. })));
}

#[test]
fn unbound_variables_and_empty_reductions_are_errors() {
    // A reshape to a variable no parameter binds.
    let mut g = Graph::new("f");
    let x = g.add_param("x", var_ty(DType::F32, &["N"])).unwrap();
    let r = g.push_typed(Op::Reshape(x), var_ty(DType::F32, &["N", "1"])).unwrap();
    g.outputs.push(r);
    assert!(run_graph(&g, &[t(DType::F32, &[2], &[1.0, 2.0])]).is_ok());
    let mut g2 = g.clone();
    g2.nodes[1].ty = var_ty(DType::F32, &["K", "1"]);
    let err = run_graph(&g2, &[t(DType::F32, &[2], &[1.0, 2.0])]).unwrap_err();
    assert!(matches!(err, InterpError::Unbound { ref vars, .. } if vars == &["K".to_string()]), "{err}");

    let g = unary_graph(DType::F32, &[], |_, x| x);
    let mut g = Graph { params: vec![], nodes: vec![], ..g };
    let x = g.add_param("x", var_ty(DType::F32, &["N", "3"])).unwrap();
    let s = g.push(Op::Reduce { op: ReduceOp::Sum, input: x, axes: vec![0], keepdim: false }).unwrap();
    g.outputs = vec![s];
    let err = run_graph(&g, &[t(DType::F32, &[0, 3], &[])]).unwrap_err();
    assert!(matches!(err, InterpError::EmptyReduction { node: NodeId(1), .. }), "{err}");
    // Reducing a non-empty axis of an empty tensor is fine.
    let mut g3 = g.clone();
    g3.nodes[1] = crate::graph::Node {
        op: Op::Reduce { op: ReduceOp::Max, input: x, axes: vec![1], keepdim: false },
        ty: var_ty(DType::F32, &["N"]),
    };
    assert_eq!(run_graph(&g3, &[t(DType::F32, &[0, 3], &[])]).unwrap()[0].shape, vec![0]);
}

#[test]
fn dead_nodes_are_not_evaluated() {
    let mut g = Graph::new("f");
    let x = g.add_param("x", var_ty(DType::F32, &["N"])).unwrap();
    let _dead = g.push(Op::Reduce { op: ReduceOp::Sum, input: x, axes: vec![0], keepdim: false }).unwrap();
    let y = g.push(Op::Unary(UnaryOp::Neg, x)).unwrap();
    g.outputs = vec![y, y];
    let out = run_graph(&g, &[t(DType::F32, &[0], &[])]).unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].shape, vec![0]);
}

#[test]
fn memory_limit_names_the_node() {
    let g = unary_graph(DType::F32, &[4], |g, x| g.push_typed(Op::Broadcast(x), ty(DType::F32, &[1000, 4])).unwrap());
    let x = t(DType::F32, &[4], &[1.0; 4]);
    assert!(run_graph_with_limit(&g, std::slice::from_ref(&x), 32_000).is_ok());
    let err = run_graph_with_limit(&g, &[x], 31_999).unwrap_err();
    assert_eq!(
        err,
        InterpError::MemoryLimit {
            node: NodeId(1),
            op: "broadcast".into(),
            shape: vec![1000, 4],
            bytes: 32_000,
            limit: 31_999
        }
    );
}

#[test]
fn malformed_graphs_are_errors_not_panics() {
    let mut g = unary_graph(DType::F32, &[2], |g, x| g.push(Op::Unary(UnaryOp::Neg, x)).unwrap());
    g.nodes[1].op = Op::Unary(UnaryOp::Neg, NodeId(1));
    assert!(matches!(run_graph(&g, &[t(DType::F32, &[2], &[1.0, 2.0])]), Err(InterpError::InvalidGraph { .. })));
    g.nodes[1].op = Op::Unary(UnaryOp::Neg, NodeId(0));
    g.nodes[1].ty = ty(DType::F32, &[3]);
    assert!(matches!(run_graph(&g, &[t(DType::F32, &[2], &[1.0, 2.0])]), Err(InterpError::InvalidGraph { .. })));
    g.outputs = vec![NodeId(7)];
    assert!(matches!(run_graph(&g, &[t(DType::F32, &[2], &[1.0, 2.0])]), Err(InterpError::InvalidGraph { .. })));
}

#[test]
fn long_chains_run_without_recursion() {
    let g = unary_graph(DType::F32, &[3], |g, x| {
        let mut v = x;
        for _ in 0..20_000 {
            v = g.push(Op::Unary(UnaryOp::Neg, v)).unwrap();
        }
        v
    });
    assert_eq!(run1(&g, t(DType::F32, &[3], &[1.0, -2.0, 3.0])).data, vec![1.0, -2.0, 3.0]);
}

fn kernel(name: &str, graph: Graph) -> Kernel {
    Kernel { name: name.into(), class: KernelClass::Generic, graph, schedule: Schedule::default_for(Tier::Interp) }
}

#[test]
fn programs_run_their_launches_through_buffers() {
    // y = exp(x) * 2; z = sum(y) ; outputs (z, x)
    let double_exp = unary_graph(DType::F32, &[3], |g, x| {
        let e = g.push(Op::Unary(UnaryOp::Exp, x)).unwrap();
        let two = g.constant(2.0, DType::F32).unwrap();
        g.push(Op::Binary(BinaryOp::Mul, e, two)).unwrap()
    });
    let total = unary_graph(DType::F32, &[3], |g, x| {
        g.push(Op::Reduce { op: ReduceOp::Sum, input: x, axes: vec![0], keepdim: false }).unwrap()
    });
    let p = Program {
        name: "p".into(),
        params: vec![crate::graph::Param { name: "x".into(), ty: var_ty(DType::F32, &["3"]) }],
        buffers: vec![ty(DType::F32, &[3]), ty(DType::F32, &[])],
        launches: vec![
            Launch {
                kernel: kernel("k0", double_exp),
                inputs: vec![ValueRef::Param(0)],
                outputs: vec![ValueRef::Buffer(0)],
            },
            Launch {
                kernel: kernel("k1", total),
                inputs: vec![ValueRef::Buffer(0)],
                outputs: vec![ValueRef::Buffer(1)],
            },
        ],
        outputs: vec![ValueRef::Buffer(1), ValueRef::Param(0)],
    };
    let x = t(DType::F32, &[3], &[0.0, 1.0, 2.0]);
    let out = run_program(&p, std::slice::from_ref(&x)).unwrap();
    let want: f64 = [0.0f64, 1.0, 2.0].iter().map(|&v| f32r(2.0 * f32r(v.exp()))).sum();
    assert_eq!(out[0].data, vec![f32r(want)]);
    assert_eq!(out[1], x);

    let mut bad = p.clone();
    bad.buffers[1] = ty(DType::F16, &[]);
    assert!(matches!(
        run_program(&bad, std::slice::from_ref(&x)),
        Err(InterpError::BufferMismatch { launch: 1, buffer: 1, .. })
    ));
    let mut bad = p.clone();
    bad.launches.swap(0, 1);
    let err = run_program(&bad, std::slice::from_ref(&x)).unwrap_err();
    assert!(matches!(err, InterpError::BadValueRef { value: ValueRef::Buffer(0), .. }), "{err}");
    let mut bad = p;
    bad.launches[1].kernel.graph.params[0].ty = ty(DType::F32, &[4]);
    let err = run_program(&bad, &[x]).unwrap_err();
    assert!(matches!(err, InterpError::Kernel { launch: 1, .. }), "{err}");
    assert!(err.to_string().contains("k1"), "{err}");
}

#[test]
fn matmul_256_cubed_runs() {
    let n = 256;
    let mut g = Graph::new("f");
    let a = g.add_param("a", ty(DType::F32, &[256, 256])).unwrap();
    let b = g.add_param("b", ty(DType::F32, &[256, 256])).unwrap();
    let c = g.push(Op::MatMul(a, b)).unwrap();
    g.outputs.push(c);
    let ones = t(DType::F32, &[n, n], &vec![1.0; n * n]);
    let out = run_graph(&g, &[ones.clone(), ones]).unwrap();
    assert!(out[0].data.iter().all(|&v| v == 256.0));
}
