//! Tuning lockfiles (`tcc tune --lock FILE`): the decisions every machine and every rank must use,
//! as sorted JSONL under a header line. Unlike an export, a lockfile is read strictly: one bad
//! line makes the whole file an error, because silently dropping a decision would let ranks
//! diverge.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use tcc_ir::Schedule;

use crate::bounds::{BoundsError, MAX_VARIANT, check_schedule, check_time_ns};
use crate::cache::key::{CacheKey, DeviceKey, KeyHash};
use crate::cache::record::{CacheRecord, RecordState};
use crate::cache::store::{CacheStore, StoreError};

/// The first line of every lockfile.
pub const LOCKFILE_HEADER: &str = r#"{"tcc-lockfile":1}"#;

/// One locked decision.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LockEntry {
    /// What it is for.
    pub key: CacheKey,
    /// The optimizer alternative.
    pub variant: u32,
    /// The schedule.
    pub schedule: Schedule,
    /// Its encoding version (see [`crate::cache::CacheRecord::schedule_format`]).
    #[serde(default = "crate::cache::record::first_format")]
    pub schedule_format: u32,
    /// Its measured median time in nanoseconds (for drift reports).
    pub time_ns: u64,
}

impl LockEntry {
    fn validate(&self) -> Result<(), BoundsError> {
        self.key.validate()?;
        if self.variant > MAX_VARIANT {
            return Err(BoundsError::new("variant", format!("{} is too large", self.variant)));
        }
        crate::cache::record::check_schedule_format(self.schedule_format)?;
        check_schedule(&self.schedule)?;
        check_time_ns("time_ns", self.time_ns)
    }
}

/// A lockfile could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LockfileError {
    /// The file could not be read or written.
    #[error("lockfile I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The first line is not the lockfile header.
    #[error("not a tcc lockfile (the first line must be {LOCKFILE_HEADER})")]
    NoHeader,
    /// A line is not a valid entry.
    #[error("lockfile line {line}: {reason}")]
    BadLine {
        /// 1-based line number.
        line: usize,
        /// Why.
        reason: String,
    },
    /// An entry could not be encoded.
    #[error("encoding a lockfile entry: {0}")]
    Encode(#[from] serde_json::Error),
}

/// A difference between a lockfile and what this machine has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Drift {
    /// The local cache has no record for a locked key.
    NotInCache {
        /// The key.
        key: KeyHash,
    },
    /// The local cache chose differently.
    Differs {
        /// The key.
        key: KeyHash,
        /// Locked (variant, schedule, time).
        locked: (u32, Schedule, u64),
        /// Cached (variant, schedule, time).
        cached: (u32, Schedule, u64),
    },
    /// The locked choice failed validation on this device.
    Quarantined {
        /// The key.
        key: KeyHash,
    },
    /// The lockfile has the kernel only for another device; that device's choice is used.
    OtherDevice {
        /// The locked key.
        key: KeyHash,
        /// The device it was locked for.
        locked: DeviceKey,
        /// This device.
        here: DeviceKey,
    },
}

impl fmt::Display for Drift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Drift::NotInCache { key } => write!(f, "{key}: locked, not in the local cache"),
            Drift::Differs { key, locked, cached } => write!(
                f,
                "{key}: locked v{} {} ({} ns), cache has v{} {} ({} ns)",
                locked.0, locked.1, locked.2, cached.0, cached.1, cached.2
            ),
            Drift::Quarantined { key } => write!(f, "{key}: the locked choice failed validation on this device"),
            Drift::OtherDevice { key, locked, here } => {
                write!(f, "{key}: locked for {locked}, used as is on {here}")
            }
        }
    }
}

/// The lockfile's choice for a key, and the drift it implies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockChoice<'a> {
    /// The locked decision.
    pub entry: &'a LockEntry,
    /// Set when the entry was locked for another device.
    pub drift: Option<Drift>,
}

/// The decisions of a lockfile, by key hash.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lockfile {
    entries: BTreeMap<KeyHash, LockEntry>,
}

impl Lockfile {
    /// An empty lockfile.
    pub fn new() -> Lockfile {
        Lockfile::default()
    }

    /// Locks the decisions of these records (quarantined ones are left out).
    pub fn from_records<'a>(records: impl IntoIterator<Item = &'a CacheRecord>) -> Lockfile {
        let mut lock = Lockfile::new();
        for r in records.into_iter().filter(|r| r.state != RecordState::Quarantined) {
            lock.insert(LockEntry {
                key: r.key.clone(),
                variant: r.variant,
                schedule: r.schedule,
                schedule_format: r.schedule_format,
                time_ns: r.time_ns,
            });
        }
        lock
    }

    /// Adds or replaces an entry.
    pub fn insert(&mut self, entry: LockEntry) {
        self.entries.insert(entry.key.hash(), entry);
    }

    /// Entries sorted by key hash.
    pub fn entries(&self) -> impl Iterator<Item = &LockEntry> {
        self.entries.values()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The file's text: the header, then one entry per line sorted by key hash.
    pub fn to_text(&self) -> Result<String, LockfileError> {
        let mut out = format!("{LOCKFILE_HEADER}\n");
        for e in self.entries.values() {
            out.push_str(&serde_json::to_string(e)?);
            out.push('\n');
        }
        Ok(out)
    }

    /// Parses a lockfile strictly: every line must be a valid, in-bounds entry.
    pub fn parse(text: &str) -> Result<Lockfile, LockfileError> {
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, first)) if first.trim() == LOCKFILE_HEADER => {}
            _ => return Err(LockfileError::NoHeader),
        }
        let mut lock = Lockfile::new();
        for (i, line) in lines {
            if line.trim().is_empty() {
                continue;
            }
            let bad = |reason: String| LockfileError::BadLine { line: i + 1, reason };
            if line.len() > crate::bounds::MAX_RECORD_BYTES {
                return Err(bad("too long".into()));
            }
            let entry: LockEntry = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
            entry.validate().map_err(|e| bad(e.to_string()))?;
            lock.insert(entry);
        }
        Ok(lock)
    }

    /// Reads a lockfile.
    pub fn read(path: &Path) -> Result<Lockfile, LockfileError> {
        Lockfile::parse(&std::fs::read_to_string(path)?)
    }

    /// Writes the lockfile atomically (temporary file, then rename).
    pub fn write(&self, path: &Path) -> Result<(), LockfileError> {
        tcc_files::write_atomically(path, self.to_text()?.as_bytes())?;
        Ok(())
    }

    /// The locked decision for `key`: the exact entry, else the same kernel locked for another
    /// device (preferring the same architecture), reported as drift.
    pub fn choose(&self, key: &CacheKey) -> Option<LockChoice<'_>> {
        if let Some(entry) = self.entries.get(&key.hash()) {
            return Some(LockChoice { entry, drift: None });
        }
        let kernel = key.kernel_hash();
        let arch = key.arch_hash();
        let entry = self
            .entries
            .values()
            .filter(|e| e.key.kernel_hash() == kernel)
            .min_by_key(|e| e.key.arch_hash() != arch)?;
        let drift =
            Drift::OtherDevice { key: entry.key.hash(), locked: entry.key.device.clone(), here: key.device.clone() };
        Some(LockChoice { entry, drift: Some(drift) })
    }

    /// Compares every locked decision with the store's record for the same key.
    pub fn check_drift(&self, store: &dyn CacheStore) -> Result<Vec<Drift>, StoreError> {
        let mut drift = Vec::new();
        for (hash, e) in &self.entries {
            match store.get(&e.key)? {
                None => drift.push(Drift::NotInCache { key: hash.clone() }),
                Some(r) if r.variant != e.variant || r.schedule != e.schedule => drift.push(Drift::Differs {
                    key: hash.clone(),
                    locked: (e.variant, e.schedule, e.time_ns),
                    cached: (r.variant, r.schedule, r.time_ns),
                }),
                Some(r) if r.state == RecordState::Quarantined => drift.push(Drift::Quarantined { key: hash.clone() }),
                Some(_) => {}
            }
        }
        Ok(drift)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::record::tests::record;
    use crate::cache::sqlite::SqliteStore;

    #[test]
    fn text_round_trip_and_strictness() {
        let a = record(100);
        let mut b = record(200);
        b.key.shapes = "other".into();
        let lock = Lockfile::from_records([&a, &b]);
        let text = lock.to_text().unwrap();
        assert!(text.starts_with(LOCKFILE_HEADER));
        assert_eq!(Lockfile::parse(&text).unwrap(), lock);
        assert!(matches!(Lockfile::parse("{}\n"), Err(LockfileError::NoHeader)));
        let truncated = &text[..text.len() - 20];
        assert!(matches!(Lockfile::parse(truncated), Err(LockfileError::BadLine { line: 3, .. })));
        let absurd = text.replace("\"stages\":2", "\"stages\":200");
        assert!(matches!(Lockfile::parse(&absurd), Err(LockfileError::BadLine { .. })));
        // Entries written before the schedule format existed read as format 1; a later format is
        // refused, never misread.
        let old = text.replace(",\"schedule_format\":1", "");
        assert_ne!(old, text);
        assert_eq!(Lockfile::parse(&old).unwrap(), lock);
        let later = text.replace("\"schedule_format\":1", "\"schedule_format\":2");
        assert!(matches!(Lockfile::parse(&later), Err(LockfileError::BadLine { line: 2, .. })));
    }

    #[test]
    fn choose_exact_then_other_device() {
        let a = record(100);
        let lock = Lockfile::from_records([&a]);
        assert_eq!(lock.choose(&a.key).unwrap().drift, None);
        let mut here = a.key.clone();
        here.device.name = "NVIDIA H100 PCIe".into();
        let choice = lock.choose(&here).unwrap();
        assert_eq!(choice.entry.schedule, a.schedule);
        assert!(matches!(choice.drift, Some(Drift::OtherDevice { .. })));
        let mut other_kernel = a.key.clone();
        other_kernel.shapes = "different".into();
        assert!(lock.choose(&other_kernel).is_none());
    }

    #[test]
    fn drift_against_a_store() {
        let store = SqliteStore::in_memory().unwrap();
        let a = record(100);
        let mut b = record(100);
        b.key.shapes = "b".into();
        let lock = Lockfile::from_records([&a, &b]);
        store.put(&a).unwrap();
        let mut b_cached = b.clone();
        b_cached.schedule.tile_m = 128;
        store.put(&b_cached).unwrap();
        let drift = lock.check_drift(&store).unwrap();
        assert_eq!(drift.len(), 1);
        assert!(matches!(&drift[0], Drift::Differs { key, .. } if *key == b.key.hash()));
        store.remove(&a.key.hash()).unwrap();
        assert_eq!(lock.check_drift(&store).unwrap().len(), 2);
    }
}
