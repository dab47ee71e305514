//! Tuned schedules: `tcc tune` measures each kernel's candidate schedules and records the winner
//! in the tuning cache; `tcc run` (and the library) replace each kernel's schedule by the locked or
//! cached winner, checking a winner measured elsewhere once on this machine before using it.
//!
//! ```text
//!  Program (optimizer)  --kernel_key-->  CacheKey (fingerprint w/o schedule, shapes, dtypes, target, CPU)
//!        |                                   |
//!        |        Lockfile::choose / Layered::lookup  -->  plan()  -->  Use | Validate | Tune | Default
//!        |                                                               |        |
//!  space: cpu_space / gpu_space (proposals + knobs)  <-----------------+   revalidate (1 trial)
//!        |
//!  Tuner + WorkerBenchmarker: each candidate in a `tcc worker` process (compile in parallel,
//!  validate against the interpreter's outputs on random inputs, or for large kernels against a
//!  known-good kernel's; time: warm-up + median, CUDA events on a GPU)
//!        |
//!  winner -> cache record (and the lockfile with `tcc tune --lock`)
//! ```

pub mod gpu;
mod key;
mod reference;
mod space;
pub mod study;
pub mod worker;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cache::LockChoice;
use crate::{Benchmarker, Candidate, Plan, SearchSpace, Strategy, TunerOptions, plan, revalidate, tune_and_record};
use tcc_ir::target::Target;
use tcc_ir::{Bindings, Kernel, Program, Schedule, ScheduleSource};

pub use crate::search::{Worker, WorkerBenchmarker};
// The autotuner's types this module's API takes and returns.
pub use crate::cache::{LockEntry, SqliteStore};
pub use crate::search::WorkerCommand;
pub use crate::search::worker::Timing;
pub use crate::{
    Budget, CacheKey, CacheRecord, CacheStore, DeviceKey, HitKind, Layered, Lockfile, Lookup, Outcome, TuneReport,
};
pub use key::{driver, host_device, kernel_key};
pub use reference::{INTERP_MAX_WORK, Reference, SPOT_CHECKS, allowance, compare, interp_work, spot_check, tolerance};
pub use space::{
    GpuPrune, cpu_space, gpu_knob_space, gpu_knobs, gpu_space, llvm_cpu_space, matmul_dims, matmul_problem,
    simt_admits, space_for, thread_choices, variations,
};

/// Largest tensor the reference computation allocates (as the interpreter's f64 values).
pub const DEFAULT_MAX_BYTES: u64 = 4 << 30;

/// Why tuning, or applying tuned schedules, could not proceed.
#[derive(Debug, thiserror::Error)]
pub enum TuningError {
    /// The target has nothing to tune (the interpreter).
    #[error("target `{0}` has no schedules to tune; use --target cpu")]
    NotTunable(String),
    /// The target has no benchmarker in this build (invalid input for this build: exit 1).
    #[error("tuning for `{0}` is not available in this build")]
    NoBenchmarker(String),
    /// The GPU to tune on is missing (no driver, no device, an unsupported one).
    #[error("{0}")]
    NoDevice(String),
    /// A shape variable is unbound.
    #[error("{0}")]
    Unbound(String),
    /// A tensor would exceed the memory limit.
    #[error("{0}")]
    MemoryLimit(String),
    /// The lockfile could not be read or written.
    #[error(transparent)]
    Lockfile(#[from] crate::cache::LockfileError),
    /// The environment failed (a temporary directory, the worker executable).
    #[error("{0}")]
    Environment(String),
    /// The tuning cache is damaged: results could not be recorded (`tcc cache repair`).
    #[error("cannot tune: {0}")]
    CacheDamaged(String),
    /// A bug in tcc.
    #[error("internal error: {0}")]
    Internal(String),
}

impl TuningError {
    /// True when the input (target, program, sizes, lockfile) is at fault rather than the
    /// environment: the command line's exit code 1.
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            TuningError::NotTunable(_)
                | TuningError::NoBenchmarker(_)
                | TuningError::Unbound(_)
                | TuningError::MemoryLimit(_)
                | TuningError::Lockfile(crate::cache::LockfileError::NoHeader)
                | TuningError::Lockfile(crate::cache::LockfileError::BadLine { .. })
        )
    }
}

/// The schedule chosen for one kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The kernel's name in the program.
    pub kernel: String,
    /// Its cache key.
    pub key: CacheKey,
    /// The schedule it runs with.
    pub schedule: Schedule,
    /// Where that schedule came from.
    pub source: ScheduleSource,
    /// Its measured median time, when known.
    pub time_ns: Option<u64>,
    /// Candidates measured for this kernel in this call (tuning trials and re-validations).
    pub trials: usize,
    /// The record that holds the decision (for lockfiles), when there is one.
    pub record: Option<CacheRecord>,
}

/// What [`Tuning::apply`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApplyReport {
    /// One decision per kernel, in launch order.
    pub decisions: Vec<Decision>,
    /// Candidates measured (re-validations of records measured elsewhere); 0 with a warm cache.
    pub trials: usize,
}

impl ApplyReport {
    /// One line: how many kernels took a locked, cached or borrowed schedule and how many trials ran.
    pub fn summary(&self) -> String {
        let count = |s: ScheduleSource| self.decisions.iter().filter(|d| d.source == s).count();
        format!(
            "{} kernels: {} locked, {} cached, {} borrowed, {} default; {} trials",
            self.decisions.len(),
            count(ScheduleSource::Locked),
            count(ScheduleSource::Cached),
            count(ScheduleSource::Borrowed),
            count(ScheduleSource::Default),
            self.trials
        )
    }
}

/// Settings of [`Tuning::tune_kernel`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TuneOptions {
    /// When to stop tuning this kernel.
    pub budget: Budget,
    /// Candidates compiled at once (0 = the number of cores).
    pub jobs: usize,
    /// Tune even when a fresh record exists.
    pub retune: bool,
    /// Show a progress bar (on a terminal only).
    pub progress: bool,
}

impl Default for TuneOptions {
    fn default() -> TuneOptions {
        TuneOptions { budget: Budget::time(Duration::from_secs(60)), jobs: 0, retune: false, progress: true }
    }
}

/// The result of [`Tuning::tune_kernel`].
#[derive(Debug, Clone)]
pub struct KernelTuning {
    /// The decision.
    pub decision: Decision,
    /// The tuning run, when one ran.
    pub report: Option<TuneReport>,
    /// The outcome of re-validating a cached record, when one was checked.
    pub validation: Option<Outcome>,
    /// Where the kernel's wall time went.
    pub phases: Phases,
}

/// Wall time of the phases of tuning one kernel (zero for a phase that did not run).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Phases {
    /// Listing the search space and computing the reference outputs (the interpreter, or the
    /// default schedule run in a worker).
    pub prepare: Duration,
    /// The search: compiling and measuring candidates.
    pub search: Duration,
}

/// The tuning cache, lockfile and worker for one target on this machine.
#[derive(Debug)]
pub struct Tuning {
    cache: Layered,
    target: Target,
    device: DeviceKey,
    lock: Option<Lockfile>,
    worker: Option<WorkerCommand>,
    timing: Timing,
    seed: u64,
    max_bytes: u64,
    space_limit: Option<usize>,
    interp_limit: u64,
    scratch: tempfile::TempDir,
}

impl Tuning {
    /// Tuning for `target`; records are keyed by this host's CPU, or for the GPU by the local
    /// GPU (opened once to read what it is).
    pub fn for_target(cache: Layered, target: Target, worker: WorkerCommand) -> Result<Tuning, TuningError> {
        let device = if target.is_gpu() { gpu::device_key(&gpu::probe()?) } else { host_device() };
        Tuning::for_device(cache, target, device, worker)
    }

    /// Tuning for `target` with records keyed by `device` (a GPU already open elsewhere).
    pub fn for_device(
        cache: Layered,
        target: Target,
        device: DeviceKey,
        worker: WorkerCommand,
    ) -> Result<Tuning, TuningError> {
        let scratch = tempfile::Builder::new()
            .prefix("tcc-tune-")
            .tempdir()
            .map_err(|e| TuningError::Environment(format!("cannot create a temporary directory: {e}")))?;
        Ok(Tuning {
            cache,
            target,
            device,
            lock: None,
            worker: Some(worker),
            timing: Timing::default(),
            seed: 0,
            max_bytes: DEFAULT_MAX_BYTES,
            space_limit: None,
            interp_limit: INTERP_MAX_WORK,
            scratch,
        })
    }

    /// Starts no worker: [`Tuning::apply`] then uses only locked and fresh cached schedules (a
    /// record measured elsewhere needs a check on this machine, so it is left unused), and
    /// [`Tuning::tune_kernel`] cannot measure. For programs that cannot serve `tcc worker`.
    pub fn without_validation(mut self) -> Tuning {
        self.worker = None;
        self
    }

    /// Uses the decisions of `lock` before anything cached.
    pub fn with_lock(mut self, lock: Lockfile) -> Tuning {
        self.lock = Some(lock);
        self
    }

    /// Keys records by `device` instead of this host's CPU (for tests and tools).
    pub fn with_device(mut self, device: DeviceKey) -> Tuning {
        self.device = device;
        self
    }

    /// Warm-up and timed runs per measurement.
    pub fn with_timing(mut self, timing: Timing) -> Tuning {
        self.timing = timing;
        self
    }

    /// Seed of the random validation inputs.
    pub fn with_seed(mut self, seed: u64) -> Tuning {
        self.seed = seed;
        self
    }

    /// The cache.
    pub fn cache(&self) -> &Layered {
        &self.cache
    }

    /// The device records are keyed by.
    pub fn device(&self) -> &DeviceKey {
        &self.device
    }

    /// The target measured on; its [`Target::name`] is what records are stored under.
    pub fn target(&self) -> Target {
        self.target
    }

    /// The cache key of `kernel` under `bindings`.
    pub fn key(&self, kernel: &Kernel, bindings: &Bindings) -> Result<CacheKey, TuningError> {
        kernel_key(kernel, bindings, self.target, &self.device)
    }

    /// The search space of `kernel` for this target, the optimizer's `proposals` first (a GPU
    /// space thinned to [`Tuning::with_space_limit`]).
    pub fn space(&self, kernel: &Kernel, proposals: &[Schedule], bindings: &Bindings) -> SearchSpace {
        let host_threads = u32::try_from(std::thread::available_parallelism().map_or(1, usize::from)).unwrap_or(1);
        let sm_count = self.device.sm_count.unwrap_or(132);
        space_for(self.target, kernel, proposals, bindings, host_threads, sm_count, self.space_limit)
    }

    /// Validates against the interpreter only kernels whose interpretation costs at most `work`
    /// element operations (default [`INTERP_MAX_WORK`]); larger ones against a known-good kernel.
    pub fn with_interp_limit(mut self, work: u64) -> Tuning {
        self.interp_limit = work;
        self
    }

    /// Thins GPU search spaces evenly along the cost model's order to at most `limit` candidates.
    pub fn with_space_limit(mut self, limit: Option<usize>) -> Tuning {
        self.space_limit = limit;
        self
    }

    /// A benchmarker for `kernel`: computes its reference once and writes it for the workers: the
    /// interpreter's outputs when that costs at most [`INTERP_MAX_WORK`] (see
    /// [`Tuning::with_interp_limit`]), else a known-good kernel's (see [`Tuning::known_good`]).
    pub fn benchmarker(&self, kernel: &Kernel, bindings: &Bindings) -> Result<WorkerBenchmarker, TuningError> {
        let hash = self.key(kernel, bindings)?.hash();
        let path = self.scratch.path().join(format!("{hash}.ref"));
        if interp_work(kernel, bindings).is_some_and(|w| w <= self.interp_limit) {
            let reference = Reference::compute(kernel, bindings, self.seed, self.max_bytes)?;
            reference.write(&path).map_err(|e| write_error(&path, e))?;
        } else {
            let checked = self.known_good(kernel, bindings, &path)?;
            tracing::info!(
                "kernel `{}`: candidates are validated against the default schedule's outputs ({} entries checked against f64)",
                kernel.name,
                checked
            );
        }
        self.worker_benchmarker(kernel, bindings, path, None)
    }

    fn worker_benchmarker(
        &self,
        kernel: &Kernel,
        bindings: &Bindings,
        reference: PathBuf,
        produce: Option<PathBuf>,
    ) -> Result<WorkerBenchmarker, TuningError> {
        let payload = worker::Payload {
            kernel: kernel.clone(),
            bindings: bindings.clone(),
            reference,
            target: self.target,
            produce,
        };
        let worker = self.worker.clone().ok_or_else(|| {
            TuningError::Environment(format!("no worker to measure with: run `tcc`, or set {WORKER_ENV}"))
        })?;
        Ok(WorkerBenchmarker::new(worker, &payload).map_err(TuningError::Internal)?.with_timing(self.timing))
    }

    /// Writes at `path` the reference of a kernel too large for the interpreter: random inputs and
    /// the outputs of the kernel under the target's default schedule (a simple kernel every
    /// backend gets right), run in a worker. When the kernel is a plain matmul those outputs are
    /// first checked at [`SPOT_CHECKS`] entries against f64 dot products. Returns the number of
    /// entries checked that way.
    pub fn known_good(&self, kernel: &Kernel, bindings: &Bindings, path: &Path) -> Result<usize, TuningError> {
        let inputs = Reference::inputs(kernel, bindings, self.seed, self.max_bytes)?;
        let inputs_path = path.with_extension("inputs");
        Reference { inputs, expected: Vec::new() }.write(&inputs_path).map_err(|e| write_error(&inputs_path, e))?;
        let bench = self.worker_benchmarker(kernel, bindings, inputs_path.clone(), Some(path.to_path_buf()))?;
        let candidate = Candidate { variant: 0, schedule: Schedule::default_for(self.target.tier()), cost: 0.0 };
        let outcome = match bench.compile(&candidate) {
            Ok(worker) => bench.measure(&candidate, &worker),
            Err(detail) => Outcome::Failed { detail },
        };
        let _ = std::fs::remove_file(&inputs_path);
        if !matches!(outcome, Outcome::Ok { .. }) {
            return Err(TuningError::Environment(format!(
                "kernel `{}`: the known-good kernel ({}) that validates candidates failed: {outcome}",
                kernel.name, candidate.schedule
            )));
        }
        let reference = Reference::read(path).map_err(TuningError::Environment)?;
        spot_check(kernel, &reference.inputs, &reference.expected, SPOT_CHECKS, self.seed).map_err(|e| {
            TuningError::Internal(format!(
                "kernel `{}`: the default schedule's outputs disagree with the f64 reference: {e}",
                kernel.name
            ))
        })
    }

    /// Replaces each kernel's schedule by its locked choice, else its cached winner. A record
    /// measured elsewhere (shared cache, import, another tcc version or CPU of the same
    /// architecture) is checked once on this machine first: if it validates, it is used and
    /// recorded as measured here (so the next call uses it directly); if not, it is quarantined
    /// and the optimizer's schedule stays. Never tunes; with a warm cache it measures nothing.
    pub fn apply(&self, program: &mut Program, bindings: &Bindings) -> Result<ApplyReport, TuningError> {
        let mut report = ApplyReport::default();
        for launch in &mut program.launches {
            let kernel = &mut launch.kernel;
            let key = self.key(kernel, bindings)?;
            let lock_choice = self.lock_choice(&key);
            let lookup = if lock_choice.is_some() { Lookup::Miss } else { self.cache.lookup(&key) };
            let mut decision = Decision {
                kernel: kernel.name.clone(),
                key: key.clone(),
                schedule: kernel.schedule,
                source: ScheduleSource::Default,
                time_ns: None,
                trials: 0,
                record: None,
            };
            match plan(lock_choice.as_ref(), &lookup, false) {
                Plan::Use { schedule, .. } => {
                    if let Some(choice) = &lock_choice {
                        decision.source = ScheduleSource::Locked;
                        decision.time_ns = Some(choice.entry.time_ns);
                    } else if let Lookup::Hit { record, kind } = &lookup {
                        decision.source = match kind {
                            HitKind::Borrowed { .. } => ScheduleSource::Borrowed,
                            HitKind::Fresh | HitKind::Unverified => ScheduleSource::Cached,
                        };
                        decision.time_ns = Some(record.time_ns);
                        decision.record = Some(record.clone());
                    }
                    decision.schedule = schedule;
                }
                Plan::Validate { .. } if self.worker.is_none() => tracing::debug!(
                    "kernel `{}`: a cached schedule measured elsewhere is not used (no worker to check it)",
                    kernel.name
                ),
                Plan::Validate { .. } => {
                    if let Lookup::Hit { record, .. } = &lookup {
                        match self.check_record(kernel, bindings, &key, record) {
                            Ok((checked, _)) => {
                                decision.trials = 1;
                                decision.source = ScheduleSource::Borrowed;
                                decision.schedule = checked.schedule;
                                decision.time_ns = Some(checked.time_ns);
                                decision.record = Some(checked);
                            }
                            Err((why, measured)) => {
                                decision.trials = usize::from(measured);
                                tracing::warn!(
                                    "kernel `{}`: the cached schedule {} was not used: {why}",
                                    kernel.name,
                                    record.schedule
                                );
                            }
                        }
                    }
                }
                Plan::Tune { .. } | Plan::Default => {}
            }
            if decision.schedule.tier != kernel.schedule.tier {
                tracing::warn!(
                    "kernel `{}`: ignoring a {} schedule for the {} tier",
                    kernel.name,
                    decision.schedule.tier.name(),
                    kernel.schedule.tier.name()
                );
                decision.schedule = kernel.schedule;
                decision.source = ScheduleSource::Default;
            }
            kernel.schedule = decision.schedule;
            report.trials += decision.trials;
            report.decisions.push(decision);
        }
        Ok(report)
    }

    fn lock_choice(&self, key: &CacheKey) -> Option<LockChoice<'_>> {
        let choice = self.lock.as_ref()?.choose(key)?;
        if let Some(drift) = &choice.drift {
            tracing::warn!("lockfile: {drift}");
        }
        Some(choice)
    }

    /// Re-validates `record` (a hit for `key`) on this machine: a record measured here becomes
    /// fresh; one measured elsewhere is noted as checked here and stays borrowed (a check is not a
    /// measurement: the next `tcc tune` re-measures it). On success returns the record now
    /// standing for `key`; on failure the record is quarantined. The error says why, and whether a
    /// candidate was measured (`false` when the check could not even start: the record is then left
    /// as it is).
    fn check_record(
        &self,
        kernel: &Kernel,
        bindings: &Bindings,
        key: &CacheKey,
        record: &CacheRecord,
    ) -> Result<(CacheRecord, u64), (String, bool)> {
        let bench = self.benchmarker(kernel, bindings).map_err(|e| (e.to_string(), false))?;
        match revalidate(&self.cache, key, record, &bench, driver(self.target)) {
            Outcome::Ok { time_ns } => Ok((CacheRecord { key: key.clone(), ..record.clone() }, time_ns)),
            other => Err((format!("it failed on this machine ({other}) and is quarantined"), true)),
        }
    }

    /// Chooses `kernel`'s schedule by measurement: a fresh cached record is used as is (0 trials)
    /// unless `options.retune`; an unverified one is checked once; otherwise (or if the check
    /// fails) the space of `proposals` (the optimizer's schedules for this kernel, best first) and
    /// their knob variations is searched under `options.budget`, starting from any stale or
    /// borrowed record, and the winner is recorded in the cache.
    pub fn tune_kernel(
        &self,
        kernel: &Kernel,
        proposals: &[Schedule],
        bindings: &Bindings,
        options: &TuneOptions,
    ) -> Result<KernelTuning, TuningError> {
        let key = self.key(kernel, bindings)?;
        let lookup = self.cache.lookup(&key);
        let mut result = KernelTuning {
            decision: Decision {
                kernel: kernel.name.clone(),
                key: key.clone(),
                schedule: kernel.schedule,
                source: ScheduleSource::Default,
                time_ns: None,
                trials: 0,
                record: None,
            },
            report: None,
            validation: None,
            phases: Phases::default(),
        };
        let mut seed = None;
        match (plan(None, &lookup, true), &lookup) {
            (Plan::Use { .. }, Lookup::Hit { record, .. }) if !options.retune => {
                result.decision.source = ScheduleSource::Cached;
                result.decision.schedule = record.schedule;
                result.decision.time_ns = Some(record.time_ns);
                result.decision.record = Some(record.clone());
                return Ok(result);
            }
            (Plan::Validate { .. }, Lookup::Hit { record, .. }) if !options.retune => {
                match self.check_record(kernel, bindings, &key, record) {
                    Ok((here, measured)) => {
                        result.decision.trials = 1;
                        result.validation = Some(Outcome::Ok { time_ns: measured });
                        result.decision.source = ScheduleSource::Borrowed;
                        result.decision.schedule = here.schedule;
                        result.decision.time_ns = Some(here.time_ns);
                        result.decision.record = Some(here);
                        return Ok(result);
                    }
                    Err((why, measured)) => {
                        result.decision.trials = usize::from(measured);
                        tracing::warn!(
                            "kernel `{}`: the cached schedule {}: {why}; tuning",
                            kernel.name,
                            record.schedule
                        );
                        result.validation = Some(Outcome::Failed { detail: why });
                    }
                }
            }
            (_, Lookup::Hit { record, kind }) => {
                if let HitKind::Borrowed { from, .. } = kind {
                    tracing::info!(
                        "kernel `{}`: re-measuring a borrowed record (measured on {from}), starting from its schedule",
                        kernel.name
                    );
                }
                seed = Some((record.variant, record.schedule));
            }
            (_, Lookup::Miss) => {}
        }
        if options.retune
            && let Err(e) = crate::search::Journal::clear(self.cache.local(), &crate::journal_session(&key))
        {
            tracing::warn!("cannot clear the tuning journal before re-tuning: {e}");
        }
        let prepare = Instant::now();
        let mut space = self.space(kernel, proposals, bindings);
        let seeds: Vec<usize> = seed.and_then(|(v, s)| space.seed(v, s)).into_iter().collect();
        let bench = self.benchmarker(kernel, bindings)?;
        result.phases.prepare = prepare.elapsed();
        let search = Instant::now();
        let tuner_options = TunerOptions {
            budget: options.budget,
            strategy: Strategy::Auto,
            compile_threads: options.jobs,
            progress: options.progress,
        };
        let (report, record, recorded) =
            tune_and_record(&self.cache, &key, &space, &seeds, tuner_options, &bench, driver(self.target));
        result.phases.search = search.elapsed();
        if let Err(e) = recorded {
            return Err(TuningError::Environment(format!(
                "kernel `{}`: the tuning result could not be recorded in the tuning cache: {e}",
                kernel.name
            )));
        }
        result.decision.trials += report.measured();
        if let Some(record) = record {
            result.decision.source = ScheduleSource::Tuned;
            result.decision.schedule = record.schedule;
            result.decision.time_ns = Some(record.time_ns);
            result.decision.record = Some(record);
        }
        result.report = Some(report);
        Ok(result)
    }
}

fn write_error(path: &Path, e: std::io::Error) -> TuningError {
    TuningError::Environment(format!("cannot write {}: {e}", path.display()))
}

/// The default tuning cache ([`Layered::open_default`]: `TCC_CACHE_DIR`, `TCC_CACHE_URL`,
/// `TCC_CACHE_READONLY`). A cache that cannot be opened (a damaged database file, an unwritable
/// directory, a bad URL) is reported as one warning per process and replaced by an empty in-memory
/// cache, so running goes on without it.
pub fn open_cache() -> Result<Layered, TuningError> {
    match Layered::open_default() {
        Ok(cache) => Ok(cache),
        Err(e) => {
            crate::cache::warn_once(&format!("cannot open the tuning cache, going on without it: {e}"));
            let store = SqliteStore::in_memory()
                .map_err(|e| TuningError::Environment(format!("cannot open an in-memory tuning cache: {e}")))?;
            Ok(Layered::new(store))
        }
    }
}

/// The default tuning cache for a command that records results (`tcc tune`): as [`open_cache`],
/// except that a damaged database is an error ([`TuningError::CacheDamaged`], naming `tcc cache
/// repair`) before anything is measured, since its results could not be recorded. The whole file
/// is checked ([`SqliteStore::check`]).
pub fn open_cache_for_recording() -> Result<Layered, TuningError> {
    use crate::cache::StoreError;
    match Layered::open_default() {
        Err(e @ StoreError::Damaged { .. }) => Err(TuningError::CacheDamaged(e.to_string())),
        Ok(cache) => match cache.local().check() {
            Err(e @ StoreError::Damaged { .. }) => Err(TuningError::CacheDamaged(e.to_string())),
            _ => Ok(cache),
        },
        Err(_) => open_cache(),
    }
}

/// Environment variable naming the program started (with the argument `worker`) to measure each
/// candidate; the running executable when unset (the `tcc` binary).
pub const WORKER_ENV: &str = "TCC_TUNE_WORKER";

/// How the tuner starts a worker: `$TCC_TUNE_WORKER worker`, else this executable with `worker`
/// when it is the `tcc` binary (another program has no `worker` subcommand: an error).
pub fn worker_command() -> Result<WorkerCommand, TuningError> {
    let program = match std::env::var_os(WORKER_ENV).filter(|p| !p.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => {
            let exe = std::env::current_exe().map_err(|e| {
                TuningError::Environment(format!("cannot find the tcc executable to start workers: {e}"))
            })?;
            if exe.file_stem().is_none_or(|s| s != "tcc") {
                return Err(TuningError::Environment(format!(
                    "{} is not the tcc binary and cannot serve `tcc worker`; set {WORKER_ENV} to a tcc binary",
                    exe.display()
                )));
            }
            exe
        }
    };
    Ok(WorkerCommand { program, args: vec!["worker".to_string()], env: Vec::new() })
}

/// Replaces each kernel's schedule of `program` (optimized for `target` under `bindings`) by its
/// locked or cached winner, with the default cache and records keyed by `device`: see
/// [`Tuning::apply`]. In the `tcc` binary records measured elsewhere are checked in `tcc worker`
/// processes; in another program they are left unused ([`Tuning::without_validation`]). The
/// pipeline's second step (`tcc::pipeline::Pipeline::choose_schedules`).
pub fn apply_cached_schedules_on(
    program: &mut Program,
    bindings: &Bindings,
    target: Target,
    device: DeviceKey,
    lock: Option<Lockfile>,
) -> Result<ApplyReport, TuningError> {
    let mut tuning = match worker_command() {
        Ok(worker) => Tuning::for_device(open_cache()?, target, device, worker)?,
        Err(e) => {
            tracing::debug!("cached schedules measured elsewhere are left unchecked and unused: {e}");
            let none = WorkerCommand { program: PathBuf::new(), args: Vec::new(), env: Vec::new() };
            Tuning::for_device(open_cache()?, target, device, none)?.without_validation()
        }
    };
    if let Some(lock) = lock {
        tuning = tuning.with_lock(lock);
    }
    tuning.apply(program, bindings)
}
