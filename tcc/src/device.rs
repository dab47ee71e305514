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

use tcc_ir::{Bindings, Program};
use tcc_passes::TargetModel;
use tcc_runtime::cpu::CompiledProgram;
use tcc_runtime::{CpuDevice, HostTensor, RuntimeError};

use crate::error::Error;

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
    compiled: Mutex<HashMap<(String, Bindings), CompiledCell>>,
    compilations: AtomicU64,
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
        Device { backend, compiled: Mutex::new(HashMap::new()), compilations: AtomicU64::new(0) }
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
    /// DESIGN §0 defines it. Slow; meant for checking other devices' results.
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

    /// The optimizer's model of this device, or `None` for the interpreter (which runs the
    /// unoptimized graph).
    pub(crate) fn target_model(&self) -> Option<TargetModel> {
        match &self.backend {
            Backend::Cpu(_) => Some(TargetModel::cpu_host()),
            #[cfg(feature = "llvm")]
            Backend::Cuda(d) => TargetModel::for_target_name(d.info().arch.name()),
            Backend::Interp => None,
        }
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
        inputs: &[HostTensor],
    ) -> Result<Vec<HostTensor>, Error> {
        let runtime = |source: RuntimeError| Error::Runtime { kernel: kernel.to_string(), source: Box::new(source) };
        match &self.backend {
            Backend::Cpu(d) => {
                let compiled = self.compiled(fingerprint, bindings, || {
                    let tuned = with_tuned_schedules(kernel, program, bindings);
                    d.compile(&tuned, bindings).map(Compiled::Cpu).map_err(runtime)
                })?;
                match compiled {
                    Compiled::Cpu(p) => p.run(inputs).map_err(runtime),
                    #[cfg(feature = "llvm")]
                    Compiled::Cuda(_) => Err(mixed_cache(kernel)),
                }
            }
            #[cfg(feature = "llvm")]
            Backend::Cuda(d) => {
                let cuda =
                    |source| Error::Cuda { kernel: kernel.to_string(), device: self.name(), source: Box::new(source) };
                let compiled = self.compiled(fingerprint, bindings, || {
                    d.compile(program, bindings).map(|p| Compiled::Cuda(Arc::new(p))).map_err(cuda)
                })?;
                match compiled {
                    Compiled::Cuda(p) => d.run(&p, inputs).map_err(cuda),
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

/// The lockfile a kernel call obeys: `$TCC_LOCKFILE`, else `tcc.lock` in the working directory.
pub const LOCKFILE_ENV: &str = "TCC_LOCKFILE";

/// A copy of `program` whose kernels take the locked or cached winners for `bindings` (the tuning
/// cache of `tcc tune`; never starting workers from a user's executable). Any cache or lockfile
/// problem costs only speed: it is logged and the optimizer's schedules stay.
fn with_tuned_schedules(kernel: &str, program: &Program, bindings: &Bindings) -> Program {
    let mut tuned = program.clone();
    let lock_path = std::env::var_os(LOCKFILE_ENV)
        .map(std::path::PathBuf::from)
        .or_else(|| Some(std::path::PathBuf::from("tcc.lock")).filter(|p| p.is_file()));
    let lock = match lock_path.map(|p| (tcc_autotune::Lockfile::read(&p), p)) {
        Some((Ok(lock), _)) => Some(lock),
        Some((Err(e), p)) => {
            tracing::warn!("kernel `{kernel}`: ignoring the lockfile {}: {e}", p.display());
            None
        }
        None => None,
    };
    match crate::tuning::apply_cached_schedules(&mut tuned, bindings, "cpu:cranelift", lock) {
        Ok(report) => {
            tracing::debug!("kernel `{kernel}`: {}", report.summary());
            tuned
        }
        Err(e) => {
            tracing::warn!("kernel `{kernel}`: the tuning cache is unavailable; using the optimizer's schedules: {e}");
            program.clone()
        }
    }
}
