//! Feature `candle`: tcc kernels as candle custom ops (one, two, three inputs) and through
//! `tcc::candle::apply` (any number), on candle's CPU; checked against candle's own ops and
//! tcc's f64 interpreter; strided inputs; the errors.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use crate::values;
use tcc::Device;
use tcc::candle::{KernelOp, apply, apply_on};
use tcc::candle_core::{D, DType, Device as CandleDevice, Tensor};

tcc::kernel! {
    fn softmax(x: f32[N, C]) -> f32[N, C] {
        let e = exp(x - x.max(-1, keepdim));
        e / e.sum(-1, keepdim)
    }

    fn product(a: f32[M, K], b: f32[K, N]) -> f32[M, N] {
        a @ b
    }

    fn attention(q: f32[H, S, 16], k: f32[H, T, 16], v: f32[H, T, 16]) -> f32[H, S, 16] {
        let s = q @ k.transpose(-1, -2) * 0.25;
        let e = exp(s - s.max(-1, keepdim));
        (e / e.sum(-1, keepdim)) @ v
    }

    fn mlp(x: f32[M, 8], gate: f32[F, 8], up: f32[F, 8], down: f32[8, F]) -> f32[M, 8] {
        let g = x @ gate.t();
        (g * sigmoid(g) * (x @ up.t())) @ down.t()
    }

    fn stats(x: f32[N, C]) -> (f32[N], f32[N]) {
        (x.sum(-1), x.max(-1))
    }

    fn half_gelu(x: f16[N]) -> f16[N] {
        gelu(x)
    }

    fn positive(x: i32[N], keep: bool[N]) -> (bool[N], i32[N]) {
        (x > 0, select(keep, x, 0))
    }
}

fn random(shape: &[usize], seed: u64) -> Tensor {
    Tensor::from_vec(values(shape.iter().product(), seed), shape, &CandleDevice::Cpu).unwrap()
}

/// Every element within `atol + rtol * |expected|`, shapes equal.
fn assert_close(actual: &Tensor, expected: &Tensor, rtol: f32, atol: f32) {
    assert_eq!(actual.dims(), expected.dims());
    let a = actual.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let e = expected.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    for (i, (a, e)) in a.iter().zip(&e).enumerate() {
        assert!((a - e).abs() <= atol + rtol * e.abs(), "element {i}: {a} vs {e}");
    }
}

/// Softmax over the last axis with candle's ops (also the GPU tests' reference).
pub(crate) fn candle_softmax(x: &Tensor) -> Tensor {
    let e = x.broadcast_sub(&x.max_keepdim(D::Minus1).unwrap()).unwrap().exp().unwrap();
    e.broadcast_div(&e.sum_keepdim(D::Minus1).unwrap()).unwrap()
}

fn interp() -> Arc<Device> {
    Arc::new(Device::interp())
}

#[test]
fn custom_op1_matches_candle_and_the_interpreter() {
    let op = KernelOp::new(softmax::kernel());
    let oracle = KernelOp::on(softmax::kernel(), interp());
    for &(n, c) in &[(1, 1), (1, 7), (3, 5), (17, 33)] {
        let x = random(&[n, c], 100 * n as u64 + c as u64);
        let y = x.apply_op1_no_bwd(&op).unwrap();
        assert!(y.is_contiguous());
        assert_close(&y, &candle_softmax(&x), 1e-5, 1e-6);
        assert_close(&y, &x.apply_op1_no_bwd(&oracle).unwrap(), 1e-5, 1e-7);
    }
}

#[test]
fn strided_and_offset_tensors_are_read_through_their_layout() {
    let op = KernelOp::new(softmax::kernel());
    let base = random(&[6, 9], 7);
    let transposed = base.t().unwrap();
    let narrowed = base.narrow(0, 2, 3).unwrap().narrow(1, 1, 5).unwrap();
    // Whole rows from row 2: contiguous with a start offset (read in place).
    let rows = base.narrow(0, 2, 3).unwrap();
    assert!(rows.is_contiguous());
    let column = base.narrow(1, 4, 1).unwrap();
    let broadcast = random(&[1, 5], 8).broadcast_as((4, 5)).unwrap();
    for x in [transposed, narrowed, rows, column, broadcast] {
        let y = x.apply_op1_no_bwd(&op).unwrap();
        assert_close(&y, &candle_softmax(&x), 1e-5, 1e-6);
        assert_eq!(
            y.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            x.contiguous().unwrap().apply_op1_no_bwd(&op).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap()
        );
    }
}

#[test]
fn custom_op2_and_op3_match_candle() {
    let op = KernelOp::new(product::kernel());
    for &(m, k, n) in &[(1, 1, 1), (3, 5, 7), (33, 17, 9)] {
        let a = random(&[m, k], 10 + m as u64);
        let b = random(&[n, k], 20 + n as u64).t().unwrap();
        let c = a.apply_op2_no_bwd(&b, &op).unwrap();
        assert_close(&c, &a.matmul(&b).unwrap(), 1e-5, 1e-5);
    }
    let op = KernelOp::new(attention::kernel());
    for &(h, s, t) in &[(1, 1, 1), (2, 5, 7), (3, 33, 17)] {
        let q = random(&[h, s, 16], 30 + s as u64);
        let k = random(&[h, t, 16], 40 + t as u64);
        let v = random(&[h, t, 16], 50 + t as u64);
        let o = q.apply_op3_no_bwd(&k, &v, &op).unwrap();
        let scores = (q.matmul(&k.transpose(1, 2).unwrap()).unwrap() * 0.25).unwrap();
        let expected = candle_softmax(&scores).matmul(&v).unwrap();
        assert_close(&o, &expected, 1e-4, 1e-5);
    }
}

#[test]
fn apply_takes_any_number_of_inputs_and_returns_every_output() {
    for &(m, f) in &[(1, 3), (5, 24)] {
        let x = random(&[m, 8], 60 + m as u64);
        let gate = random(&[f, 8], 61);
        let up = random(&[f, 8], 62);
        let down = random(&[8, f], 63);
        let [y] = <[Tensor; 1]>::try_from(apply(mlp::kernel(), &[&x, &gate, &up, &down]).unwrap()).unwrap();
        let g = x.matmul(&gate.t().unwrap()).unwrap();
        let gated = (g.silu().unwrap() * x.matmul(&up.t().unwrap()).unwrap()).unwrap();
        let expected = gated.matmul(&down.t().unwrap()).unwrap();
        assert_close(&y, &expected, 1e-4, 1e-5);
        let checked = apply_on(&Device::interp(), mlp::kernel(), &[&x, &gate, &up, &down]).unwrap();
        assert_close(&y, &checked[0], 1e-4, 1e-5);
    }
    let x = random(&[4, 7], 64);
    let outputs = apply(stats::kernel(), &[&x]).unwrap();
    assert_eq!(outputs.len(), 2);
    assert_close(&outputs[0], &x.sum(1).unwrap(), 1e-5, 1e-5);
    assert_close(&outputs[1], &x.max(1).unwrap(), 0.0, 0.0);
}

#[test]
fn half_precision_integers_and_bools_keep_their_dtypes() {
    let x = random(&[9], 70).to_dtype(DType::F16).unwrap();
    let y = x.apply_op1_no_bwd(&KernelOp::new(half_gelu::kernel())).unwrap();
    assert_eq!(y.dtype(), DType::F16);
    let checked = x.apply_op1_no_bwd(&KernelOp::on(half_gelu::kernel(), interp())).unwrap();
    assert_close(&y.to_dtype(DType::F32).unwrap(), &checked.to_dtype(DType::F32).unwrap(), 1e-2, 2e-3);
    let ints = Tensor::new(&[3i32, -2, 0, 7, -9], &CandleDevice::Cpu).unwrap();
    let keep = Tensor::new(&[1u8, 0, 1, 2, 1], &CandleDevice::Cpu).unwrap();
    let outputs = apply(positive::kernel(), &[&ints, &keep]).unwrap();
    assert_eq!(outputs[0].dtype(), DType::U8);
    assert_eq!(outputs[0].to_vec1::<u8>().unwrap(), vec![1, 0, 0, 1, 0]);
    assert_eq!(outputs[1].to_vec1::<i32>().unwrap(), vec![3, 0, 0, 7, -9]);
}

#[test]
fn mismatched_tensors_are_errors_that_say_what_is_wrong() {
    let op = KernelOp::new(product::kernel());
    // A shape variable bound twice (K = 3 from `a`, 4 from `b`).
    let e = random(&[2, 3], 80).apply_op2_no_bwd(&random(&[4, 5], 81), &op).unwrap_err().to_string();
    assert!(e.contains("parameter `b`") && e.contains("K=3"), "{e}");
    // A rank the parameter does not have.
    let e = random(&[6], 82).apply_op1_no_bwd(&KernelOp::new(softmax::kernel())).unwrap_err().to_string();
    assert!(e.contains("parameter `x`"), "{e}");
    // A dtype the parameter does not have, and one tcc has not.
    let e = random(&[2, 3], 83).to_dtype(DType::F16).unwrap().apply_op1_no_bwd(&KernelOp::new(softmax::kernel()));
    assert!(e.unwrap_err().to_string().contains("dtype f32"));
    let e = random(&[2, 3], 84).to_dtype(DType::F64).unwrap().apply_op1_no_bwd(&KernelOp::new(softmax::kernel()));
    assert!(e.unwrap_err().to_string().contains("candle f64 tensor"));
    // A custom op returns one tensor: a kernel of two outputs goes through `apply`.
    let e = random(&[2, 3], 85).apply_op1_no_bwd(&KernelOp::new(stats::kernel())).unwrap_err().to_string();
    assert!(e.contains("returns 2 tensors") && e.contains("tcc::candle::apply"), "{e}");
    // Too few tensors for the kernel.
    let e = apply(mlp::kernel(), &[&random(&[1, 8], 86)]).unwrap_err().to_string();
    assert!(e.contains("takes 4 tensors, got 1"), "{e}");
}
