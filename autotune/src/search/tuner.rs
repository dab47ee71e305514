//! The tuner: picks candidates by strategy, compiles each batch in parallel on host threads,
//! measures one candidate at a time, journals every result, and stops at the budget with the best
//! found so far.

use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use crate::bounds::MAX_TIME_NS;
use crate::cache::{CacheKey, CacheRecord, RecordState, RunnerUp, Searched};
use crate::provenance::Provenance;
use crate::search::bench::{Benchmarker, Outcome, Trial};
use crate::search::budget::{Budget, StopReason};
use crate::search::candidate::SearchSpace;
use crate::search::journal::Journal;
use crate::search::progress::Progress;
use crate::search::strategy::{self, Selector, Strategy};

/// Settings of one tuning run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TunerOptions {
    /// When to stop.
    pub budget: Budget,
    /// How to walk the space.
    pub strategy: Strategy,
    /// Candidates compiled at once (0 = the number of host cores).
    pub compile_threads: usize,
    /// Show a progress bar (only ever drawn on a terminal).
    pub progress: bool,
}

impl Default for TunerOptions {
    fn default() -> TunerOptions {
        TunerOptions { budget: Budget::unlimited(), strategy: Strategy::Auto, compile_threads: 0, progress: true }
    }
}

/// Counts of trials by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Validated and timed.
    pub ok: usize,
    /// Rejected by validation.
    pub wrong: usize,
    /// Failed to compile or run.
    pub failed: usize,
    /// Killed by the timeout.
    pub timeout: usize,
}

/// The result of a tuning run: every trial, the best, and why it stopped.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneReport {
    /// Every trial in the order measured (resumed ones first).
    pub trials: Vec<Trial>,
    /// Why the run stopped.
    pub stop: StopReason,
    /// Wall time of this run.
    pub elapsed: Duration,
    /// Candidates in the space.
    pub space_size: usize,
    /// The strategy used (after [`Strategy::Auto`] was resolved).
    pub strategy: Strategy,
}

impl TuneReport {
    /// Validated trials, fastest first (ties: the earlier trial first).
    pub fn ranked(&self) -> Vec<&Trial> {
        let mut ok: Vec<(u64, usize, &Trial)> =
            self.trials.iter().enumerate().filter_map(|(i, t)| t.outcome.time_ns().map(|ns| (ns, i, t))).collect();
        ok.sort_by_key(|&(ns, i, _)| (ns, i));
        ok.into_iter().map(|(_, _, t)| t).collect()
    }

    /// The fastest validated trial: a wrong, failed or timed-out candidate is never chosen.
    pub fn best(&self) -> Option<&Trial> {
        self.ranked().first().copied()
    }

    /// Up to `n` validated trials after the best, fastest first.
    pub fn runners_up(&self, n: usize) -> Vec<RunnerUp> {
        self.ranked()
            .into_iter()
            .skip(1)
            .take(n)
            .filter_map(|t| {
                Some(RunnerUp {
                    variant: t.candidate.variant,
                    schedule: t.candidate.schedule,
                    time_ns: t.outcome.time_ns()?,
                })
            })
            .collect()
    }

    /// Trials read back from the journal of an earlier run (interrupted, or cut short by its
    /// budget) that this run went on from.
    pub fn resumed(&self) -> usize {
        self.trials.iter().filter(|t| t.resumed).count()
    }

    /// Trials measured by this run.
    pub fn measured(&self) -> usize {
        self.trials.len() - self.resumed()
    }

    /// How much of the space the search measured, this run and those it went on from.
    pub fn searched(&self) -> Searched {
        let trials = u32::try_from(self.trials.len()).unwrap_or(u32::MAX);
        let space = u32::try_from(self.space_size).unwrap_or(u32::MAX).max(trials);
        Searched { trials, space, complete: self.stop == StopReason::Exhausted }
    }

    /// Counts of trials by outcome.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for t in &self.trials {
            match t.outcome {
                Outcome::Ok { .. } => c.ok += 1,
                Outcome::Wrong { .. } => c.wrong += 1,
                Outcome::Failed { .. } => c.failed += 1,
                Outcome::Timeout { .. } => c.timeout += 1,
            }
        }
        c
    }

    /// A fresh cache record of the best trial for `key`, with up to
    /// [`crate::bounds::MAX_RUNNERS_UP`] runners-up; `None` if nothing validated.
    pub fn to_record(&self, key: CacheKey, provenance: Provenance) -> Option<CacheRecord> {
        let best = self.best()?;
        Some(CacheRecord {
            key,
            variant: best.candidate.variant,
            schedule: best.candidate.schedule,
            schedule_format: tcc_ir::schedule::SCHEDULE_FORMAT,
            time_ns: best.outcome.time_ns()?,
            runners_up: self.runners_up(crate::bounds::MAX_RUNNERS_UP),
            provenance,
            state: RecordState::Fresh,
            searched: Some(self.searched()),
            checked: None,
        })
    }

    /// A plain-text table of every trial, fastest validated first, then the rest in order.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let c = self.counts();
        let resumed = match self.resumed() {
            0 => String::new(),
            n => format!("; resumed: {n} measured by an earlier run, {} now", self.measured()),
        };
        let _ = writeln!(
            out,
            "{} trials of {} candidates ({}; {}{resumed}): {} ok, {} wrong, {} failed, {} timeout, {:.1} s",
            self.trials.len(),
            self.space_size,
            self.strategy.name(),
            self.stop,
            c.ok,
            c.wrong,
            c.failed,
            c.timeout,
            self.elapsed.as_secs_f64()
        );
        let mut rows = self.ranked();
        rows.extend(self.trials.iter().filter(|t| t.outcome.time_ns().is_none()));
        for t in rows {
            let mark = if t.resumed { " (resumed)" } else { "" };
            let _ = writeln!(out, "{:<8} {:<28} {}{mark}", t.outcome.name(), short(&t.outcome), t.candidate);
        }
        out
    }
}

fn short(o: &Outcome) -> String {
    match o {
        Outcome::Ok { time_ns } => format!("{:.3} us", *time_ns as f64 / 1e3),
        Outcome::Timeout { after_ms } => format!("after {after_ms} ms"),
        Outcome::Wrong { detail } | Outcome::Failed { detail } => detail.chars().take(28).collect(),
    }
}

/// One tuning run over a search space.
pub struct Tuner<'a> {
    space: &'a SearchSpace,
    options: TunerOptions,
    journal: Option<(&'a dyn Journal, String)>,
    seeds: Vec<usize>,
    on_trial: Option<&'a (dyn Fn(&Trial) + Sync)>,
}

impl<'a> Tuner<'a> {
    /// A tuner over `space`.
    pub fn new(space: &'a SearchSpace, options: TunerOptions) -> Tuner<'a> {
        Tuner { space, options, journal: None, seeds: Vec::new(), on_trial: None }
    }

    /// Journals every trial under `session` (use the cache key's hash) and, on start, skips the
    /// candidates an interrupted run of the same session already measured.
    pub fn with_journal(mut self, journal: &'a dyn Journal, session: &str) -> Tuner<'a> {
        self.journal = Some((journal, session.to_string()));
        self
    }

    /// Candidates (indices into the space) to measure before any other: a stale or borrowed
    /// cache entry's schedule.
    pub fn with_seeds(mut self, seeds: &[usize]) -> Tuner<'a> {
        self.seeds = seeds.to_vec();
        self
    }

    /// Calls `f` after each trial is measured and journaled.
    pub fn on_trial(mut self, f: &'a (dyn Fn(&Trial) + Sync)) -> Tuner<'a> {
        self.on_trial = Some(f);
        self
    }

    /// Runs the search with `bench` until the strategy is done or the budget is used up.
    pub fn run<B: Benchmarker>(&self, bench: &B) -> TuneReport {
        let start = Instant::now();
        let space = self.space;
        let budget = self.options.budget;
        let strategy = self.options.strategy.resolve(space.len(), &budget);
        let mut state = State { done: vec![false; space.len()], ranked: Vec::new(), trials: Vec::new() };
        self.resume(&mut state);
        let threads = match self.options.compile_threads {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            n => n,
        };
        let planned = budget.max_trials.map_or(space.len(), |n| (state.trials.len() + n).min(space.len()));
        let progress = Progress::new(planned as u64, self.options.progress);
        progress.step_by(state.trials.len(), state.best());
        let mut selector = Selector::new(strategy, self.seeds.clone());
        let mut measured = 0usize;
        let stop = 'search: loop {
            if state.done.iter().all(|&d| d) {
                break StopReason::Exhausted;
            }
            let left = budget.max_trials.map_or(usize::MAX, |n| n.saturating_sub(measured));
            if left == 0 {
                break StopReason::TrialBudget;
            }
            if budget.max_time.is_some_and(|t| start.elapsed() >= t) {
                break StopReason::TimeBudget;
            }
            let view = strategy::Progress { done: &state.done, ranked: &state.ranked };
            let batch = selector.next(space, &view, threads.min(left));
            if batch.is_empty() {
                break StopReason::Exhausted;
            }
            for (i, compiled, compile_time) in compile_batch(bench, space, &batch) {
                if budget.max_time.is_some_and(|t| start.elapsed() >= t) {
                    break 'search StopReason::TimeBudget;
                }
                let candidate = &space.candidates()[i];
                let began = Instant::now();
                let outcome = match compiled {
                    Ok(artifact) => checked(
                        catch_unwind(AssertUnwindSafe(|| bench.measure(candidate, &artifact)))
                            .unwrap_or_else(|_| Outcome::Failed { detail: "the benchmarker panicked".into() }),
                    ),
                    Err(e) => Outcome::Failed { detail: format!("compile: {e}") },
                };
                let wall = compile_time + began.elapsed();
                let trial = Trial {
                    candidate: candidate.clone(),
                    outcome,
                    wall_ms: u64::try_from(wall.as_millis()).unwrap_or(u64::MAX),
                    resumed: false,
                };
                self.record(&trial);
                state.add(i, trial);
                measured += 1;
                progress.step_by(1, state.best());
            }
        };
        progress.finish();
        TuneReport { trials: state.trials, stop, elapsed: start.elapsed(), space_size: space.len(), strategy }
    }

    fn resume(&self, state: &mut State) {
        let Some((journal, session)) = &self.journal else {
            return;
        };
        match journal.load(session) {
            Ok(trials) => {
                for mut t in trials {
                    if let Some(i) = self.space.position(t.candidate.variant, &t.candidate.schedule)
                        && !state.done[i]
                    {
                        t.resumed = true;
                        t.candidate = self.space.candidates()[i].clone();
                        state.add(i, t);
                    }
                }
            }
            Err(e) => tracing::warn!("cannot read the tuning journal, starting afresh: {e}"),
        }
    }

    fn record(&self, trial: &Trial) {
        match &trial.outcome {
            Outcome::Ok { .. } => {
                tracing::debug!("candidate {}: {}", trial.candidate, trial.outcome)
            }
            other => tracing::info!("candidate {} rejected: {other}", trial.candidate),
        }
        if let Some((journal, session)) = &self.journal
            && let Err(e) = journal.append(session, trial)
        {
            tracing::warn!("cannot journal a tuning trial (an interrupted run will repeat it): {e}");
        }
        if let Some(f) = self.on_trial {
            f(trial);
        }
    }
}

/// A benchmarker's claim of a zero or absurd time is a failure, not a winner.
fn checked(outcome: Outcome) -> Outcome {
    match outcome {
        Outcome::Ok { time_ns } if time_ns == 0 || time_ns > MAX_TIME_NS => {
            Outcome::Failed { detail: format!("implausible time of {time_ns} ns") }
        }
        other => other,
    }
}

struct State {
    done: Vec<bool>,
    ranked: Vec<(u64, usize)>,
    trials: Vec<Trial>,
}

impl State {
    fn add(&mut self, i: usize, trial: Trial) {
        self.done[i] = true;
        if let Some(ns) = trial.outcome.time_ns() {
            let at = self.ranked.partition_point(|&(t, _)| t <= ns);
            self.ranked.insert(at, (ns, i));
        }
        self.trials.push(trial);
    }

    fn best(&self) -> Option<u64> {
        self.ranked.first().map(|&(ns, _)| ns)
    }
}

type Compiled<A> = (usize, Result<A, String>, Duration);

/// Compiles a batch on one host thread per candidate; a panicking compile is a failure.
fn compile_batch<B: Benchmarker>(bench: &B, space: &SearchSpace, batch: &[usize]) -> Vec<Compiled<B::Artifact>> {
    let compile_one = |i: usize| {
        let began = Instant::now();
        let c = &space.candidates()[i];
        let result = catch_unwind(AssertUnwindSafe(|| bench.compile(c)))
            .unwrap_or_else(|_| Err("the compiler panicked".to_string()));
        (i, result, began.elapsed())
    };
    if batch.len() <= 1 {
        return batch.iter().map(|&i| compile_one(i)).collect();
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = batch.iter().map(|&i| (i, s.spawn(move || compile_one(i)))).collect();
        handles
            .into_iter()
            .map(|(i, h)| h.join().unwrap_or_else(|_| (i, Err("the compiler panicked".to_string()), Duration::ZERO)))
            .collect()
    })
}
