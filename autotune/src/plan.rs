//! Putting cache and search together: what to do for a kernel given the lockfile and the cache,
//! checking a cached winner once on this device, and tuning with the result recorded.

use tcc_ir::Schedule;

use crate::cache::{CacheKey, CacheRecord, HitKind, Layered, LockChoice, Lookup, StoreError};
use crate::provenance::Provenance;
use crate::search::{
    Benchmarker, Candidate, Journal, Outcome, SearchSpace, StopReason, TuneReport, Tuner, TunerOptions,
};

/// What to do for one kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Use this choice as is (locked, or fresh in the cache).
    Use {
        /// Optimizer alternative.
        variant: u32,
        /// Schedule.
        schedule: Schedule,
    },
    /// Check this choice on this device first (see [`revalidate`]); use it if it passes,
    /// otherwise quarantine it and tune (if `tune_if_wrong`) or fall back to the default.
    Validate {
        /// Optimizer alternative.
        variant: u32,
        /// Schedule.
        schedule: Schedule,
        /// Whether tuning is allowed.
        tune_if_wrong: bool,
    },
    /// Tune, measuring `seed` (a borrowed choice) first, or go on with a search a budget cut
    /// short (the journal holds what it measured; `seed` is its winner).
    Tune {
        /// Where to start.
        seed: Option<(u32, Schedule)>,
    },
    /// Nothing cached and tuning not allowed: the optimizer's own choice.
    Default,
}

/// Decides what to do: a lockfile entry wins outright (every machine and rank uses it); a fresh
/// hit is used, unless tuning is allowed and its search was cut short (then the search goes on);
/// an unverified one is validated; a borrowed one is re-measured (a starting point for tuning) when
/// tuning is allowed, else used if already checked here, else validated; a miss is tuned when
/// allowed.
pub fn plan(lock: Option<&LockChoice<'_>>, lookup: &Lookup, tuning_allowed: bool) -> Plan {
    if let Some(choice) = lock {
        return Plan::Use { variant: choice.entry.variant, schedule: choice.entry.schedule };
    }
    let seed = |record: &CacheRecord| Plan::Tune { seed: Some((record.variant, record.schedule)) };
    match lookup {
        Lookup::Hit { record, kind: HitKind::Fresh } if tuning_allowed && !record.search_complete() => seed(record),
        Lookup::Hit { record, kind: HitKind::Fresh } => {
            Plan::Use { variant: record.variant, schedule: record.schedule }
        }
        Lookup::Hit { record, kind: HitKind::Unverified } => {
            Plan::Validate { variant: record.variant, schedule: record.schedule, tune_if_wrong: tuning_allowed }
        }
        Lookup::Hit { record, kind: HitKind::Borrowed { .. } } if tuning_allowed => seed(record),
        Lookup::Hit { record, kind: HitKind::Borrowed { checked: true, .. } } => {
            Plan::Use { variant: record.variant, schedule: record.schedule }
        }
        Lookup::Hit { record, kind: HitKind::Borrowed { checked: false, .. } } => {
            Plan::Validate { variant: record.variant, schedule: record.schedule, tune_if_wrong: false }
        }
        Lookup::Miss if tuning_allowed => Plan::Tune { seed: None },
        Lookup::Miss => Plan::Default,
    }
}

/// Checks a cached record's choice on this device with `bench`. If it validates, a record measured
/// here is marked validated, and one measured elsewhere (borrowed) is noted as checked here with
/// `driver` (it stays borrowed: a check is not a measurement); otherwise the record is
/// quarantined. Returns the outcome.
pub fn revalidate<B: Benchmarker>(
    cache: &Layered,
    key: &CacheKey,
    record: &CacheRecord,
    bench: &B,
    driver: &str,
) -> Outcome {
    let candidate = Candidate { variant: record.variant, schedule: record.schedule, cost: 0.0 };
    let outcome = match bench.compile(&candidate) {
        Ok(artifact) => bench.measure(&candidate, &artifact),
        Err(e) => Outcome::Failed { detail: format!("compile: {e}") },
    };
    let stored = match outcome {
        Outcome::Ok { .. } if record.measured_here(key, cache.here()) => cache.mark_validated(key).map(|_| ()),
        Outcome::Ok { .. } => cache.mark_checked(key, record, Provenance::here(driver, &key.device)).map(|_| ()),
        _ => {
            tracing::warn!("cached choice {} failed on this device ({outcome}); quarantined", candidate);
            cache.quarantine(record)
        }
    };
    if let Err(e) = stored {
        tracing::warn!("cannot update the tuning cache after re-validation: {e}");
    }
    outcome
}

/// The tuning journal's session for `key`: its hash and this build's code-generator version (trials
/// measured by other generated code never resume).
pub fn journal_session(key: &CacheKey) -> String {
    format!("{}/codegen-{}", key.hash(), tcc_ir::CODEGEN_VERSION)
}

/// Tunes `key` over `space` (measuring `seeds` first), journaling each trial in the local cache
/// (session [`journal_session`]) so that an interrupted run, or one a budget cut short, goes on
/// from where it stopped; records the winner (local, and shared unless read-only) with how much of
/// the space was searched, and clears the journal once the search is complete. Returns the report,
/// the winner's record if any candidate validated, and whether recording it succeeded (an error
/// means the result is lost: the caller must say so, never exit as if it were kept).
pub fn tune_and_record<B: Benchmarker>(
    cache: &Layered,
    key: &CacheKey,
    space: &SearchSpace,
    seeds: &[usize],
    options: TunerOptions,
    bench: &B,
    driver: &str,
) -> (TuneReport, Option<CacheRecord>, Result<(), StoreError>) {
    let session = journal_session(key);
    let report = Tuner::new(space, options).with_journal(cache.local(), &session).with_seeds(seeds).run(bench);
    let record = report.to_record(key.clone(), Provenance::here(driver, &key.device));
    let mut recorded = Ok(());
    if let Some(r) = &record {
        recorded = cache.record(r);
        if recorded.is_ok()
            && report.stop == StopReason::Exhausted
            && let Err(e) = cache.local().clear(&session)
        {
            tracing::warn!("cannot clear the tuning journal: {e}");
        }
    }
    (report, record, recorded)
}
