//! `tcc tune --plan FILE [--shard I/N]`: tunes this shard's part of a plan's kernels through the
//! same per-kernel path as `tcc tune FILE` ([`Tuning::tune_kernel`]: fresh winners are `cached`,
//! a search cut short or killed goes on from its journal), and makes sure every winner measured
//! here is in the shared cache when one is configured (a winner an earlier run could not share is
//! pushed now); a winner that could not be shared is named, and the run exits 2.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde_json::json;
use tcc_autotune::cache::Shared;
use tcc_autotune::shard::{Shard, ShardSource};
use tcc_autotune::tuning::{Decision, TuneOptions, Tuning, open_cache_for_recording, worker_command};
use tcc_ir::ScheduleSource;

use super::args::TuneArgs;
use super::devices::{Device, on_devices, resolve, worker_on};
use super::error::CliError;
use super::json::print_line;
use super::plan_file::read_plan;
use super::plan_kernels::{PlanKernel, list};
use super::tune::{
    allot_trials, decision_object, describe_budget, describe_kernel, share, summary, tuning_error, without_winner,
};

/// Runs `tcc tune --plan`.
pub fn tune_plan(args: &TuneArgs, plan: &Path) -> Result<(), CliError> {
    let (shard, from) = match args.shard {
        Some(shard) => (shard, ShardSource::Flag),
        None => Shard::from_env(|name| std::env::var(name).ok()).map_err(|e| CliError::invalid(e.to_string()))?,
    };
    let listing = Instant::now();
    let entries = read_plan(plan)?;
    let worker = worker_command().map_err(tuning_error)?;
    let open = |target, device: Device| -> Result<Tuning, CliError> {
        let cache = open_cache_for_recording().map_err(tuning_error)?;
        Ok(Tuning::for_target(cache, target, worker_on(&worker, device))
            .map_err(tuning_error)?
            .with_seed(args.seed)
            .with_space_limit(args.space))
    };
    let mut listed = list(&entries, args.target, args.top_k, |target| open(target, None))?;
    let targets = listed.targets();
    // --devices names GPUs: every target of the plan must be one.
    let mut devices = vec![None];
    for &target in &targets {
        devices = resolve(args.devices.as_ref(), target)?;
    }
    let estimates: Vec<f64> = listed.kernels.iter().map(|k| k.estimate_us).collect();
    let listed_tunings = std::sync::Mutex::new(Some(listed.take_tunings()));
    let mut mine: Vec<&PlanKernel> = shard.pick(&estimates).into_iter().filter_map(|i| listed.kernels.get(i)).collect();
    // Longest estimated tuning first, so that no device is left with a long kernel at the end
    // while the others idle (the order the shards split by).
    mine.sort_by(|a, b| b.estimate_us.total_cmp(&a.estimate_us).then_with(|| a.id.cmp(&b.id)));
    let allotted = allot_trials(args.budget.max_trials, &mine.iter().map(|k| k.candidates).collect::<Vec<_>>());
    let digest = listed.digest();
    if args.json {
        print_line(&json!({
            "plan": plan.display().to_string(),
            "entries": entries.len(),
            "kernels": listed.kernels.len(),
            "digest": digest,
            "shard": shard.index,
            "shards": shard.count,
            "shard_from": from.name(),
            "this_shard": mine.len(),
            "estimate_s": mine.iter().map(|k| k.estimate_us).sum::<f64>() / 1e6,
            "listing_s": listing.elapsed().as_secs_f64(),
        }))?;
    } else {
        println!(
            "plan {}: {} kernels from {} entries (digest {digest}); shard {shard} ({}): {} kernel{}, estimated {:.0} s, budget {}",
            plan.display(),
            listed.kernels.len(),
            entries.len(),
            from.name(),
            mine.len(),
            if mine.len() == 1 { "" } else { "s" },
            mine.iter().map(|k| k.estimate_us).sum::<f64>() / 1e6,
            describe_budget(&args.budget)
        );
    }
    let start = Instant::now();
    let trials = AtomicUsize::new(0);
    let begun = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    // One kernel on the tunings of one device: its decision, and why its winner was not shared.
    let tune_one = |tuning: &Tuning, device: Device, i: usize, k: &PlanKernel| -> Result<Outcome, CliError> {
        let before = begun.fetch_add(1, Ordering::SeqCst);
        let kernel_start = Instant::now();
        let options = TuneOptions {
            budget: share(&args.budget, start.elapsed(), allotted[i], mine.len() - before, devices.len()),
            jobs: args.jobs,
            retune: args.retune,
            progress: devices.len() == 1,
        };
        let result = tuning.tune_kernel(&k.kernel, &k.proposals, &k.bindings, &options).map_err(tuning_error)?;
        let d = &result.decision;
        // Only winners measured here are shared; a borrowed one came from elsewhere.
        let shared = match (&d.record, d.source) {
            (Some(record), ScheduleSource::Tuned | ScheduleSource::Cached) => tuning.cache().share(record),
            _ => Shared::NoRemote,
        };
        let not_shared = match &shared {
            Shared::Failed(why) => Some((format!("{} ({})", d.kernel, &k.id.as_str()[..12]), why.clone())),
            _ => None,
        };
        let finished = done.fetch_add(1, Ordering::SeqCst) + 1;
        if args.json {
            let mut object = decision_object(k.target, &k.kernel, d);
            object.insert("id".into(), json!(k.id.as_str()));
            object.insert("target".into(), json!(k.target.name()));
            object.insert("entries".into(), json!(k.entries));
            object.insert("candidates".into(), json!(k.candidates));
            object.insert("resumed".into(), json!(result.report.as_ref().map_or(0, |r| r.resumed())));
            object.insert("shared".into(), json!(shared_name(&shared)));
            object.insert("device".into(), json!(device));
            object.insert("seconds".into(), json!(kernel_start.elapsed().as_secs_f64()));
            object.insert("prepare_s".into(), json!(result.phases.prepare.as_secs_f64()));
            object.insert("search_s".into(), json!(result.phases.search.as_secs_f64()));
            object.insert("started_s".into(), json!(kernel_start.duration_since(start).as_secs_f64()));
            print_line(&serde_json::Value::Object(object))?;
        } else {
            print!(
                "[{finished}/{}] {} on {} ({}): {}",
                mine.len(),
                k.entries.join(", "),
                k.target.name(),
                shared_name(&shared),
                describe_kernel(&k.kernel, &result, k.proposals.first())
            );
        }
        trials.fetch_add(d.trials, Ordering::SeqCst);
        Ok((result.decision, not_shared))
    };
    // Each device tunes with one tuning per target; the tunings opened for listing serve the
    // first device.
    let first_device = devices.first().copied().flatten();
    let open_all = |device: Device| -> Result<(Device, Vec<Tuning>), CliError> {
        let reused = if device == first_device {
            listed_tunings.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
        } else {
            None
        };
        let tunings = match reused {
            Some(tunings) => tunings,
            None => targets.iter().map(|&target| open(target, device)).collect::<Result<_, _>>()?,
        };
        Ok((device, tunings))
    };
    let outcomes = on_devices(&devices, &mine, open_all, |(device, tunings), i, k| {
        let tuning = tunings
            .iter()
            .find(|t| t.target() == k.target)
            .ok_or_else(|| CliError::Environment(format!("internal error: no tuning for `{}`", k.target.name())))?;
        tune_one(tuning, *device, i, k)
    })?;
    let trials = trials.load(Ordering::SeqCst);
    let mut decisions: Vec<Decision> = Vec::with_capacity(outcomes.len());
    let mut not_shared: Vec<(String, String)> = Vec::new();
    for (decision, unshared) in outcomes {
        decisions.push(decision);
        not_shared.extend(unshared);
    }
    let count_of = |s: ScheduleSource| decisions.iter().filter(|d| d.source == s).count();
    if args.json {
        print_line(&json!({
            "shard": shard.index,
            "shards": shard.count,
            "digest": digest,
            "tuned": count_of(ScheduleSource::Tuned),
            "cached": count_of(ScheduleSource::Cached),
            "borrowed": count_of(ScheduleSource::Borrowed),
            "without_winner": count_of(ScheduleSource::Default),
            "trials": trials,
            "not_shared": not_shared.iter().map(|(k, _)| k).collect::<Vec<_>>(),
        }))?;
    } else {
        print!("{}", summary(&decisions, start.elapsed(), trials));
    }
    let missing: Vec<&str> =
        decisions.iter().filter(|d| d.source == ScheduleSource::Default).map(|d| d.kernel.as_str()).collect();
    let mut problems: Vec<String> = without_winner(&missing).into_iter().collect();
    if let Some((_, why)) = not_shared.first() {
        problems.push(format!(
            "{} winner{} kept in the local cache but not shared ({why}): {}; run this shard again when the shared \
             cache answers to push them",
            not_shared.len(),
            if not_shared.len() == 1 { " is" } else { "s are" },
            not_shared.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    if problems.is_empty() { Ok(()) } else { Err(CliError::Environment(problems.join("; "))) }
}

/// One kernel's decision, and the kernel and reason when its winner could not be shared.
type Outcome = (Decision, Option<(String, String)>);

/// How a winner stands with the shared cache, for output: `local only` (none configured),
/// `read-only`, `shared`, `pushed` (shared now, by this run) or `not shared`.
fn shared_name(shared: &Shared) -> &'static str {
    match shared {
        Shared::NoRemote => "local only",
        Shared::ReadOnly => "read-only",
        Shared::Already => "shared",
        Shared::Pushed => "pushed",
        Shared::Failed(_) => "not shared",
    }
}
