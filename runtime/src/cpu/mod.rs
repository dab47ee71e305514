//! The CPU device: compiles programs with the cranelift tier, caches them, and runs their
//! kernels on a thread pool, splitting each kernel's rows across threads.

pub mod kernel;
mod spare;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use tcc_codegen::{Backend, BufKind, CraneliftBackend, LowerOptions};
use tcc_ir::{Bindings, Program, TensorType, ValueRef};

use crate::bind::{bind_inputs, bind_views, describe};
use crate::error::RuntimeError;
use crate::tensor::{HostTensor, HostView};
use kernel::LoadedKernel;
use spare::Spares;

/// Below this many innermost iterations per thread, a kernel runs on fewer threads.
pub const MIN_WORK_PER_THREAD: u64 = 1 << 15;

/// One launch of a compiled program.
#[derive(Debug)]
struct CompiledLaunch {
    kernel: LoadedKernel,
    inputs: Vec<ValueRef>,
    outputs: Vec<ValueRef>,
    threads: usize,
    /// Scratch and call-local buffers kept between runs.
    spares: Spares,
}

/// A program compiled for one set of shape bindings.
#[derive(Debug)]
pub struct CompiledProgram {
    name: String,
    params: Vec<tcc_ir::Param>,
    bindings: Bindings,
    buffers: Vec<(TensorType, Vec<usize>)>,
    launches: Vec<CompiledLaunch>,
    outputs: Vec<ValueRef>,
    pool: Arc<rayon::ThreadPool>,
}

/// The host CPU as a device.
#[derive(Debug)]
pub struct CpuDevice {
    backend: CraneliftBackend,
    /// When set, every kernel compiles with the LLVM tier instead of cranelift.
    #[cfg(feature = "llvm")]
    llvm: Option<tcc_codegen::LlvmCpuBackend>,
    pool: Arc<rayon::ThreadPool>,
    threads: usize,
    cache: Mutex<HashMap<(String, Bindings), Arc<CompiledProgram>>>,
}

impl CpuDevice {
    /// A device using every core.
    pub fn new() -> Result<CpuDevice, RuntimeError> {
        CpuDevice::with_threads(0)
    }

    /// A device using `threads` threads (0 = every core).
    pub fn with_threads(threads: usize) -> Result<CpuDevice, RuntimeError> {
        CpuDevice::with_backend(CraneliftBackend::new()?, threads)
    }

    /// A device compiling with `tier` on `threads` threads (0 = every core). On the LLVM tier with
    /// `schedule_tiles`, matmuls take their register and cache tiles from each kernel's schedule
    /// (what the tuner measures and records); without, from the backend's defaults for the host
    /// (what the optimizer's own schedules run with). The one place a CPU device is made for a tier.
    pub fn for_tier(tier: tcc_ir::CpuTier, threads: usize, schedule_tiles: bool) -> Result<CpuDevice, RuntimeError> {
        match tier {
            tcc_ir::CpuTier::Cranelift => CpuDevice::with_threads(threads),
            #[cfg(feature = "llvm")]
            tcc_ir::CpuTier::Llvm => {
                let device = CpuDevice::with_threads(threads)?;
                let llvm = tcc_codegen::LlvmCpuBackend::new()?
                    .with_threads(device.threads())
                    .with_schedule_tiles(schedule_tiles);
                Ok(device.with_llvm_backend(llvm))
            }
            #[cfg(not(feature = "llvm"))]
            tcc_ir::CpuTier::Llvm => {
                // Unreachable through `tcc::target::resolve`, which refuses `cpu:llvm` without LLVM.
                let _ = schedule_tiles;
                Err(RuntimeError::Internal("the LLVM CPU tier needs the `llvm` feature".into()))
            }
        }
    }

    /// A device compiling with the given lowering options (tests use `materialize_all`).
    pub fn with_options(options: LowerOptions, threads: usize) -> Result<CpuDevice, RuntimeError> {
        CpuDevice::with_backend(CraneliftBackend::with_options(options)?, threads)
    }

    /// A device compiling with `backend`.
    pub fn with_backend(backend: CraneliftBackend, threads: usize) -> Result<CpuDevice, RuntimeError> {
        let threads = if threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { threads };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("tcc-cpu-{i}"))
            .build()
            .map_err(|e| RuntimeError::ThreadPool(e.to_string()))?;
        Ok(CpuDevice {
            backend,
            #[cfg(feature = "llvm")]
            llvm: None,
            pool: Arc::new(pool),
            threads,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// A device using `threads` threads (0 = every core) that compiles every kernel with the LLVM
    /// tier (wide vectors for the host CPU), whatever tier the kernels' schedules name.
    #[cfg(feature = "llvm")]
    pub fn with_llvm(threads: usize) -> Result<CpuDevice, RuntimeError> {
        let device = CpuDevice::with_threads(threads)?;
        let llvm = tcc_codegen::LlvmCpuBackend::new()?.with_threads(device.threads);
        Ok(device.with_llvm_backend(llvm))
    }

    /// The same device compiling every kernel with `llvm` (cached programs are dropped).
    #[cfg(feature = "llvm")]
    pub fn with_llvm_backend(mut self, llvm: tcc_codegen::LlvmCpuBackend) -> CpuDevice {
        self.llvm = Some(llvm);
        self.clear_cache();
        self
    }

    /// The tier kernels compile with.
    pub fn tier(&self) -> tcc_ir::Tier {
        #[cfg(feature = "llvm")]
        if self.llvm.is_some() {
            return tcc_ir::Tier::LlvmCpu;
        }
        tcc_ir::Tier::Cranelift
    }

    /// Number of worker threads.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The code generator.
    pub fn backend(&self) -> &CraneliftBackend {
        &self.backend
    }

    /// Number of compiled programs in the cache.
    pub fn cache_len(&self) -> usize {
        self.cache.lock().map_or(0, |c| c.len())
    }

    /// Empties the cache of compiled programs.
    pub fn clear_cache(&self) {
        if let Ok(mut c) = self.cache.lock() {
            c.clear();
        }
    }

    /// A stable fingerprint of a program: blake3 of its canonical JSON form.
    pub fn fingerprint(program: &Program) -> Result<String, RuntimeError> {
        let text = serde_json::to_string(program).map_err(|e| RuntimeError::Internal(format!("serializing: {e}")))?;
        Ok(blake3::hash(text.as_bytes()).to_hex().to_string())
    }

    /// The program compiled for `bindings`, from the cache or compiled now.
    pub fn compile(&self, program: &Program, bindings: &Bindings) -> Result<Arc<CompiledProgram>, RuntimeError> {
        let key = (CpuDevice::fingerprint(program)?, bindings.clone());
        if let Some(hit) = self.cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return Ok(hit);
        }
        let compiled = Arc::new(self.compile_uncached(program, bindings)?);
        if let Ok(mut c) = self.cache.lock() {
            c.insert(key, compiled.clone());
        }
        Ok(compiled)
    }

    /// Compiles every kernel of `program`, in launch order. Cranelift kernels are independent
    /// modules, so they compile in parallel on the device's threads (a 10,000-op program has
    /// about a thousand); the first error in launch order is returned.
    fn load_all(&self, program: &Program, bindings: &Bindings) -> Result<Vec<LoadedKernel>, RuntimeError> {
        #[cfg(feature = "llvm")]
        if let Some(llvm) = &self.llvm {
            return program
                .launches
                .iter()
                .map(|l| Ok(LoadedKernel::from_llvm(llvm.compile(&l.kernel, bindings)?)))
                .collect();
        }
        let backend = &self.backend;
        let loaded: Vec<Result<LoadedKernel, RuntimeError>> = self.pool.install(|| {
            program.launches.par_iter().map(|l| Ok(LoadedKernel::new(backend.compile(&l.kernel, bindings)?))).collect()
        });
        loaded.into_iter().collect()
    }

    fn compile_uncached(&self, program: &Program, bindings: &Bindings) -> Result<CompiledProgram, RuntimeError> {
        let mut buffers = Vec::with_capacity(program.buffers.len());
        for ty in &program.buffers {
            let dims = tcc_codegen::loops::resolve_dims(&ty.shape, bindings)?;
            buffers.push((ty.clone(), dims.iter().map(|&d| d as usize).collect()));
        }
        let mut launches = Vec::with_capacity(program.launches.len());
        for (launch, kernel) in program.launches.iter().zip(self.load_all(program, bindings)?) {
            let wanted = launch.kernel.schedule.threads as usize;
            let threads = if wanted == 0 { self.threads } else { wanted.min(self.threads) };
            launches.push(CompiledLaunch {
                kernel,
                inputs: launch.inputs.clone(),
                outputs: launch.outputs.clone(),
                threads,
                spares: Spares::default(),
            });
        }
        Ok(CompiledProgram {
            name: program.name.clone(),
            params: program.params.clone(),
            bindings: bindings.clone(),
            buffers,
            launches,
            outputs: program.outputs.clone(),
            pool: self.pool.clone(),
        })
    }

    /// Runs `program` on `inputs`: binds shape variables from the inputs' shapes (an error names
    /// the parameter and both shapes on a mismatch), compiles (or reuses) the program for those
    /// bindings, and returns its outputs.
    pub fn run(&self, program: &Program, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, RuntimeError> {
        let bindings = bind_inputs(&program.name, &program.params, inputs)?;
        self.compile(program, &bindings)?.run(inputs)
    }
}

impl CompiledProgram {
    /// The shape bindings this program was compiled for.
    pub fn bindings(&self) -> &Bindings {
        &self.bindings
    }

    /// Names of the compiled kernels, in launch order.
    pub fn kernel_names(&self) -> Vec<&str> {
        self.launches.iter().map(|l| l.kernel.name()).collect()
    }

    /// Runs the program; the inputs must have exactly the shapes it was compiled for.
    pub fn run(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, RuntimeError> {
        self.run_views(&inputs.iter().map(HostTensor::view).collect::<Vec<_>>())
    }

    /// [`CompiledProgram::run`] on inputs read in place (their bytes are only read).
    pub fn run_views(&self, inputs: &[HostView<'_>]) -> Result<Vec<HostTensor>, RuntimeError> {
        self.run_observed(inputs, |_, _| {})
    }

    /// [`CompiledProgram::run`], also returning each launch's wall time, in launch order.
    pub fn run_timed(
        &self,
        inputs: &[HostTensor],
    ) -> Result<(Vec<HostTensor>, Vec<std::time::Duration>), RuntimeError> {
        let mut times = vec![std::time::Duration::ZERO; self.launches.len()];
        let views: Vec<HostView<'_>> = inputs.iter().map(HostTensor::view).collect();
        let outputs = self.run_observed(&views, |i, t| {
            if let Some(slot) = times.get_mut(i) {
                *slot = t;
            }
        })?;
        Ok((outputs, times))
    }

    /// Runs the program, telling `observe` each launch's index and wall time.
    fn run_observed(
        &self,
        inputs: &[HostView<'_>],
        mut observe: impl FnMut(usize, std::time::Duration),
    ) -> Result<Vec<HostTensor>, RuntimeError> {
        let bindings = bind_views(&self.name, &self.params, inputs)?;
        // Variables no parameter carries (the length of an `iota`) keep the compiled values.
        if bindings.iter().any(|(v, n)| self.bindings.get(v) != Some(n)) {
            let param = self
                .params
                .iter()
                .zip(inputs)
                .find(|(p, _)| p.ty.shape.vars().iter().any(|v| bindings.get(v) != self.bindings.get(v)));
            let (name, expected, got) = match param {
                Some((p, t)) => (p.name.clone(), describe(&p.ty.shape, &self.bindings), t.shape().to_vec()),
                None => (String::new(), format!("{:?}", self.bindings), Vec::new()),
            };
            return Err(RuntimeError::ShapeMismatch { param: name, expected, got });
        }
        let mut buffers: Vec<Option<HostTensor>> = Vec::with_capacity(self.buffers.len());
        for (ty, dims) in &self.buffers {
            buffers.push(Some(HostTensor::for_kernel(ty.dtype, dims.clone())?));
        }
        for (i, launch) in self.launches.iter().enumerate() {
            let start = std::time::Instant::now();
            self.launch(launch, inputs, &mut buffers)?;
            observe(i, start.elapsed());
        }
        for t in buffers.iter_mut().flatten() {
            t.zero_unwritten();
        }
        self.outputs
            .iter()
            .map(|o| match o {
                ValueRef::Param(p) => {
                    inputs.get(*p).map(HostView::to_tensor).ok_or_else(|| bad(format!("output names parameter {p}")))
                }
                ValueRef::Buffer(b) => {
                    // A buffer returned twice is cloned for its second use.
                    let repeated = self.outputs.iter().filter(|x| **x == ValueRef::Buffer(*b)).count() > 1;
                    let slot = buffers.get_mut(*b).ok_or_else(|| bad(format!("output names buffer {b}")))?;
                    let t = if repeated { slot.clone() } else { slot.take() };
                    t.ok_or_else(|| bad(format!("output buffer {b} is missing")))
                }
            })
            .collect()
    }

    fn launch(
        &self,
        launch: &CompiledLaunch,
        inputs: &[HostView<'_>],
        buffers: &mut [Option<HostTensor>],
    ) -> Result<(), RuntimeError> {
        let decls = launch.kernel.buffers();
        // Outputs must be distinct buffers that the launch does not also read.
        for (i, o) in launch.outputs.iter().enumerate() {
            let ValueRef::Buffer(_) = o else {
                return Err(bad(format!("launch writes parameter {o:?}")));
            };
            if launch.outputs[..i].contains(o) || launch.inputs.contains(o) {
                return Err(bad(format!("launch output {o:?} aliases another of its buffers")));
            }
        }
        let mut scratch: Vec<spare::TempBuf> = Vec::new();
        let mut ptrs: Vec<usize> = Vec::with_capacity(decls.len());
        let mut locals: Vec<(usize, usize)> = Vec::new();
        for decl in decls {
            let need = usize::try_from(decl.len)
                .ok()
                .and_then(|n| n.checked_mul(decl.dtype.size_bytes()))
                .ok_or_else(|| bad("buffer too large"))?;
            if decl.kind == BufKind::Scratch {
                scratch.push(launch.spares.take(need));
            }
            if decl.kind == BufKind::Local {
                locals.push((ptrs.len(), need));
            }
            ptrs.push(need);
        }
        let mut scratch_iter = scratch.iter_mut();
        for (i, decl) in decls.iter().enumerate() {
            let need = ptrs[i];
            let (ptr, have, dtype) = match decl.kind {
                BufKind::Input(k) => {
                    let (bytes, dtype) = match launch.inputs.get(k) {
                        Some(ValueRef::Param(p)) => inputs.get(*p).map(|t| (t.bytes(), t.dtype())),
                        Some(ValueRef::Buffer(b)) => {
                            buffers.get(*b).and_then(Option::as_ref).map(|t| (t.bytes(), t.dtype()))
                        }
                        None => None,
                    }
                    .ok_or_else(|| bad(format!("kernel input {k} is unbound")))?;
                    // Inputs are only read by the kernel.
                    (bytes.as_ptr() as usize, bytes.len(), dtype)
                }
                BufKind::Output(k) => {
                    let t = match launch.outputs.get(k) {
                        Some(ValueRef::Buffer(b)) => buffers.get_mut(*b).and_then(Option::as_mut),
                        _ => None,
                    }
                    .ok_or_else(|| bad(format!("kernel output {k} is unbound")))?;
                    let dtype = t.dtype();
                    let (ptr, len) = t.kernel_output();
                    (ptr as usize, len, dtype)
                }
                BufKind::Scratch => {
                    let s = scratch_iter.next().ok_or_else(|| bad("scratch buffer missing"))?;
                    (s.as_mut_ptr() as usize, s.len(), decl.dtype)
                }
                // Filled per call below.
                BufKind::Local => (0, need, decl.dtype),
            };
            if have != need || dtype != decl.dtype {
                return Err(bad(format!(
                    "kernel `{}` buffer {i} expects {need} bytes of {}, got {have} bytes of {dtype}",
                    launch.kernel.name(),
                    decl.dtype
                )));
            }
            ptrs[i] = ptr;
        }
        let kernel = &launch.kernel;
        // One call with its own local buffers.
        let run = |phase: usize, begin: u64, end: u64| {
            let mut mine = ptrs.clone();
            let mut storage: Vec<spare::TempBuf> = Vec::with_capacity(locals.len());
            for &(slot, bytes) in &locals {
                let mut v = launch.spares.take(bytes);
                mine[slot] = v.as_mut_ptr() as usize;
                storage.push(v);
            }
            // SAFETY: `mine` holds one pointer per declared buffer, each checked above to span
            // exactly the declared bytes (local ones freshly taken for this call and alive
            // until it returns); outputs are distinct buffers not read by this launch and scratch
            // is freshly taken, so nothing aliases; phases run one after another; concurrent
            // calls get disjoint row ranges of a phase whose lowering proved that different rows
            // write disjoint elements and never read what another row writes.
            unsafe { kernel.call(phase, &mine, begin, end) };
            for v in storage {
                launch.spares.give(v);
            }
        };
        for (phase, (rows, work)) in kernel.phases().into_iter().enumerate() {
            let by_work = usize::try_from(work / MIN_WORK_PER_THREAD).unwrap_or(usize::MAX).max(1);
            let threads = launch.threads.min(usize::try_from(rows).unwrap_or(usize::MAX)).min(by_work).max(1);
            if threads <= 1 {
                run(phase, 0, rows.max(1));
                continue;
            }
            let chunks = (threads * 4).min(usize::try_from(rows).unwrap_or(usize::MAX)) as u64;
            self.pool.install(|| {
                (0..chunks).into_par_iter().for_each(|c| run(phase, rows * c / chunks, rows * (c + 1) / chunks));
            });
        }
        for s in scratch {
            launch.spares.give(s);
        }
        for o in &launch.outputs {
            if let ValueRef::Buffer(b) = o
                && let Some(t) = buffers.get_mut(*b).and_then(Option::as_mut)
            {
                // SAFETY: every phase of the kernel has run over all its rows, and a kernel
                // writes every element of each of its outputs (the lowering's stores cover the
                // output's index space; debug builds hand outputs out as NaN bytes, so a test
                // would see an element left unwritten).
                unsafe { t.assume_written() };
            }
        }
        Ok(())
    }
}

fn bad(msg: impl Into<String>) -> RuntimeError {
    RuntimeError::Internal(msg.into())
}

#[cfg(test)]
mod tests {
    use tcc_ir::interp::run_graph;
    use tcc_ir::testing::{Tolerance, compare_outputs, random_inputs};
    use tcc_ir::{DType, Kernel, KernelClass, Launch, Schedule, Tier};

    use super::*;

    /// `g` as one matmul kernel.
    fn one_kernel(g: tcc_ir::Graph) -> Program {
        let outputs: Vec<ValueRef> = (0..g.outputs.len()).map(ValueRef::Buffer).collect();
        let buffers = g.outputs.iter().map(|o| g.nodes[o.index()].ty.clone()).collect();
        let kernel = Kernel {
            name: "k0_matmul".into(),
            class: KernelClass::MatMul,
            graph: g.clone(),
            schedule: Schedule::default_for(Tier::Cranelift),
        };
        let inputs = (0..g.params.len()).map(ValueRef::Param).collect();
        Program {
            name: g.name.clone(),
            params: g.params.clone(),
            buffers,
            launches: vec![Launch { kernel, inputs, outputs: outputs.clone() }],
            outputs,
        }
    }

    #[test]
    fn products_never_read_an_unwritten_temporary() {
        // Edge tiles in both dimensions, a depth past one panel, a product of one row; f16 also
        // rounds through an f32 buffer that is reused without zeros.
        for (dtype, (m, n, k)) in [
            (DType::F32, (13, 37, 29)),
            (DType::F32, (1, 5, 3)),
            (DType::F32, (70, 33, 600)),
            (DType::F16, (9, 19, 40)),
        ] {
            let g = tcc_ir::testing::gemm_graph(dtype, &[], (m, n, k), false, true).unwrap();
            let program = one_kernel(g.clone());
            let inputs = random_inputs(&g, &Bindings::new(), m ^ n ^ k).unwrap();
            let host: Vec<HostTensor> = inputs.iter().map(|t| HostTensor::from_interp(t).unwrap()).collect();
            let expected = run_graph(&g, &inputs).unwrap();
            #[cfg_attr(not(feature = "llvm"), allow(unused_mut))]
            let mut devices = vec![CpuDevice::with_threads(2).unwrap()];
            #[cfg(feature = "llvm")]
            devices.push(CpuDevice::with_llvm(2).unwrap());
            for device in &devices {
                let compiled = device.compile(&program, &Bindings::new()).unwrap();
                // A debug build hands every temporary out as NaN bytes, fresh or reused.
                for run in 0..3 {
                    let actual: Vec<_> = compiled.run(&host).unwrap().iter().map(HostTensor::to_interp).collect();
                    compare_outputs(&expected, &actual, &Tolerance::default().with_accumulation(k))
                        .unwrap_or_else(|e| panic!("{:?} {dtype} {m}x{n}x{k}, run {run}: {e}", device.tier()));
                }
            }
        }
    }
}
