//! candle tensors on candle's CUDA device (feature `candle-cuda`; compiling the kernels needs
//! feature `llvm`). A kernel runs on candle's own stream, in order with candle's work: inputs are
//! read in place in candle's memory, outputs are allocated on that stream and handed to candle
//! (no copies, no host round trip, no synchronization). One tcc [`Device`] serves each candle
//! CUDA device, so a kernel compiles once per device and shapes.

use candle_core::{CudaDevice as CandleCuda, CudaStorage, Layout, Shape};

use super::CandleError;
use crate::device::Device;
use crate::kernel::Kernel;

/// Runs `kernel` with the CUDA storages `inputs` (one per parameter, with their layouts) as its
/// arguments, on candle's stream; its outputs as candle storages and shapes.
pub(super) fn run(
    kernel: &Kernel,
    inputs: &[(&CudaStorage, &Layout)],
) -> Result<Vec<(CudaStorage, Shape)>, CandleError> {
    imp::run(kernel, inputs)
}

/// The tcc device running kernels on `candle`'s CUDA device: its context and stream. Made on
/// first use and kept for the program's life, one per candle device (its compiled kernels with
/// it). [`CandleError::Device`] when this build compiles no GPU kernels (feature `llvm`) or the
/// GPU is not one tcc compiles for.
pub fn device(candle: &CandleCuda) -> Result<std::sync::Arc<Device>, CandleError> {
    imp::device(candle)
}

#[cfg(not(feature = "llvm"))]
mod imp {
    use super::*;

    const NO_COMPILER: &str = "this build of tcc compiles no GPU kernels: enable tcc's `llvm` feature (it needs a \
                               system LLVM 19) to run kernels on candle's CUDA device";

    pub(super) fn run(
        kernel: &Kernel,
        _: &[(&CudaStorage, &Layout)],
    ) -> Result<Vec<(CudaStorage, Shape)>, CandleError> {
        Err(CandleError::Device { kernel: kernel.name().to_string(), reason: NO_COMPILER.into() })
    }

    pub(super) fn device(_: &CandleCuda) -> Result<std::sync::Arc<Device>, CandleError> {
        Err(CandleError::Device { kernel: "(none)".into(), reason: NO_COMPILER.into() })
    }
}

#[cfg(feature = "llvm")]
mod imp {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, PoisonError};

    use candle_core::backend::{BackendDevice, BackendStorage};
    use candle_core::cuda_backend::cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DeviceRepr, SyncOnDrop};
    use candle_core::cuda_backend::{CudaStorageSlice, DeviceId};
    use tcc_runtime::cuda::{CudaDevice, DeviceBuffer};

    use super::*;
    use crate::device::DeviceTensor;
    use crate::error::Error;
    use crate::kernel::TensorArg;

    /// One tcc device per candle CUDA device, for the program's life.
    static DEVICES: Mutex<Option<HashMap<DeviceId, Arc<Device>>>> = Mutex::new(None);

    pub(super) fn device(candle: &CandleCuda) -> Result<Arc<Device>, CandleError> {
        let mut devices = DEVICES.lock().unwrap_or_else(PoisonError::into_inner);
        let devices = devices.get_or_insert_with(HashMap::new);
        if let Some(d) = devices.get(&candle.id()) {
            return Ok(d.clone());
        }
        let runtime = CudaDevice::on_stream(candle.cuda_stream()).map_err(|e| CandleError::Device {
            kernel: "(none)".into(),
            reason: format!("candle's CUDA device cannot run tcc kernels: {e}"),
        })?;
        let d = Arc::new(Device::on_foreign_stream(runtime));
        devices.insert(candle.id(), d.clone());
        Ok(d)
    }

    /// One input as the kernel reads it: candle's memory in place, or a contiguous copy that
    /// candle made on its stream (for a strided layout or a start not 16-byte aligned).
    struct Input<'s> {
        storage: Held<'s>,
        /// Elements before the first one read.
        offset: usize,
        dims: Vec<usize>,
    }

    /// candle's storage of an input, or the contiguous copy of it this call owns.
    enum Held<'s> {
        InPlace(&'s CudaStorage),
        Copy(CudaStorage),
    }

    impl Held<'_> {
        fn storage(&self) -> &CudaStorage {
            match self {
                Held::InPlace(s) => s,
                Held::Copy(s) => s,
            }
        }
    }

    pub(super) fn run(
        kernel: &Kernel,
        inputs: &[(&CudaStorage, &Layout)],
    ) -> Result<Vec<(CudaStorage, Shape)>, CandleError> {
        let name = kernel.name();
        let device_error = |reason: String| CandleError::Device { kernel: name.to_string(), reason };
        let Some((first, _)) = inputs.first() else {
            return Err(device_error("a kernel with no inputs has no candle device to run on".into()));
        };
        let candle = first.device.clone();
        if let Some(i) = inputs.iter().position(|(s, _)| s.device.id() != candle.id()) {
            return Err(device_error(format!("input {i} is on another CUDA device than input 0")));
        }
        let tcc = device(&candle).map_err(|e| match e {
            CandleError::Device { reason, .. } => device_error(reason),
            other => other,
        })?;
        let runtime = tcc.cuda_runtime().ok_or_else(|| device_error("not a CUDA device".into()))?;
        let held = inputs
            .iter()
            .enumerate()
            .map(|(index, &(s, l))| readable(name, index, s, l))
            .collect::<Result<Vec<_>, _>>()?;
        // Pointers into candle's memory; the guards record the reads on candle's stream when they
        // drop, after the kernel is queued.
        let stream = candle.cuda_stream();
        let mut guards = Vec::with_capacity(held.len());
        let mut tensors: Vec<DeviceTensor> = Vec::with_capacity(held.len());
        for (index, input) in held.iter().enumerate() {
            let (dtype, elem, address, len, guard) = address_of(name, index, input.storage.storage(), &stream)?;
            guards.push(guard);
            let count: usize = input.dims.iter().product();
            if input.offset.checked_add(count).is_none_or(|end| end > len) {
                let l = inputs[index].1;
                return Err(CandleError::Layout {
                    kernel: name.to_string(),
                    index,
                    dims: l.dims().to_vec(),
                    stride: l.stride().to_vec(),
                    offset: l.start_offset(),
                });
            }
            let start = address + (input.offset * elem) as u64;
            // SAFETY: `start .. start + count * elem` lies in candle's allocation of this input
            // (checked just above), which `held` keeps alive until this function
            // returns; candle frees memory in stream order on the stream the kernel is queued on.
            let buffer = unsafe { DeviceBuffer::foreign(runtime, start, (count * elem) as u64) }
                .map_err(|e| cuda_error(name, &tcc, e))?;
            tensors.push(tcc.borrowed_tensor(buffer, dtype, input.dims.clone()));
        }
        let outputs = kernel.run_device(&tcc, tensors.iter().map(TensorArg::device).collect())?;
        drop(guards);
        drop(tensors);
        outputs
            .into_iter()
            .map(|t| {
                let shape = Shape::from(t.shape().to_vec());
                let dtype = t.dtype();
                let buffer = t.into_buffer();
                let storage = match dtype {
                    tcc_ir::DType::F32 => wrap::<f32>(buffer, &candle),
                    tcc_ir::DType::F16 => wrap::<half::f16>(buffer, &candle),
                    tcc_ir::DType::BF16 => wrap::<half::bf16>(buffer, &candle),
                    tcc_ir::DType::I32 => wrap::<i32>(buffer, &candle),
                    tcc_ir::DType::Bool => wrap::<u8>(buffer, &candle),
                }
                .map_err(|e| cuda_error(name, &tcc, e))?;
                Ok((storage, shape))
            })
            .collect()
    }

    /// Input `index` as the kernel reads it: in place when its layout is contiguous from a
    /// 16-byte aligned start, else a contiguous copy made by candle on its stream.
    fn readable<'s>(kernel: &str, index: usize, s: &'s CudaStorage, l: &Layout) -> Result<Input<'s>, CandleError> {
        let dims = l.dims().to_vec();
        let elem = s.dtype().size_in_bytes();
        if let Some((start, _)) = l.contiguous_offsets()
            && (start * elem).is_multiple_of(16)
        {
            return Ok(Input { storage: Held::InPlace(s), offset: start, dims });
        }
        let candle_error = |e: candle_core::Error| CandleError::Device {
            kernel: kernel.to_string(),
            reason: format!("copying input {index} into a contiguous tensor: {e}"),
        };
        let shape = Shape::from(dims.clone());
        let mut copy = s.device.zeros_impl(&shape, s.dtype()).map_err(candle_error)?;
        s.copy_strided_src(&mut copy, 0, l).map_err(candle_error)?;
        Ok(Input { storage: Held::Copy(copy), offset: 0, dims })
    }

    /// The tcc dtype, the element size, the device address, the length in elements and the read
    /// guard of `storage`.
    fn address_of<'a>(
        kernel: &str,
        index: usize,
        storage: &'a CudaStorage,
        stream: &'a CudaStream,
    ) -> Result<(tcc_ir::DType, usize, u64, usize, SyncOnDrop<'a>), CandleError> {
        let (dtype, elem, len, (address, guard)) = match &storage.slice {
            CudaStorageSlice::F32(s) => (tcc_ir::DType::F32, 4, s.len(), s.device_ptr(stream)),
            CudaStorageSlice::F16(s) => (tcc_ir::DType::F16, 2, s.len(), s.device_ptr(stream)),
            CudaStorageSlice::BF16(s) => (tcc_ir::DType::BF16, 2, s.len(), s.device_ptr(stream)),
            CudaStorageSlice::I32(s) => (tcc_ir::DType::I32, 4, s.len(), s.device_ptr(stream)),
            // tcc reads a bool as a byte, non-zero being true: candle's u8 as it is.
            CudaStorageSlice::U8(s) => (tcc_ir::DType::Bool, 1, s.len(), s.device_ptr(stream)),
            _ => {
                return Err(CandleError::UnsupportedDType {
                    kernel: kernel.to_string(),
                    index,
                    dtype: storage.dtype().as_str().to_string(),
                });
            }
        };
        Ok((dtype, elem, address, len, guard))
    }

    /// An output buffer as a candle storage of `T` on `candle`'s device (candle frees it).
    fn wrap<T: DeviceRepr + candle_core::cuda_backend::CudaDType>(
        buffer: DeviceBuffer,
        candle: &CandleCuda,
    ) -> Result<CudaStorage, tcc_runtime::cuda::CudaError> {
        let slice: CudaSlice<T> = buffer.into_slice()?;
        Ok(CudaStorage::wrap_cuda_slice(slice, candle.clone()))
    }

    fn cuda_error(kernel: &str, device: &Device, e: tcc_runtime::cuda::CudaError) -> CandleError {
        CandleError::Kernel(Error::Cuda { kernel: kernel.to_string(), device: device.name(), source: Box::new(e) })
    }
}
