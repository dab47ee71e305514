//! tcc kernels applied to candle tensors (feature `candle`, candle-core 0.11).
//!
//! ```text
//!  x.apply_op1_no_bwd(&KernelOp::new(softmax::kernel()))   one input  (candle's CustomOp1)
//!  a.apply_op2_no_bwd(&b, &op), a.apply_op3_no_bwd(&b, &c, &op)       (CustomOp2, CustomOp3)
//!  tcc::candle::apply(mlp::kernel(), &[&x, &w1, &b1, &w2])            any number of inputs,
//!                                                                      every output
//! ```
//!
//! Each input is read through its candle layout (any strides and offset: a transposed or narrowed
//! tensor is read in its logical row-major order); the outputs are new contiguous tensors. Shapes
//! and dtypes are checked against the kernel's parameters as for any call
//! ([`crate::Error::Shape`] and [`crate::Error::DType`], wrapped in a candle error). Dtypes: f32,
//! f16, bf16 and i32 as themselves; a `bool` parameter takes a candle `u8` tensor (non-zero is
//! true) and a `bool` output is a `u8` tensor of 0 and 1.
//!
//! Devices: a tensor on candle's CPU runs on tcc's default CPU device ([`crate::Device::default_cpu`])
//! or on the tcc device given with [`KernelOp::on`] / [`apply_on`] (the interpreter, to check a
//! kernel against tcc's oracle). On the CPU a contiguous f32, f16, bf16 or i32 input (any start
//! offset) is read in place, with no copy; a strided or u8 one is gathered into a copy first. Each
//! output is copied once into candle's storage (candle's `CpuStorage` owns typed vectors, tcc's
//! runtime byte buffers).
//!
//! With feature `candle-cuda` (and `llvm`, which compiles GPU kernels), tensors on candle's CUDA
//! device run there: on candle's context and stream, in order with candle's own work and without
//! waiting for it, each input read in place in candle's memory (a strided one, or one whose
//! start is not 16-byte aligned, is first made contiguous by candle on the GPU) and each output
//! allocated on that stream and handed to candle, with no copy. [`cuda_device`] is the tcc
//! device that serves a candle CUDA device (one each, kept for the program's life). A fault
//! inside a kernel surfaces at candle's next synchronization. Tensors on candle's Metal device,
//! and on CUDA without `candle-cuda`, are refused with [`CandleError::Device`].
//!
//! No backward pass: candle's `apply_op*` (with backprop) reports that the op has none.

mod convert;
#[cfg(feature = "candle-cuda")]
mod cuda;

#[cfg(feature = "candle-cuda")]
pub use cuda::device as cuda_device;

use std::sync::Arc;

#[cfg(feature = "candle-cuda")]
use candle_core::CudaStorage;
use candle_core::op::BackpropOp;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, Layout, Shape, Storage, Tensor};
use tcc_runtime::HostTensor;

use crate::device::Device;
use crate::error::Error;
use crate::kernel::Kernel;

/// Why a tcc kernel could not run on candle tensors (returned wrapped in a `candle_core::Error`).
#[derive(Debug, thiserror::Error)]
pub enum CandleError {
    /// The kernel itself failed: an argument of the wrong shape or dtype, or the device.
    #[error(transparent)]
    Kernel(#[from] Error),
    /// An input's dtype has no tcc dtype (u32, i64, f64, f8 ...).
    #[error(
        "kernel `{kernel}`: input {index} is a candle {dtype} tensor; tcc kernels take f32, f16, bf16, i32 and u8 (as bool)"
    )]
    UnsupportedDType {
        /// The kernel.
        kernel: String,
        /// The input's position.
        index: usize,
        /// The candle dtype.
        dtype: String,
    },
    /// An input's layout does not fit its storage (a bug in the caller's tensor, or in candle).
    #[error(
        "kernel `{kernel}`: input {index}: its layout (shape {dims:?}, strides {stride:?}, offset {offset}) reaches past its storage"
    )]
    Layout {
        /// The kernel.
        kernel: String,
        /// The input's position.
        index: usize,
        /// The layout's dimensions.
        dims: Vec<usize>,
        /// The layout's strides, in elements.
        stride: Vec<usize>,
        /// The layout's start offset, in elements.
        offset: usize,
    },
    /// A candle custom op returns one tensor: the kernel returns another number ([`apply`] returns
    /// all of them).
    #[error("kernel `{kernel}` returns {got} tensors; a candle custom op returns one (use tcc::candle::apply)")]
    OutputCount {
        /// The kernel.
        kernel: String,
        /// Its number of outputs.
        got: usize,
    },
    /// The inputs are on a device this build cannot run on, or on different devices.
    #[error("kernel `{kernel}`: {reason}")]
    Device {
        /// The kernel.
        kernel: String,
        /// What is wrong.
        reason: String,
    },
}

impl From<CandleError> for candle_core::Error {
    fn from(e: CandleError) -> candle_core::Error {
        candle_core::Error::wrap(e)
    }
}

/// A tcc kernel as a candle custom op of one, two or three inputs with one output
/// ([`CustomOp1`], [`CustomOp2`], [`CustomOp3`]). Cheap to clone.
#[derive(Debug, Clone)]
pub struct KernelOp {
    kernel: &'static Kernel,
    device: Option<Arc<Device>>,
}

impl KernelOp {
    /// The op running `kernel` (`f::kernel()` of a `kernel!` fn) on tcc's default CPU device.
    pub fn new(kernel: &'static Kernel) -> KernelOp {
        KernelOp { kernel, device: None }
    }

    /// The op running `kernel` on the tcc `device` (a CPU device of chosen threads, or the
    /// interpreter) for tensors in host memory.
    pub fn on(kernel: &'static Kernel, device: Arc<Device>) -> KernelOp {
        KernelOp { kernel, device: Some(device) }
    }

    /// The kernel.
    pub fn kernel(&self) -> &'static Kernel {
        self.kernel
    }

    /// Runs on CPU storages: the one output and its shape.
    fn cpu(&self, inputs: &[(&CpuStorage, &Layout)]) -> candle_core::Result<(CpuStorage, Shape)> {
        let device = host_device(self.device.as_deref())?;
        let output = single(self.kernel, run_host(self.kernel, device, inputs)?)?;
        Ok(convert::to_cpu_storage(self.kernel.name(), output)?)
    }

    /// Runs on CUDA storages, on candle's stream: the one output and its shape.
    #[cfg(feature = "candle-cuda")]
    fn cuda(&self, inputs: &[(&CudaStorage, &Layout)]) -> candle_core::Result<(CudaStorage, Shape)> {
        Ok(single(self.kernel, cuda::run(self.kernel, inputs)?)?)
    }
}

/// The one output of `kernel`, or [`CandleError::OutputCount`].
fn single<T>(kernel: &Kernel, mut outputs: Vec<T>) -> Result<T, CandleError> {
    match (outputs.pop(), outputs.is_empty()) {
        (Some(t), true) => Ok(t),
        (last, _) => Err(CandleError::OutputCount {
            kernel: kernel.name().to_string(),
            got: outputs.len() + usize::from(last.is_some()),
        }),
    }
}

impl CustomOp1 for KernelOp {
    fn name(&self) -> &'static str {
        self.kernel.name()
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        self.cpu(&[(s, l)])
    }

    #[cfg(feature = "candle-cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        self.cuda(&[(s, l)])
    }
}

impl CustomOp2 for KernelOp {
    fn name(&self) -> &'static str {
        self.kernel.name()
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        self.cpu(&[(s1, l1), (s2, l2)])
    }

    #[cfg(feature = "candle-cuda")]
    fn cuda_fwd(
        &self,
        s1: &CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        self.cuda(&[(s1, l1), (s2, l2)])
    }
}

impl CustomOp3 for KernelOp {
    fn name(&self) -> &'static str {
        self.kernel.name()
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        self.cpu(&[(s1, l1), (s2, l2), (s3, l3)])
    }

    #[cfg(feature = "candle-cuda")]
    fn cuda_fwd(
        &self,
        s1: &CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
        s3: &CudaStorage,
        l3: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        self.cuda(&[(s1, l1), (s2, l2), (s3, l3)])
    }
}

/// Runs `kernel` on any number of candle tensors (one per parameter, in order) and returns every
/// output as a candle tensor on the inputs' device, for kernels of more than three inputs or more
/// than one output. Tensors in host memory run on tcc's default CPU device.
pub fn apply(kernel: &Kernel, inputs: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
    apply_with(kernel, None, inputs)
}

/// [`apply`] on the tcc `device` (for tensors in host memory).
pub fn apply_on(device: &Device, kernel: &Kernel, inputs: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
    apply_with(kernel, Some(device), inputs)
}

fn apply_with(kernel: &Kernel, device: Option<&Device>, inputs: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
    let device_error = |reason: String| CandleError::Device { kernel: kernel.name().to_string(), reason };
    if let Some((i, t)) = inputs.iter().enumerate().find(|(_, t)| !t.device().same_device(inputs[0].device())) {
        return Err(device_error(format!(
            "input {i} is on {:?}, input 0 on {:?}: a kernel's inputs share one device",
            t.device().location(),
            inputs[0].device().location()
        ))
        .into());
    }
    let guards: Vec<_> = inputs.iter().map(|t| t.storage_and_layout()).collect();
    #[cfg(feature = "candle-cuda")]
    if let Some((Storage::Cuda(_), _)) = guards.first().map(|(s, l)| (&**s, l)) {
        let mut on_gpu = Vec::with_capacity(guards.len());
        for (storage, layout) in &guards {
            if let Storage::Cuda(s) = &**storage {
                on_gpu.push((s, *layout));
            }
        }
        let outputs = cuda::run(kernel, &on_gpu)?;
        drop(guards);
        return Ok(outputs
            .into_iter()
            .map(|(storage, shape)| Tensor::from_storage(Storage::Cuda(storage), shape, BackpropOp::none(), false))
            .collect());
    }
    let mut host = Vec::with_capacity(guards.len());
    for (i, (storage, layout)) in guards.iter().enumerate() {
        match &**storage {
            Storage::Cpu(s) => host.push((s, *layout)),
            other => {
                return Err(device_error(format!(
                    "input {i} is on candle's {:?}, {}",
                    other.device().location(),
                    ELSEWHERE
                ))
                .into());
            }
        }
    }
    let outputs = run_host(kernel, host_device(device)?, &host)?;
    drop(guards);
    outputs
        .into_iter()
        .map(|t| {
            let (storage, shape) = convert::to_cpu_storage(kernel.name(), t)?;
            Ok(Tensor::from_storage(Storage::Cpu(storage), shape, BackpropOp::none(), false))
        })
        .collect()
}

/// What a tensor on a device this build does not run on is told.
#[cfg(not(feature = "candle-cuda"))]
const ELSEWHERE: &str = "and this build of tcc runs candle tensors in host memory only (feature `candle-cuda` adds \
                         candle's CUDA device)";
#[cfg(feature = "candle-cuda")]
const ELSEWHERE: &str = "and tcc runs candle tensors in host memory and on candle's CUDA device only";

/// `device`, or tcc's default CPU device.
fn host_device(device: Option<&Device>) -> Result<&Device, CandleError> {
    match device {
        Some(d) => Ok(d),
        None => Ok(Device::default_cpu()?),
    }
}

/// Runs `kernel` on `device` with CPU storages as its arguments; its outputs.
fn run_host(
    kernel: &Kernel,
    device: &Device,
    inputs: &[(&CpuStorage, &Layout)],
) -> Result<Vec<HostTensor>, CandleError> {
    let args = inputs
        .iter()
        .enumerate()
        .map(|(index, &(s, l))| convert::to_arg(kernel.name(), index, s, l))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(kernel.run(device, args)?)
}
