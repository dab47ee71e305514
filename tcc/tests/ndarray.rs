//! Feature `ndarray`: arrays and views of any dimension and layout as kernel arguments, results
//! as arrays (`f::array`, `f::array_on`), checked against the f64 interpreter; and the errors.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::values;
use tcc::ndarray::{Array, ArrayD, Axis, IxDyn, s};
use tcc::{Device, Error, f16};

tcc::kernel! {
    fn softmax(x: f32[N, D]) -> f32[N, D] {
        let e = exp(x - x.max(-1, keepdim));
        e / e.sum(-1, keepdim)
    }

    fn scale3(x: f32[B, N, D], w: f32[D]) -> f32[B, N, D] {
        tanh(x * w) + 0.5
    }

    fn norm1(x: f32[N]) -> f32[] {
        abs(x).sum(0)
    }

    fn stats(x: f32[N, D]) -> (f32[N], f32[N]) {
        (x.sum(-1), x.max(-1))
    }

    fn gelu_f16(x: f16[N, D]) -> f16[N, D] {
        gelu(x)
    }

    fn product(a: f32[M, K], b: f32[K, N]) -> f32[M, N] {
        a @ b
    }
}

fn random(shape: &[usize], seed: u64) -> ArrayD<f32> {
    let n = shape.iter().product();
    ArrayD::from_shape_vec(IxDyn(shape), values(n, seed)).unwrap()
}

/// Every element of `actual` within `atol + rtol * |expected|` of `expected`, shapes equal.
fn assert_close(actual: &ArrayD<f32>, expected: &ArrayD<f32>, rtol: f32, atol: f32) {
    assert_eq!(actual.shape(), expected.shape());
    for (i, (a, e)) in actual.iter().zip(expected.iter()).enumerate() {
        assert!((a - e).abs() <= atol + rtol * e.abs(), "element {i}: {a} vs {e}");
    }
}

#[test]
fn standard_arrays_of_every_rank_match_the_interpreter() {
    let interp = Device::interp();
    for &(n, d) in &[(1, 1), (1, 7), (3, 5), (17, 33)] {
        let x = random(&[n, d], 1 + n as u64 * 100 + d as u64);
        let y = softmax::array(&x).unwrap();
        assert!(y.is_standard_layout());
        assert_close(&y, &softmax::array_on(&interp, &x).unwrap(), 1e-4, 1e-6);
        // Owned arrays, views and typed (fixed-dimension) arrays are all arguments.
        let x2 = x.clone().into_dimensionality::<tcc::ndarray::Ix2>().unwrap();
        assert_eq!(softmax::array(x2.view()).unwrap(), y);
        assert_eq!(softmax::array(x2).unwrap(), y);
    }
    let x = random(&[2, 3, 5], 7);
    let w = Array::from_vec(values(5, 8));
    assert_close(&scale3::array(x.view(), &w).unwrap(), &scale3::array_on(&interp, &x, &w).unwrap(), 1e-4, 1e-5);
    let v = random(&[9], 9);
    let total = norm1::array(&v).unwrap();
    assert_eq!(total.shape(), &[] as &[usize]);
    assert_close(&total, &norm1::array_on(&interp, &v).unwrap(), 1e-5, 1e-5);
}

#[test]
fn strided_views_are_read_in_logical_order() {
    let interp = Device::interp();
    let base = random(&[6, 9], 11);
    let base2 = base.view().into_dimensionality::<tcc::ndarray::Ix2>().unwrap();
    let transposed = base2.t();
    let stepped = base2.slice(s![1..;2, ..;3]);
    let reversed = base2.slice(s![..;-1, 2..7]);
    let column = base2.column(4).insert_axis(Axis(1));
    for view in [transposed, stepped, reversed, column] {
        assert!(!view.is_standard_layout() || view.ncols() == 1, "{view:?}");
        let y = softmax::array(view).unwrap();
        // The same values in standard layout give the same result, bit for bit.
        assert_eq!(y, softmax::array(view.as_standard_layout()).unwrap());
        assert_close(&y, &softmax::array_on(&interp, view).unwrap(), 1e-4, 1e-6);
    }
    // A broadcast view (stride 0) stands for its repeated rows.
    let row = Array::from_vec(values(5, 12));
    let broadcast = row.broadcast((4, 5)).unwrap();
    let y = softmax::array(broadcast).unwrap();
    for r in 0..4 {
        assert_eq!(y.index_axis(Axis(0), r), y.index_axis(Axis(0), 0));
    }
    assert_close(&y, &softmax::array_on(&interp, broadcast).unwrap(), 1e-4, 1e-6);
    // A product of two transposed operands.
    let a = random(&[5, 3], 13);
    let b = random(&[7, 5], 14);
    let (a2, b2) = (
        a.view().into_dimensionality::<tcc::ndarray::Ix2>().unwrap(),
        b.view().into_dimensionality::<tcc::ndarray::Ix2>().unwrap(),
    );
    let c = product::array(a2.t(), b2.t()).unwrap();
    let expected = b2.dot(&a2).reversed_axes();
    assert_close(&c, &expected.into_dyn(), 1e-5, 1e-5);
}

#[test]
fn several_outputs_and_half_precision_are_arrays() {
    let x = random(&[4, 7], 21);
    let (sum, max) = stats::array(&x).unwrap();
    let (isum, imax) = stats::array_on(&Device::interp(), &x).unwrap();
    assert_close(&sum, &isum, 1e-5, 1e-5);
    assert_eq!(max, imax);
    let h = x.mapv(f16::from_f32);
    let y = gelu_f16::array(h.t()).unwrap();
    let expected = gelu_f16::array_on(&Device::interp(), h.t()).unwrap();
    assert_eq!(y.shape(), &[7, 4]);
    for (a, e) in y.iter().zip(expected.iter()) {
        assert!((a.to_f32() - e.to_f32()).abs() <= 2e-3 + 1e-2 * e.to_f32().abs(), "{a} vs {e}");
    }
}

#[test]
fn mismatched_arrays_are_errors_naming_the_parameter() {
    // A rank the parameter does not have.
    let e = softmax::array(random(&[6], 31)).unwrap_err();
    assert!(matches!(&e, Error::Shape { param, got, .. } if param == "x" && got == &[6]), "{e}");
    assert!(e.is_argument_error());
    // A shape variable bound twice to different sizes (K from `a`, then from `b`).
    let e = product::array(random(&[2, 3], 32), random(&[4, 5], 33)).unwrap_err();
    assert!(matches!(&e, Error::Shape { param, .. } if param == "b"), "{e}");
    assert!(e.to_string().contains("K=3"), "{e}");
    // A strided view of the right size is an argument; one of another size is not.
    let x = random(&[2, 3, 5], 34);
    let w = random(&[10], 35);
    let every_other = scale3::array(&x, w.slice(s![..;2])).unwrap();
    assert_eq!(every_other, scale3::array(&x, w.slice(s![..;2]).to_owned()).unwrap());
    let e = scale3::array(&x, w.slice(s![..;3])).unwrap_err();
    assert!(matches!(&e, Error::Shape { param, got, .. } if param == "w" && got == &[4]), "{e}");
    // A broadcast view of more elements than a tensor may hold: refused before allocating.
    let one = Array::from_elem((1, 1), 1.5f32);
    let huge = one.broadcast((1 << 21, 1 << 20)).unwrap();
    let e = softmax::array(huge).unwrap_err();
    assert!(matches!(&e, Error::Tensor { param, .. } if param == "x"), "{e}");
}
