//! The GPU side of tuning: finding the local GPU (the tuner only reads what it is; candidates run
//! in workers) and, in a worker, loading one compiled candidate, validating and timing it as
//! contract §8 says: CUDA events, warm-up, the L2 cache flushed before every timed repetition
//! (a buffer twice its size is overwritten), the median of at least [`MIN_GPU_REPEATS`].

use crate::DeviceKey;
use tcc_runtime::cuda::{CudaDevice, DeviceInfo};

use super::TuningError;

/// Fewest timed repetitions of a GPU measurement.
pub const MIN_GPU_REPEATS: u32 = 20;

/// What the local GPU (device 0) is. Opens it only to read its properties; no driver, no device or
/// an unsupported one is [`TuningError::NoDevice`].
pub fn probe() -> Result<DeviceInfo, TuningError> {
    CudaDevice::open(0)
        .map(|d| d.info().clone())
        .map_err(|e| TuningError::NoDevice(format!("no CUDA GPU to tune on: {e}")))
}

/// The cache's device key of a GPU: its name, PTX target, compute capability and SM count.
pub fn device_key(info: &DeviceInfo) -> DeviceKey {
    DeviceKey {
        name: info.name.chars().filter(|c| !c.is_control()).take(200).collect(),
        arch: info.arch.name().to_string(),
        compute_capability: Some(info.compute_capability),
        sm_count: Some(info.sm_count),
    }
}

#[cfg(feature = "llvm")]
pub use measure::{compile, measure};

#[cfg(feature = "llvm")]
mod measure {
    use crate::Outcome;
    use crate::search::worker::{Check, Timing};
    use tcc_codegen::ptx::{GpuArch, PtxKernel};
    use tcc_ir::{Bindings, Kernel};
    use tcc_runtime::HostTensor;
    use tcc_runtime::cuda::{CudaDevice, DeviceBuffer};

    use super::MIN_GPU_REPEATS;
    use crate::tuning::reference::{Reference, allowance, compare};

    /// Compiles `kernel` (under its schedule) to PTX for `arch`; no GPU is touched.
    pub fn compile(kernel: &Kernel, bindings: &Bindings, arch: GpuArch) -> Result<PtxKernel, String> {
        tcc_codegen::ptx::compile_kernel(kernel, bindings, arch).map_err(|e| e.to_string())
    }

    fn output_shapes(kernel: &Kernel, bindings: &Bindings) -> Result<Vec<(tcc_ir::DType, Vec<usize>)>, String> {
        let g = &kernel.graph;
        g.outputs
            .iter()
            .map(|&o| {
                let ty = g.ty(o).ok_or("an untyped output")?;
                let dims = ty.shape.resolve(bindings).ok_or("an output with an unbound shape")?;
                Ok((ty.dtype, dims))
            })
            .collect()
    }

    /// Loads `ptx` on device 0, runs it once on the reference inputs and compares its outputs with
    /// the reference (or, when `produce` is set, returns them instead of comparing), then times it.
    pub fn measure(
        kernel: &Kernel,
        bindings: &Bindings,
        ptx: &PtxKernel,
        reference: &Reference,
        timing: &Timing,
        produce: bool,
    ) -> Result<(Outcome, Vec<HostTensor>), String> {
        let device = CudaDevice::open(0).map_err(|e| e.to_string())?;
        let loaded = device.load(ptx).map_err(|e| e.to_string())?;
        let err = |e: tcc_runtime::cuda::CudaError| e.to_string();
        let inputs = reference
            .inputs
            .iter()
            .enumerate()
            .map(|(i, t)| device.upload(t, &format!("input {i}")))
            .collect::<Result<Vec<DeviceBuffer>, _>>()
            .map_err(err)?;
        let shapes = output_shapes(kernel, bindings)?;
        let outputs = shapes
            .iter()
            .enumerate()
            .map(|(k, (dtype, dims))| {
                let bytes = dims.iter().map(|&d| d as u64).product::<u64>() * dtype.size_bytes() as u64;
                device.alloc(bytes, &format!("output {k}"))
            })
            .collect::<Result<Vec<DeviceBuffer>, _>>()
            .map_err(err)?;
        let scratch = device.alloc(ptx.ir.scratch_bytes, "scratch").map_err(err)?;
        let (ins, outs): (Vec<&DeviceBuffer>, Vec<&DeviceBuffer>) = (inputs.iter().collect(), outputs.iter().collect());
        let launch = || device.launch(&loaded, &ins, &outs, &scratch).map_err(err);
        launch()?;
        device.sync_after(&kernel.name).map_err(err)?;
        let actual = outputs
            .iter()
            .zip(&shapes)
            .enumerate()
            .map(|(k, (b, (dtype, dims)))| device.download(b, *dtype, dims.clone(), &format!("output {k}")))
            .collect::<Result<Vec<HostTensor>, _>>()
            .map_err(err)?;
        let check = if produce {
            Check::Pass
        } else {
            match compare(&reference.expected, &actual, allowance(kernel, bindings)) {
                Ok(()) => Check::Pass,
                Err(detail) => Check::Wrong(detail),
            }
        };
        if let Check::Wrong(detail) = check {
            return Ok((Outcome::Wrong { detail }, actual));
        }
        for _ in 0..timing.warmup {
            launch()?;
        }
        device.synchronize().map_err(err)?;
        let mut flush = device.alloc(device.info().l2_bytes.max(1 << 20) * 2, "the L2 flush buffer").map_err(err)?;
        let mut samples = Vec::new();
        for _ in 0..timing.repeats.max(MIN_GPU_REPEATS) {
            device.clear(&mut flush).map_err(err)?;
            let start = device.record_event().map_err(err)?;
            launch()?;
            let end = device.record_event().map_err(err)?;
            samples.push(f64::from(device.elapsed_ms(&start, &end).map_err(err)?));
        }
        device.sync_after(&kernel.name).map_err(err)?;
        samples.sort_by(f64::total_cmp);
        let median_ms = samples.get(samples.len() / 2).copied().unwrap_or(0.0);
        Ok((Outcome::Ok { time_ns: ((median_ms * 1e6).round() as u64).max(1) }, actual))
    }
}
