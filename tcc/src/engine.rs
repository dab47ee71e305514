//! Where a program runs: the reference interpreter, a compiled CPU tier, or a CUDA GPU. The command line and the
//! benchmarks go through this one place, so every target is prepared the same way: optimize for the
//! target's cost model, compile once per shape binding, then run.

use std::time::{Duration, Instant};

use std::sync::Arc;
use tcc_ir::interp::Tensor;
use tcc_ir::{Bindings, Graph, Program};
use tcc_passes::{OptimizeOptions, TargetModel, optimize};

use tcc_runtime::{CompiledProgram, CpuDevice, HostTensor};

/// Why a target could not be prepared or run; each message names the culprit.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The target name is not one this build knows.
    #[error("unknown or unavailable target `{0}` (this build runs: {TARGETS})")]
    UnknownTarget(String),
    /// A tensor would exceed the memory limit.
    #[error("{0} (raise it with --max-memory)")]
    MemoryLimit(String),
    /// The optimizer failed.
    #[error("the optimizer failed on `{function}`: {message}")]
    Optimizer {
        /// The fn.
        function: String,
        /// Why.
        message: String,
    },
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

/// The targets `tcc run` and `tcc bench` accept in this build.
#[cfg(feature = "llvm")]
pub const TARGETS: &str = "cpu, cpu:llvm, cpu:cranelift, cuda, interp";
/// The targets `tcc run` and `tcc bench` accept in this build.
#[cfg(not(feature = "llvm"))]
pub const TARGETS: &str = "cpu, cpu:cranelift, interp (cpu:llvm and cuda need the `llvm` feature)";

/// A target ready to prepare programs.
#[derive(Debug)]
// One engine exists per command; boxing the device would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Engine {
    /// The f64 reference interpreter.
    Interp,
    /// The host CPU through the cranelift tier.
    Cpu {
        /// The tier's target name (`cpu:cranelift` or `cpu:llvm`).
        name: String,
        /// The cost model the optimizer uses.
        model: TargetModel,
        /// The device.
        device: CpuDevice,
    },
    /// The local CUDA GPU through the PTX backend (feature `llvm`).
    #[cfg(feature = "llvm")]
    Cuda {
        /// The cost model of the GPU's architecture.
        model: TargetModel,
        /// The device.
        device: tcc_runtime::cuda::CudaDevice,
    },
}

impl Engine {
    /// The engine for a `--target` name.
    pub fn for_target(name: &str) -> Result<Engine, EngineError> {
        match name {
            "interp" => Ok(Engine::Interp),
            // `cpu` is the best tier built in: LLVM's wide vectors when the `llvm` feature is on.
            #[cfg(feature = "llvm")]
            "cpu" | "cpu:llvm" => {
                let model = TargetModel::for_target_name("cpu:llvm")
                    .ok_or_else(|| EngineError::UnknownTarget(name.to_string()))?;
                let device = CpuDevice::with_llvm(0).map_err(|e| EngineError::Device {
                    target: name.to_string(),
                    function: String::new(),
                    message: e.to_string(),
                })?;
                Ok(Engine::Cpu { name: "cpu:llvm".to_string(), model, device })
            }
            #[cfg(feature = "llvm")]
            "cpu:cranelift" => cranelift_engine(name),
            #[cfg(not(feature = "llvm"))]
            "cpu" | "cpu:cranelift" => cranelift_engine(name),
            #[cfg(feature = "llvm")]
            "cuda" => {
                let device = tcc_runtime::cuda::CudaDevice::open(0).map_err(|e| EngineError::Device {
                    target: "cuda".into(),
                    function: String::new(),
                    message: e.to_string(),
                })?;
                let arch = device.info().arch.name();
                let model =
                    TargetModel::for_target_name(arch).ok_or_else(|| EngineError::UnknownTarget(arch.to_string()))?;
                Ok(Engine::Cuda { model, device })
            }
            other => Err(EngineError::UnknownTarget(other.to_string())),
        }
    }

    /// The target's name, as reported to users (`interp`, `cpu:cranelift`).
    pub fn name(&self) -> &str {
        match self {
            Engine::Interp => "interp",
            Engine::Cpu { name, .. } => name,
            #[cfg(feature = "llvm")]
            Engine::Cuda { device, .. } => device.info().arch.name(),
        }
    }

    /// Optimizes and compiles `graph` for `bindings`.
    pub fn prepare<'e>(&'e self, graph: &Graph, bindings: &Bindings) -> Result<Prepared<'e>, EngineError> {
        match self {
            Engine::Interp => Ok(Prepared {
                engine: self,
                graph: graph.clone(),
                program: None,
                compiled: None,
                compile_time: Duration::ZERO,
                schedules: None,
            }),
            Engine::Cpu { name, model, device } => {
                let start = Instant::now();
                let mut options = OptimizeOptions::new(model.clone());
                options.bindings = bindings.clone();
                let optimized = optimize(graph, &options)
                    .map_err(|e| EngineError::Optimizer { function: graph.name.clone(), message: e.to_string() })?;
                let mut program = optimized.program;
                // Cached or locked winners replace the optimizer's schedules; a cache that cannot be
                // opened costs only speed, so it is a warning, never a failure.
                // The tuner measures the cranelift tier only so far; the LLVM tier keeps the
                // optimizer's schedules.
                let schedules = if name == "cpu:cranelift" {
                    match crate::tuning::apply_cached_schedules(&mut program, bindings, name, None) {
                        Ok(report) => Some(report.summary()),
                        Err(e) => {
                            tracing::warn!("the tuning cache is unavailable; using the optimizer's schedules: {e}");
                            None
                        }
                    }
                } else {
                    None
                };
                check_buffers(&program, bindings)?;
                let compiled = device.compile(&program, bindings).map_err(|e| EngineError::Device {
                    target: name.clone(),
                    function: graph.name.clone(),
                    message: e.to_string(),
                })?;
                Ok(Prepared {
                    engine: self,
                    graph: graph.clone(),
                    program: Some(program),
                    compiled: Some(compiled),
                    compile_time: start.elapsed(),
                    schedules,
                })
            }
            #[cfg(feature = "llvm")]
            Engine::Cuda { model, device } => {
                let start = Instant::now();
                let mut options = OptimizeOptions::new(model.clone());
                options.bindings = bindings.clone();
                let mut program = optimize(graph, &options)
                    .map_err(|e| EngineError::Optimizer { function: graph.name.clone(), message: e.to_string() })?
                    .program;
                // Locked or cached winners of `tcc tune --target cuda` for this GPU, as on the CPU.
                let target = crate::tuning::TuneTarget::Gpu(device.info().arch);
                let key = crate::tuning::gpu::device_key(device.info());
                let schedules =
                    match crate::tuning::apply_cached_schedules_on(&mut program, bindings, target, key, None) {
                        Ok(report) => Some(report.summary()),
                        Err(e) => {
                            tracing::warn!("the tuning cache is unavailable; using the optimizer's schedules: {e}");
                            None
                        }
                    };
                check_buffers(&program, bindings)?;
                device.compile(&program, bindings).map_err(|e| EngineError::Device {
                    target: self.name().to_string(),
                    function: graph.name.clone(),
                    message: e.to_string(),
                })?;
                Ok(Prepared {
                    engine: self,
                    graph: graph.clone(),
                    program: Some(program),
                    compiled: None,
                    compile_time: start.elapsed(),
                    schedules,
                })
            }
        }
    }
}

/// The cranelift tier on every core.
fn cranelift_engine(name: &str) -> Result<Engine, EngineError> {
    let model =
        TargetModel::for_target_name("cpu:cranelift").ok_or_else(|| EngineError::UnknownTarget(name.to_string()))?;
    let device = CpuDevice::new().map_err(|e| EngineError::Device {
        target: name.to_string(),
        function: String::new(),
        message: e.to_string(),
    })?;
    Ok(Engine::Cpu { name: "cpu:cranelift".to_string(), model, device })
}

/// Refuses programs whose intermediate buffers could not be allocated sensibly.
fn check_buffers(program: &Program, bindings: &Bindings) -> Result<(), EngineError> {
    for (i, ty) in program.buffers.iter().enumerate() {
        let numel =
            ty.shape.resolve(bindings).and_then(|dims| dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d as u64)));
        let bytes = numel.and_then(|n| n.checked_mul(ty.dtype.size_bytes() as u64));
        if bytes.is_none_or(|b| b >= tcc_ir::limits::MAX_ELEMENTS) {
            return Err(EngineError::MemoryLimit(format!("buffer {i} of type {ty} is too large")));
        }
    }
    Ok(())
}

/// A program prepared for one target and one binding of its shape variables.
#[derive(Debug)]
pub struct Prepared<'e> {
    engine: &'e Engine,
    graph: Graph,
    program: Option<Program>,
    compiled: Option<Arc<CompiledProgram>>,
    compile_time: Duration,
    /// What the tuning cache decided, when it was consulted.
    schedules: Option<String>,
}

impl Prepared<'_> {
    /// The optimized program (`None` on the interpreter).
    pub fn program(&self) -> Option<&Program> {
        self.program.as_ref()
    }

    /// Runs the compiled program on host tensors (no conversions; what benchmarks time). `None` on
    /// the interpreter, which has no compiled form.
    pub fn run_host(&self, inputs: &[HostTensor]) -> Option<Result<Vec<HostTensor>, EngineError>> {
        #[cfg(feature = "llvm")]
        if let (Engine::Cuda { device, .. }, Some(program)) = (self.engine, &self.program) {
            return Some(device.run_program(program, inputs).map_err(|e| self.device_error(e.to_string())));
        }
        let compiled = self.compiled.as_ref()?;
        Some(compiled.run(inputs).map_err(|e| EngineError::Device {
            target: self.engine.name().to_string(),
            function: self.graph.name.clone(),
            message: e.to_string(),
        }))
    }

    /// Median time of one run in milliseconds, as DESIGN §0 asks per device: on a GPU, CUDA events
    /// with warm-up and an L2 flush before each of at least 20 repetitions; on the CPU, wall time
    /// of at least `min_reps` runs and more until `max_seconds` passed or `max_reps` were taken.
    pub fn time_ms(
        &self,
        inputs: &[HostTensor],
        min_reps: usize,
        max_reps: usize,
        max_seconds: f64,
    ) -> Result<f64, EngineError> {
        #[cfg(feature = "llvm")]
        if let (Engine::Cuda { device, .. }, Some(program)) = (self.engine, &self.program) {
            let options = tcc_runtime::cuda::TimingOptions { warmup: 5, repetitions: min_reps.max(20), flush_l2: true };
            let timing = device.time_program(program, inputs, options).map_err(|e| self.device_error(e.to_string()))?;
            return Ok(timing.median_ms);
        }
        let compiled =
            self.compiled.as_ref().ok_or_else(|| self.device_error("the interpreter is not timed".into()))?;
        let mut times = Vec::new();
        let start = Instant::now();
        while times.len() < min_reps || (start.elapsed().as_secs_f64() < max_seconds && times.len() < max_reps) {
            let t = Instant::now();
            let out = compiled.run(inputs).map_err(|e| self.device_error(e.to_string()))?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
            std::hint::black_box(out);
        }
        times.sort_by(f64::total_cmp);
        Ok(times.get(times.len() / 2).copied().unwrap_or(f64::NAN))
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
        match &self.program {
            Some(p) => format!(
                " ({} kernel{} compiled in {:.1} ms{})",
                p.launches.len(),
                if p.launches.len() == 1 { "" } else { "s" },
                self.compile_time.as_secs_f64() * 1e3,
                self.schedules.as_ref().map(|s| format!("; tuning cache: {s}")).unwrap_or_default()
            ),
            None => String::new(),
        }
    }

    /// Runs on `inputs`, refusing any interpreter intermediate above `max_memory` bytes.
    pub fn run(&self, inputs: &[Tensor], max_memory: u64) -> Result<Vec<Tensor>, EngineError> {
        match &self.program {
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
            _ => tcc_ir::interp::run_graph_with_limit(&self.graph, inputs, max_memory).map_err(|e| match e {
                tcc_ir::interp::InterpError::MemoryLimit { .. } => EngineError::MemoryLimit(e.to_string()),
                other => EngineError::Interpreter(other.to_string()),
            }),
        }
    }
}
