//! Three kernels written with `tcc::kernel!`, and a check that runs each on a device and
//! compares it with tcc's reference interpreter. `src/main.rs` is the command line around it;
//! README.md is the tutorial.

use std::time::{Duration, Instant};

use tcc::ir::interp::{Tensor, run_graph};
use tcc::{Device, HostTensor, f16};

tcc::kernel! {
    // A transformer MLP block: up-projection with bias, GELU, down-projection with bias.
    fn mlp(x: f32[M, 64], w1: f32[64, 256], b1: f32[256], w2: f32[256, 64], b2: f32[64]) -> f32[M, 64] {
        let h = gelu(x @ w1 + b1);
        h @ w2 + b2
    }

    // Numerically stable softmax over the last axis.
    fn softmax(x: f32[N, D]) -> f32[N, D] {
        let e = exp(x - x.max(-1, keepdim));
        e / e.sum(-1, keepdim)
    }

    // The MLP's first half in half precision (f16 storage; each op rounds to f16).
    fn mlp_f16(x: f16[M, 512], w: f16[512, 512], b: f16[512]) -> f16[M, 512] {
        gelu(x @ w + b)
    }
}

/// How far a device's result may be from the interpreter's: `|actual - expected| <= atol +
/// rtol * |expected|` for every element.
#[derive(Debug, Clone, Copy)]
pub struct Tolerance {
    /// Relative part.
    pub rtol: f64,
    /// Absolute part.
    pub atol: f64,
}

/// f32 kernels: fused kernels keep intermediates in f32 and use polynomial `exp`/`tanh`.
pub const F32: Tolerance = Tolerance { rtol: 1e-3, atol: 1e-4 };
/// f16 kernels: the interpreter rounds to f16 after each op, a fused kernel only at the end.
pub const F16: Tolerance = Tolerance { rtol: 2e-2, atol: 2e-3 };

/// The outcome of one kernel on one device.
#[derive(Debug)]
pub struct Report {
    /// The kernel.
    pub kernel: &'static str,
    /// The output's shape.
    pub shape: Vec<usize>,
    /// The largest absolute difference from the interpreter.
    pub max_abs_error: f64,
    /// Elements outside the tolerance.
    pub mismatches: usize,
    /// The first call (optimizes and compiles for these shapes, then runs).
    pub first_call: Duration,
    /// A second call with the same shapes (reuses the compiled program).
    pub second_call: Duration,
}

impl Report {
    /// True when every element is within tolerance.
    pub fn ok(&self) -> bool {
        self.mismatches == 0
    }
}

/// Deterministic values in [-scale, scale) (SplitMix64), so runs are reproducible.
fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            ((z >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// Compares `actual` with the interpreter's run of `kernel` on `inputs`.
fn compare(
    kernel: &tcc::Kernel,
    inputs: &[&HostTensor],
    actual: &HostTensor,
    tol: Tolerance,
) -> Result<(f64, usize), String> {
    let graph = kernel.graph().map_err(|e| e.to_string())?;
    let tensors: Vec<Tensor> = inputs.iter().map(|t| t.to_interp()).collect();
    let expected = run_graph(graph, &tensors).map_err(|e| format!("interpreter: {e}"))?;
    let expected = expected.first().ok_or("the interpreter returned nothing")?;
    if expected.shape != actual.shape() {
        return Err(format!("shape {:?}, the interpreter gives {:?}", actual.shape(), expected.shape));
    }
    let mut max_abs = 0.0f64;
    let mut bad = 0;
    for (&e, a) in expected.data.iter().zip(actual.to_f64_vec()) {
        let err = (a - e).abs();
        max_abs = max_abs.max(err);
        if err.is_nan() || err > tol.atol + tol.rtol * e.abs() {
            bad += 1;
        }
    }
    Ok((max_abs, bad))
}

/// Calls `f` twice, timing each call; returns the second result.
fn twice<T>(mut f: impl FnMut() -> Result<T, tcc::Error>) -> Result<(T, Duration, Duration), tcc::Error> {
    let start = Instant::now();
    f()?;
    let first = start.elapsed();
    let start = Instant::now();
    let out = f()?;
    Ok((out, first, start.elapsed()))
}

/// Runs the MLP block for `m` rows on `device` and checks it.
pub fn check_mlp(device: &Device, m: usize) -> Result<Report, String> {
    let x = HostTensor::from_vec(vec![m, 64], values(m * 64, 1, 1.0)).map_err(|e| e.to_string())?;
    let w1 = HostTensor::from_vec(vec![64, 256], values(64 * 256, 2, 0.125)).map_err(|e| e.to_string())?;
    let b1 = HostTensor::from_vec(vec![256], values(256, 3, 0.1)).map_err(|e| e.to_string())?;
    let w2 = HostTensor::from_vec(vec![256, 64], values(256 * 64, 4, 0.0625)).map_err(|e| e.to_string())?;
    let b2 = HostTensor::from_vec(vec![64], values(64, 5, 0.1)).map_err(|e| e.to_string())?;
    let (y, first_call, second_call) = twice(|| mlp::on(device, &x, &w1, &b1, &w2, &b2)).map_err(|e| e.to_string())?;
    let (max_abs_error, mismatches) = compare(mlp::kernel(), &[&x, &w1, &b1, &w2, &b2], &y, F32)?;
    Ok(Report { kernel: "mlp", shape: y.shape().to_vec(), max_abs_error, mismatches, first_call, second_call })
}

/// Runs softmax over an `n` x `d` matrix of plain `f32` data on `device` and checks it.
pub fn check_softmax(device: &Device, n: usize, d: usize) -> Result<Report, String> {
    // Plain slices with a shape: no tcc types needed for the inputs.
    let data = values(n * d, 6, 30.0);
    let (y, first_call, second_call) = twice(|| softmax::on(device, (&data, [n, d]))).map_err(|e| e.to_string())?;
    let x = HostTensor::from_slice(vec![n, d], &data).map_err(|e| e.to_string())?;
    let (max_abs_error, mismatches) = compare(softmax::kernel(), &[&x], &y, F32)?;
    Ok(Report { kernel: "softmax", shape: y.shape().to_vec(), max_abs_error, mismatches, first_call, second_call })
}

/// Runs the f16 MLP half for `m` rows on `device` and checks it.
pub fn check_mlp_f16(device: &Device, m: usize) -> Result<Report, String> {
    let half = |v: Vec<f32>| v.into_iter().map(f16::from_f32).collect::<Vec<f16>>();
    let x = half(values(m * 512, 7, 1.0));
    let w = half(values(512 * 512, 8, 0.044));
    let b = half(values(512, 9, 0.1));
    let (y, first_call, second_call) =
        twice(|| mlp_f16::on(device, (&x, [m, 512]), (&w, [512, 512]), (&b, [512]))).map_err(|e| e.to_string())?;
    let host = |v: &[f16], shape: Vec<usize>| HostTensor::from_slice(shape, v).map_err(|e| e.to_string());
    let inputs = [host(&x, vec![m, 512])?, host(&w, vec![512, 512])?, host(&b, vec![512])?];
    let (max_abs_error, mismatches) = compare(mlp_f16::kernel(), &[&inputs[0], &inputs[1], &inputs[2]], &y, F16)?;
    Ok(Report { kernel: "mlp_f16", shape: y.shape().to_vec(), max_abs_error, mismatches, first_call, second_call })
}

/// Every check, on `device`.
pub fn check_all(device: &Device) -> Result<Vec<Report>, String> {
    Ok(vec![check_mlp(device, 8)?, check_softmax(device, 16, 100)?, check_mlp_f16(device, 4)?])
}

/// On a CUDA `device`, with device memory: the MLP block's inputs uploaded once and its output
/// left on the GPU (`on_device`), then that output fed to softmax as a device tensor; both are
/// read back and checked against the interpreter.
pub fn check_device_buffers(device: &Device, m: usize) -> Result<Vec<Report>, String> {
    let e = |e: tcc::Error| e.to_string();
    let host = |shape: Vec<usize>, seed: u64, scale: f32| {
        let n = shape.iter().product();
        HostTensor::from_vec(shape, values(n, seed, scale)).map_err(|e| e.to_string())
    };
    let x = host(vec![m, 64], 11, 1.0)?;
    let w1 = host(vec![64, 256], 12, 0.125)?;
    let b1 = host(vec![256], 13, 0.1)?;
    let w2 = host(vec![256, 64], 14, 0.0625)?;
    let b2 = host(vec![64], 15, 0.1)?;
    let (xd, w1d, b1d, w2d, b2d) = (
        device.upload(&x).map_err(e)?,
        device.upload(&w1).map_err(e)?,
        device.upload(&b1).map_err(e)?,
        device.upload(&w2).map_err(e)?,
        device.upload(&b2).map_err(e)?,
    );
    let (y, first_call, second_call) = twice(|| mlp::on_device(device, &xd, &w1d, &b1d, &w2d, &b2d)).map_err(e)?;
    let y_host = device.download(&y).map_err(e)?;
    let (max_abs_error, mismatches) = compare(mlp::kernel(), &[&x, &w1, &b1, &w2, &b2], &y_host, F32)?;
    let mlp_report = Report {
        kernel: "mlp (device)",
        shape: y.shape().to_vec(),
        max_abs_error,
        mismatches,
        first_call,
        second_call,
    };

    // The MLP's output, still on the GPU, is softmax's input (shape variables N, D bind from it).
    let (p, first_call, second_call) = twice(|| softmax::on(device, &y)).map_err(e)?;
    let (max_abs_error, mismatches) = compare(softmax::kernel(), &[&y_host], &p, F32)?;
    let softmax_report = Report {
        kernel: "softmax (device)",
        shape: p.shape().to_vec(),
        max_abs_error,
        mismatches,
        first_call,
        second_call,
    };
    Ok(vec![mlp_report, softmax_report])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_all_ok(device: &Device) {
        for r in check_all(device).unwrap() {
            assert!(r.ok(), "{} on {}: {r:?}", r.kernel, device.name());
        }
    }

    #[test]
    fn kernels_on_the_cpu_match_the_interpreter() {
        assert_all_ok(Device::default_cpu().unwrap());
    }

    #[test]
    fn other_shapes_bind_at_call_time() {
        let cpu = Device::default_cpu().unwrap();
        assert!(check_mlp(cpu, 1).unwrap().ok());
        assert!(check_softmax(cpu, 3, 2049).unwrap().ok());
    }

    #[test]
    fn a_wrong_shape_is_an_error_naming_the_parameter() {
        let x = vec![0.0f32; 6];
        let e = softmax((&x, [6])).unwrap_err();
        assert_eq!(e.to_string(), "kernel `softmax`: parameter `x` has shape [N, D], got [6]");
    }

    #[test]
    fn device_tensors_need_a_cuda_device() {
        let cpu = Device::default_cpu().unwrap();
        let x = HostTensor::from_vec(vec![2, 64], vec![0.5f32; 128]).unwrap();
        let e = cpu.upload(&x).unwrap_err().to_string();
        assert!(e.contains("needs a CUDA device"), "{e}");
        let e = softmax::on_device(cpu, &x).unwrap_err().to_string();
        assert!(e.contains("needs a CUDA device"), "{e}");
    }

    #[cfg(feature = "gpu-tests")]
    #[test]
    fn kernels_on_the_gpu_match_the_interpreter() {
        let gpu = Device::cuda(0).unwrap_or_else(|e| panic!("feature `gpu-tests` needs a CUDA device: {e}"));
        assert_all_ok(&gpu);
    }

    #[cfg(feature = "gpu-tests")]
    #[test]
    fn device_buffers_on_the_gpu_match_the_interpreter() {
        let gpu = Device::cuda(0).unwrap_or_else(|e| panic!("feature `gpu-tests` needs a CUDA device: {e}"));
        for m in [8, 33] {
            for r in check_device_buffers(&gpu, m).unwrap() {
                assert!(r.ok(), "{} on {}: {r:?}", r.kernel, gpu.name());
            }
        }
        // A wrong shape on the device is the same error as on the host, naming the parameter.
        let x = gpu.upload(&HostTensor::from_vec(vec![6], vec![0.0f32; 6]).unwrap()).unwrap();
        let e = softmax::on_device(&gpu, &x).unwrap_err().to_string();
        assert_eq!(e, "kernel `softmax`: parameter `x` has shape [N, D], got [6]");
        // A device tensor cannot be passed to a kernel on another device.
        let e = softmax::on(Device::default_cpu().unwrap(), &x).unwrap_err().to_string();
        assert!(e.contains("argument `x` of kernel `softmax` is a tensor on cuda:0"), "{e}");
    }
}
