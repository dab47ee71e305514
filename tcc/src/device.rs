//! Devices that run kernels: the CPU (cranelift tier), a CUDA GPU (with feature `llvm`), and the
//! reference interpreter, which must be asked for by name and is never a silent fallback.
//!
//! A [`Device`] owns, besides the runtime's device, the compiled programs of every kernel that ran
//! on it, keyed by (program fingerprint, shape bindings). Each key has its own lock, so threads that
//! call the same kernel with the same shapes wait for one compilation instead of each compiling,
//! and calls with other shapes or other kernels are not held up.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use tcc_ir::target::{CpuTier, Target, TargetSpec};
use tcc_ir::{Bindings, Program};
use tcc_runtime::cpu::CompiledProgram;
use tcc_runtime::{CpuDevice, HostTensor, HostView, RuntimeError};

use crate::error::Error;
use crate::pipeline::{LockSetting, Pipeline};

/// What kind of device a [`Device`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// The host CPU, through the cranelift tier.
    Cpu,
    /// A CUDA GPU, through the PTX backend.
    Cuda,
    /// The f64 reference interpreter (slow; the oracle, for checking).
    Interp,
}

/// A device to run kernels on, with its cache of compiled programs.
#[derive(Debug)]
pub struct Device {
    backend: Backend,
    /// The pipeline every kernel run here goes through (made on first use: it reads the lockfile).
    pipeline: OnceLock<Pipeline>,
    compiled: Mutex<HashMap<(String, Bindings), CompiledCell>>,
    compilations: AtomicU64,
    id: u64,
    /// Most bytes one run may hold (parameters, intermediates and outputs); `None`: no limit
    /// but the element count of contract §6.
    max_memory: Option<u64>,
    /// Whether a CUDA run waits for its kernels before returning (and names the kernel of a
    /// fault). A device on another library's stream does not: its work stays queued in order.
    #[cfg(feature = "llvm")]
    waits: bool,
}

/// Identities of devices (so a tensor is never used on a device other than its own).
static NEXT_DEVICE_ID: AtomicU64 = AtomicU64::new(1);

/// A tensor in a CUDA device's memory: made by [`Device::upload`] or returned by a kernel's
/// `on_device`, passed to kernels on the same device without copies, read back with
/// [`Device::download`]. Its dtype and shape are checked against each parameter when a kernel is
/// called, like a [`HostTensor`]'s.
#[derive(Debug)]
pub struct DeviceTensor {
    buffer: tcc_runtime::cuda::DeviceBuffer,
    dtype: tcc_ir::DType,
    shape: Vec<usize>,
    device: u64,
    device_name: String,
}

impl DeviceTensor {
    /// The element type.
    pub fn dtype(&self) -> tcc_ir::DType {
        self.dtype
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The device it lives on (as [`Device::name`] says).
    pub fn device_name(&self) -> &str {
        &self.device_name
    }

    /// The device memory.
    pub fn buffer(&self) -> &tcc_runtime::cuda::DeviceBuffer {
        &self.buffer
    }

    /// The device memory, taken (to hand to another library:
    /// [`tcc_runtime::cuda::DeviceBuffer::into_slice`]).
    pub fn into_buffer(self) -> tcc_runtime::cuda::DeviceBuffer {
        self.buffer
    }

    /// True if it lives on `device`.
    pub fn is_on(&self, device: &Device) -> bool {
        self.device == device.id
    }
}

#[derive(Debug)]
enum Backend {
    Cpu(CpuDevice),
    #[cfg(feature = "llvm")]
    Cuda(tcc_runtime::cuda::CudaDevice),
    Interp,
}

/// A program compiled for one device and one set of bindings.
#[derive(Debug, Clone)]
enum Compiled {
    Cpu(Arc<CompiledProgram>),
    #[cfg(feature = "llvm")]
    Cuda(Arc<tcc_runtime::cuda::GpuProgram>),
}

/// One compiled program, filled by the first caller that asks for it.
type CompiledCell = Arc<Mutex<Option<Compiled>>>;

/// Locks `m`, recovering the data if another thread panicked while holding it (every value kept
/// under these locks is complete whenever the lock is released).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Device {
    fn with_backend(backend: Backend) -> Device {
        Device {
            backend,
            pipeline: OnceLock::new(),
            compiled: Mutex::new(HashMap::new()),
            compilations: AtomicU64::new(0),
            id: NEXT_DEVICE_ID.fetch_add(1, Ordering::Relaxed),
            max_memory: None,
            #[cfg(feature = "llvm")]
            waits: true,
        }
    }

    /// A device launching on the stream of the runtime's CUDA device `d` (another library's
    /// stream, [`tcc_runtime::cuda::CudaDevice::on_stream`]) without waiting for its kernels: a
    /// run returns once they are queued, in order with the library's own work.
    #[cfg(all(feature = "llvm", feature = "candle-cuda"))]
    pub(crate) fn on_foreign_stream(d: tcc_runtime::cuda::CudaDevice) -> Device {
        Device { waits: false, ..Device::with_backend(Backend::Cuda(d)) }
    }

    /// The runtime's CUDA device, if this is one.
    #[cfg(all(feature = "llvm", feature = "candle-cuda"))]
    pub(crate) fn cuda_runtime(&self) -> Option<&tcc_runtime::cuda::CudaDevice> {
        match &self.backend {
            Backend::Cuda(d) => Some(d),
            _ => None,
        }
    }

    /// A tensor of this CUDA device over `buffer` (memory another library owns, borrowed for one
    /// run: the tensor must be dropped before that memory is freed).
    #[cfg(all(feature = "llvm", feature = "candle-cuda"))]
    pub(crate) fn borrowed_tensor(
        &self,
        buffer: tcc_runtime::cuda::DeviceBuffer,
        dtype: tcc_ir::DType,
        shape: Vec<usize>,
    ) -> DeviceTensor {
        self.wrap(buffer, dtype, shape)
    }

    /// This device refusing any run whose parameters, intermediates and outputs together need
    /// more than `bytes` (the library's `tcc run --max-memory`): the call returns
    /// [`Error::MemoryLimit`], naming the largest tensor and its size, before anything is
    /// compiled or allocated. On the interpreter every value of the graph counts.
    pub fn with_max_memory(mut self, bytes: u64) -> Device {
        self.max_memory = Some(bytes);
        self
    }

    /// The limit of [`Device::with_max_memory`], if any.
    pub fn max_memory(&self) -> Option<u64> {
        self.max_memory
    }

    /// The device of a target (`"cpu".parse()?`, `"cuda"`, `"sm_90a"`, `"interp"`, ...), resolved as
    /// the command line resolves it ([`crate::target::resolve`]): `cpu` is the best CPU tier built
    /// in, `cuda` (or an exact GPU target, which the GPU must compile for) CUDA device 0.
    pub fn for_target(spec: TargetSpec) -> Result<Device, Error> {
        let unavailable = |reason: String| Error::DeviceUnavailable { device: spec.to_string(), reason };
        let target = crate::target::resolve(spec).map_err(|e| unavailable(e.to_string()))?;
        crate::target::require_code_generator(target).map_err(|e| unavailable(e.to_string()))?;
        match target {
            Target::Interp => Ok(Device::interp()),
            Target::Cpu(tier) => tcc_runtime::CpuDevice::for_tier(tier, 0, false)
                .map(Device::from)
                .map_err(|e| unavailable(e.to_string())),
            Target::Gpu(arch) => {
                let device = Device::cuda(0)?;
                match device.target() {
                    Some(Target::Gpu(have)) if have == arch => Ok(device),
                    _ => Err(unavailable(format!("{} does not compile for {arch}", device.name()))),
                }
            }
        }
    }

    /// The device named by `$TCC_TARGET` (see [`Device::for_target`]), else the best CPU tier.
    pub fn from_env() -> Result<Device, Error> {
        match crate::target::from_env() {
            None => Device::for_target(TargetSpec::BestCpu),
            Some(Ok(spec)) => Device::for_target(spec),
            Some(Err(reason)) => Err(Error::DeviceUnavailable { device: "$TCC_TARGET".into(), reason }),
        }
    }

    /// The host CPU, using every core.
    pub fn cpu() -> Result<Device, Error> {
        CpuDevice::new().map(Device::from).map_err(cpu_unavailable)
    }

    /// The host CPU, using `threads` worker threads (0 = every core).
    pub fn cpu_with_threads(threads: usize) -> Result<Device, Error> {
        CpuDevice::with_threads(threads).map(Device::from).map_err(cpu_unavailable)
    }

    /// The process-wide CPU device that `call` (without a device) uses; created on first use.
    pub fn default_cpu() -> Result<&'static Device, Error> {
        static CPU: OnceLock<Result<Device, String>> = OnceLock::new();
        match CPU.get_or_init(|| CpuDevice::new().map(Device::from).map_err(|e| e.to_string())) {
            Ok(device) => Ok(device),
            Err(reason) => Err(Error::DeviceUnavailable { device: "cpu".into(), reason: reason.clone() }),
        }
    }

    /// CUDA device `ordinal`. Fails with [`Error::DeviceUnavailable`] when there is no driver, no
    /// such device, a device older than sm_80, or when this build lacks the PTX code generator
    /// (feature `llvm` of `tcc`, which needs a system LLVM 19).
    pub fn cuda(ordinal: usize) -> Result<Device, Error> {
        #[cfg(feature = "llvm")]
        {
            tcc_runtime::cuda::CudaDevice::open(ordinal)
                .map(|d| Device::with_backend(Backend::Cuda(d)))
                .map_err(|e| Error::DeviceUnavailable { device: format!("cuda:{ordinal}"), reason: e.to_string() })
        }
        #[cfg(not(feature = "llvm"))]
        {
            Err(Error::DeviceUnavailable {
                device: format!("cuda:{ordinal}"),
                reason: "this build of tcc has no PTX code generator: enable the `llvm` feature of the `tcc` \
                         crate (it needs a system LLVM 19)"
                    .into(),
            })
        }
    }

    /// The f64 reference interpreter as a device: it runs the unoptimized program exactly as
    /// contract §5 defines it. Slow; meant for checking other devices' results.
    pub fn interp() -> Device {
        Device::with_backend(Backend::Interp)
    }

    /// What kind of device this is.
    pub fn kind(&self) -> DeviceKind {
        match self.backend {
            Backend::Cpu(_) => DeviceKind::Cpu,
            #[cfg(feature = "llvm")]
            Backend::Cuda(_) => DeviceKind::Cuda,
            Backend::Interp => DeviceKind::Interp,
        }
    }

    /// A short description: `cpu (2 threads)`, `cuda:0 (NVIDIA H100 80GB HBM3, sm_90a)`, `interp`.
    pub fn name(&self) -> String {
        match &self.backend {
            Backend::Cpu(d) => format!("cpu ({} threads)", d.threads()),
            #[cfg(feature = "llvm")]
            Backend::Cuda(d) => format!("cuda:{} ({}, {})", d.info().ordinal, d.info().name, d.info().arch.name()),
            Backend::Interp => "interp".into(),
        }
    }

    /// How many times a program was compiled on this device (one per kernel and set of shapes,
    /// however many threads asked at once).
    pub fn compilations(&self) -> u64 {
        self.compilations.load(Ordering::Relaxed)
    }

    /// Drops every compiled program (the next call of each kernel compiles again).
    pub fn clear_cache(&self) {
        lock(&self.compiled).clear();
        if let Backend::Cpu(d) = &self.backend {
            d.clear_cache();
        }
    }

    /// The target this device compiles for, or `None` for the interpreter (which runs the
    /// unoptimized graph).
    pub fn target(&self) -> Option<Target> {
        match &self.backend {
            Backend::Cpu(d) => Some(match d.tier() {
                tcc_ir::Tier::LlvmCpu => Target::Cpu(CpuTier::Llvm),
                _ => Target::Cpu(CpuTier::Cranelift),
            }),
            #[cfg(feature = "llvm")]
            Backend::Cuda(d) => Some(Target::Gpu(d.info().arch)),
            Backend::Interp => None,
        }
    }

    /// The pipeline kernels run here go through: this device's target, the lockfile of
    /// `$TCC_LOCKFILE` (else `./tcc.lock`), and this device's tuning records. `None` for the
    /// interpreter.
    pub(crate) fn pipeline(&self) -> Option<&Pipeline> {
        let target = self.target()?;
        Some(self.pipeline.get_or_init(|| {
            let lock = LockSetting::FromEnvironment;
            #[cfg(feature = "llvm")]
            if let Backend::Cuda(d) = &self.backend {
                let key = crate::tuning::gpu::device_key(d.info());
                if let Ok(p) = Pipeline::for_device(target, &lock, key) {
                    return p;
                }
            }
            // Reading the lockfile from the environment never fails (an unreadable one is a warning).
            Pipeline::new(target, &lock).unwrap_or_else(|_| Pipeline::untuned(target))
        }))
    }

    /// The program compiled for `bindings`: from this device's cache, or compiled now while
    /// every other caller asking for the same key waits.
    fn compiled(
        &self,
        fingerprint: &str,
        bindings: &Bindings,
        compile: impl FnOnce() -> Result<Compiled, Error>,
    ) -> Result<Compiled, Error> {
        let cell = lock(&self.compiled).entry((fingerprint.to_string(), bindings.clone())).or_default().clone();
        let mut slot = lock(&cell);
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        self.compilations.fetch_add(1, Ordering::Relaxed);
        let c = compile()?;
        *slot = Some(c.clone());
        Ok(c)
    }

    /// Runs an optimized `program` (identified by `fingerprint`) on inputs whose shapes bound
    /// `bindings`, compiling it first if this device has not yet done so for these bindings.
    pub(crate) fn execute(
        &self,
        kernel: &str,
        program: &Program,
        fingerprint: &str,
        bindings: &Bindings,
        inputs: &[HostView<'_>],
    ) -> Result<Vec<HostTensor>, Error> {
        let runtime = |source: RuntimeError| Error::Runtime { kernel: kernel.to_string(), source: Box::new(source) };
        match &self.backend {
            Backend::Cpu(d) => {
                let compiled = self.compiled(fingerprint, bindings, || {
                    let tuned = self.with_chosen_schedules(program, bindings);
                    d.compile(&tuned, bindings).map(Compiled::Cpu).map_err(runtime)
                })?;
                match compiled {
                    Compiled::Cpu(p) => p.run_views(inputs).map_err(runtime),
                    #[cfg(feature = "llvm")]
                    Compiled::Cuda(_) => Err(mixed_cache(kernel)),
                }
            }
            #[cfg(feature = "llvm")]
            Backend::Cuda(d) => {
                let cuda =
                    |source| Error::Cuda { kernel: kernel.to_string(), device: self.name(), source: Box::new(source) };
                let compiled =
                    self.compiled(fingerprint, bindings, || compile_cuda(self, d, kernel, program, bindings))?;
                match compiled {
                    Compiled::Cuda(p) => {
                        // The CUDA runtime uploads from tensors of its own.
                        let owned: Vec<HostTensor> = inputs.iter().map(HostView::to_tensor).collect();
                        d.run(&p, &owned).map_err(cuda)
                    }
                    Compiled::Cpu(_) => Err(mixed_cache(kernel)),
                }
            }
            Backend::Interp => Err(Error::Internal {
                kernel: kernel.to_string(),
                message: "the interpreter runs graphs, not compiled programs".into(),
            }),
        }
    }
}

impl Device {
    fn not_cuda(&self, what: &str) -> Error {
        Error::DeviceUnavailable {
            device: self.name(),
            reason: format!("{what} needs a CUDA device (`tcc::Device::cuda`, feature `llvm`)"),
        }
    }

    /// `Ok` on a CUDA device; else the error that `what` needs one.
    pub(crate) fn require_cuda(&self, what: &str) -> Result<(), Error> {
        match &self.backend {
            #[cfg(feature = "llvm")]
            Backend::Cuda(_) => Ok(()),
            _ => Err(self.not_cuda(what)),
        }
    }

    /// Copies a host tensor into this CUDA device's memory.
    pub fn upload(&self, tensor: &HostTensor) -> Result<DeviceTensor, Error> {
        match &self.backend {
            #[cfg(feature = "llvm")]
            Backend::Cuda(d) => {
                let buffer = d.upload(tensor, "an uploaded tensor").map_err(|e| self.cuda_error("upload", e))?;
                Ok(self.wrap(buffer, tensor.dtype(), tensor.shape().to_vec()))
            }
            _ => {
                let _ = tensor;
                Err(self.not_cuda("a device tensor"))
            }
        }
    }

    /// Copies a device tensor of this device back to the host.
    pub fn download(&self, tensor: &DeviceTensor) -> Result<HostTensor, Error> {
        if !tensor.is_on(self) {
            return Err(Error::DeviceUnavailable {
                device: self.name(),
                reason: format!("the tensor lives on {}, not on this device", tensor.device_name),
            });
        }
        match &self.backend {
            #[cfg(feature = "llvm")]
            Backend::Cuda(d) => d
                .download(&tensor.buffer, tensor.dtype, tensor.shape.clone(), "a device tensor")
                .map_err(|e| self.cuda_error("download", e)),
            _ => Err(self.not_cuda("a device tensor")),
        }
    }

    #[cfg(feature = "llvm")]
    fn wrap(&self, buffer: tcc_runtime::cuda::DeviceBuffer, dtype: tcc_ir::DType, shape: Vec<usize>) -> DeviceTensor {
        DeviceTensor { buffer, dtype, shape, device: self.id, device_name: self.name() }
    }

    #[cfg(feature = "llvm")]
    fn cuda_error(&self, kernel: &str, e: tcc_runtime::cuda::CudaError) -> Error {
        Error::Cuda { kernel: kernel.to_string(), device: self.name(), source: Box::new(e) }
    }

    /// Runs an optimized `program` on this CUDA device with arguments already bound to
    /// `bindings`: host ones are uploaded, device ones used in place; the outputs stay in device
    /// memory.
    pub(crate) fn execute_resident(
        &self,
        kernel: &str,
        program: &Program,
        fingerprint: &str,
        bindings: &Bindings,
        args: Vec<ResidentArg<'_>>,
    ) -> Result<Vec<DeviceTensor>, Error> {
        match &self.backend {
            #[cfg(feature = "llvm")]
            Backend::Cuda(d) => self.run_resident(d, kernel, program, fingerprint, bindings, args),
            _ => {
                let _ = (program, fingerprint, bindings, args);
                Err(self.not_cuda(&format!("kernel `{kernel}` with outputs in device memory")))
            }
        }
    }

    #[cfg(feature = "llvm")]
    fn run_resident(
        &self,
        d: &tcc_runtime::cuda::CudaDevice,
        kernel: &str,
        program: &Program,
        fingerprint: &str,
        bindings: &Bindings,
        args: Vec<ResidentArg<'_>>,
    ) -> Result<Vec<DeviceTensor>, Error> {
        use tcc_ir::ValueRef;
        use tcc_runtime::cuda::DeviceBuffer;
        let cuda = |e| self.cuda_error(kernel, e);
        let compiled = self.compiled(fingerprint, bindings, || compile_cuda(self, d, kernel, program, bindings))?;
        let Compiled::Cuda(gp) = compiled else { return Err(mixed_cache(kernel)) };
        // Host arguments are uploaded; device ones are borrowed.
        let mut uploaded: Vec<Option<DeviceBuffer>> = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            uploaded.push(match a {
                ResidentArg::Host(t) => Some(d.upload(t, &format!("parameter {i}")).map_err(cuda)?),
                ResidentArg::Device(_) => None,
            });
        }
        let dims = |ty: &tcc_ir::TensorType, what: &str| {
            ty.shape.resolve(bindings).ok_or_else(|| Error::Internal {
                kernel: kernel.to_string(),
                message: format!("{what} has an unbound shape {}", ty.shape),
            })
        };
        let mut buffers: Vec<Option<DeviceBuffer>> = Vec::with_capacity(program.buffers.len());
        for (b, ty) in program.buffers.iter().enumerate() {
            let shape = dims(ty, &format!("buffer {b}"))?;
            let bytes = shape.iter().map(|&x| x as u64).product::<u64>() * ty.dtype.size_bytes() as u64;
            buffers.push(Some(d.alloc(bytes, &format!("buffer {b} of kernel `{kernel}`")).map_err(cuda)?));
        }
        let scratch_bytes = gp.kernels().iter().map(|k| k.ir().scratch_bytes).max().unwrap_or(0);
        let scratch = d.alloc(scratch_bytes, &format!("the scratch memory of kernel `{kernel}`")).map_err(cuda)?;
        {
            let value = |v: ValueRef| -> Result<&DeviceBuffer, Error> {
                let found = match v {
                    ValueRef::Param(i) => match args.get(i) {
                        Some(ResidentArg::Device(t)) => Some(&t.buffer),
                        Some(ResidentArg::Host(_)) => uploaded.get(i).and_then(Option::as_ref),
                        None => None,
                    },
                    ValueRef::Buffer(b) => buffers.get(b).and_then(Option::as_ref),
                };
                found.ok_or_else(|| Error::Internal {
                    kernel: kernel.to_string(),
                    message: format!("{v:?} does not exist"),
                })
            };
            for (launch, loaded) in program.launches.iter().zip(gp.kernels()) {
                let ins = launch.inputs.iter().map(|&v| value(v)).collect::<Result<Vec<_>, _>>()?;
                let outs = launch.outputs.iter().map(|&v| value(v)).collect::<Result<Vec<_>, _>>()?;
                d.launch(loaded, &ins, &outs, &scratch).map_err(cuda)?;
            }
        }
        if self.waits {
            d.sync_after(kernel).map_err(cuda)?;
        }
        let mut outputs = Vec::with_capacity(program.outputs.len());
        for (k, &v) in program.outputs.iter().enumerate() {
            let (ty, taken) = match v {
                ValueRef::Buffer(b) => (program.buffers.get(b), buffers.get_mut(b).and_then(Option::take)),
                ValueRef::Param(i) => (program.params.get(i).map(|p| &p.ty), None),
            };
            let ty = ty.ok_or_else(|| Error::Internal {
                kernel: kernel.to_string(),
                message: format!("output {k} names {v:?}, which does not exist"),
            })?;
            let shape = dims(ty, &format!("output {k}"))?;
            let buffer = match taken {
                Some(b) => b,
                // An output that is a parameter, or a buffer already returned: a copy through the host.
                None => {
                    let source = match v {
                        ValueRef::Param(i) => match args.get(i) {
                            Some(ResidentArg::Device(t)) => Some(&t.buffer),
                            _ => uploaded.get(i).and_then(Option::as_ref),
                        },
                        ValueRef::Buffer(_) => outputs
                            .iter()
                            .zip(&program.outputs)
                            .find(|&(_, &w)| w == v)
                            .map(|(t, _): (&DeviceTensor, _)| &t.buffer),
                    };
                    let source = source.ok_or_else(|| Error::Internal {
                        kernel: kernel.to_string(),
                        message: format!("output {k}: no memory for {v:?}"),
                    })?;
                    let host = d.download(source, ty.dtype, shape.clone(), &format!("output {k}")).map_err(cuda)?;
                    d.upload(&host, &format!("output {k}")).map_err(cuda)?
                }
            };
            outputs.push(self.wrap(buffer, ty.dtype, shape));
        }
        Ok(outputs)
    }
}

/// One argument of [`Device::execute_resident`].
#[derive(Debug)]
pub(crate) enum ResidentArg<'a> {
    /// In host memory (uploaded for the call).
    Host(HostTensor),
    /// Already in this device's memory.
    Device(&'a DeviceTensor),
}

impl ResidentArg<'_> {
    /// Its dtype and shape.
    pub(crate) fn dtype_shape(&self) -> (tcc_ir::DType, &[usize]) {
        match self {
            ResidentArg::Host(t) => (t.dtype(), t.shape()),
            ResidentArg::Device(t) => (t.dtype, &t.shape),
        }
    }
}

/// Compiles `program` for the GPU `d` (the backend of `device`) with its kernels' locked or cached
/// schedules for this GPU.
#[cfg(feature = "llvm")]
fn compile_cuda(
    device: &Device,
    d: &tcc_runtime::cuda::CudaDevice,
    kernel: &str,
    program: &Program,
    bindings: &Bindings,
) -> Result<Compiled, Error> {
    let tuned = device.with_chosen_schedules(program, bindings);
    d.compile(&tuned, bindings).map(|p| Compiled::Cuda(Arc::new(p))).map_err(|e| device.cuda_error(kernel, e))
}

#[cfg(feature = "llvm")]
fn mixed_cache(kernel: &str) -> Error {
    Error::Internal {
        kernel: kernel.to_string(),
        message: "a device cached a program compiled for another device".into(),
    }
}

fn cpu_unavailable(e: RuntimeError) -> Error {
    Error::DeviceUnavailable { device: "cpu".into(), reason: e.to_string() }
}

impl From<CpuDevice> for Device {
    /// A device running on `cpu` (for example one built with [`CpuDevice::with_threads`]).
    fn from(cpu: CpuDevice) -> Device {
        Device::with_backend(Backend::Cpu(cpu))
    }
}

impl Device {
    /// A copy of `program` whose kernels take the schedules the pipeline chooses for `bindings`
    /// (locked or cached winners of `tcc tune`; never starting workers from a user's executable).
    fn with_chosen_schedules(&self, program: &Program, bindings: &Bindings) -> Program {
        let mut chosen = program.clone();
        if let Some(pipeline) = self.pipeline() {
            let plans = pipeline.choose_schedules(&mut chosen, bindings);
            for p in &plans {
                tracing::debug!("kernel `{}`: {} ({})", p.kernel, p.schedule, p.source);
            }
        }
        chosen
    }
}
