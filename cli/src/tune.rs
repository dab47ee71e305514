//! `tcc tune FILE --target T [--dim ...] [--budget 60s|200trials] [--lock FILE]`: optimize a fn, then
//! for each kernel measure candidate schedules (each in a `tcc worker` process, validated against
//! the interpreter or a known-good kernel) and record the winner in the tuning cache; print what
//! was tried and chosen.
//!
//! `tcc tune --study --target T [--suite gpu] [--workload NAMES] --out DIR`: the tuner's own
//! benchmark on the suite's workloads (guided search vs exhaustive sweep, see
//! `tcc_autotune::tuning::study`).

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tcc_autotune::cache::LockEntry;
use tcc_autotune::{Budget, Lockfile, Trial};
use tcc_ir::target::Target;
use tcc_ir::{Bindings, Graph, Program, Schedule, ScheduleSource};

use super::args::{ProgramArgs, TuneArgs};
use super::atomic::write_output;
use super::error::CliError;
use super::load::{bind, load, select_fn};
use tcc::pipeline::{KernelPlan, Pipeline, PlanOptions};
use tcc::target::tuning_target;
use tcc_autotune::tuning::study::{StudyOptions, StudyResult, markdown, trials_jsonl};
use tcc_autotune::tuning::{
    Decision, KernelTuning, TuneOptions, Tuning, TuningError, open_cache_for_recording, worker_command,
};

/// Runs `tcc tune`.
pub fn tune(args: &TuneArgs) -> Result<(), CliError> {
    if args.study {
        return study(args);
    }
    if let Some(plan) = &args.plan {
        return super::tune_plan::tune_plan(args, plan);
    }
    let target = tuning_target(args.target).map_err(tuning_error)?;
    let file = args.file.clone().ok_or_else(|| CliError::invalid("`tcc tune` needs a FILE (or --study)"))?;
    let program_args = ProgramArgs { file: file.clone(), function: args.function.clone() };
    let lock = match &args.lock {
        Some(path) => Some((path.as_path(), read_lock(path, &file)?)),
        None => None,
    };
    let loaded = load(&file)?;
    let graph = select_fn(&loaded, &program_args)?;
    let bindings = bind(graph, &args.dims)?;
    let tcc_passes::Optimized { program, alternatives, .. } =
        optimize_for_tuning(target, graph, &bindings, args.top_k)?;
    let devices = super::devices::resolve(args.devices.as_ref(), target)?;
    let worker = worker_command().map_err(tuning_error)?;
    let open = |device: super::devices::Device| -> Result<Tuning, CliError> {
        let cache = open_cache_for_recording().map_err(tuning_error)?;
        Ok(Tuning::for_target(cache, target, super::devices::worker_on(&worker, device))
            .map_err(tuning_error)?
            .with_seed(args.seed)
            .with_space_limit(args.space))
    };
    let tuning = open(devices.first().copied().flatten())?;
    let say = |text: &str| {
        if !args.json {
            print!("{text}");
        }
    };
    say(&format!(
        "fn {} on {} ({}{}): {} kernel{}, budget {}\n",
        graph.name,
        target.name(),
        tuning.device().name,
        if devices.len() > 1 { format!(" x {} GPUs", devices.len()) } else { String::new() },
        program.launches.len(),
        if program.launches.len() == 1 { "" } else { "s" },
        describe_budget(&args.budget)
    ));
    let start = Instant::now();
    let trials = AtomicUsize::new(0);
    let begun = AtomicUsize::new(0);
    let count = program.launches.len();
    let proposals_of = program
        .launches
        .iter()
        .map(|l| proposals(&tuning, &l.kernel, &alternatives, &bindings))
        .collect::<Result<Vec<_>, _>>()?;
    // Spaces are listed here only to split a trial budget (each kernel's tuning lists its own).
    let spaces: Vec<usize> = match args.budget.max_trials {
        Some(_) => program
            .launches
            .iter()
            .zip(&proposals_of)
            .map(|(l, p)| tuning.space(&l.kernel, p, &bindings).len())
            .collect(),
        None => vec![0; program.launches.len()],
    };
    let allotted = allot_trials(args.budget.max_trials, &spaces);
    let work = |tuning: &Tuning, i: usize, launch: &tcc_ir::Launch| -> Result<Decision, CliError> {
        let kernel = &launch.kernel;
        let proposals = &proposals_of[i];
        let before = begun.fetch_add(1, Ordering::SeqCst);
        let options = TuneOptions {
            budget: share(&args.budget, start.elapsed(), allotted[i], count - before, devices.len()),
            jobs: args.jobs,
            retune: args.retune,
            progress: devices.len() == 1,
        };
        let result = tuning.tune_kernel(kernel, proposals, &bindings, &options).map_err(tuning_error)?;
        say(&describe_kernel(kernel, &result, proposals.first()));
        if args.json {
            super::json::print_line(&serde_json::Value::Object(decision_object(target, kernel, &result.decision)))?;
        }
        trials.fetch_add(result.decision.trials, Ordering::SeqCst);
        Ok(result.decision)
    };
    // The tuning opened for the header serves its device; the other devices open their own.
    let first_device = devices.first().copied().flatten();
    let opened = std::sync::Mutex::new(Some(tuning));
    let open_or_reuse = |device: super::devices::Device| -> Result<Tuning, CliError> {
        let reused = if device == first_device {
            opened.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
        } else {
            None
        };
        reused.map_or_else(|| open(device), Ok)
    };
    let decisions = super::devices::on_devices(&devices, &program.launches, open_or_reuse, work)?;
    say(&summary(&decisions, start.elapsed(), trials.load(Ordering::SeqCst)));
    if let Some((path, mut lockfile)) = lock {
        let mut written = 0;
        for d in &decisions {
            if let (Some(record), Some(time_ns)) = (&d.record, d.time_ns) {
                lockfile.insert(LockEntry {
                    key: d.key.clone(),
                    variant: record.variant,
                    schedule: d.schedule,
                    schedule_format: tcc_ir::schedule::SCHEDULE_FORMAT,
                    time_ns,
                });
                written += 1;
            }
        }
        lockfile
            .write(path)
            .map_err(|e| CliError::Environment(format!("cannot write the lockfile `{}`: {e}", path.display())))?;
        say(&format!("lockfile {}: {written} entries written, {} in all\n", path.display(), lockfile.len()));
    }
    let missing: Vec<&str> =
        decisions.iter().filter(|d| d.source == ScheduleSource::Default).map(|d| d.kernel.as_str()).collect();
    match without_winner(&missing) {
        Some(message) => Err(CliError::Environment(message)),
        None => Ok(()),
    }
}

/// The `--json` object of one kernel's decision: the kernel object of contract §3 with `trials`,
/// `time_ns` and `key` (the cache key's hash).
pub fn decision_object(
    target: Target,
    kernel: &tcc_ir::Kernel,
    decision: &Decision,
) -> serde_json::Map<String, serde_json::Value> {
    let chosen = tcc_ir::Kernel { schedule: decision.schedule, ..kernel.clone() };
    let plan = KernelPlan::new(&chosen, target, decision.source, decision.time_ns);
    let mut object = super::json::kernel_object(&plan);
    object.insert("trials".into(), serde_json::json!(decision.trials));
    object.insert("time_ns".into(), serde_json::json!(decision.time_ns));
    object.insert("key".into(), serde_json::json!(decision.key.hash().as_str()));
    object
}

/// The last line of a tuning run: kernels, time, trials, and how many were tuned, cached,
/// borrowed or left without a winner.
pub fn summary(decisions: &[Decision], elapsed: Duration, trials: usize) -> String {
    let count_of = |s: ScheduleSource| decisions.iter().filter(|d| d.source == s).count();
    format!(
        "{} kernel{} in {:.1} s: {trials} trials run; {} tuned, {} cached, {} borrowed, {} without a winner\n",
        decisions.len(),
        if decisions.len() == 1 { "" } else { "s" },
        elapsed.as_secs_f64(),
        count_of(ScheduleSource::Tuned),
        count_of(ScheduleSource::Cached),
        count_of(ScheduleSource::Borrowed),
        count_of(ScheduleSource::Default)
    )
}

/// The error of a run that left `missing` kernels without a winner, if any.
pub fn without_winner(missing: &[&str]) -> Option<String> {
    (!missing.is_empty()).then(|| {
        format!(
            "no candidate of {} validated and ran; see the table above",
            missing.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
        )
    })
}

/// Runs `tcc tune --study`.
fn study(args: &TuneArgs) -> Result<(), CliError> {
    let target = tuning_target(args.target).map_err(tuning_error)?;
    let out = args.out.as_ref().ok_or_else(|| CliError::invalid("--study needs --out DIR"))?;
    if !(args.guided_share > 0.0 && args.guided_share <= 1.0) {
        return Err(CliError::invalid(format!("--guided-share {} is not in (0, 1]", args.guided_share)));
    }
    let suite = args.suite.clone().unwrap_or_else(|| if target.is_gpu() { "gpu" } else { "cpu" }.to_string());
    let all = crate::suite::load_suite(&args.workloads, &suite).map_err(|e| CliError::invalid(e.to_string()))?;
    let chosen: Vec<_> = match &args.workload {
        Some(names) => {
            let names: Vec<&str> = names.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
            if let Some(missing) = names.iter().find(|n| !all.iter().any(|w| w.name == **n)) {
                let known: Vec<&str> = all.iter().map(|w| w.name.as_str()).collect();
                return Err(CliError::invalid(format!(
                    "suite `{suite}` has no workload `{missing}`; it has {}",
                    known.join(", ")
                )));
            }
            all.into_iter().filter(|w| names.contains(&w.name.as_str())).collect()
        }
        None => all.into_iter().filter(|w| w.kind == "gemm").collect(),
    };
    std::fs::create_dir_all(out)
        .map_err(|e| CliError::Environment(format!("cannot create `{}`: {e}", out.display())))?;
    let tuning = Tuning::for_target(tcc_autotune_memory_cache()?, target, worker_command().map_err(tuning_error)?)
        .map_err(tuning_error)?
        .with_seed(args.seed)
        .with_space_limit(args.space.or(Some(256)));
    let options = StudyOptions { guided_fraction: args.guided_share, jobs: args.jobs, ..StudyOptions::default() };
    let (mut results, mut trials): (Vec<StudyResult>, String) = (Vec::new(), String::new());
    let bindings = Bindings::new();
    for w in &chosen {
        let graph = w.graph().map_err(|e| CliError::invalid(e.to_string()))?;
        let tcc_passes::Optimized { program, alternatives, .. } =
            optimize_for_tuning(target, &graph, &bindings, args.top_k)?;
        for launch in &program.launches {
            let kernel = &launch.kernel;
            let proposals = proposals(&tuning, kernel, &alternatives, &bindings)?;
            if tuning.space(kernel, &proposals, &bindings).len() < 2 {
                println!("{} kernel {} [{}]: nothing to search", w.name, kernel.name, kernel.class.name());
                continue;
            }
            let (result, guided, exhaustive) =
                tuning.study(&w.name, kernel, &proposals, &bindings, &options).map_err(tuning_error)?;
            println!(
                "{} kernel {}: space {}, guided {} trials in {:.1} s, exhaustive {} trials in {:.1} s, ratio {}",
                w.name,
                kernel.name,
                result.space,
                result.guided.trials,
                result.guided.wall_s,
                result.exhaustive.trials,
                result.exhaustive.wall_s,
                result.ratio.map_or("-".to_string(), |r| format!("{r:.3}"))
            );
            trials.push_str(&trials_jsonl(&result, &guided, &exhaustive));
            results.push(result);
            // Written after every kernel, so a run cut short keeps what it measured.
            write_study(out, &results, &trials)?;
        }
    }
    write_study(out, &results, &trials)?;
    println!("{} kernels studied; results in {}", results.len(), out.display());
    Ok(())
}

/// An empty in-memory cache: a study neither reads nor writes the user's.
fn tcc_autotune_memory_cache() -> Result<tcc_autotune::Layered, CliError> {
    tcc_autotune::tuning::SqliteStore::in_memory()
        .map(tcc_autotune::Layered::new)
        .map_err(|e| CliError::Environment(format!("cannot open an in-memory cache: {e}")))
}

fn write_study(out: &Path, results: &[StudyResult], trials: &str) -> Result<(), CliError> {
    let mut rows = String::new();
    for r in results {
        let line = serde_json::to_string(r)
            .map_err(|e| CliError::Environment(format!("internal error encoding a study row: {e}")))?;
        rows.push_str(&line);
        rows.push('\n');
    }
    write_output(&out.join("study.jsonl"), rows.as_bytes(), None)?;
    write_output(&out.join("trials.jsonl"), trials.as_bytes(), None)?;
    write_output(&out.join("study.md"), markdown(results).as_bytes(), None)
}

/// Reads the lockfile to update (a missing one starts empty); refuses to overwrite the program.
fn read_lock(path: &Path, input: &Path) -> Result<Lockfile, CliError> {
    if let (Ok(a), Ok(b)) = (path.canonicalize(), input.canonicalize())
        && a == b
    {
        return Err(CliError::invalid(format!(
            "refusing to overwrite the input file `{}` with the lockfile",
            path.display()
        )));
    }
    match Lockfile::read(path) {
        Ok(lock) => Ok(lock),
        Err(tcc_autotune::cache::LockfileError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            Ok(Lockfile::new())
        }
        Err(e @ tcc_autotune::cache::LockfileError::Io(_)) => {
            Err(CliError::Environment(format!("`{}`: {e}", path.display())))
        }
        Err(e) => Err(CliError::invalid(format!("`{}`: {e}", path.display()))),
    }
}

/// Optimizes `graph` for `target` through the pipeline's first step (as `tcc run` does), with
/// `top_k` alternatives; the schedules are the optimizer's (tuning starts from them). The report
/// has each kernel's estimate.
pub fn optimize_for_tuning(
    target: Target,
    graph: &Graph,
    bindings: &Bindings,
    top_k: usize,
) -> Result<tcc_passes::Optimized, CliError> {
    Ok(Pipeline::untuned(target).optimize(graph, bindings, PlanOptions { explain: false, top_k })?)
}

/// The optimizer's schedules for `kernel`: its own, then those the alternatives give the same
/// kernel (same cache key), without repeats.
pub fn proposals(
    tuning: &Tuning,
    kernel: &tcc_ir::Kernel,
    alternatives: &[Program],
    bindings: &Bindings,
) -> Result<Vec<Schedule>, CliError> {
    let key = tuning.key(kernel, bindings).map_err(tuning_error)?;
    let mut out = vec![kernel.schedule];
    for alt in alternatives {
        for l in &alt.launches {
            if !out.contains(&l.kernel.schedule) && tuning.key(&l.kernel, bindings).is_ok_and(|k| k == key) {
                out.push(l.kernel.schedule);
            }
        }
    }
    Ok(out)
}

/// This kernel's share of the budget: the trials [`allot_trials`] gave it, and an equal part of
/// the time left for each kernel left (`devices` parts at once, since that many kernels are tuned
/// side by side). A kernel reached after the time is used up still measures one candidate (the
/// optimizer's choice), so it gets a validated record.
pub fn share(
    budget: &Budget,
    elapsed: Duration,
    allotted_trials: usize,
    kernels_left: usize,
    devices: usize,
) -> Budget {
    let parts = kernels_left.max(1);
    let max_trials = budget.max_trials.map(|_| allotted_trials.max(1));
    // The time left is the wall time of every device working at once.
    let at_once = u32::try_from(devices.clamp(1, parts)).unwrap_or(1);
    match budget.max_time.map(|t| t.saturating_sub(elapsed)) {
        Some(left) if left.is_zero() => Budget { max_trials: Some(1), max_time: None },
        left => Budget {
            max_trials,
            max_time: left.map(|t| (t * at_once / u32::try_from(parts).unwrap_or(u32::MAX)).min(t)),
        },
    }
}

/// A run's trial budget split among its kernels before any is tuned, by the sizes of their search
/// spaces: a kernel whose space is smaller than an equal part takes its whole space, the rest is
/// split equally among the others, a remainder going one trial each to the largest spaces (ties:
/// the earlier kernel), and every kernel gets at least one trial. The split depends on neither the
/// order kernels finish in nor on how many devices tune at once, so the same plan tuned on one GPU
/// or on several measures the same candidates. Without a trial limit every share is unlimited
/// (`usize::MAX`).
pub fn allot_trials(total: Option<usize>, spaces: &[usize]) -> Vec<usize> {
    let Some(total) = total else { return vec![usize::MAX; spaces.len()] };
    let mut shares = vec![0usize; spaces.len()];
    let mut open: Vec<usize> = (0..spaces.len()).collect();
    let mut left = total;
    // Water-filling: settle every kernel whose space fits in an equal part of what is left.
    loop {
        if open.is_empty() {
            break;
        }
        let part = left / open.len();
        let (small, large): (Vec<usize>, Vec<usize>) = open.iter().partition(|&&i| spaces[i].max(1) <= part);
        if small.is_empty() {
            for &i in &large {
                shares[i] = part;
            }
            let mut by_size = large.clone();
            by_size.sort_by(|&a, &b| spaces[b].cmp(&spaces[a]).then(a.cmp(&b)));
            for &i in by_size.iter().take(left - part * large.len()) {
                shares[i] += 1;
            }
            break;
        }
        for &i in &small {
            shares[i] = spaces[i].max(1);
            left -= shares[i];
        }
        open = large;
    }
    shares.iter().map(|&n| n.max(1)).collect()
}

/// A budget as text (`5m, 200 trials`).
pub fn describe_budget(b: &Budget) -> String {
    let mut parts = Vec::new();
    if let Some(t) = b.max_time {
        parts.push(format!("{:.0?}", t));
    }
    if let Some(n) = b.max_trials {
        parts.push(format!("{n} trials"));
    }
    if parts.is_empty() { "unlimited".to_string() } else { parts.join(", ") }
}

/// What tuning one kernel did: its key, the trials' table and the winner.
pub fn describe_kernel(kernel: &tcc_ir::Kernel, result: &KernelTuning, optimizer_choice: Option<&Schedule>) -> String {
    let d = &result.decision;
    let mut out = String::new();
    let _ = writeln!(out, "kernel {} [{}] key {}", kernel.name, kernel.class.name(), &d.key.hash().as_str()[..12]);
    if let Some(v) = &result.validation {
        let _ = writeln!(out, "  re-validated the cached schedule: {v}");
    }
    if let Some(report) = &result.report {
        for line in report.table().lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    let time = d.time_ns.map_or("-".to_string(), |ns| format!("{:.3} us", ns as f64 / 1e3));
    let versus = result
        .report
        .as_ref()
        .and_then(|r| optimizer_time(&r.trials, optimizer_choice?))
        .zip(d.time_ns)
        .map(|(base, best)| {
            format!("; the optimizer's schedule: {:.3} us, {:.2}x", base as f64 / 1e3, base as f64 / best as f64)
        })
        .unwrap_or_default();
    let _ = writeln!(out, "  winner ({}, {} trials): {} {time}{versus}", d.source.name(), d.trials, d.schedule);
    out
}

fn optimizer_time(trials: &[Trial], schedule: &Schedule) -> Option<u64> {
    trials.iter().find(|t| t.candidate.schedule == *schedule).and_then(|t| t.outcome.time_ns())
}

/// A tuning error with its exit code (contract §4).
pub fn tuning_error(e: TuningError) -> CliError {
    if e.is_invalid_input() { CliError::invalid(e.to_string()) } else { CliError::Environment(e.to_string()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_is_shared_between_kernels() {
        let b = Budget { max_trials: Some(10), max_time: Some(Duration::from_secs(60)) };
        let s = share(&b, Duration::from_secs(20), 3, 2, 1);
        assert_eq!(s.max_trials, Some(3));
        assert_eq!(s.max_time, Some(Duration::from_secs(20)));
        assert_eq!(share(&b, Duration::from_secs(90), 5, 1, 1), Budget::trials(1));
        assert_eq!(share(&Budget::trials(4), Duration::from_secs(1), 0, 2, 1), Budget::trials(1));
        assert_eq!(share(&Budget::time(Duration::from_secs(60)), Duration::ZERO, usize::MAX, 2, 1).max_trials, None);
        // Two GPUs side by side: each kernel may take twice the serial share of the wall time,
        // never more than what is left.
        assert_eq!(share(&b, Duration::from_secs(20), 4, 4, 2).max_time, Some(Duration::from_secs(20)));
        assert_eq!(share(&b, Duration::from_secs(20), 4, 1, 8).max_time, Some(Duration::from_secs(40)));
        assert_eq!(describe_budget(&Budget::trials(5)), "5 trials");
    }

    #[test]
    fn trials_are_allotted_by_space_before_tuning() {
        // Small spaces take all they have; the rest is split equally, the remainder to the largest.
        assert_eq!(allot_trials(Some(96), &[1, 1, 4, 1912, 4872, 1232]), vec![1, 1, 4, 30, 30, 30]);
        assert_eq!(allot_trials(Some(10), &[100, 100, 200]), vec![3, 3, 4]);
        assert_eq!(allot_trials(Some(11), &[100, 100, 200]), vec![4, 3, 4]);
        // Fewer trials than kernels: each still measures one.
        assert_eq!(allot_trials(Some(2), &[5, 5, 5]), vec![1, 1, 1]);
        // More than every space holds: each takes its whole space.
        assert_eq!(allot_trials(Some(1000), &[3, 0, 7]), vec![3, 1, 7]);
        assert_eq!(allot_trials(None, &[3, 7]), vec![usize::MAX, usize::MAX]);
        assert!(allot_trials(Some(5), &[]).is_empty());
    }
}
