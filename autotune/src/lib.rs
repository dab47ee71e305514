//! The autotuner and the tuning cache (local SQLite, shared Redis, JSONL export and lockfiles).
//! (Being built: see issue 8.)

#![warn(missing_docs)]
