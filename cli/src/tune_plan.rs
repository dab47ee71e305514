//! `tcc tune --plan FILE [--shard I/N]`: tunes this shard's part of a plan's kernels through the
//! same per-kernel path as `tcc tune FILE` ([`Tuning::tune_kernel`]: fresh winners are `cached`,
//! a search cut short or killed goes on from its journal), and makes sure every winner measured
//! here is in the shared cache when one is configured (a winner an earlier run could not share is
//! pushed now); a winner that could not be shared is named, and the run exits 2.

use std::path::Path;
use std::time::Instant;

use serde_json::json;
use tcc_autotune::cache::Shared;
use tcc_autotune::shard::{Shard, ShardSource};
use tcc_autotune::tuning::{Decision, TuneOptions, Tuning, open_cache_for_recording, worker_command};
use tcc_ir::ScheduleSource;

use super::args::TuneArgs;
use super::error::CliError;
use super::json::print_line;
use super::plan_file::read_plan;
use super::plan_kernels::{PlanKernel, list};
use super::tune::{decision_object, describe_budget, describe_kernel, share, summary, tuning_error, without_winner};

/// Runs `tcc tune --plan`.
pub fn tune_plan(args: &TuneArgs, plan: &Path) -> Result<(), CliError> {
    let (shard, from) = match args.shard {
        Some(shard) => (shard, ShardSource::Flag),
        None => Shard::from_env(|name| std::env::var(name).ok()).map_err(|e| CliError::invalid(e.to_string()))?,
    };
    let entries = read_plan(plan)?;
    let worker = worker_command().map_err(tuning_error)?;
    let open = |target| -> Result<Tuning, CliError> {
        let cache = open_cache_for_recording().map_err(tuning_error)?;
        Ok(Tuning::for_target(cache, target, worker.clone())
            .map_err(tuning_error)?
            .with_seed(args.seed)
            .with_space_limit(args.space))
    };
    let listed = list(&entries, args.target, args.top_k, open)?;
    let estimates: Vec<f64> = listed.kernels.iter().map(|k| k.estimate_us).collect();
    let mine: Vec<&PlanKernel> = shard.pick(&estimates).into_iter().filter_map(|i| listed.kernels.get(i)).collect();
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
    let mut trials = 0usize;
    let mut decisions: Vec<Decision> = Vec::new();
    let mut not_shared: Vec<(String, String)> = Vec::new();
    for (i, k) in mine.iter().enumerate() {
        let tuning = listed.tuning(k.target)?;
        let options = TuneOptions {
            budget: share(&args.budget, start.elapsed(), trials, mine.len() - i),
            jobs: args.jobs,
            retune: args.retune,
            progress: true,
        };
        let result = tuning.tune_kernel(&k.kernel, &k.proposals, &k.bindings, &options).map_err(tuning_error)?;
        let d = &result.decision;
        // Only winners measured here are shared; a borrowed one came from elsewhere.
        let shared = match (&d.record, d.source) {
            (Some(record), ScheduleSource::Tuned | ScheduleSource::Cached) => tuning.cache().share(record),
            _ => Shared::NoRemote,
        };
        if let Shared::Failed(why) = &shared {
            not_shared.push((format!("{} ({})", d.kernel, &k.id.as_str()[..12]), why.clone()));
        }
        if args.json {
            let mut object = decision_object(k.target, &k.kernel, d);
            object.insert("id".into(), json!(k.id.as_str()));
            object.insert("target".into(), json!(k.target.name()));
            object.insert("entries".into(), json!(k.entries));
            object.insert("candidates".into(), json!(k.candidates));
            object.insert("resumed".into(), json!(result.report.as_ref().map_or(0, |r| r.resumed())));
            object.insert("shared".into(), json!(shared_name(&shared)));
            print_line(&serde_json::Value::Object(object))?;
        } else {
            print!(
                "[{}/{}] {} on {} ({}): ",
                i + 1,
                mine.len(),
                k.entries.join(", "),
                k.target.name(),
                shared_name(&shared)
            );
            print!("{}", describe_kernel(&k.kernel, &result, k.proposals.first()));
        }
        trials += d.trials;
        decisions.push(result.decision);
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
