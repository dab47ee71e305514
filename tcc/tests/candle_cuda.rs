//! Features `candle-cuda` and `llvm`, on a machine with a GPU: tcc kernels on candle tensors on
//! candle's CUDA device (candle's stream, inputs read in place, outputs handed to candle). Checked
//! against candle's own ops on the GPU and tcc's f64 interpreter on the same values; strided,
//! offset and misaligned inputs; f16, i32 and bool; chains with candle's ops that never wait;
//! one compilation per shape; outputs owned by candle; the errors.

use crate::candle::{candle_softmax, mlp, positive, product, softmax, stats};
use crate::values;
use tcc::Device;
use tcc::candle::{KernelOp, apply, apply_on, cuda_device};
use tcc::candle_core::{DType, Device as CandleDevice, Tensor};

// The CPU tests' kernels, and an f16 attention of head 64 (the GPU attention kernel's dtype).
tcc::kernel! {
    fn attention(q: f16[H, S, 64], k: f16[H, T, 64], v: f16[H, T, 64]) -> f16[H, S, 64] {
        let s = (q @ k.transpose(-1, -2)).cast::<f32>() * 0.125;
        let e = exp(s - s.max(-1, keepdim));
        (e / e.sum(-1, keepdim)).cast::<f16>() @ v
    }
}

fn gpu() -> CandleDevice {
    CandleDevice::new_cuda(0).expect("these tests need a CUDA GPU (features candle-cuda and llvm)")
}

fn random(shape: &[usize], seed: u64, device: &CandleDevice) -> Tensor {
    Tensor::from_vec(values(shape.iter().product(), seed), shape, device).unwrap()
}

/// Every element within `atol + rtol * |expected|`, shapes equal (compared on the host, in f32).
fn assert_close(actual: &Tensor, expected: &Tensor, rtol: f32, atol: f32) {
    assert_eq!(actual.dims(), expected.dims());
    let host = |t: &Tensor| {
        t.to_device(&CandleDevice::Cpu).unwrap().to_dtype(DType::F32).unwrap().flatten_all().unwrap().to_vec1::<f32>()
    };
    let (a, e) = (host(actual).unwrap(), host(expected).unwrap());
    for (i, (a, e)) in a.iter().zip(&e).enumerate() {
        assert!((a - e).abs() <= atol + rtol * e.abs(), "element {i}: {a} vs {e}");
    }
}

/// `inputs` copied to the host and run by tcc's interpreter (the oracle).
fn oracle(kernel: &tcc::Kernel, inputs: &[&Tensor]) -> Vec<Tensor> {
    let host: Vec<Tensor> = inputs.iter().map(|t| t.to_device(&CandleDevice::Cpu).unwrap()).collect();
    apply_on(&Device::interp(), kernel, &host.iter().collect::<Vec<_>>()).unwrap()
}

#[test]
fn custom_ops_run_on_candles_gpu_and_match_candle_and_the_interpreter() {
    let dev = gpu();
    let op = KernelOp::new(softmax::kernel());
    for &(n, c) in &[(1, 1), (1, 7), (3, 5), (17, 33), (64, 1000)] {
        let x = random(&[n, c], 100 * n as u64 + c as u64, &dev);
        let y = x.apply_op1_no_bwd(&op).unwrap();
        assert!(y.device().same_device(&dev) && y.is_contiguous());
        assert_close(&y, &candle_softmax(&x), 1e-5, 1e-6);
        assert_close(&y, &oracle(softmax::kernel(), &[&x])[0], 1e-5, 1e-6);
    }
    let op = KernelOp::new(product::kernel());
    for &(m, k, n) in &[(1, 1, 1), (3, 5, 7), (33, 17, 9), (128, 256, 64)] {
        let a = random(&[m, k], 10 + m as u64, &dev);
        // A transposed `b`: strided, made contiguous by candle on the GPU first.
        let b = random(&[n, k], 20 + n as u64, &dev).t().unwrap();
        let c = a.apply_op2_no_bwd(&b, &op).unwrap();
        assert_close(&c, &a.matmul(&b.contiguous().unwrap()).unwrap(), 1e-4, 1e-4);
        assert_close(&c, &oracle(product::kernel(), &[&a, &b])[0], 1e-4, 1e-4);
    }
    let op = KernelOp::new(attention::kernel());
    for &(h, s, t) in &[(1, 1, 1), (2, 5, 7), (3, 130, 77)] {
        let q = random(&[h, s, 64], 30 + s as u64, &dev).to_dtype(DType::F16).unwrap();
        let k = random(&[h, t, 64], 40 + t as u64, &dev).to_dtype(DType::F16).unwrap();
        let v = random(&[h, t, 64], 50 + t as u64, &dev).to_dtype(DType::F16).unwrap();
        let o = q.apply_op3_no_bwd(&k, &v, &op).unwrap();
        assert_eq!(o.dtype(), DType::F16);
        assert_close(&o, &oracle(attention::kernel(), &[&q, &k, &v])[0], 2e-2, 2e-2);
    }
}

#[test]
fn strided_offset_and_misaligned_inputs_are_read_through_their_layout() {
    let dev = gpu();
    let op = KernelOp::new(softmax::kernel());
    let base = random(&[6, 8], 7, &dev);
    // Rows 2..5 start 64 bytes in: read in place. Rows of 9 from row 1 start 36 bytes in:
    // not 16-byte aligned, so copied first.
    let rows = base.narrow(0, 2, 3).unwrap();
    let odd = random(&[5, 9], 9, &dev).narrow(0, 1, 3).unwrap();
    let transposed = base.t().unwrap();
    let narrowed = base.narrow(0, 2, 3).unwrap().narrow(1, 1, 5).unwrap();
    let broadcast = random(&[1, 5], 8, &dev).broadcast_as((4, 5)).unwrap();
    for x in [rows, odd, transposed, narrowed, broadcast] {
        let y = x.apply_op1_no_bwd(&op).unwrap();
        assert_close(&y, &candle_softmax(&x.contiguous().unwrap()), 1e-5, 1e-6);
        assert_close(&y, &oracle(softmax::kernel(), &[&x])[0], 1e-5, 1e-6);
    }
}

#[test]
fn apply_returns_every_output_on_the_gpu_with_its_dtype() {
    let dev = gpu();
    for &(m, f) in &[(1, 3), (5, 24), (300, 40)] {
        let x = random(&[m, 8], 60 + m as u64, &dev);
        let w: Vec<Tensor> =
            [(f, 8, 61), (f, 8, 62), (8, f, 63)].iter().map(|&(r, c, s)| random(&[r, c], s, &dev)).collect();
        let y = apply(mlp::kernel(), &[&x, &w[0], &w[1], &w[2]]).unwrap();
        assert_eq!(y.len(), 1);
        assert_close(&y[0], &oracle(mlp::kernel(), &[&x, &w[0], &w[1], &w[2]])[0], 1e-4, 1e-5);
    }
    let x = random(&[4, 7], 64, &dev);
    let outputs = apply(stats::kernel(), &[&x]).unwrap();
    assert_eq!(outputs.len(), 2);
    assert_close(&outputs[0], &x.sum(1).unwrap(), 1e-5, 1e-5);
    assert_close(&outputs[1], &x.max(1).unwrap(), 0.0, 0.0);
    let ints = Tensor::new(&[3i32, -2, 0, 7, -9], &dev).unwrap();
    let keep = Tensor::new(&[1u8, 0, 1, 2, 1], &dev).unwrap();
    let outputs = apply(positive::kernel(), &[&ints, &keep]).unwrap();
    assert_eq!(outputs[0].dtype(), DType::U8);
    assert_eq!(outputs[0].to_vec1::<u8>().unwrap(), vec![1, 0, 0, 1, 0]);
    assert_eq!(outputs[1].to_vec1::<i32>().unwrap(), vec![3, 0, 0, 7, -9]);
}

#[test]
fn kernels_chain_with_candles_ops_on_its_stream_and_compile_once_per_shape() {
    let dev = gpu();
    let CandleDevice::Cuda(cuda) = &dev else { panic!("not a CUDA device") };
    let tcc_device = cuda_device(cuda).unwrap();
    assert!(std::sync::Arc::ptr_eq(&tcc_device, &cuda_device(cuda).unwrap()));
    let op = KernelOp::new(softmax::kernel());
    let x = random(&[256, 512], 11, &dev);
    let before = tcc_device.compilations();
    // candle op -> tcc kernel -> candle op -> tcc kernel, nothing waiting in between.
    let mut y = x.clone();
    let mut expected = x.to_device(&CandleDevice::Cpu).unwrap();
    for _ in 0..20 {
        y = ((y * 3.0).unwrap().apply_op1_no_bwd(&op).unwrap() - 0.5).unwrap();
        expected = (candle_softmax(&(expected * 3.0).unwrap()) - 0.5).unwrap();
    }
    assert_close(&y, &expected, 1e-4, 1e-5);
    assert_eq!(tcc_device.compilations() - before, 1, "20 calls of one shape compile once");
}

#[test]
fn mismatched_tensors_on_the_gpu_are_errors_that_say_what_is_wrong() {
    let dev = gpu();
    let op = KernelOp::new(product::kernel());
    let e = random(&[2, 3], 80, &dev).apply_op2_no_bwd(&random(&[4, 5], 81, &dev), &op).unwrap_err().to_string();
    assert!(e.contains("parameter `b`") && e.contains("K=3"), "{e}");
    let e = random(&[2, 3], 84, &dev).to_dtype(DType::F64).unwrap().apply_op1_no_bwd(&KernelOp::new(softmax::kernel()));
    assert!(e.unwrap_err().to_string().contains("candle f64 tensor"));
    let e = apply(product::kernel(), &[&random(&[2, 3], 85, &dev), &random(&[3, 2], 86, &CandleDevice::Cpu)]);
    assert!(e.unwrap_err().to_string().contains("share one device"));
}

#[test]
fn outputs_belong_to_candle_and_inputs_may_be_freed_before_the_kernel_runs() {
    let dev = gpu();
    let op = KernelOp::new(softmax::kernel());
    let x = random(&[64, 1000], 12, &dev);
    let expected = oracle(softmax::kernel(), &[&x]).remove(0);
    // The input is dropped (freed in stream order) while the kernel may still be queued.
    let y = {
        let x = x.copy().unwrap();
        x.apply_op1_no_bwd(&op).unwrap()
    };
    // Tensors of the output's size made afterwards must get other memory: the output is candle's.
    let others: Vec<Tensor> = (0..16).map(|i| Tensor::full(i as f32 + 0.5, (64, 1000), &dev).unwrap()).collect();
    dev.synchronize().unwrap();
    assert_close(&y, &expected, 1e-5, 1e-6);
    for (i, t) in others.iter().enumerate() {
        assert!(t.flatten_all().unwrap().to_vec1::<f32>().unwrap().iter().all(|&v| v == i as f32 + 0.5));
    }
}
