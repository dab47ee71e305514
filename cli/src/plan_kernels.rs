//! The kernels of a tuning plan: every entry optimized as `tcc tune` optimizes one program, each
//! kernel keyed as the tuning cache keys it, listed once however many entries use it, in the
//! order of its key without the device (so shards on machines of one kind agree), each with an
//! estimate of its tuning time that shards balance their work by.

use tcc::target::tuning_target;
use tcc_autotune::cache::KeyHash;
use tcc_autotune::tuning::{CacheKey, Tuning};
use tcc_ir::target::{Target, TargetSpec};
use tcc_ir::{Bindings, Kernel, Schedule};

use super::args::ProgramArgs;
use super::error::CliError;
use super::load::{bind, load, select_fn};
use super::plan_file::PlanEntry;
use super::tune::{optimize_for_tuning, proposals, tuning_error};

/// What measuring one candidate costs besides running it (starting a worker, compiling), in
/// microseconds, for the estimate.
const CANDIDATE_OVERHEAD_US: f64 = 50_000.0;
/// Timed runs of one candidate (warm-up and repetitions), for the estimate.
const RUNS_PER_CANDIDATE: f64 = 25.0;

/// One kernel of a plan.
#[derive(Debug)]
pub struct PlanKernel {
    /// Its cache key without the device ([`CacheKey::kernel_hash`]): the order of the plan.
    pub id: KeyHash,
    /// Its cache key on this machine.
    pub key: CacheKey,
    /// The kernel, with the optimizer's schedule.
    pub kernel: Kernel,
    /// The optimizer's schedules for it, best first.
    pub proposals: Vec<Schedule>,
    /// The shape bindings of the first entry that has it.
    pub bindings: Bindings,
    /// The target it is tuned for.
    pub target: Target,
    /// Where the plan uses it (`PLAN:LINE`).
    pub entries: Vec<String>,
    /// Its search space's size.
    pub candidates: usize,
    /// The estimate of its tuning time, microseconds: candidates × (the cost model's estimate of
    /// its run time × runs per candidate + a fixed overhead per candidate).
    pub estimate_us: f64,
}

/// A plan's kernels and the tuning (cache, worker) of each target they use.
#[derive(Debug)]
pub struct PlanKernels {
    /// Every kernel once, ordered by [`PlanKernel::id`].
    pub kernels: Vec<PlanKernel>,
    tunings: Vec<Tuning>,
}

impl PlanKernels {
    /// The tuning for `target` (every kernel's target has one).
    pub fn tuning(&self, target: Target) -> Result<&Tuning, CliError> {
        self.tunings
            .iter()
            .find(|t| t.target() == target)
            .ok_or_else(|| CliError::Environment(format!("internal error: no tuning for `{}`", target.name())))
    }

    /// The tunings opened for listing, one per target in [`PlanKernels::targets`]'s order, handed
    /// over to tune with (none is left here).
    pub fn take_tunings(&mut self) -> Vec<Tuning> {
        std::mem::take(&mut self.tunings)
    }

    /// The targets the plan's kernels are tuned for, in the order they were first used.
    pub fn targets(&self) -> Vec<Target> {
        self.tunings.iter().map(Tuning::target).collect()
    }

    /// blake3 of every kernel's id and estimate, in order: equal in every shard that splits the plan
    /// the same way (shards on machines of different kinds may not).
    pub fn digest(&self) -> String {
        let text: String = self.kernels.iter().map(|k| format!("{} {:.0}\n", k.id, k.estimate_us)).collect();
        KeyHash::of_text(&text).as_str()[..16].to_string()
    }
}

/// Lists the kernels of `entries` (an entry without a target takes `default_target`); `open`
/// makes the tuning of a target (once per target).
pub fn list(
    entries: &[PlanEntry],
    default_target: TargetSpec,
    top_k: usize,
    mut open: impl FnMut(Target) -> Result<Tuning, CliError>,
) -> Result<PlanKernels, CliError> {
    let mut out = PlanKernels { kernels: Vec::new(), tunings: Vec::new() };
    for entry in entries {
        let at = |e: CliError| located(&entry.at, e);
        let target = tuning_target(entry.target.unwrap_or(default_target)).map_err(|e| at(tuning_error(e)))?;
        let index = match out.tunings.iter().position(|t| t.target() == target) {
            Some(i) => i,
            None => {
                out.tunings.push(open(target)?);
                out.tunings.len() - 1
            }
        };
        let tuning = &out.tunings[index];
        let loaded = load(&entry.file).map_err(at)?;
        let program_args = ProgramArgs { file: entry.file.clone(), function: entry.function.clone() };
        let graph = select_fn(&loaded, &program_args).map_err(at)?;
        let bindings = bind(graph, &entry.dims).map_err(at)?;
        let optimized = optimize_for_tuning(target, graph, &bindings, top_k).map_err(at)?;
        let estimates = optimized.report.kernels.iter().map(|k| k.estimate_us);
        let mut found = Vec::new();
        for (launch, run_us) in optimized.program.launches.iter().zip(estimates) {
            let kernel = &launch.kernel;
            let key = tuning.key(kernel, &bindings).map_err(|e| at(tuning_error(e)))?;
            let id = key.kernel_hash();
            if let Some(known) = out.kernels.iter_mut().chain(found.iter_mut()).find(|k: &&mut PlanKernel| k.id == id) {
                if !known.entries.contains(&entry.at) {
                    known.entries.push(entry.at.clone());
                }
                continue;
            }
            let proposals = proposals(tuning, kernel, &optimized.alternatives, &bindings).map_err(at)?;
            let candidates = tuning.space(kernel, &proposals, &bindings).len();
            let run_us = if run_us.is_finite() && run_us > 0.0 { run_us } else { 0.0 };
            found.push(PlanKernel {
                id,
                key,
                kernel: kernel.clone(),
                proposals,
                bindings: bindings.clone(),
                target,
                entries: vec![entry.at.clone()],
                candidates,
                estimate_us: candidates as f64 * (run_us * RUNS_PER_CANDIDATE + CANDIDATE_OVERHEAD_US),
            });
        }
        out.kernels.extend(found);
    }
    out.kernels.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// `e` said of the plan entry at `at`: its message is prefixed with the place; diagnostics
/// already printed get the place on a line of their own.
fn located(at: &str, e: CliError) -> CliError {
    match e {
        CliError::Invalid { message, printed: false } => CliError::invalid(format!("{at}: {message}")),
        CliError::Invalid { message, printed: true } => {
            eprintln!("error: in the plan entry {at}");
            CliError::Invalid { message, printed: true }
        }
        CliError::Environment(message) => CliError::Environment(format!("{at}: {message}")),
    }
}
