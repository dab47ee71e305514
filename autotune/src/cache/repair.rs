//! `tcc cache repair`: salvages every readable record (and tuning-journal entry) of a damaged local
//! database into a fresh one, and keeps the damaged file beside it. Nothing is deleted: the damaged
//! file (and its write-ahead log) is renamed `NAME.damaged-YYYYMMDDTHHMMSSZ`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::cache::key::KeyHash;
use crate::cache::record::{CacheRecord, RecordState};
use crate::cache::salvage::{self, TableRow, Value};
use crate::cache::sqlite::SqliteStore;
use crate::cache::store::{CacheStore, StoreError};
use crate::provenance::{format_utc, unix_now};
use crate::search::{Journal, Trial};

/// What [`repair`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairReport {
    /// Records written to the fresh database.
    pub saved: usize,
    /// Tuning-journal entries (trials of unfinished tuning runs) written to it.
    pub journal: usize,
    /// Rows known to have existed (from what survives of the records table and its indexes) that
    /// could not be read: a lower bound when whole pages were lost.
    pub lost: usize,
    /// Where the damaged file is now.
    pub damaged_copy: PathBuf,
}

/// A candidate for one key: its row's time stamp and the record.
struct Found {
    updated: i64,
    record: CacheRecord,
}

/// Salvages the database at `path` (whatever state it is in: SQLite is not asked to read it) into
/// a fresh database at the same path, after renaming the damaged file (and its `-wal` and `-shm`
/// files) to `PATH.damaged-<UTC time>`. Where a key was found several times (an older copy of a
/// page), the newest row wins, and of rows equally new the least trusted. Errors when `path` does
/// not exist or a file cannot be read, written or renamed; the damaged file is never removed.
pub fn repair(path: &Path) -> Result<RepairReport, StoreError> {
    let db = std::fs::read(path)?;
    let wal = std::fs::read(sidecar(path, "-wal")).unwrap_or_default();
    let scan = salvage::scan(&db, &wal);

    let mut records: BTreeMap<KeyHash, Found> = BTreeMap::new();
    let mut journal: BTreeMap<(String, String), (i64, i64, Trial)> = BTreeMap::new();
    let mut known_rows: BTreeSet<i64> = BTreeSet::new();
    let mut read_rows: BTreeSet<i64> = BTreeSet::new();
    for row in &scan.table_rows {
        let Some((first, second, text, updated)) = four_columns(row) else { continue };
        if KeyHash::parse(first).is_some() && KeyHash::parse(second).is_some() {
            // A row of the records table: key hash, architecture hash, record, time stamp.
            known_rows.insert(row.rowid);
            let Ok(record) = CacheRecord::decode_stored(first, text) else { continue };
            read_rows.insert(row.rowid);
            let better = records
                .get(&record.key.hash())
                .is_none_or(|old| (updated, distrust(record.state)) > (old.updated, distrust(old.record.state)));
            if better {
                records.insert(record.key.hash(), Found { updated, record });
            }
        } else if let Ok(trial) = Trial::decode(text)
            && trial.candidate.id() == second
        {
            // A row of the journal: session, candidate, trial, time stamp.
            let entry = (first.to_string(), second.to_string());
            if journal.get(&entry).is_none_or(|(old, _, _)| updated >= *old) {
                journal.insert(entry, (updated, row.rowid, trial));
            }
        }
    }
    // Index entries of the records table (a key or architecture hash, then the rowid): rows whose
    // table pages are gone still count as lost.
    for entry in &scan.index_rows {
        if let [Value::Text(hash), Value::Int(rowid)] = entry.as_slice()
            && KeyHash::parse(hash).is_some()
        {
            known_rows.insert(*rowid);
        }
    }
    let lost = known_rows.difference(&read_rows).count();

    let fresh_path = sidecar(path, ".repairing");
    remove_if_there(&fresh_path)?;
    remove_if_there(&sidecar(&fresh_path, "-wal"))?;
    remove_if_there(&sidecar(&fresh_path, "-shm"))?;
    let mut entries: Vec<(i64, String, Trial)> =
        journal.into_iter().map(|((session, _), (_, rowid, trial))| (rowid, session, trial)).collect();
    entries.sort_by_key(|(rowid, _, _)| *rowid);
    {
        let fresh = SqliteStore::open(&fresh_path)?;
        for found in records.values() {
            fresh.put(&found.record)?;
        }
        for (_, session, trial) in &entries {
            fresh.append(session, trial)?;
        }
        fresh.check()?;
    } // closed: its write-ahead log is folded into the file

    let damaged_copy = free_name(path)?;
    std::fs::rename(path, &damaged_copy)?;
    for suffix in ["-wal", "-shm"] {
        let side = sidecar(path, suffix);
        if side.exists() {
            std::fs::rename(&side, sidecar(&damaged_copy, suffix))?;
        }
    }
    std::fs::rename(&fresh_path, path)?;
    Ok(RepairReport { saved: records.len(), journal: entries.len(), lost, damaged_copy })
}

/// Columns text, text, text, integer (both tables' rows have that form).
fn four_columns(row: &TableRow) -> Option<(&str, &str, &str, i64)> {
    match row.values.as_slice() {
        [Value::Text(a), Value::Text(b), Value::Text(c), Value::Int(d)] => Some((a, b, c, *d)),
        _ => None,
    }
}

/// How little a state is trusted: of two copies equally new, the less trusted is kept (a
/// quarantine is never undone by a repair; an unverified record is checked again).
fn distrust(state: RecordState) -> u8 {
    match state {
        RecordState::Fresh => 0,
        RecordState::Unverified => 1,
        RecordState::Quarantined => 2,
    }
}

/// `path` with `suffix` appended to its file name.
fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// `PATH.damaged-<UTC time>`, with `-2`, `-3`, ... if that exists already.
fn free_name(path: &Path) -> Result<PathBuf, StoreError> {
    let stamp: String = format_utc(unix_now()).chars().filter(|c| *c != '-' && *c != ':').collect();
    let base = sidecar(path, &format!(".damaged-{stamp}"));
    for n in 1..1000 {
        let candidate = if n == 1 { base.clone() } else { sidecar(&base, &format!("-{n}")) };
        if !candidate.exists() {
            return Ok(candidate);
        }
    }
    Err(StoreError::Config(format!("no free name for the damaged copy of `{}`", path.display())))
}

/// Removes a leftover of an earlier repair that did not finish (never the damaged file).
fn remove_if_there(path: &Path) -> Result<(), StoreError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        _ => Ok(()),
    }
}
