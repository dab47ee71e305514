//! The one pipeline from a graph to a program ready to compile, which every entry point calls:
//! `tcc run`, `compile`, `explain`, `bench` and `tune`, the builder/[`crate::Device`] API and
//! `kernel!`. So for the same kernel, target, lockfile and cache they all use, and show, the same
//! schedule.
//!
//! ```text
//!  Graph + Bindings
//!    --optimize (the target's cost model)------------------>  Program, schedules `default`
//!    --choose_schedules (lockfile, then tuning cache)------>  Program, each kernel's schedule and
//!                                                              its source: locked | cached |
//!                                                              borrowed | default
//!    --the target's device compiles (engine, Device) or the emitters write (`compile --emit`)
//! ```
//!
//! The lockfile is `--lock FILE`, else `$TCC_LOCKFILE`, else `./tcc.lock` when it exists. A
//! lockfile or cache that cannot be read costs only speed: a warning, and the optimizer's
//! schedules stay; a lockfile named with `--lock` that cannot be read is an error.

use std::path::{Path, PathBuf};

use tcc_autotune::{DeviceKey, Lockfile};
use tcc_ir::target::Target;
use tcc_ir::{Bindings, Graph, Kernel, Program, Schedule, ScheduleKind, ScheduleSource};
use tcc_passes::{OptimizeOptions, Optimized, TargetModel, optimize};

use crate::tuning::{ApplyReport, Decision};

/// The environment variable naming the lockfile when no `--lock` is given.
pub const LOCKFILE_ENV: &str = "TCC_LOCKFILE";

/// The lockfile read when neither `--lock` nor [`LOCKFILE_ENV`] names one (if it exists).
pub const DEFAULT_LOCKFILE: &str = "tcc.lock";

/// Which lockfile a pipeline obeys.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum LockSetting {
    /// `$TCC_LOCKFILE`, else `./tcc.lock` when it exists; an unreadable one is a warning.
    #[default]
    FromEnvironment,
    /// This file (`--lock FILE`); unreadable is an error.
    File(PathBuf),
    /// None.
    Off,
}

/// Why the pipeline could not produce a program.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The lockfile named with `--lock` cannot be used.
    #[error("the lockfile `{path}`: {message}")]
    Lockfile {
        /// Its path.
        path: PathBuf,
        /// Why.
        message: String,
        /// True when its contents are at fault (invalid input), false when reading failed.
        invalid: bool,
    },
    /// The optimizer failed.
    #[error("the optimizer failed on `{function}`: {message}")]
    Optimizer {
        /// The fn.
        function: String,
        /// Why.
        message: String,
    },
}

/// One kernel of a planned program: what it is and the schedule it runs with, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelPlan {
    /// Its name in the program.
    pub kernel: String,
    /// Its family (`gemm`, `pointwise`, `row-reduction`, `generic`).
    pub family: &'static str,
    /// The schedule it runs with.
    pub schedule: Schedule,
    /// That schedule as its family reads it (its canonical text is what every command shows).
    pub kind: ScheduleKind,
    /// Where that schedule came from.
    pub source: ScheduleSource,
    /// The measured time of that schedule (from the lockfile or cache), nanoseconds.
    pub recorded_ns: Option<u64>,
}

impl KernelPlan {
    /// The plan of `kernel` as it stands (its schedule decoded for `target`), from `source`.
    pub fn new(kernel: &Kernel, target: Target, source: ScheduleSource, recorded_ns: Option<u64>) -> KernelPlan {
        KernelPlan {
            kernel: kernel.name.clone(),
            family: kernel.class.family(),
            schedule: kernel.schedule,
            kind: kernel.schedule_kind(target),
            source,
            recorded_ns,
        }
    }
}

/// A program ready to compile, with each kernel's plan.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The program, its schedules chosen.
    pub program: Program,
    /// One entry per launch, in launch order.
    pub kernels: Vec<KernelPlan>,
    /// The optimizer's report (schedules and sources updated to the chosen ones).
    pub report: tcc_passes::Report,
    /// The optimizer's alternatives (with `top_k`), schedules unchosen.
    pub alternatives: Vec<Program>,
}

/// Settings of [`Pipeline::plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlanOptions {
    /// Record why each kernel was fused (slower; `tcc explain`).
    pub explain: bool,
    /// Alternative programs the optimizer returns too (`tcc tune`).
    pub top_k: usize,
}

/// The pipeline for one target: its cost model, its lockfile and where its tuning records are.
#[derive(Debug, Clone)]
pub struct Pipeline {
    target: Target,
    lock: Option<Lockfile>,
    records: Records,
}

/// Whose tuning records a pipeline reads.
#[derive(Debug, Clone)]
enum Records {
    /// Records of this device (the host CPU, or the local GPU).
    Device(DeviceKey),
    /// None: the interpreter, a GPU target without that GPU here, or the cache turned off.
    None(String),
}

impl Pipeline {
    /// The pipeline for `target` obeying `lock`, reading the tuning records of this machine: the
    /// host CPU's for a CPU target; for a GPU target the local GPU's when it runs that target's
    /// code (opening it to read what it is), else none (the optimizer's schedules).
    pub fn new(target: Target, lock: &LockSetting) -> Result<Pipeline, PipelineError> {
        let records = match target {
            Target::Interp => Records::None("the interpreter has no schedules".into()),
            Target::Cpu(_) => Records::Device(crate::tuning::host_device()),
            Target::Gpu(arch) => match crate::target::local_gpu(arch) {
                Ok(info) => Records::Device(crate::tuning::gpu::device_key(&info)),
                Err(e) => Records::None(format!("no tuning records for {arch}: {e}")),
            },
        };
        Ok(Pipeline { target, lock: read_lock(lock)?, records })
    }

    /// The pipeline for `target` with the records of `device` (a GPU the caller has open: nothing
    /// is probed).
    pub fn for_device(target: Target, lock: &LockSetting, device: DeviceKey) -> Result<Pipeline, PipelineError> {
        Ok(Pipeline { target, lock: read_lock(lock)?, records: Records::Device(device) })
    }

    /// The optimizer alone: no lockfile and no tuning cache (for the differential tests, which
    /// check the optimizer's own schedules).
    pub fn untuned(target: Target) -> Pipeline {
        Pipeline { target, lock: None, records: Records::None("tuning records turned off".into()) }
    }

    /// The target.
    pub fn target(&self) -> Target {
        self.target
    }

    /// The target's cost model.
    pub fn model(&self) -> TargetModel {
        TargetModel::for_target(self.target)
    }

    /// The device whose tuning records are read, if any.
    pub fn device_key(&self) -> Option<&DeviceKey> {
        match &self.records {
            Records::Device(key) => Some(key),
            Records::None(_) => None,
        }
    }

    /// The lockfile obeyed, if any.
    pub fn lockfile(&self) -> Option<&Lockfile> {
        self.lock.as_ref()
    }

    /// Step 1: the optimizer, with the target's cost model, under `bindings` (unbound variables
    /// count as the cost model's default size).
    pub fn optimize(
        &self,
        graph: &Graph,
        bindings: &Bindings,
        options: PlanOptions,
    ) -> Result<Optimized, PipelineError> {
        let mut opts = OptimizeOptions::new(self.model());
        opts.bindings = bindings.clone();
        opts.explain = options.explain;
        opts.top_k = options.top_k;
        optimize(graph, &opts)
            .map_err(|e| PipelineError::Optimizer { function: graph.name.clone(), message: e.to_string() })
    }

    /// Step 2: each kernel's schedule becomes its locked choice, else its cached winner (a record
    /// measured elsewhere is checked once on this machine in a `tcc worker` when this process can
    /// start one; else it is left unused). Never fails: without records (or with shape variables
    /// unbound) kernels keep the optimizer's schedules, as `default`.
    pub fn choose_schedules(&self, program: &mut Program, bindings: &Bindings) -> Vec<KernelPlan> {
        let target = self.target;
        let defaults = |program: &Program| -> Vec<KernelPlan> {
            program.launches.iter().map(|l| KernelPlan::new(&l.kernel, target, ScheduleSource::Default, None)).collect()
        };
        let all_bound =
            program.launches.iter().all(|l| l.kernel.graph.shape_vars().iter().all(|v| bindings.get(v).is_some()));
        if !all_bound {
            tracing::debug!("`{}`: shape variables unbound, so no tuning record applies", program.name);
            return defaults(program);
        }
        let device = match &self.records {
            Records::Device(key) => key.clone(),
            Records::None(why) => {
                tracing::debug!("`{}`: no tuning records ({why})", program.name);
                let mut plans = defaults(program);
                if let Some(lock) = &self.lock
                    && target != Target::Interp
                {
                    self.apply_lock_only(program, bindings, lock, &mut plans);
                }
                return plans;
            }
        };
        let mut chosen = program.clone();
        match crate::tuning::apply_cached_schedules_on(&mut chosen, bindings, self.target, device, self.lock.clone()) {
            Ok(report) => {
                *program = chosen;
                plans(program, &report, self.target)
            }
            Err(e) => {
                tracing::warn!(
                    "`{}`: the tuning cache is unavailable; using the optimizer's schedules: {e}",
                    program.name
                );
                defaults(program)
            }
        }
    }

    /// The lockfile's choices without a device here (a GPU target compiled on a machine without
    /// that GPU): each kernel's entry is found by its kernel key alone (any device), as a
    /// lockfile made on another machine is.
    fn apply_lock_only(&self, program: &mut Program, bindings: &Bindings, lock: &Lockfile, plans: &mut [KernelPlan]) {
        let nowhere = DeviceKey {
            name: "no local device".into(),
            arch: self.target.name().into(),
            compute_capability: None,
            sm_count: None,
        };
        for (launch, plan) in program.launches.iter_mut().zip(plans.iter_mut()) {
            let kernel = &mut launch.kernel;
            let Ok(key) = crate::tuning::kernel_key(kernel, bindings, self.target, &nowhere) else { continue };
            let Some(choice) = lock.choose(&key) else { continue };
            if choice.entry.schedule.tier != kernel.schedule.tier {
                continue;
            }
            kernel.schedule = choice.entry.schedule;
            *plan = KernelPlan::new(kernel, self.target, ScheduleSource::Locked, Some(choice.entry.time_ns));
        }
    }

    /// Steps 1 and 2.
    pub fn plan(&self, graph: &Graph, bindings: &Bindings, options: PlanOptions) -> Result<Plan, PipelineError> {
        let optimized = self.optimize(graph, bindings, options)?;
        let mut program = optimized.program;
        let kernels = self.choose_schedules(&mut program, bindings);
        let mut report = optimized.report;
        for (k, plan) in report.kernels.iter_mut().zip(&kernels) {
            k.schedule = plan.schedule;
            k.kind = plan.kind;
            k.source = plan.source;
        }
        Ok(Plan { program, kernels, report, alternatives: optimized.alternatives })
    }
}

/// The plans of `program`'s kernels from the decisions of `report`.
fn plans(program: &Program, report: &ApplyReport, target: Target) -> Vec<KernelPlan> {
    program
        .launches
        .iter()
        .zip(&report.decisions)
        .map(|(l, d): (_, &Decision)| KernelPlan::new(&l.kernel, target, d.source, d.time_ns))
        .collect()
}

/// The lockfile `setting` names, read.
fn read_lock(setting: &LockSetting) -> Result<Option<Lockfile>, PipelineError> {
    match setting {
        LockSetting::Off => Ok(None),
        LockSetting::File(path) => read_lock_file(path).map(Some),
        LockSetting::FromEnvironment => {
            let path = std::env::var_os(LOCKFILE_ENV)
                .filter(|p| !p.is_empty())
                .map(PathBuf::from)
                .or_else(|| Some(PathBuf::from(DEFAULT_LOCKFILE)).filter(|p| p.is_file()));
            match path {
                None => Ok(None),
                Some(path) => match read_lock_file(&path) {
                    Ok(lock) => Ok(Some(lock)),
                    Err(e) => {
                        tracing::warn!("ignoring {e}");
                        Ok(None)
                    }
                },
            }
        }
    }
}

fn read_lock_file(path: &Path) -> Result<Lockfile, PipelineError> {
    use tcc_autotune::cache::LockfileError;
    Lockfile::read(path).map_err(|e| PipelineError::Lockfile {
        path: path.to_path_buf(),
        invalid: matches!(e, LockfileError::NoHeader | LockfileError::BadLine { .. }),
        message: e.to_string(),
    })
}
