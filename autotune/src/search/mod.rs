//! The search: candidates, strategies, budgets, the tuner, the journal and out-of-process
//! measurement (the one benchmarker, [`WorkerBenchmarker`], and the worker protocol).

mod bench;
mod budget;
mod candidate;
mod journal;
mod process;
mod progress;
mod strategy;
mod tuner;
pub mod worker;

pub use bench::{Benchmarker, Outcome, Trial};
pub use budget::{Budget, StopReason};
pub use candidate::{
    Candidate, CostModel, HardwareLimits, Knobs, MAX_ENUMERATED, NEIGHBOR_KNOBS, SearchSpace, SpaceError,
};
pub use journal::{Journal, MemoryJournal};
pub use process::{Worker, WorkerBenchmarker, WorkerCommand};
pub use strategy::{AUTO_EXHAUSTIVE_MAX, Strategy};
pub use tuner::{Counts, TuneReport, Tuner, TunerOptions};
