//! `tcc::kernel!` end to end: kernels defined with the macro run on the CPU and match the
//! interpreter; argument errors name the parameter; concurrent first calls compile once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use tcc::ir::interp::{Tensor, run_graph};
use tcc::ir::testing::{Tolerance, compare_outputs, random_inputs};
use tcc::{Device, Error, HostTensor, f16};

tcc::kernel! {
    // A transformer MLP block in f32.
    fn mlp(x: f32[M, 16], w1: f32[16, 32], b1: f32[32], w2: f32[32, 16], b2: f32[16]) -> f32[M, 16] {
        let h = gelu(x @ w1 + b1);
        h @ w2 + b2
    }

    fn softmax(x: f32[N, D]) -> f32[N, D] {
        let e = exp(x - x.max(-1, keepdim));
        e / e.sum(-1, keepdim)
    }

    fn mlp_f16(x: f16[M, 32], w: f16[32, 64], b: f16[64]) -> f16[M, 64] {
        gelu(x @ w + b)
    }

    fn stats(x: f32[N, D]) -> (f32[N], f32[N]) {
        (x.sum(-1), x.max(-1))
    }

    fn add(a: f32[N], b: f32[N]) -> f32[N] {
        a + b
    }

    fn count_positive(x: i32[N]) -> i32[] {
        select(x > 0, 1, 0).sum(0)
    }
}

fn tolerance() -> Tolerance {
    Tolerance::default().scaled(4.0)
}

fn bindings(pairs: &[(&str, u64)]) -> tcc::ir::Bindings {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// Random inputs for `kernel`, as interpreter tensors and as host tensors.
fn inputs(kernel: &tcc::Kernel, dims: &[(&str, u64)], seed: u64) -> (Vec<Tensor>, Vec<HostTensor>) {
    let t = random_inputs(kernel.graph().unwrap(), &bindings(dims), seed).unwrap();
    let h = t.iter().map(|x| HostTensor::from_interp(x).unwrap()).collect();
    (t, h)
}

fn check(kernel: &tcc::Kernel, inputs: &[Tensor], actual: &[HostTensor]) {
    let expected = run_graph(kernel.graph().unwrap(), inputs).unwrap();
    let actual: Vec<Tensor> = actual.iter().map(HostTensor::to_interp).collect();
    compare_outputs(&expected, &actual, &tolerance()).unwrap_or_else(|m| panic!("{}: {m}", kernel.name()));
}

#[test]
fn mlp_on_the_cpu_matches_the_interpreter() {
    let (t, h) = inputs(mlp::kernel(), &[("M", 5)], 1);
    let y = mlp(&h[0], &h[1], &h[2], &h[3], &h[4]).unwrap();
    assert_eq!(y.shape(), &[5, 16]);
    check(mlp::kernel(), &t, &[y]);
}

#[test]
fn softmax_from_slices_matches_the_interpreter_and_sums_to_one() {
    let (n, d) = (3usize, 7usize);
    let data: Vec<f32> = (0..n * d).map(|i| (i as f32 * 0.37).sin() * 4.0).collect();
    let y = softmax((&data, [n, d])).unwrap();
    let rows = y.to_vec::<f32>().unwrap();
    for r in rows.chunks(d) {
        assert!((r.iter().sum::<f32>() - 1.0).abs() < 1e-5, "{r:?}");
    }
    let x = HostTensor::from_slice(vec![n, d], &data).unwrap();
    check(softmax::kernel(), &[x.to_interp()], &[y]);
}

#[test]
fn every_argument_form_is_accepted() {
    let data = vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let shape = vec![2usize, 3];
    let host = HostTensor::from_slice(vec![2, 3], &data).unwrap();
    let expected = softmax(&host).unwrap();
    let forms = [
        softmax((&data[..], [2, 3])).unwrap(),
        softmax((&data, &shape)).unwrap(),
        softmax((&data, &shape[..])).unwrap(),
        softmax((&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2usize, 3])).unwrap(),
        softmax((data.clone(), shape.clone())).unwrap(),
        softmax(host.clone()).unwrap(),
        softmax(tcc::TensorArg::slice(&data, &shape)).unwrap(),
    ];
    for y in forms {
        assert_eq!(y, expected);
    }
}

#[test]
fn f16_mlp_matches_the_interpreter() {
    let (t, h) = inputs(mlp_f16::kernel(), &[("M", 4)], 2);
    let y = mlp_f16(&h[0], &h[1], &h[2]).unwrap();
    assert_eq!(y.dtype(), tcc::DType::F16);
    check(mlp_f16::kernel(), &t, &[y]);
    // Typed slices of f16 are accepted where f16 is declared.
    let x: Vec<f16> = h[0].to_vec().unwrap();
    let again = mlp_f16((&x, [4, 32]), &h[1], &h[2]).unwrap();
    assert_eq!(again.to_vec::<f16>().unwrap().len(), 4 * 64);
}

#[test]
fn several_results_come_back_as_a_tuple() {
    let data = [1.0f32, -2.0, 3.0, 4.0, 0.5, -6.0];
    let (sum, max) = stats((&data, [2, 3])).unwrap();
    assert_eq!(sum.to_vec::<f32>().unwrap(), [2.0, -1.5]);
    assert_eq!(max.to_vec::<f32>().unwrap(), [3.0, 4.0]);
}

#[test]
fn integer_kernels_take_integer_slices() {
    let y = count_positive((&[3, -1, 0, 7, 2], [5])).unwrap();
    assert_eq!(y.to_vec::<i32>().unwrap(), [3]);
}

#[test]
fn a_shape_mismatch_names_the_parameter_and_both_shapes() {
    let x = HostTensor::zeros(tcc::DType::F32, vec![5, 16]).unwrap();
    let w1 = HostTensor::zeros(tcc::DType::F32, vec![16, 32]).unwrap();
    let b1 = HostTensor::zeros(tcc::DType::F32, vec![31]).unwrap();
    let w2 = HostTensor::zeros(tcc::DType::F32, vec![32, 16]).unwrap();
    let b2 = HostTensor::zeros(tcc::DType::F32, vec![16]).unwrap();
    let e = mlp(&x, &w1, &b1, &w2, &b2).unwrap_err();
    match &e {
        Error::Shape { kernel, param, expected, got } => {
            assert_eq!(
                (kernel.as_str(), param.as_str(), expected.as_str(), got.as_slice()),
                ("mlp", "b1", "[32]", &[31][..])
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(e.is_argument_error());
    assert_eq!(e.to_string(), "kernel `mlp`: parameter `b1` has shape [32], got [31]");
}

#[test]
fn a_shape_variable_bound_twice_differently_names_its_first_value() {
    let e = add((&[1.0f32, 2.0, 3.0], [3]), (&[1.0f32, 2.0, 3.0, 4.0], [4])).unwrap_err();
    assert_eq!(e.to_string(), "kernel `add`: parameter `b` has shape [N=3], got [4]");
}

#[test]
fn rank_and_constant_dimension_mismatches_show_the_declared_shape() {
    let e = softmax((&[0.0f32; 6], [6])).unwrap_err();
    assert!(
        matches!(&e, Error::Shape { param, expected, got, .. } if param == "x" && expected == "[N, D]" && got == &[6]),
        "{e:?}"
    );
    let a = HostTensor::zeros(tcc::DType::F32, vec![2, 3]).unwrap();
    let x = HostTensor::zeros(tcc::DType::F32, vec![4, 16]).unwrap();
    let e = mlp::on(&Device::interp(), &x, &a, &a, &a, &a).unwrap_err();
    assert_eq!(e.to_string(), "kernel `mlp`: parameter `w1` has shape [16, 32], got [2, 3]");
    let e = mlp::kernel().run(&Device::interp(), vec![tcc::TensorArg::host(&x)]).unwrap_err();
    assert_eq!(e.to_string(), "kernel `mlp` takes 5 tensors, got 1");
}

#[test]
fn a_wrong_dtype_or_data_length_names_the_parameter() {
    let x = HostTensor::zeros(tcc::DType::F16, vec![2, 3]).unwrap();
    let e = softmax(&x).unwrap_err();
    assert_eq!(e.to_string(), "kernel `softmax`: parameter `x` has dtype f32, got a f16 tensor");
    let e = softmax((&[1.0f32, 2.0, 3.0], [2, 2])).unwrap_err();
    assert!(matches!(&e, Error::Tensor { param, .. } if param == "x"), "{e:?}");
}

#[test]
fn the_interpreter_device_agrees_with_the_cpu() {
    let (_, h) = inputs(softmax::kernel(), &[("N", 4), ("D", 9)], 3);
    let cpu = softmax(&h[0]).unwrap();
    let interp = softmax::on(&Device::interp(), &h[0]).unwrap();
    compare_outputs(&[interp.to_interp()], &[cpu.to_interp()], &tolerance()).unwrap();
}

#[test]
fn concurrent_first_calls_compile_once_and_agree() {
    let device = Arc::new(Device::cpu_with_threads(1).unwrap());
    let (_, h) = inputs(mlp::kernel(), &[("M", 3)], 4);
    let h = Arc::new(h);
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (device, h) = (device.clone(), h.clone());
            std::thread::spawn(move || mlp::on(&device, &h[0], &h[1], &h[2], &h[3], &h[4]).unwrap())
        })
        .collect();
    let results: Vec<HostTensor> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(results.windows(2).all(|w| w[0] == w[1]));
    assert_eq!(device.compilations(), 1);
    // New shapes compile again, once; the old ones are still cached.
    let (_, h7) = inputs(mlp::kernel(), &[("M", 7)], 5);
    mlp::on(&device, &h7[0], &h7[1], &h7[2], &h7[3], &h7[4]).unwrap();
    mlp::on(&device, &h[0], &h[1], &h[2], &h[3], &h[4]).unwrap();
    assert_eq!(device.compilations(), 2);
    device.clear_cache();
    mlp::on(&device, &h[0], &h[1], &h[2], &h[3], &h[4]).unwrap();
    assert_eq!(device.compilations(), 3);
}

#[test]
fn generated_constants_describe_the_kernel() {
    assert_eq!(mlp::NAME, "mlp");
    assert_eq!(mlp::PARAMS, ["x", "w1", "b1", "w2", "b2"]);
    assert!(mlp::IR.starts_with("fn mlp(x: f32[M, 16]"), "{}", mlp::IR);
    assert_eq!(mlp::kernel().param_names().unwrap(), mlp::PARAMS);
    assert!(std::ptr::eq(mlp::kernel(), mlp::kernel()));
    let program = mlp::kernel().program_for(Device::default_cpu().unwrap()).unwrap().unwrap();
    assert!(!program.launches.is_empty());
    assert!(mlp::kernel().program_for(&Device::interp()).unwrap().is_none());
}

#[test]
fn invalid_embedded_ir_is_an_error_not_a_panic() {
    static BAD: tcc::Kernel = tcc::Kernel::from_ir("bad", "fn bad(x: f32[N]) -> (f32[N]) {\n  return %7\n}\n");
    let e = BAD.run(&Device::interp(), vec![tcc::TensorArg::slice(&[1.0f32], &[1])]).unwrap_err();
    assert!(matches!(e, Error::Ir { .. }), "{e:?}");
    static RENAMED: tcc::Kernel = tcc::Kernel::from_ir("other", softmax::IR);
    assert!(matches!(RENAMED.graph(), Err(Error::Ir { message, .. }) if message.contains("defines `softmax`")));
}

#[cfg(feature = "ndarray")]
#[test]
fn ndarray_arrays_and_views_are_arguments() {
    use tcc::ndarray::Array2;
    let a = Array2::<f32>::from_shape_fn((3, 4), |(i, j)| (i * 4 + j) as f32 * 0.5);
    let expected = softmax((a.as_slice().unwrap(), [3, 4])).unwrap();
    assert_eq!(softmax(&a).unwrap(), expected);
    assert_eq!(softmax(a.view()).unwrap(), expected);
    assert_eq!(softmax(a.clone()).unwrap(), expected);
    // A transposed view is copied in its logical (row-major) order.
    let t = a.t();
    let y = softmax(t).unwrap().to_ndarray::<f32>().unwrap();
    assert_eq!(y.shape(), &[4, 3]);
    let by_rows = softmax((t.iter().copied().collect::<Vec<f32>>(), [4, 3])).unwrap();
    assert_eq!(y.iter().copied().collect::<Vec<f32>>(), by_rows.to_vec::<f32>().unwrap());
}

#[cfg(not(feature = "llvm"))]
#[test]
fn cuda_without_the_llvm_feature_says_what_is_missing() {
    let e = Device::cuda(0).unwrap_err();
    assert!(
        matches!(&e, Error::DeviceUnavailable { device, reason } if device == "cuda:0" && reason.contains("`llvm`")),
        "{e}"
    );
}
