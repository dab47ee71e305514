//! The storage interface every cache backend implements, and what they share.

use std::collections::BTreeMap;

use crate::cache::key::{CacheKey, KeyHash};
use crate::cache::record::{CacheRecord, RecordState, prefer};

/// A cache backend failed. Messages never contain credentials.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The local database failed.
    #[error("local tuning cache: {0}")]
    Sqlite(String),
    /// The local database file is damaged (not a database, or its pages are malformed): it is
    /// not used, and `tcc cache repair` salvages its readable records.
    #[error(
        "the tuning cache `{}` is damaged ({detail}); run `tcc cache repair` to salvage its records into a fresh database (the damaged file is kept beside it)",
        path.display()
    )]
    Damaged {
        /// The database file.
        path: std::path::PathBuf,
        /// What SQLite reported.
        detail: String,
    },
    /// The remote server cannot be reached (down, slow, refused): callers fall back to the local
    /// cache.
    #[error("remote tuning cache unavailable: {0}")]
    Unavailable(String),
    /// The remote server answered with an error (for example a permission error).
    #[error("remote tuning cache: {0}")]
    Remote(String),
    /// A write was attempted on a read-only store.
    #[error("the tuning cache {0} is read-only")]
    ReadOnly(String),
    /// The configuration (a URL, a path, an option) is invalid.
    #[error("tuning cache configuration: {0}")]
    Config(String),
    /// A record to store is out of bounds.
    #[error("invalid cache record: {0}")]
    Invalid(#[from] crate::bounds::BoundsError),
    /// A record could not be encoded.
    #[error("encoding a cache record: {0}")]
    Encode(#[from] serde_json::Error),
    /// A file could not be read or written.
    #[error("tuning cache I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The cache's folder could not be created.
    #[error("cannot create the tuning cache folder `{}`: {source}", path.display())]
    CreateDir {
        /// The folder.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Every decodable record of a store, and how many entries could not be decoded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Listing {
    /// Decoded records, sorted by key hash.
    pub records: Vec<CacheRecord>,
    /// Entries that could not be decoded (skipped with a warning).
    pub undecodable: usize,
}

/// What [`CacheStore::merge`] did with an incoming record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeOutcome {
    /// There was none for that key: stored.
    Added,
    /// The incoming one was faster (or the stored one quarantined): replaced.
    Replaced,
    /// The stored one was at least as good: kept.
    Kept,
}

/// A tuning cache backend: a map from [`KeyHash`] to [`CacheRecord`], with a secondary index by
/// architecture. Entries that cannot be decoded are skipped with a warning, never an error.
pub trait CacheStore: Send + Sync {
    /// A description for messages (a path, or a URL without credentials).
    fn describe(&self) -> String;

    /// Whether writes are refused.
    fn is_read_only(&self) -> bool {
        false
    }

    /// The record for exactly this key.
    fn get(&self, key: &CacheKey) -> Result<Option<CacheRecord>, StoreError>;

    /// Records whose key differs from `key` only in the device's name, compute capability or SM
    /// count (same [`CacheKey::arch_hash`]), excluding `key` itself.
    fn same_arch(&self, key: &CacheKey) -> Result<Vec<CacheRecord>, StoreError>;

    /// Stores a record under its key's hash, replacing any other.
    fn put(&self, record: &CacheRecord) -> Result<(), StoreError>;

    /// Removes the record stored under `hash`; true if there was one.
    fn remove(&self, hash: &KeyHash) -> Result<bool, StoreError>;

    /// Every decodable record.
    fn list(&self) -> Result<Listing, StoreError>;

    /// Changes the state of the record for `key`; false if there is none.
    fn set_state(&self, key: &CacheKey, state: RecordState) -> Result<bool, StoreError> {
        match self.get(key)? {
            Some(mut record) => {
                record.state = state;
                self.put(&record)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Merges an incoming record (an import, a peer's write) with the stored one: see
    /// [`merge_choice`].
    fn merge(&self, incoming: &CacheRecord) -> Result<MergeOutcome, StoreError> {
        let existing = self.get(&incoming.key)?;
        let (outcome, chosen) = merge_choice(existing.as_ref(), incoming);
        if outcome != MergeOutcome::Kept {
            self.put(&chosen)?;
        }
        Ok(outcome)
    }
}

/// The rule for merging an incoming record into a store: stored nothing → add; stored one
/// quarantined → the incoming one replaces it unless it names the same (failed) schedule;
/// otherwise the faster measurement wins ([`prefer`]). The result is what to store.
pub fn merge_choice(existing: Option<&CacheRecord>, incoming: &CacheRecord) -> (MergeOutcome, CacheRecord) {
    let Some(existing) = existing else {
        return (MergeOutcome::Added, incoming.clone());
    };
    let same_choice = existing.schedule == incoming.schedule && existing.variant == incoming.variant;
    if existing.state == RecordState::Quarantined {
        return if same_choice {
            (MergeOutcome::Kept, existing.clone())
        } else {
            (MergeOutcome::Replaced, incoming.clone())
        };
    }
    if existing == incoming || std::ptr::eq(prefer(existing, incoming), existing) {
        (MergeOutcome::Kept, existing.clone())
    } else {
        (MergeOutcome::Replaced, incoming.clone())
    }
}

/// Counts of a listing for `tcc cache stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Decodable records.
    pub records: usize,
    /// Entries that could not be decoded.
    pub undecodable: usize,
    /// Records per state name.
    pub by_state: BTreeMap<String, usize>,
    /// Records per tcc version.
    pub by_version: BTreeMap<String, usize>,
    /// Records per target.
    pub by_target: BTreeMap<String, usize>,
    /// Records per device name.
    pub by_device: BTreeMap<String, usize>,
}

impl Stats {
    /// Counts a listing.
    pub fn of(listing: &Listing) -> Stats {
        let mut stats = Stats { records: listing.records.len(), undecodable: listing.undecodable, ..Stats::default() };
        for r in &listing.records {
            *stats.by_state.entry(r.state.name().to_string()).or_default() += 1;
            *stats.by_version.entry(r.provenance.tcc_version.clone()).or_default() += 1;
            *stats.by_target.entry(r.key.target.clone()).or_default() += 1;
            *stats.by_device.entry(r.key.device.name.clone()).or_default() += 1;
        }
        stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::record::tests::record;

    #[test]
    fn merge_rules() {
        let slow = record(200);
        let fast = record(100);
        assert_eq!(merge_choice(None, &slow), (MergeOutcome::Added, slow.clone()));
        assert_eq!(merge_choice(Some(&slow), &fast), (MergeOutcome::Replaced, fast.clone()));
        assert_eq!(merge_choice(Some(&fast), &slow), (MergeOutcome::Kept, fast.clone()));
        assert_eq!(merge_choice(Some(&fast), &fast), (MergeOutcome::Kept, fast.clone()));
        let mut bad = record(50);
        bad.state = RecordState::Quarantined;
        let same_as_bad = record(10);
        assert_eq!(merge_choice(Some(&bad), &same_as_bad).0, MergeOutcome::Kept);
        let mut other = record(500);
        other.schedule.tile_m = 16;
        assert_eq!(merge_choice(Some(&bad), &other), (MergeOutcome::Replaced, other.clone()));
    }

    #[test]
    fn stats_count() {
        let mut b = record(5);
        b.state = RecordState::Unverified;
        let listing = Listing { records: vec![record(1), b], undecodable: 3 };
        let s = Stats::of(&listing);
        assert_eq!(s.records, 2);
        assert_eq!(s.undecodable, 3);
        assert_eq!(s.by_state.get("fresh"), Some(&1));
        assert_eq!(s.by_state.get("unverified"), Some(&1));
        assert_eq!(s.by_target.get("sm_90a"), Some(&2));
    }
}
