//! The tuning journal: each finished trial is appended as soon as it is measured, so a run killed
//! at any moment loses at most the candidate in flight, and a resumed run skips what was measured.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::cache::StoreError;
use crate::search::bench::Trial;

/// Durable storage of finished trials, per tuning session (the kernel's cache key hash).
/// [`crate::cache::SqliteStore`] implements it in the local cache database.
pub trait Journal: Send + Sync {
    /// The trials recorded for `session`, in the order they were appended.
    fn load(&self, session: &str) -> Result<Vec<Trial>, StoreError>;
    /// Records one finished trial (replacing an earlier entry for the same candidate).
    fn append(&self, session: &str, trial: &Trial) -> Result<(), StoreError>;
    /// Forgets a session (after its result is in the cache).
    fn clear(&self, session: &str) -> Result<(), StoreError>;
}

/// A journal in memory (nothing survives the process): for tests and cache-less runs.
#[derive(Debug, Default)]
pub struct MemoryJournal {
    sessions: Mutex<HashMap<String, Vec<Trial>>>,
}

impl MemoryJournal {
    /// An empty journal.
    pub fn new() -> MemoryJournal {
        MemoryJournal::default()
    }
}

impl Journal for MemoryJournal {
    fn load(&self, session: &str) -> Result<Vec<Trial>, StoreError> {
        let map = self.sessions.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(map.get(session).cloned().unwrap_or_default())
    }

    fn append(&self, session: &str, trial: &Trial) -> Result<(), StoreError> {
        let mut map = self.sessions.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let list = map.entry(session.to_string()).or_default();
        list.retain(|t| t.candidate.id() != trial.candidate.id());
        list.push(trial.clone());
        Ok(())
    }

    fn clear(&self, session: &str) -> Result<(), StoreError> {
        let mut map = self.sessions.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.remove(session);
        Ok(())
    }
}
