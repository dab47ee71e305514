//! Error bounds of the vectorized transcendentals and exactness of the f16/bf16 conversions,
//! measured through whole kernels (vector body and scalar tail alike).

use half::{bf16, f16};
use tcc_codegen::CraneliftBackend;
use tcc_ir::interp::run_graph;
use tcc_ir::{CpuTier, DType, Graph, KernelClass, Op, Shape, TensorType, UnaryOp};
use tcc_runtime::{CpuDevice, HostTensor};

use crate::common::{device, whole};

fn unary_graph(op: UnaryOp, n: usize) -> Graph {
    let mut g = Graph::new(op.name());
    let x = g.add_param("x", TensorType { dtype: DType::F32, shape: Shape::from_consts(&[n as u64]) }).unwrap();
    let y = g.push(Op::Unary(op, x)).unwrap();
    g.outputs.push(y);
    g
}

fn cast_graph(from: DType, to: DType, n: usize) -> Graph {
    let mut g = Graph::new("cast");
    let x = g.add_param("x", TensorType { dtype: from, shape: Shape::from_consts(&[n as u64]) }).unwrap();
    let y = g.push_typed(Op::Cast(x), TensorType { dtype: to, shape: Shape::from_consts(&[n as u64]) }).unwrap();
    g.outputs.push(y);
    g
}

/// Inputs across the whole f32 range: a dense grid near 0, log-spaced magnitudes of both signs,
/// subnormals and the special values.
fn wide_inputs() -> Vec<f32> {
    let mut v: Vec<f32> = (-20_000..=20_000).map(|i| i as f32 * 0.005).collect();
    let mut m = 1e-44f64;
    while m < 3e38 {
        v.push(m as f32);
        v.push(-m as f32);
        m *= 1.07;
    }
    v.extend([0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, f32::MAX, f32::MIN, f32::MIN_POSITIVE, 1e-45]);
    v.extend([-87.5, -88.8, -100.0, -103.9, -104.5, 88.5, 88.72, 88.73, 89.5, 709.0, -709.0]);
    v
}

/// Distance in units of the last place of f32 between `got` and the f64 reference; a zero of the
/// wrong sign is infinitely far.
fn ulps(got: f32, want: f64) -> f64 {
    if want.is_nan() || got.is_nan() {
        return if want.is_nan() && got.is_nan() { 0.0 } else { f64::INFINITY };
    }
    let w = want as f32;
    // A zero of the wrong sign turns into an infinity of the wrong sign one division later.
    if w == 0.0 && got == 0.0 {
        return if w.is_sign_negative() == got.is_sign_negative() { 0.0 } else { f64::INFINITY };
    }
    if w.is_infinite() || got.is_infinite() {
        return if w == got { 0.0 } else { f64::INFINITY };
    }
    let ulp = (f64::from(w.abs().max(f32::MIN_POSITIVE)) * f64::from(f32::EPSILON)).max(f64::from(1e-45f32));
    (f64::from(got) - want).abs() / ulp
}

fn max_ulps(op: UnaryOp, reference: impl Fn(f64) -> f64) -> (f64, f32) {
    max_ulps_on(device(), op, reference)
}

fn max_ulps_on(dev: &CpuDevice, op: UnaryOp, reference: impl Fn(f64) -> f64) -> (f64, f32) {
    let xs = wide_inputs();
    let g = unary_graph(op, xs.len());
    let out =
        dev.run(&whole(&g, KernelClass::Pointwise), &[HostTensor::from_slice(vec![xs.len()], &xs).unwrap()]).unwrap();
    let ys = out[0].to_vec::<f32>().unwrap();
    let mut worst = (0.0, 0.0f32);
    for (&x, &y) in xs.iter().zip(&ys) {
        let e = ulps(y, reference(f64::from(x)));
        if e > worst.0 {
            worst = (e, x);
        }
    }
    eprintln!("{}: max {} ulps at x = {}", op.name(), worst.0, worst.1);
    worst
}

#[test]
fn exp_is_within_2_ulps() {
    let (e, x) = max_ulps(UnaryOp::Exp, f64::exp);
    assert!(e <= 2.0, "exp: {e} ulps at {x}");
}

#[test]
fn log_is_within_2_ulps() {
    let (e, x) = max_ulps(UnaryOp::Log, f64::ln);
    assert!(e <= 2.0, "log: {e} ulps at {x}");
}

#[test]
fn tanh_is_within_4_ulps() {
    let (e, x) = max_ulps(UnaryOp::Tanh, f64::tanh);
    assert!(e <= 4.0, "tanh: {e} ulps at {x}");
}

#[test]
fn sigmoid_is_within_4_ulps() {
    let (e, x) = max_ulps(UnaryOp::Sigmoid, |x| 1.0 / (1.0 + (-x).exp()));
    assert!(e <= 4.0, "sigmoid: {e} ulps at {x}");
}

#[test]
fn gelu_is_within_160_ulps() {
    // For x < -5 the result is x e^t with t = 2u down to about -100: the f32 rounding of t (a few
    // ulps of |t|) is amplified |t| times, so the error grows to tens of ulps there (relative 1e-5).
    // The tanh form `0.5 x (1 + tanh(u))` cancels in f64 too for x below about -5: compare with
    // the same function written as `x * sigmoid(2u)`.
    let gelu = |x: f64| {
        if x == f64::NEG_INFINITY {
            return -0.0;
        }
        let t = 2.0 * 0.797_884_560_802_865_4 * (x + 0.044_715 * x * x * x);
        if t < 0.0 { x * t.exp() / (1.0 + t.exp()) } else { x / (1.0 + (-t).exp()) }
    };
    let (e, x) = max_ulps(UnaryOp::Gelu, gelu);
    assert!(e <= 160.0, "gelu: {e} ulps at {x}");
}

#[test]
fn every_unary_op_keeps_the_interpreters_signed_zeros_infinities_and_nans() {
    // Found by the long random programs: `rsqrt(-tanh(x * 0))` had the wrong infinity because
    // tanh turned -0 into +0.
    let xs = [0.0f32, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e-45, -1e-45, f32::MIN_POSITIVE, -1e-30];
    for op in UnaryOp::ALL {
        let g = unary_graph(op, xs.len());
        let input = HostTensor::from_slice(vec![xs.len()], &xs).unwrap();
        let got = device().run(&whole(&g, KernelClass::Pointwise), std::slice::from_ref(&input)).unwrap()[0]
            .to_vec::<f32>()
            .unwrap();
        let want = run_graph(&g, &[input.to_interp()]).unwrap()[0].data.clone();
        for ((&x, &y), &w) in xs.iter().zip(&got).zip(&want) {
            let e = ulps(y, w);
            assert!(e <= 4.0, "{}({x:e}) = {y:e}, the interpreter says {w:e}", op.name());
        }
    }
}

#[test]
fn the_polynomials_keep_their_bounds_without_fma() {
    let dev = CpuDevice::with_backend(CraneliftBackend::new().unwrap().with_fma(false), 1).unwrap();
    assert!(!dev.backend().caps().has_fma);
    let (e, x) = max_ulps_on(&dev, UnaryOp::Exp, f64::exp);
    assert!(e <= 2.0, "exp: {e} ulps at {x}");
    let (e, x) = max_ulps_on(&dev, UnaryOp::Log, f64::ln);
    assert!(e <= 2.0, "log: {e} ulps at {x}");
    let (e, x) = max_ulps_on(&dev, UnaryOp::Tanh, f64::tanh);
    assert!(e <= 4.0, "tanh: {e} ulps at {x}");
}

#[test]
fn every_f16_and_bf16_converts_to_f32_exactly() {
    let n = 1 << 16;
    let halves: Vec<f16> = (0..n).map(|b| f16::from_bits(b as u16)).collect();
    let out = device()
        .run(
            &whole(&cast_graph(DType::F16, DType::F32, n), KernelClass::Pointwise),
            &[HostTensor::from_slice(vec![n], &halves).unwrap()],
        )
        .unwrap();
    for (h, y) in halves.iter().zip(out[0].to_vec::<f32>().unwrap()) {
        let want = h.to_f32();
        assert!(want.to_bits() == y.to_bits() || (want.is_nan() && y.is_nan()), "{h:?} -> {y}");
    }
    let brains: Vec<bf16> = (0..n).map(|b| bf16::from_bits(b as u16)).collect();
    let out = device()
        .run(
            &whole(&cast_graph(DType::BF16, DType::F32, n), KernelClass::Pointwise),
            &[HostTensor::from_slice(vec![n], &brains).unwrap()],
        )
        .unwrap();
    for (h, y) in brains.iter().zip(out[0].to_vec::<f32>().unwrap()) {
        let want = h.to_f32();
        assert!(want.to_bits() == y.to_bits() || (want.is_nan() && y.is_nan()), "{h:?} -> {y}");
    }
}

#[test]
fn f32_rounds_to_f16_and_bf16_to_nearest_even() {
    // Every f32 whose bits step by a prime through the whole space, plus the wide inputs and ties.
    let mut xs: Vec<f32> = (0..200_003u64).map(|i| f32::from_bits((i * 21_467) as u32)).collect();
    xs.extend(wide_inputs());
    xs.extend([65504.0, 65519.99, 65520.0, 5.96e-8, 2.98e-8, 2.99e-8, 1.0 + 1.0 / 2048.0, 1.0 + 3.0 / 2048.0]);
    let n = xs.len();
    let input = HostTensor::from_slice(vec![n], &xs).unwrap();
    let out = device()
        .run(&whole(&cast_graph(DType::F32, DType::F16, n), KernelClass::Pointwise), std::slice::from_ref(&input))
        .unwrap();
    for (x, y) in xs.iter().zip(out[0].to_vec::<f16>().unwrap()) {
        let want = f16::from_f32(*x);
        assert!(want.to_bits() == y.to_bits() || (want.is_nan() && y.is_nan()), "{x:e}: want {want:?}, got {y:?}");
    }
    let out = device().run(&whole(&cast_graph(DType::F32, DType::BF16, n), KernelClass::Pointwise), &[input]).unwrap();
    for (x, y) in xs.iter().zip(out[0].to_vec::<bf16>().unwrap()) {
        let want = bf16::from_f32(*x);
        assert!(want.to_bits() == y.to_bits() || (want.is_nan() && y.is_nan()), "{x:e}: want {want:?}, got {y:?}");
    }
}

#[test]
fn max_and_min_of_zeros_of_both_signs_keep_their_first_operand_as_the_interpreter() {
    // max(-0, +0) is -0 and max(+0, -0) is +0 (contract §5): the first operand where they tie.
    // The reciprocals turn a zero of the wrong sign into an infinity of the wrong sign.
    let a = [-0.0f32, 0.0, -0.0, 0.0, 1.0, -1.0, f32::NAN, 0.0];
    let b = [0.0f32, -0.0, -0.0, 0.0, 0.0, -0.0, 0.0, f32::NAN];
    let ty = |n: usize| TensorType { dtype: DType::F32, shape: Shape::from_consts(&[n as u64]) };
    let mut g = Graph::new("max_min");
    let x = g.add_param("x", ty(a.len())).unwrap();
    let y = g.add_param("y", ty(b.len())).unwrap();
    let one = g.constant(1.0, DType::F32).unwrap();
    for op in [tcc_ir::BinaryOp::Max, tcc_ir::BinaryOp::Min] {
        let m = g.push(Op::Binary(op, x, y)).unwrap();
        let r = g.push(Op::Binary(tcc_ir::BinaryOp::Div, one, m)).unwrap();
        g.outputs.push(r);
    }
    let inputs =
        [HostTensor::from_slice(vec![a.len()], &a).unwrap(), HostTensor::from_slice(vec![b.len()], &b).unwrap()];
    let want = run_graph(&g, &[inputs[0].to_interp(), inputs[1].to_interp()]).unwrap();
    let got = device().run(&whole(&g, KernelClass::Pointwise), &inputs).unwrap();
    assert_exactly_the_interpreters(&got, &want, "");
}

/// Asserts that every element of every output is the interpreter's, a zero with its sign and NaN
/// where it is NaN; `context` starts the failure message.
fn assert_exactly_the_interpreters(got: &[HostTensor], want: &[tcc_ir::interp::Tensor], context: &str) {
    for (o, (got, want)) in got.iter().zip(want).enumerate() {
        for (i, (&g, &w)) in got.to_vec::<f32>().unwrap().iter().zip(&want.data).enumerate() {
            assert!(ulps(g, w) == 0.0, "{context}output {o}, element {i}: got {g}, the interpreter {w}");
        }
    }
}

#[test]
fn max_and_min_reductions_over_zeros_of_both_signs_agree_with_the_interpreter_in_any_order() {
    // A max reduction that ties at zero ends on +0 if any zero is +0, a min reduction on -0 if any
    // is -0 (contract §5): the result does not depend on the order a backend reduces in. Rows of
    // every length up to 37 (vector bodies and scalar tails) hold zeros of random signs, some
    // with a negative or NaN element; the reciprocals turn a zero of the wrong sign into an
    // infinity of the wrong sign.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut devices = vec![(CpuTier::Cranelift, CpuDevice::for_tier(CpuTier::Cranelift, 0, false).unwrap())];
    if cfg!(feature = "llvm") {
        devices.push((CpuTier::Llvm, CpuDevice::for_tier(CpuTier::Llvm, 0, false).unwrap()));
    }
    for n in 1..=37usize {
        let rows = 9usize;
        let data: Vec<f32> = (0..rows * n)
            .map(|i| match (i / n, next() % 16) {
                (7, 0) => -1.5,
                (8, 0) => f32::NAN,
                (_, r) if r < 8 => 0.0,
                _ => -0.0,
            })
            .collect();
        let ty = TensorType { dtype: DType::F32, shape: Shape::from_consts(&[rows as u64, n as u64]) };
        for (class, axis) in [(KernelClass::RowReduction, 1usize), (KernelClass::Generic, 0)] {
            let mut g = Graph::new("zeros");
            let x = g.add_param("x", ty.clone()).unwrap();
            let one = g.constant(1.0, DType::F32).unwrap();
            for op in [tcc_ir::ReduceOp::Max, tcc_ir::ReduceOp::Min] {
                let m = g.push(Op::Reduce { op, input: x, axes: vec![axis], keepdim: false }).unwrap();
                let r = g.push(Op::Binary(tcc_ir::BinaryOp::Div, one, m)).unwrap();
                g.outputs.push(r);
            }
            let input = HostTensor::from_slice(vec![rows, n], &data).unwrap();
            let want = run_graph(&g, &[input.to_interp()]).unwrap();
            for (tier, dev) in &devices {
                let got = dev.run(&whole(&g, class), std::slice::from_ref(&input)).unwrap();
                assert_exactly_the_interpreters(&got, &want, &format!("{tier:?}: n {n}, axis {axis}, "));
            }
        }
    }
}
