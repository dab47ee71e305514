//! Where a program runs: the reference interpreter, a compiled CPU tier, or a CUDA GPU. `tcc run` and
//! `tcc bench` go through this one place, which plans every program through the
//! [`crate::pipeline`] (optimizer, lockfile, tuning cache), compiles it once per shape binding, then
//! runs or times it.

use std::time::{Duration, Instant};

use std::sync::Arc;
use tcc_ir::interp::Tensor;
use tcc_ir::target::{Target, TargetSpec};
use tcc_ir::{Bindings, Graph, Program, ScheduleSource};

use crate::pipeline::{KernelPlan, LockSetting, Pipeline, PipelineError, PlanOptions};

use tcc_runtime::{CompiledProgram, CpuDevice, HostTensor};

/// Why a target could not be prepared or run; each message names the culprit.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The target cannot be used in this build or on this machine.
    #[error(transparent)]
    Unavailable(#[from] crate::target::TargetUnavailable),
    /// A tensor would exceed the memory limit.
    #[error("{0} (raise it with --max-memory)")]
    MemoryLimit(String),
    /// The pipeline failed (the optimizer, or a lockfile named on the command line).
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// Compiling or running on the device failed (`function` is empty when opening the device failed).
    #[error("{target}{}: {message}", if function.is_empty() { String::new() } else { format!(" failed on `{function}`") })]
    Device {
        /// The target.
        target: String,
        /// The fn.
        function: String,
        /// Why.
        message: String,
    },
    /// The reference interpreter failed.
    #[error("the interpreter failed: {0}")]
    Interpreter(String),
}

/// A target with its device open, ready to prepare programs.
#[derive(Debug)]
// One engine exists per command; boxing the device would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Engine {
    /// The f64 reference interpreter.
    Interp,
    /// The host CPU through one tier.
    Cpu {
        /// The target (`cpu:cranelift` or `cpu:llvm`).
        target: Target,
        /// The device, compiling with that tier.
        device: CpuDevice,
        /// On `cpu:llvm`, the device for programs with locked, cached or borrowed schedules: its
        /// matmuls take their register and cache tiles from the schedule, as the tuner measured
        /// them (see [`tcc_runtime::CpuDevice::for_tier`]). Opened on first use: most runs have none.
        tuned: std::sync::OnceLock<Result<CpuDevice, String>>,
    },
    /// The local CUDA GPU through the PTX backend (feature `llvm`).
    #[cfg(feature = "llvm")]
    Cuda {
        /// The target (the GPU's architecture).
        target: Target,
        /// The device.
        device: tcc_runtime::cuda::CudaDevice,
    },
}

impl Engine {
    /// Resolves `spec` ([`crate::target::resolve`]) and opens its device.
    pub fn for_spec(spec: TargetSpec) -> Result<Engine, EngineError> {
        Engine::open(crate::target::resolve(spec)?)
    }

    /// Opens the device of `target`: the host CPU with its tier, or the local GPU, which must
    /// compile for exactly that architecture (`cuda` names whatever it is).
    pub fn open(target: Target) -> Result<Engine, EngineError> {
        crate::target::require_code_generator(target)?;
        let device_error = |message: String| EngineError::Device {
            target: target.name().to_string(),
            function: String::new(),
            message,
        };
        match target {
            Target::Interp => Ok(Engine::Interp),
            Target::Cpu(tier) => {
                let device =
                    tcc_runtime::CpuDevice::for_tier(tier, 0, false).map_err(|e| device_error(e.to_string()))?;
                Ok(Engine::Cpu { target, device, tuned: std::sync::OnceLock::new() })
            }
            #[cfg(feature = "llvm")]
            Target::Gpu(arch) => {
                let device = tcc_runtime::cuda::CudaDevice::open(0).map_err(|e| device_error(e.to_string()))?;
                if device.info().arch != arch {
                    return Err(device_error(format!(
                        "the local GPU ({}) compiles for {}; run with --target cuda or --target {}",
                        device.info().name,
                        device.info().arch,
                        device.info().arch
                    )));
                }
                Ok(Engine::Cuda { target, device })
            }
            #[cfg(not(feature = "llvm"))]
            Target::Gpu(_) => Err(crate::target::TargetUnavailable::NeedsLlvm(target.name().to_string()).into()),
        }
    }

    /// The target.
    pub fn target(&self) -> Target {
        match self {
            Engine::Interp => Target::Interp,
            Engine::Cpu { target, .. } => *target,
            #[cfg(feature = "llvm")]
            Engine::Cuda { target, .. } => *target,
        }
    }

    /// The target's name, as reported to users (`interp`, `cpu:cranelift`, `sm_90a`).
    pub fn name(&self) -> &'static str {
        self.target().name()
    }

    /// The pipeline of this engine's target obeying `lock`, with the tuning records of its device.
    pub fn pipeline(&self, lock: &LockSetting) -> Result<Pipeline, EngineError> {
        #[cfg(feature = "llvm")]
        if let Engine::Cuda { target, device } = self {
            let key = crate::tuning::gpu::device_key(device.info());
            return Ok(Pipeline::for_device(*target, lock, key)?);
        }
        Ok(Pipeline::new(self.target(), lock)?)
    }

    /// Plans `graph` for `bindings` through `pipeline` (optimizer, lockfile, tuning cache) and
    /// compiles the result, with no memory limit but the element-count limit of every tensor.
    pub fn prepare<'e>(
        &'e self,
        pipeline: &Pipeline,
        graph: &Graph,
        bindings: &Bindings,
    ) -> Result<Prepared<'e>, EngineError> {
        self.prepare_within(pipeline, graph, bindings, u64::MAX)
    }

    /// [`Engine::prepare`], refusing (before compiling anything) a program whose parameters,
    /// intermediates and outputs together need more than `max_bytes`: the error names the largest
    /// tensor and its size.
    pub fn prepare_within<'e>(
        &'e self,
        pipeline: &Pipeline,
        graph: &Graph,
        bindings: &Bindings,
        max_bytes: u64,
    ) -> Result<Prepared<'e>, EngineError> {
        let start = Instant::now();
        if let Engine::Interp = self {
            return Ok(Prepared {
                engine: self,
                graph: graph.clone(),
                bindings: bindings.clone(),
                plan: None,
                compiled: None,
                compile_time: Duration::ZERO,
            });
        }
        let plan = pipeline.plan(graph, bindings, PlanOptions::default())?;
        check_buffers(&plan.program, bindings, max_bytes)?;
        let compile_error = |message: String| EngineError::Device {
            target: self.name().to_string(),
            function: graph.name.clone(),
            message,
        };
        let compiled = match self {
            Engine::Cpu { target, device, tuned } => {
                let any_tuned = plan.kernels.iter().any(|k| k.source != ScheduleSource::Default);
                let device = match target {
                    Target::Cpu(tier @ tcc_ir::CpuTier::Llvm) if any_tuned => tuned
                        .get_or_init(|| tcc_runtime::CpuDevice::for_tier(*tier, 0, true).map_err(|e| e.to_string()))
                        .as_ref()
                        .map_err(|e| compile_error(e.clone()))?,
                    _ => device,
                };
                Some(device.compile(&plan.program, bindings).map_err(|e| compile_error(e.to_string()))?)
            }
            #[cfg(feature = "llvm")]
            Engine::Cuda { device, .. } => {
                device.compile(&plan.program, bindings).map_err(|e| compile_error(e.to_string()))?;
                None
            }
            Engine::Interp => None,
        };
        Ok(Prepared {
            engine: self,
            graph: graph.clone(),
            bindings: bindings.clone(),
            plan: Some(plan),
            compiled,
            compile_time: start.elapsed(),
        })
    }
}

/// Refuses programs whose tensors could not be allocated sensibly: any one of `2^40` elements or
/// more, or parameters, intermediates and outputs that together need more than `max_bytes` (the
/// message names the largest and its size).
fn check_buffers(program: &Program, bindings: &Bindings, max_bytes: u64) -> Result<(), EngineError> {
    crate::memory::check_program(program, bindings, max_bytes).map_err(|e| EngineError::MemoryLimit(e.to_string()))
}

/// What [`Prepared::time`] measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// Median time of one run of the program, milliseconds.
    pub median_ms: f64,
    /// Each kernel's median, in launch order, milliseconds.
    pub kernel_median_ms: Vec<f64>,
    /// Timed repetitions.
    pub repetitions: usize,
}

fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or(f64::NAN)
}

/// A program prepared for one target and one binding of its shape variables.
#[derive(Debug)]
pub struct Prepared<'e> {
    engine: &'e Engine,
    graph: Graph,
    /// The shape bindings it was prepared for (the interpreter needs those no parameter carries).
    bindings: Bindings,
    plan: Option<crate::pipeline::Plan>,
    compiled: Option<Arc<CompiledProgram>>,
    compile_time: Duration,
}

impl Prepared<'_> {
    /// The optimized program (`None` on the interpreter).
    pub fn program(&self) -> Option<&Program> {
        self.plan.as_ref().map(|p| &p.program)
    }

    /// Each kernel's plan: family, schedule and its source (empty on the interpreter).
    pub fn kernels(&self) -> &[KernelPlan] {
        self.plan.as_ref().map_or(&[], |p| p.kernels.as_slice())
    }

    /// Runs the compiled program on host tensors (no conversions; what benchmarks time). `None` on
    /// the interpreter, which has no compiled form.
    pub fn run_host(&self, inputs: &[HostTensor]) -> Option<Result<Vec<HostTensor>, EngineError>> {
        #[cfg(feature = "llvm")]
        if let (Engine::Cuda { device, .. }, Some(program)) = (self.engine, self.program()) {
            return Some(device.run_program(program, inputs).map_err(|e| self.device_error(e.to_string())));
        }
        let compiled = self.compiled.as_ref()?;
        Some(compiled.run(inputs).map_err(|e| EngineError::Device {
            target: self.engine.name().to_string(),
            function: self.graph.name.clone(),
            message: e.to_string(),
        }))
    }

    /// Median time of one run in milliseconds, as contract §8 asks per device: on a GPU, CUDA events
    /// with warm-up and an L2 flush before each of at least 20 repetitions; on the CPU, wall time
    /// of at least `min_reps` runs and more until `max_seconds` passed or `max_reps` were taken.
    pub fn time_ms(
        &self,
        inputs: &[HostTensor],
        min_reps: usize,
        max_reps: usize,
        max_seconds: f64,
    ) -> Result<f64, EngineError> {
        Ok(self.time(inputs, min_reps, max_reps, max_seconds)?.median_ms)
    }

    /// [`Prepared::time_ms`] with each kernel's median too.
    pub fn time(
        &self,
        inputs: &[HostTensor],
        min_reps: usize,
        max_reps: usize,
        max_seconds: f64,
    ) -> Result<Measured, EngineError> {
        #[cfg(feature = "llvm")]
        if let (Engine::Cuda { device, .. }, Some(program)) = (self.engine, self.program()) {
            let repetitions = min_reps.max(20);
            let options = tcc_runtime::cuda::TimingOptions { warmup: 5, repetitions, flush_l2: true };
            let timing = device.time_program(program, inputs, options).map_err(|e| self.device_error(e.to_string()))?;
            return Ok(Measured {
                median_ms: timing.median_ms,
                kernel_median_ms: timing.launch_median_ms,
                repetitions,
            });
        }
        let compiled =
            self.compiled.as_ref().ok_or_else(|| self.device_error("the interpreter is not timed".into()))?;
        // One untimed run first: buffers allocated, caches and pages warm.
        std::hint::black_box(compiled.run(inputs).map_err(|e| self.device_error(e.to_string()))?);
        let mut totals = Vec::new();
        let mut per_kernel: Vec<Vec<f64>> = Vec::new();
        let start = Instant::now();
        while totals.len() < min_reps.max(1) || (start.elapsed().as_secs_f64() < max_seconds && totals.len() < max_reps)
        {
            let t = Instant::now();
            let (out, launches) = compiled.run_timed(inputs).map_err(|e| self.device_error(e.to_string()))?;
            totals.push(t.elapsed().as_secs_f64() * 1e3);
            per_kernel.resize(launches.len(), Vec::new());
            for (slot, d) in per_kernel.iter_mut().zip(launches) {
                slot.push(d.as_secs_f64() * 1e3);
            }
            std::hint::black_box(out);
        }
        Ok(Measured {
            median_ms: median(&mut totals),
            kernel_median_ms: per_kernel.iter_mut().map(|s| median(s)).collect(),
            repetitions: totals.len(),
        })
    }

    fn device_error(&self, message: String) -> EngineError {
        EngineError::Device { target: self.engine.name().to_string(), function: self.graph.name.clone(), message }
    }

    /// The time the optimizer and the compiler took.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// A short note on what was compiled, for the command line (empty for the interpreter).
    pub fn summary(&self) -> String {
        match self.program() {
            Some(p) => format!(
                " ({} kernel{} compiled in {:.1} ms)",
                p.launches.len(),
                if p.launches.len() == 1 { "" } else { "s" },
                self.compile_time.as_secs_f64() * 1e3,
            ),
            None => String::new(),
        }
    }

    /// Runs on `inputs`, refusing any interpreter intermediate above `max_memory` bytes.
    pub fn run(&self, inputs: &[Tensor], max_memory: u64) -> Result<Vec<Tensor>, EngineError> {
        match self.program() {
            Some(_) => {
                let host: Vec<HostTensor> = inputs
                    .iter()
                    .map(HostTensor::from_interp)
                    .collect::<Result<_, _>>()
                    .map_err(|e| self.device_error(e.to_string()))?;
                let outputs =
                    self.run_host(&host).ok_or_else(|| self.device_error("nothing was compiled".into()))??;
                Ok(outputs.iter().map(HostTensor::to_interp).collect())
            }
            _ => {
                tcc_ir::interp::run_graph_within(&self.graph, inputs, &self.bindings, max_memory).map_err(|e| match e {
                    tcc_ir::interp::InterpError::MemoryLimit { .. } => EngineError::MemoryLimit(e.to_string()),
                    other => EngineError::Interpreter(other.to_string()),
                })
            }
        }
    }
}
