//! Device tensors as `kernel!` arguments, on a machine without a GPU: the checks that come before
//! any device work (counts, dtypes, shapes naming the parameter) and the errors of asking a CPU
//! for device memory. The GPU path itself runs in examples/kernel-user with `gpu-tests`.

use tcc::{Device, Error, HostTensor};

tcc::kernel! {
    fn scale(x: f32[N, D], s: f32[D]) -> f32[N, D] { x * s }
}

#[test]
fn on_device_checks_shapes_before_asking_for_a_gpu() {
    let cpu = Device::default_cpu().unwrap();
    let x = vec![1.0f32; 6];
    let e = scale::on_device(cpu, (&x, [6]), (&x, [6])).unwrap_err();
    assert!(matches!(e, Error::Shape { ref param, .. } if param == "x"), "{e}");
    let e = scale::on_device(cpu, (&x, [2, 3]), (&x[..2], [2])).unwrap_err();
    assert_eq!(e.to_string(), "kernel `scale`: parameter `s` has shape [D=3], got [2]");
    let e = scale::kernel().run_device(cpu, vec![tcc::TensorArg::slice(&x, &[2, 3])]).unwrap_err();
    assert!(matches!(e, Error::InputCount { expected: 2, got: 1, .. }), "{e}");
    let ints = HostTensor::from_vec(vec![3], vec![1i32, 2, 3]).unwrap();
    let e = scale::on_device(cpu, (&x, [2, 3]), &ints).unwrap_err();
    assert!(matches!(e, Error::DType { ref param, .. } if param == "s"), "{e}");
    let e = scale::on_device(cpu, (&x, [2, 3]), (&x[..3], [3])).unwrap_err();
    assert!(matches!(e, Error::DeviceUnavailable { .. }), "{e}");
    assert!(e.to_string().contains("needs a CUDA device"), "{e}");
}

#[test]
fn only_a_cuda_device_holds_device_tensors() {
    let t = HostTensor::from_vec(vec![2], vec![1.0f32, 2.0]).unwrap();
    for device in [Device::cpu().unwrap(), Device::interp()] {
        let e = device.upload(&t).unwrap_err();
        assert!(e.to_string().contains("needs a CUDA device"), "{}: {e}", device.name());
    }
    // The host path is unchanged.
    let y = scale::on(Device::default_cpu().unwrap(), (&[1.0f32, 2.0], [1, 2]), (&[3.0f32, 4.0], [2])).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![3.0, 8.0]);
}

#[test]
fn devices_open_by_target_as_the_command_line_names_them() {
    use tcc::ir::TargetSpec;
    let interp = tcc::Device::for_target("interp".parse().unwrap()).unwrap();
    assert_eq!(interp.kind(), tcc::DeviceKind::Interp);
    let cpu = tcc::Device::for_target(TargetSpec::BestCpu).unwrap();
    assert_eq!(cpu.kind(), tcc::DeviceKind::Cpu);
    let tier = if cfg!(feature = "llvm") { "cpu:llvm" } else { "cpu:cranelift" };
    assert_eq!(cpu.target().map(|t| t.name()), Some(tier));
    let cranelift = tcc::Device::for_target("cpu:cranelift".parse().unwrap()).unwrap();
    assert_eq!(cranelift.target().map(|t| t.name()), Some("cpu:cranelift"));
    // No GPU here (or no LLVM in this build): a clear error, never a silent fallback.
    if tcc::Device::cuda(0).is_err() {
        let err = tcc::Device::for_target("sm_90a".parse().unwrap()).unwrap_err();
        assert!(matches!(err, tcc::Error::DeviceUnavailable { .. }), "{err}");
    }
    assert!("sm_70".parse::<TargetSpec>().is_err());
}
