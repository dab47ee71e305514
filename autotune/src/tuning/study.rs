//! The tuner's own benchmark (`tcc tune --study`): for one kernel, the guided search under a trial
//! budget of a fraction of the space and the exhaustive sweep of the whole space, in one process
//! with the same benchmarker (same reference, same workers), then both winners re-measured
//! back to back so their ratio is not a comparison across minutes of drift.

use std::fmt::Write as _;

use crate::{Benchmarker, Budget, Outcome, Strategy, TuneReport, Tuner, TunerOptions};
use tcc_ir::{Bindings, Kernel, Schedule};

use super::{Tuning, TuningError};

/// Settings of a study.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StudyOptions {
    /// The guided search's trial budget as a fraction of the space (the issue asks at most 0.25).
    pub guided_fraction: f64,
    /// The fraction of the space, cheapest by the cost model, the guided search measures first.
    pub top_fraction: f64,
    /// Candidates compiled at once (0 = one per core).
    pub jobs: usize,
    /// Progress bars.
    pub progress: bool,
    /// Times each winner is re-measured at the end (the fastest is kept).
    pub remeasure: u32,
}

impl Default for StudyOptions {
    fn default() -> StudyOptions {
        StudyOptions { guided_fraction: 0.25, top_fraction: 0.1, jobs: 0, progress: true, remeasure: 3 }
    }
}

/// One search of a study.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunSummary {
    /// `guided` or `exhaustive`.
    pub strategy: String,
    /// Candidates measured.
    pub trials: usize,
    /// Validated and timed.
    pub ok: usize,
    /// Rejected by validation.
    pub wrong: usize,
    /// Failed to compile or run.
    pub failed: usize,
    /// Killed by the timeout.
    pub timeout: usize,
    /// Wall time of the search (compiling, validating and timing), in seconds.
    pub wall_s: f64,
    /// Why it stopped.
    pub stop: String,
    /// The winner's median time in nanoseconds, as measured during the search.
    pub best_ns: Option<u64>,
    /// The winner's schedule.
    pub best: Option<String>,
}

impl RunSummary {
    fn of(report: &TuneReport) -> RunSummary {
        let c = report.counts();
        let best = report.best();
        RunSummary {
            strategy: report.strategy.name().to_string(),
            trials: report.trials.len(),
            ok: c.ok,
            wrong: c.wrong,
            failed: c.failed,
            timeout: c.timeout,
            wall_s: report.elapsed.as_secs_f64(),
            stop: report.stop.to_string(),
            best_ns: best.and_then(|t| t.outcome.time_ns()),
            best: best.map(|t| t.candidate.schedule.to_string()),
        }
    }
}

/// What a study found for one kernel.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StudyResult {
    /// The workload (or fn) the kernel comes from.
    pub workload: String,
    /// The kernel's name.
    pub kernel: String,
    /// The target's name (`sm_90a`, `cpu:llvm`).
    pub target: String,
    /// The device measured on.
    pub device: String,
    /// Candidates in the space.
    pub space: usize,
    /// The guided search.
    pub guided: RunSummary,
    /// The exhaustive sweep.
    pub exhaustive: RunSummary,
    /// The guided winner re-measured at the end (fastest of the re-measurements), in ns.
    pub guided_ns: Option<u64>,
    /// The exhaustive winner re-measured at the end, in ns.
    pub exhaustive_ns: Option<u64>,
    /// `guided_ns / exhaustive_ns` (1.0 when both searches chose the same schedule).
    pub ratio: Option<f64>,
    /// Whether the guided pick is within 5% of the exhaustive best.
    pub within_5pct: Option<bool>,
    /// Fraction of the space the guided search measured.
    pub measured_fraction: f64,
}

/// One line of the trials file: a measured candidate of one search.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StudyTrial<'a> {
    /// The workload.
    pub workload: &'a str,
    /// `guided` or `exhaustive`.
    pub search: &'a str,
    /// The schedule.
    pub schedule: String,
    /// The cost model's estimate (the order of the exhaustive sweep).
    pub cost: f64,
    /// What came of it.
    pub outcome: &'a Outcome,
    /// Wall time of this trial in milliseconds.
    pub wall_ms: u64,
}

/// The trials of both searches of a study, one JSON object per line.
pub fn trials_jsonl(result: &StudyResult, guided: &TuneReport, exhaustive: &TuneReport) -> String {
    let mut out = String::new();
    for (search, report) in [("guided", guided), ("exhaustive", exhaustive)] {
        for t in &report.trials {
            let row = StudyTrial {
                workload: &result.workload,
                search,
                schedule: t.candidate.schedule.to_string(),
                cost: t.candidate.cost,
                outcome: &t.outcome,
                wall_ms: t.wall_ms,
            };
            if let Ok(line) = serde_json::to_string(&row) {
                out.push_str(&line);
                out.push('\n');
            }
        }
    }
    out
}

/// A Markdown table of study results.
pub fn markdown(results: &[StudyResult]) -> String {
    let us = |ns: Option<u64>| ns.map_or("-".to_string(), |ns| format!("{:.1}", ns as f64 / 1e3));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| workload | target | space | guided trials (share) | guided time s | exhaustive time s | guided pick us | exhaustive best us | ratio | within 5% |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|:---:|");
    for r in results {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} ({:.0}%) | {:.1} | {:.1} | {} | {} | {} | {} |",
            r.workload,
            r.target,
            r.space,
            r.guided.trials,
            r.measured_fraction * 100.0,
            r.guided.wall_s,
            r.exhaustive.wall_s,
            us(r.guided_ns),
            us(r.exhaustive_ns),
            r.ratio.map_or("-".to_string(), |x| format!("{x:.3}")),
            match r.within_5pct {
                Some(true) => "yes",
                Some(false) => "no",
                None => "-",
            }
        );
    }
    for r in results {
        let _ = writeln!(
            out,
            "\n{} on {} ({}): guided winner {}; exhaustive winner {}.",
            r.workload,
            r.device,
            r.target,
            r.guided.best.as_deref().unwrap_or("none"),
            r.exhaustive.best.as_deref().unwrap_or("none")
        );
    }
    out
}

/// The fastest of `times` validated measurements of `schedule`, or `None` if none validated.
fn remeasure<B: Benchmarker>(bench: &B, schedule: &Schedule, times: u32) -> Option<u64> {
    let candidate = crate::Candidate { variant: 0, schedule: *schedule, cost: 0.0 };
    (0..times.max(1))
        .filter_map(|_| {
            let artifact = bench.compile(&candidate).ok()?;
            bench.measure(&candidate, &artifact).time_ns()
        })
        .min()
}

impl Tuning {
    /// Studies the tuner on `kernel` (from `workload`): the guided search, then the exhaustive
    /// sweep of the same space with the same benchmarker, then both winners re-measured
    /// alternately. The cache is neither read nor written. Returns the result and both searches.
    pub fn study(
        &self,
        workload: &str,
        kernel: &Kernel,
        proposals: &[Schedule],
        bindings: &Bindings,
        options: &StudyOptions,
    ) -> Result<(StudyResult, TuneReport, TuneReport), TuningError> {
        let space = self.space(kernel, proposals, bindings);
        let bench = self.benchmarker(kernel, bindings)?;
        let guided_trials = ((space.len() as f64 * options.guided_fraction).floor() as usize).max(1);
        let run = |strategy: Strategy, budget: Budget| {
            let opts = TunerOptions { budget, strategy, compile_threads: options.jobs, progress: options.progress };
            Tuner::new(&space, opts).run(&bench)
        };
        let guided = run(Strategy::Guided { top_fraction: options.top_fraction }, Budget::trials(guided_trials));
        let exhaustive = run(Strategy::Exhaustive, Budget::unlimited());
        let (g, e) = (guided.best().map(|t| t.candidate.schedule), exhaustive.best().map(|t| t.candidate.schedule));
        let (mut guided_ns, mut exhaustive_ns) = (None, None);
        if let (Some(g), Some(e)) = (g, e) {
            if g == e {
                let t = remeasure(&bench, &g, options.remeasure);
                (guided_ns, exhaustive_ns) = (t, t);
            } else {
                for _ in 0..options.remeasure.max(1) {
                    let (a, b) = (remeasure(&bench, &g, 1), remeasure(&bench, &e, 1));
                    guided_ns = guided_ns.into_iter().chain(a).min();
                    exhaustive_ns = exhaustive_ns.into_iter().chain(b).min();
                }
            }
        }
        let ratio = guided_ns.zip(exhaustive_ns).map(|(a, b)| a as f64 / b.max(1) as f64);
        let result = StudyResult {
            workload: workload.to_string(),
            kernel: kernel.name.clone(),
            target: self.target().name().to_string(),
            device: self.device().name.clone(),
            space: space.len(),
            guided: RunSummary::of(&guided),
            exhaustive: RunSummary::of(&exhaustive),
            guided_ns,
            exhaustive_ns,
            ratio,
            within_5pct: ratio.map(|r| r <= 1.05),
            measured_fraction: guided.trials.len() as f64 / space.len().max(1) as f64,
        };
        Ok((result, guided, exhaustive))
    }
}
