//! Running and timing whole programs on a CUDA device (needs feature `llvm` to compile them).

use tcc_codegen::ptx::compile_kernel;
use tcc_ir::{Bindings, Program, ValueRef};

use super::device::{CudaDevice, DeviceBuffer, LoadedKernel};
use super::error::CudaError;
use crate::bind::bind_inputs;
use crate::tensor::HostTensor;

/// A program compiled and loaded for one device and one binding of its shape variables.
#[derive(Debug)]
pub struct GpuProgram {
    program: Program,
    bindings: Bindings,
    kernels: Vec<LoadedKernel>,
}

impl GpuProgram {
    /// The bindings it was compiled for.
    pub fn bindings(&self) -> &Bindings {
        &self.bindings
    }

    /// The loaded kernels, one per launch.
    pub fn kernels(&self) -> &[LoadedKernel] {
        &self.kernels
    }
}

/// How to time a program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimingOptions {
    /// Untimed runs first.
    pub warmup: usize,
    /// Timed runs (at least 1; contract §8 asks for at least 20).
    pub repetitions: usize,
    /// Overwrite a buffer twice the L2 size before every timed run.
    pub flush_l2: bool,
}

impl Default for TimingOptions {
    fn default() -> TimingOptions {
        TimingOptions { warmup: 3, repetitions: 20, flush_l2: true }
    }
}

/// Event-measured times of a program's launches.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    /// Median over the repetitions, in milliseconds.
    pub median_ms: f64,
    /// Fastest repetition, in milliseconds.
    pub min_ms: f64,
    /// Every repetition, in order, in milliseconds.
    pub samples_ms: Vec<f64>,
    /// Each launch's median over the repetitions, in launch order, in milliseconds (events
    /// recorded between launches; empty when not measured per launch).
    pub launch_median_ms: Vec<f64>,
}

impl Timing {
    /// The median and minimum of `samples` (milliseconds, in the order taken).
    pub fn from_samples(samples: Vec<f64>) -> Timing {
        let mut sorted = samples.clone();
        sorted.sort_by(f64::total_cmp);
        let median_ms = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
        let min_ms = sorted.first().copied().unwrap_or(0.0);
        Timing { median_ms, min_ms, samples_ms: samples, launch_median_ms: Vec::new() }
    }
}

/// The device memory of one run: parameters, buffers and a scratch area shared by the launches.
struct Resident {
    params: Vec<DeviceBuffer>,
    buffers: Vec<DeviceBuffer>,
    scratch: DeviceBuffer,
}

fn dims(gp: &GpuProgram, ty: &tcc_ir::TensorType, what: &str) -> Result<Vec<usize>, CudaError> {
    ty.shape
        .resolve(&gp.bindings)
        .ok_or_else(|| CudaError::Internal(format!("{what}: shape {} has unbound variables", ty.shape)))
}

impl CudaDevice {
    /// Compiles every kernel of `program` for this device's target under `bindings` and loads it.
    pub fn compile(&self, program: &Program, bindings: &Bindings) -> Result<GpuProgram, CudaError> {
        let arch = self.info().arch;
        let kernels = program
            .launches
            .iter()
            .map(|l| {
                let k = compile_kernel(&l.kernel, bindings, arch)?;
                self.load(&k)
            })
            .collect::<Result<Vec<_>, CudaError>>()?;
        Ok(GpuProgram { program: program.clone(), bindings: bindings.clone(), kernels })
    }

    fn resident(&self, gp: &GpuProgram, inputs: &[HostTensor]) -> Result<Resident, CudaError> {
        let p = &gp.program;
        let bindings = bind_inputs(&p.name, &p.params, inputs)?;
        // Variables no parameter carries (the length of an `iota`) keep the compiled values.
        if bindings.iter().any(|(v, n)| gp.bindings.get(v) != Some(n)) {
            return Err(CudaError::Internal(format!(
                "`{}` was compiled for {:?} but the inputs bind {:?}",
                p.name, gp.bindings, bindings
            )));
        }
        let params = inputs
            .iter()
            .zip(&p.params)
            .map(|(t, param)| self.upload(t, &format!("parameter `{}`", param.name)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut buffers = Vec::with_capacity(p.buffers.len());
        for (b, ty) in p.buffers.iter().enumerate() {
            let writer = p
                .launches
                .iter()
                .find(|l| l.outputs.contains(&ValueRef::Buffer(b)))
                .map(|l| format!(" (written by kernel `{}`)", l.kernel.name))
                .unwrap_or_default();
            let what = format!("buffer {b}{writer}");
            let d = dims(gp, ty, &what)?;
            let bytes = d.iter().map(|&x| x as u64).product::<u64>() * ty.dtype.size_bytes() as u64;
            buffers.push(self.alloc(bytes, &what)?);
        }
        let (scratch_bytes, user) = gp
            .kernels
            .iter()
            .map(|k| (k.ir().scratch_bytes, k.ir().name.clone()))
            .max_by_key(|(b, _)| *b)
            .unwrap_or((0, String::new()));
        let scratch = self.alloc(scratch_bytes, &format!("the scratch memory of kernel `{user}`"))?;
        Ok(Resident { params, buffers, scratch })
    }

    fn value<'r>(r: &'r Resident, v: ValueRef, context: &str) -> Result<&'r DeviceBuffer, CudaError> {
        match v {
            ValueRef::Param(i) => r.params.get(i),
            ValueRef::Buffer(b) => r.buffers.get(b),
        }
        .ok_or_else(|| CudaError::Internal(format!("{context}: {v:?} does not exist")))
    }

    /// Queues every launch; with `check`, waits after each so a fault names its kernel.
    fn launch_all(&self, gp: &GpuProgram, r: &Resident, check: bool) -> Result<(), CudaError> {
        for (launch, kernel) in gp.program.launches.iter().zip(&gp.kernels) {
            let name = &launch.kernel.name;
            let ins = launch.inputs.iter().map(|&v| Self::value(r, v, name)).collect::<Result<Vec<_>, _>>()?;
            let outs = launch.outputs.iter().map(|&v| Self::value(r, v, name)).collect::<Result<Vec<_>, _>>()?;
            self.launch(kernel, &ins, &outs, &r.scratch)?;
            if check {
                self.sync_after(name)?;
            }
        }
        Ok(())
    }

    /// Runs a compiled program on host inputs and returns its outputs.
    pub fn run(&self, gp: &GpuProgram, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, CudaError> {
        let r = self.resident(gp, inputs)?;
        self.launch_all(gp, &r, true)?;
        let p = &gp.program;
        p.outputs
            .iter()
            .enumerate()
            .map(|(k, &v)| match v {
                ValueRef::Param(i) => inputs
                    .get(i)
                    .cloned()
                    .ok_or_else(|| CudaError::Internal(format!("output {k}: parameter {i} does not exist"))),
                ValueRef::Buffer(b) => {
                    let ty =
                        p.buffers.get(b).ok_or_else(|| CudaError::Internal(format!("output {k}: no buffer {b}")))?;
                    let d = dims(gp, ty, &format!("output {k}"))?;
                    self.download(Self::value(&r, v, "outputs")?, ty.dtype, d, &format!("output {k}"))
                }
            })
            .collect()
    }

    /// Binds the shape variables from the inputs, compiles, runs and returns the outputs.
    pub fn run_program(&self, program: &Program, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, CudaError> {
        let bindings = bind_inputs(&program.name, &program.params, inputs)?;
        let gp = self.compile(program, &bindings)?;
        self.run(&gp, inputs)
    }

    /// Times a program with CUDA events: one checked run, `warmup` untimed runs, then
    /// `repetitions` timed runs (each after an L2 flush when asked).
    pub fn time_program(
        &self,
        program: &Program,
        inputs: &[HostTensor],
        options: TimingOptions,
    ) -> Result<Timing, CudaError> {
        let bindings = bind_inputs(&program.name, &program.params, inputs)?;
        let gp = self.compile(program, &bindings)?;
        let r = self.resident(&gp, inputs)?;
        self.launch_all(&gp, &r, true)?;
        for _ in 0..options.warmup {
            self.launch_all(&gp, &r, false)?;
        }
        self.synchronize()?;
        let mut flush = if options.flush_l2 {
            Some(self.alloc(self.info().l2_bytes.max(1) * 2, "the L2 flush buffer")?)
        } else {
            None
        };
        let mut samples = Vec::with_capacity(options.repetitions.max(1));
        let mut per_launch: Vec<Vec<f64>> = vec![Vec::new(); gp.kernels.len()];
        for _ in 0..options.repetitions.max(1) {
            if let Some(f) = flush.as_mut() {
                self.clear(f)?;
            }
            // An event before the first launch and after each one: the total and every launch's share.
            let mut marks = vec![self.record_event()?];
            for (launch, kernel) in gp.program.launches.iter().zip(&gp.kernels) {
                let name = &launch.kernel.name;
                let ins = launch.inputs.iter().map(|&v| Self::value(&r, v, name)).collect::<Result<Vec<_>, _>>()?;
                let outs = launch.outputs.iter().map(|&v| Self::value(&r, v, name)).collect::<Result<Vec<_>, _>>()?;
                self.launch(kernel, &ins, &outs, &r.scratch)?;
                marks.push(self.record_event()?);
            }
            if let (Some(first), Some(last)) = (marks.first(), marks.last()) {
                samples.push(f64::from(self.elapsed_ms(first, last)?));
            }
            for (i, pair) in marks.windows(2).enumerate() {
                if let (Some(slot), [a, b]) = (per_launch.get_mut(i), pair) {
                    slot.push(f64::from(self.elapsed_ms(a, b)?));
                }
            }
        }
        self.sync_after(&program.name)?;
        let mut timing = Timing::from_samples(samples);
        timing.launch_median_ms = per_launch.into_iter().map(|s| Timing::from_samples(s).median_ms).collect();
        Ok(timing)
    }
}
