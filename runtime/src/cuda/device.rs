//! A CUDA device: discovery, the module cache, device buffers, copies, launches and events.

use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags, CUfunction_attribute, CUresult};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DeviceRepr, LaunchConfig,
    PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use tcc_codegen::ptx::{GpuArch, KernelIr, PtxKernel};
use tcc_ir::DType;

use super::error::CudaError;
use super::tensor_map::{self, TensorMap};
use crate::tensor::HostTensor;

/// What a device is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Driver ordinal.
    pub ordinal: usize,
    /// Marketing name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (u32, u32),
    /// Number of SMs.
    pub sm_count: u32,
    /// Total device memory in bytes.
    pub total_memory: u64,
    /// L2 cache size in bytes.
    pub l2_bytes: u64,
    /// The PTX target tcc compiles for on this device.
    pub arch: GpuArch,
}

/// Device memory of a known size: tcc's own allocation ([`CudaDevice::alloc`]), or memory another
/// owner allocated and frees, such as a tensor library's tensor ([`DeviceBuffer::foreign`]).
#[derive(Debug)]
pub struct DeviceBuffer {
    /// Dropped in `Drop`: freed if tcc owns it, let go of if not.
    pub(crate) slice: ManuallyDrop<CudaSlice<u8>>,
    bytes: u64,
    foreign: bool,
}

impl DeviceBuffer {
    /// Its size in bytes (as asked for; the allocation may be larger).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// True for memory another owner frees ([`DeviceBuffer::foreign`]).
    pub fn is_foreign(&self) -> bool {
        self.foreign
    }

    /// `bytes` of device memory at `address` that another owner allocated in `device`'s context
    /// and frees (a tensor library's tensor, read or written in place). Dropping the buffer leaves
    /// the memory alone.
    ///
    /// Kernels read and write a buffer in 16-byte vectors, so `address` must be 16-byte aligned
    /// ([`CudaError::Internal`] otherwise); an access may reach past `bytes` up to the next multiple
    /// of 16, which stays inside the driver's allocation granularity (256 bytes).
    ///
    /// # Safety
    /// `address .. address + bytes` must be memory of `device`'s context that stays allocated while
    /// the buffer lives and while any work queued with it on `device`'s stream runs (memory freed
    /// in stream order on that stream, as candle's is, satisfies this).
    pub unsafe fn foreign(device: &CudaDevice, address: u64, bytes: u64) -> Result<DeviceBuffer, CudaError> {
        if !address.is_multiple_of(16) {
            return Err(CudaError::Internal(format!(
                "device memory at {address:#x} is not 16-byte aligned; tcc kernels access memory in 16-byte vectors"
            )));
        }
        let len =
            usize::try_from(bytes).map_err(|_| CudaError::Internal(format!("{bytes} bytes do not fit memory")))?;
        // SAFETY: the caller vouches for the memory; the slice never frees it (see `Drop`).
        let slice = unsafe { device.stream.upgrade_device_ptr::<u8>(address, len) };
        Ok(DeviceBuffer { slice: ManuallyDrop::new(slice), bytes, foreign: true })
    }

    /// The memory as `bytes / size_of::<T>()` elements of `T`, handed to a new owner that frees it
    /// in stream order on the device's stream (cudarc's slice, as a tensor library keeps them).
    /// [`CudaError::Internal`] for foreign memory or a size that is not a whole number of `T`.
    pub fn into_slice<T: DeviceRepr>(self) -> Result<CudaSlice<T>, CudaError> {
        let size = std::mem::size_of::<T>() as u64;
        if self.foreign || size == 0 || !self.bytes.is_multiple_of(size) {
            return Err(CudaError::Internal(format!(
                "a buffer of {} bytes{} cannot become a slice of {}-byte elements",
                self.bytes,
                if self.foreign { " that tcc does not own" } else { "" },
                size
            )));
        }
        let len = usize::try_from(self.bytes / size)
            .map_err(|_| CudaError::Internal(format!("{} bytes do not fit memory", self.bytes)))?;
        let mut me = ManuallyDrop::new(self);
        // SAFETY: `me` is never dropped, so its slice is taken exactly once.
        let slice = unsafe { ManuallyDrop::take(&mut me.slice) };
        let stream = slice.stream().clone();
        let address = slice.leak();
        // SAFETY: `address` is tcc's allocation of at least `bytes` bytes on `stream`'s context,
        // let go of above; `T` is plain device data and every byte was written (zeroed at
        // allocation, then by the kernel), so the new slice is its only owner.
        Ok(unsafe { stream.upgrade_device_ptr::<T>(address, len) })
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: `slice` is taken here only, once.
        let slice = unsafe { ManuallyDrop::take(&mut self.slice) };
        if self.foreign {
            // Its owner frees it: only cudarc's bookkeeping goes.
            let _ = slice.leak();
        } else {
            drop(slice);
        }
    }
}

/// A kernel loaded into the device: one function per entry.
#[derive(Debug, Clone)]
pub struct LoadedKernel {
    functions: Vec<CudaFunction>,
    ir: KernelIr,
}

impl LoadedKernel {
    /// The kernel's launches, ABI sizes and LLVM IR.
    pub fn ir(&self) -> &KernelIr {
        &self.ir
    }
}

/// One CUDA device with a stream, a module cache and the launch helpers tcc needs.
pub struct CudaDevice {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    info: DeviceInfo,
    modules: Mutex<HashMap<[u8; 32], Arc<CudaModule>>>,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaDevice").field("info", &self.info).finish_non_exhaustive()
    }
}

#[cfg(not(feature = "cuda-dynamic-linking"))]
fn driver_present() -> bool {
    // SAFETY: only tries to dlopen libcuda; no CUDA call is made.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// With cudarc linked against libcuda (feature `cuda-dynamic-linking`) the program could not have
/// started without it.
#[cfg(feature = "cuda-dynamic-linking")]
fn driver_present() -> bool {
    true
}

fn attr(ctx: &CudaContext, a: CUdevice_attribute, what: &str) -> Result<u32, CudaError> {
    let v = ctx.attribute(a).map_err(|e| CudaError::driver(format!("reading {what}"), e))?;
    Ok(u32::try_from(v).unwrap_or(0))
}

impl CudaDevice {
    /// The number of CUDA devices; [`CudaError::NoDriver`] without a driver.
    pub fn count() -> Result<usize, CudaError> {
        if !driver_present() {
            return Err(CudaError::NoDriver);
        }
        match CudaContext::device_count() {
            Ok(n) => Ok(usize::try_from(n).unwrap_or(0)),
            Err(e) if e.0 == CUresult::CUDA_ERROR_NO_DEVICE => Ok(0),
            Err(e) => Err(CudaError::driver("counting devices", e)),
        }
    }

    /// Opens device `ordinal`: probes for the driver first (never panics without one), creates
    /// its context and stream, and reads what it is.
    pub fn open(ordinal: usize) -> Result<CudaDevice, CudaError> {
        let count = CudaDevice::count()?;
        if ordinal >= count {
            return Err(CudaError::NoDevice { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| CudaError::driver(format!("opening device {ordinal}"), e))?;
        let stream = ctx.default_stream();
        CudaDevice::with_stream(ordinal, ctx, stream)
    }

    /// The device of `stream`'s context, launching on `stream`: tcc's kernels then run in order
    /// with the work another library (candle) queues there, on memory it owns
    /// ([`DeviceBuffer::foreign`]).
    pub fn on_stream(stream: Arc<CudaStream>) -> Result<CudaDevice, CudaError> {
        if !driver_present() {
            return Err(CudaError::NoDriver);
        }
        let ctx = stream.context().clone();
        let ordinal = ctx.ordinal();
        CudaDevice::with_stream(ordinal, ctx, stream)
    }

    /// Reads what device `ordinal` (of context `ctx`) is; launches go to `stream`.
    fn with_stream(ordinal: usize, ctx: Arc<CudaContext>, stream: Arc<CudaStream>) -> Result<CudaDevice, CudaError> {
        let name = ctx.name().map_err(|e| CudaError::driver("reading the device name", e))?;
        let major = attr(&ctx, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability")?;
        let minor = attr(&ctx, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability")?;
        let arch = GpuArch::for_compute_capability(major, minor).ok_or(CudaError::UnsupportedDevice {
            name: name.clone(),
            major,
            minor,
        })?;
        let info = DeviceInfo {
            ordinal,
            name,
            compute_capability: (major, minor),
            sm_count: attr(&ctx, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count")?,
            total_memory: ctx.total_mem().map_err(|e| CudaError::driver("reading the memory size", e))? as u64,
            l2_bytes: u64::from(attr(&ctx, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 size")?),
            arch,
        };
        Ok(CudaDevice { ctx, stream, info, modules: Mutex::new(HashMap::new()) })
    }

    /// What the device is.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The driver context, for runtime-internal measurements (the ceilings).
    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream every launch of this device goes to.
    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Loads a compiled kernel (modules are cached by a hash of their PTX).
    pub fn load(&self, kernel: &PtxKernel) -> Result<LoadedKernel, CudaError> {
        let key = *blake3::hash(kernel.ptx.as_bytes()).as_bytes();
        let module = {
            let mut cache = self.modules.lock().map_err(|_| CudaError::Internal("module cache poisoned".into()))?;
            match cache.get(&key) {
                Some(m) => m.clone(),
                None => {
                    if kernel.ptx.contains('\0') {
                        return Err(CudaError::Internal(format!(
                            "kernel `{}`: PTX contains a NUL byte",
                            kernel.ir.name
                        )));
                    }
                    let m = self.ctx.load_module(Ptx::from_src(kernel.ptx.clone())).map_err(|source| {
                        CudaError::Launch { kernel: kernel.ir.name.clone(), entry: "(module load)".into(), source }
                    })?;
                    cache.insert(key, m.clone());
                    m
                }
            }
        };
        let functions = kernel
            .ir
            .steps
            .iter()
            .map(|s| {
                if s.entry.contains('\0') {
                    return Err(CudaError::Internal(format!("entry name {:?} contains a NUL byte", s.entry)));
                }
                let launch_error =
                    |source| CudaError::Launch { kernel: kernel.ir.name.clone(), entry: s.entry.clone(), source };
                let f = module.load_function(&s.entry).map_err(launch_error)?;
                let dynamic = s.launch.dynamic_shared_bytes;
                if dynamic > 48 * 1024 {
                    let bytes = i32::try_from(dynamic).unwrap_or(i32::MAX);
                    f.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes)
                        .map_err(launch_error)?;
                }
                Ok(f)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(LoadedKernel { functions, ir: kernel.ir.clone() })
    }

    /// Number of modules in the cache.
    pub fn cached_modules(&self) -> usize {
        self.modules.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// Allocates `bytes` of zeroed device memory for `what` (named in an out-of-memory error).
    pub fn alloc(&self, bytes: u64, what: &str) -> Result<DeviceBuffer, CudaError> {
        // Round up to 16 bytes (vector accesses) and never ask for 0.
        let len = usize::try_from(bytes.max(1).div_ceil(16) * 16)
            .map_err(|_| CudaError::OutOfMemory { what: what.to_string(), bytes })?;
        let slice = self.stream.alloc_zeros::<u8>(len).map_err(|e| CudaError::alloc(what, bytes, e))?;
        Ok(DeviceBuffer { slice: ManuallyDrop::new(slice), bytes, foreign: false })
    }

    /// Copies a host tensor to new device memory.
    pub fn upload(&self, t: &HostTensor, what: &str) -> Result<DeviceBuffer, CudaError> {
        let mut buf = self.alloc(t.bytes().len() as u64, what)?;
        if !t.bytes().is_empty() {
            let mut view = buf.slice.slice_mut(..t.bytes().len());
            self.stream
                .memcpy_htod(t.bytes(), &mut view)
                .map_err(|e| CudaError::driver(format!("copying {what} to the device"), e))?;
        }
        Ok(buf)
    }

    /// Copies device memory back as a host tensor of `dtype` and `shape`.
    pub fn download(
        &self,
        buf: &DeviceBuffer,
        dtype: DType,
        shape: Vec<usize>,
        what: &str,
    ) -> Result<HostTensor, CudaError> {
        let n: usize = shape.iter().product::<usize>() * dtype.size_bytes();
        if n as u64 > buf.bytes {
            return Err(CudaError::Internal(format!("{what}: {n} bytes asked from a buffer of {}", buf.bytes)));
        }
        let mut host = vec![0u8; n];
        if n > 0 {
            let view = buf.slice.slice(..n);
            self.stream
                .memcpy_dtoh(&view, &mut host)
                .map_err(|e| CudaError::driver(format!("copying {what} to the host"), e))?;
        }
        Ok(HostTensor::from_bytes(dtype, shape, host)?)
    }

    /// Writes zeros over a buffer (used to flush the L2 cache before timed runs).
    pub fn clear(&self, buf: &mut DeviceBuffer) -> Result<(), CudaError> {
        self.stream.memset_zeros(&mut *buf.slice).map_err(|e| CudaError::driver("clearing a buffer", e))
    }

    /// Queues every entry of `kernel` on the stream with the kernel ABI: inputs, outputs, scratch,
    /// then the entry's tensor maps, encoded here from its specs and the buffers they name.
    pub fn launch(
        &self,
        kernel: &LoadedKernel,
        inputs: &[&DeviceBuffer],
        outputs: &[&DeviceBuffer],
        scratch: &DeviceBuffer,
    ) -> Result<(), CudaError> {
        let ir = &kernel.ir;
        if inputs.len() != ir.inputs || outputs.len() != ir.outputs || scratch.bytes < ir.scratch_bytes {
            return Err(CudaError::Internal(format!(
                "kernel `{}` takes {} inputs, {} outputs and {} scratch bytes; got {}, {} and {}",
                ir.name,
                ir.inputs,
                ir.outputs,
                ir.scratch_bytes,
                inputs.len(),
                outputs.len(),
                scratch.bytes
            )));
        }
        for (step, func) in ir.steps.iter().zip(&kernel.functions) {
            let cfg = LaunchConfig {
                grid_dim: (step.launch.grid(self.info.sm_count), 1, 1),
                block_dim: (step.launch.block_threads, 1, 1),
                shared_mem_bytes: step.launch.dynamic_shared_bytes,
            };
            // Encoded first, as the builder points at them; `reads` (cudarc's read guards of the
            // mapped buffers) are dropped after the launch, so the reads are recorded after it.
            let mut maps: Vec<TensorMap> = Vec::with_capacity(step.tensor_maps.len());
            let mut reads = Vec::with_capacity(step.tensor_maps.len());
            for (j, spec) in step.tensor_maps.iter().enumerate() {
                let map_error = |reason: String| CudaError::TensorMap {
                    kernel: ir.name.clone(),
                    entry: step.entry.clone(),
                    index: j,
                    reason,
                };
                let (buf, offset) =
                    tensor_map::locate(spec.buffer, inputs, outputs, scratch, scratch.bytes).map_err(map_error)?;
                let (address, read) = buf.slice.device_ptr(&self.stream);
                reads.push(read);
                let base = address.checked_add(offset).ok_or_else(|| map_error("the address overflows".into()))?;
                let available = buf.bytes.saturating_sub(offset);
                maps.push(tensor_map::encode(spec, base, available).map_err(map_error)?);
            }
            let mut args = self.stream.launch_builder(func);
            for b in inputs.iter().chain(outputs) {
                args.arg(&*b.slice);
            }
            args.arg(&*scratch.slice);
            for map in &maps {
                args.arg(map);
            }
            // SAFETY: the entry's parameters are exactly (inputs, outputs, scratch) pointers (the
            // kernel ABI of tcc_codegen::ptx), checked in count above, then one 128-byte tensor
            // map per spec of the step (`PtxStep::tensor_maps`, in order); every buffer is at
            // least as large as the kernel's specialized shapes need (the caller allocates them
            // from the same bindings the kernel was compiled for), 16-byte aligned, and stays
            // alive until the stream is synchronized (cudarc records the uses); every tensor map
            // describes one of those buffers and lies within its size (checked by
            // `tensor_map::validate`), and `maps` outlives the launch call, which copies them.
            unsafe { args.launch(cfg) }.map_err(|source| CudaError::Launch {
                kernel: ir.name.clone(),
                entry: step.entry.clone(),
                source,
            })?;
            drop(reads);
        }
        Ok(())
    }

    /// Waits for the stream; a fault of a kernel queued before is reported naming `kernel`.
    pub fn sync_after(&self, kernel: &str) -> Result<(), CudaError> {
        self.stream.synchronize().map_err(|source| CudaError::Fault {
            kernel: kernel.to_string(),
            entry: "(one of its entries)".into(),
            source,
        })
    }

    /// Waits for all queued work.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.stream.synchronize().map_err(|e| CudaError::driver("synchronizing the stream", e))
    }

    /// Records a timing event (created with `CU_EVENT_DEFAULT`, so it can time) on the stream.
    pub fn record_event(&self) -> Result<CudaEvent, CudaError> {
        let ev = self
            .ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| CudaError::driver("creating an event", e))?;
        ev.record(&self.stream).map_err(|e| CudaError::driver("recording an event", e))?;
        Ok(ev)
    }

    /// Milliseconds between two recorded events (waits for the second).
    pub fn elapsed_ms(&self, start: &CudaEvent, end: &CudaEvent) -> Result<f32, CudaError> {
        start.elapsed_ms(end).map_err(|e| CudaError::driver("reading event times", e))
    }
}
