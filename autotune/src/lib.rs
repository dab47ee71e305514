//! The autotuner of tcc, in one crate: the search, the worker processes and the one benchmarker
//! that measures in them, the tuning cache and lockfile, and the wiring to every tunable target
//! ([`tuning`]: search spaces, cache keys, the reference outputs candidates are validated against,
//! the worker's compile and measure). It depends on the code generators and the runtime to compile
//! and time candidates, never on the `tcc` library, which depends on it to read locked and cached
//! schedules in its pipeline.
//!
//! ```text
//!  candidates (optimizer top-k × Schedule knobs, pruned by HardwareLimits, ordered by a CostModel)
//!       |  search::SearchSpace
//!  strategy (exhaustive | guided | evolutionary) under a Budget, best so far
//!       |  search::Tuner: compile a batch on host threads, measure one at a time,
//!       |  journal each trial (SIGKILL loses at most the one in flight)
//!  Benchmarker: validate against a trusted implementation, then time
//!       |  search::WorkerBenchmarker: each candidate in a child worker (`tcc worker`, serving
//!       |  search::worker::serve with tuning::worker's compile and measure), killed on timeout
//!  winner -> cache::CacheRecord (data only, bounds-checked on decode)
//!       |  cache::Layered: local SqliteStore + optional RedisStore (read-through, write-back)
//!  JSONL export/import/merge, Lockfile (same choices on every machine), lookup with
//!  stale / unverified / borrowed / quarantined handling (plan::plan, plan::revalidate)
//! ```
//!
//! The search reaches a device only through [`search::Benchmarker`], so its logic is tested on the
//! CPU with fakes.

#![warn(missing_docs)]

pub mod bounds;
pub mod cache;
pub mod plan;
pub mod provenance;
pub mod search;
pub mod shard;
pub mod tuning;

pub use cache::{CacheKey, CacheRecord, CacheStore, DeviceKey, HitKind, Layered, Lockfile, Lookup, SqliteStore};
pub use plan::{Plan, journal_session, plan, revalidate, tune_and_record};
pub use provenance::{Here, Provenance, TCC_VERSION};
pub use search::{
    Benchmarker, Budget, Candidate, Outcome, SearchSpace, Strategy, Trial, TuneReport, Tuner, TunerOptions,
};
