//! The local cache: one SQLite database (WAL mode, busy timeout, short transactions), safe with
//! several processes reading and tuning at once. It also holds the tuning journal.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::cache::key::{CacheKey, KeyHash};
use crate::cache::paths::{DB_FILE_NAME, default_cache_dir};
use crate::cache::record::{CacheRecord, RecordState};
use crate::cache::store::{CacheStore, Listing, MergeOutcome, StoreError, merge_choice};
use crate::provenance::unix_now;
use crate::search::{Journal, Trial};

/// How long a connection waits for another process's lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(15);

/// Most records [`CacheStore::same_arch`] returns.
const MAX_SAME_ARCH: i64 = 256;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS records (
    key_hash TEXT PRIMARY KEY NOT NULL,
    arch_hash TEXT NOT NULL,
    record TEXT NOT NULL,
    updated_unix INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS records_by_arch ON records(arch_hash);
CREATE TABLE IF NOT EXISTS journal (
    session TEXT NOT NULL,
    candidate TEXT NOT NULL,
    trial TEXT NOT NULL,
    updated_unix INTEGER NOT NULL,
    PRIMARY KEY (session, candidate)
);
";

/// A database error; one that says the file is not a database or is malformed becomes
/// [`StoreError::Damaged`] (its path filled in by the caller, see `at`).
fn db_err(e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) => {
            StoreError::Damaged { path: PathBuf::new(), detail: e.to_string() }
        }
        _ => StoreError::Sqlite(e.to_string()),
    }
}

/// The local SQLite cache.
#[derive(Debug)]
pub struct SqliteStore {
    path: PathBuf,
    conn: Mutex<Connection>,
}

/// What [`SqliteStore::gc`] removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcOptions {
    /// This build's code-generator version ([`tcc_ir::CODEGEN_VERSION`]).
    pub codegen_version: u32,
    /// Remove records measured by another code-generator version (or an unknown one) or schedule
    /// format: borrowed on every machine running this build.
    pub drop_other_versions: bool,
    /// Remove quarantined records.
    pub drop_quarantined: bool,
    /// Remove journal entries (of tuning runs that never finished) older than this.
    pub journal_older_than: Duration,
}

/// What [`SqliteStore::gc`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Rows that could not be decoded.
    pub undecodable: usize,
    /// Records of another code-generator version or schedule format.
    pub other_versions: usize,
    /// Quarantined records.
    pub quarantined: usize,
    /// Old journal entries.
    pub journal: usize,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`, in WAL mode with a busy timeout.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir { path: dir.to_path_buf(), source })?;
        }
        let conn = Connection::open(path).map_err(|e| at(path, db_err(e)))?;
        SqliteStore::setup(conn, path.to_path_buf(), true).map_err(|e| at(path, e))
    }

    /// Opens the database in the default cache directory ([`default_cache_dir`]).
    pub fn open_default() -> Result<SqliteStore, StoreError> {
        SqliteStore::open(&default_cache_dir()?.join(DB_FILE_NAME))
    }

    /// A private in-memory database (for tests and `--no-cache` runs).
    pub fn in_memory() -> Result<SqliteStore, StoreError> {
        let conn = Connection::open_in_memory().map_err(db_err)?;
        SqliteStore::setup(conn, PathBuf::from(":memory:"), false)
    }

    fn setup(mut conn: Connection, path: PathBuf, wal: bool) -> Result<SqliteStore, StoreError> {
        conn.busy_timeout(BUSY_TIMEOUT).map_err(db_err)?;
        if wal {
            // Switching to WAL needs a moment of exclusive access; another process opening the
            // same file at once can make it report busy without waiting, so retry.
            let deadline = Instant::now() + BUSY_TIMEOUT;
            loop {
                match conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0)) {
                    Ok(_) => break,
                    Err(e) if Instant::now() < deadline && is_busy(&e) => std::thread::sleep(Duration::from_millis(20)),
                    Err(e) => return Err(db_err(e)),
                }
            }
            conn.pragma_update(None, "synchronous", "NORMAL").map_err(db_err)?;
        }
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db_err)?;
        tx.execute_batch(SCHEMA).map_err(db_err)?;
        tx.commit().map_err(db_err)?;
        Ok(SqliteStore { path, conn: Mutex::new(conn) })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on the connection; a [`StoreError::Damaged`] it returns names this database.
    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        f(&mut self.conn()).map_err(|e| at(&self.path, e))
    }

    /// [`SqliteStore::check`] of the database at `path`, opened read-only (nothing is written to
    /// a file that may be damaged). A missing file is fine.
    pub fn check_file(path: &Path) -> Result<(), StoreError> {
        if !path.exists() {
            return Ok(());
        }
        let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| at(path, db_err(e)))?;
        let store = SqliteStore { path: path.to_path_buf(), conn: Mutex::new(conn) };
        store.check()
    }

    /// Checks the whole file (SQLite's `quick_check`): [`StoreError::Damaged`] naming the first
    /// problem when its pages are malformed. Reads every page: for `tcc cache` and `tcc tune`,
    /// not for every lookup.
    pub fn check(&self) -> Result<(), StoreError> {
        let problems: Vec<String> = self.with(|conn| {
            let mut stmt = conn.prepare("PRAGMA quick_check(5)").map_err(db_err)?;
            let rows = stmt.query_map([], |r| r.get::<_, String>(0)).map_err(db_err)?;
            rows.map(|r| r.map_err(db_err)).collect()
        })?;
        match problems.as_slice() {
            [ok] if ok == "ok" => Ok(()),
            problems => Err(StoreError::Damaged {
                path: self.path.clone(),
                detail: problems.join("; ").chars().take(300).collect(),
            }),
        }
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave the connection half-updated: every write
        // is one statement or one transaction, which SQLite rolls back.
        self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Number of journal entries (finished candidates of unfinished tuning runs).
    pub fn journal_len(&self) -> Result<usize, StoreError> {
        self.with(|conn| {
            let n: i64 = conn.query_row("SELECT COUNT(*) FROM journal", [], |r| r.get(0)).map_err(db_err)?;
            Ok(usize::try_from(n).unwrap_or(0))
        })
    }

    /// Removes undecodable rows and, as asked, records of other versions, quarantined records
    /// and old journal entries, in one transaction.
    pub fn gc(&self, options: &GcOptions) -> Result<GcReport, StoreError> {
        self.with(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db_err)?;
            let mut report = GcReport::default();
            let mut doomed = Vec::new();
            {
                let mut stmt = tx.prepare("SELECT key_hash, record FROM records").map_err(db_err)?;
                let rows =
                    stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)))).map_err(db_err)?;
                for row in rows {
                    let (hash, text) = row.map_err(db_err)?;
                    match text.ok().map(|t| CacheRecord::decode_stored(&hash, &t)) {
                        Some(Ok(rec)) if options.drop_quarantined && rec.state == RecordState::Quarantined => {
                            report.quarantined += 1;
                            doomed.push(hash);
                        }
                        Some(Ok(rec)) if options.drop_other_versions && !rec.by_codegen(options.codegen_version) => {
                            report.other_versions += 1;
                            doomed.push(hash);
                        }
                        Some(Ok(_)) => {}
                        _ => {
                            report.undecodable += 1;
                            doomed.push(hash);
                        }
                    }
                }
            }
            for hash in &doomed {
                tx.execute("DELETE FROM records WHERE key_hash = ?1", params![hash]).map_err(db_err)?;
            }
            let cutoff = unix_now().saturating_sub(options.journal_older_than.as_secs());
            let cutoff = i64::try_from(cutoff).unwrap_or(i64::MAX);
            report.journal =
                tx.execute("DELETE FROM journal WHERE updated_unix < ?1", params![cutoff]).map_err(db_err)?;
            tx.commit().map_err(db_err)?;
            Ok(report)
        })
    }
}

/// `e` with `path` in a [`StoreError::Damaged`] that has none.
fn at(path: &Path, e: StoreError) -> StoreError {
    match e {
        StoreError::Damaged { path: p, detail } if p.as_os_str().is_empty() => {
            StoreError::Damaged { path: path.to_path_buf(), detail }
        }
        other => other,
    }
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseBusy) | Some(rusqlite::ErrorCode::DatabaseLocked))
}

/// Decodes one stored row, warning (never failing) when it cannot be used.
fn decode_row(hash: &str, text: rusqlite::Result<String>) -> Option<CacheRecord> {
    let decoded =
        text.map_err(|e| e.to_string()).and_then(|t| CacheRecord::decode_stored(hash, &t).map_err(|e| e.to_string()));
    match decoded {
        Ok(record) => Some(record),
        Err(e) => {
            tracing::warn!(key = %hash, "skipping an undecodable tuning-cache row: {e}");
            None
        }
    }
}

fn write_record(conn: &Connection, record: &CacheRecord) -> Result<(), StoreError> {
    record.validate()?;
    let text = record.encode()?;
    conn.execute(
        "INSERT INTO records (key_hash, arch_hash, record, updated_unix) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(key_hash) DO UPDATE SET arch_hash = excluded.arch_hash, record = excluded.record,
         updated_unix = excluded.updated_unix",
        params![record.key.hash().as_str(), record.key.arch_hash().as_str(), text, unix_now_i64()],
    )
    .map_err(db_err)?;
    Ok(())
}

fn read_record(conn: &Connection, hash: &str) -> Result<Option<CacheRecord>, StoreError> {
    let text = conn
        .query_row("SELECT record FROM records WHERE key_hash = ?1", params![hash], |r| Ok(r.get::<_, String>(0)))
        .optional()
        .map_err(db_err)?;
    Ok(text.and_then(|t| decode_row(hash, t)))
}

fn unix_now_i64() -> i64 {
    i64::try_from(unix_now()).unwrap_or(i64::MAX)
}

impl CacheStore for SqliteStore {
    fn describe(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }

    fn get(&self, key: &CacheKey) -> Result<Option<CacheRecord>, StoreError> {
        self.with(|conn| read_record(conn, key.hash().as_str()))
    }

    fn same_arch(&self, key: &CacheKey) -> Result<Vec<CacheRecord>, StoreError> {
        const SQL: &str =
            "SELECT key_hash, record FROM records WHERE arch_hash = ?1 AND key_hash != ?2 ORDER BY key_hash LIMIT ?3";
        self.with(|conn| {
            let mut stmt = conn.prepare(SQL).map_err(db_err)?;
            let rows = stmt
                .query_map(params![key.arch_hash().as_str(), key.hash().as_str(), MAX_SAME_ARCH], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)))
                })
                .map_err(db_err)?;
            let mut out = Vec::new();
            for row in rows {
                let (hash, text) = row.map_err(db_err)?;
                out.extend(decode_row(&hash, text));
            }
            Ok(out)
        })
    }

    fn put(&self, record: &CacheRecord) -> Result<(), StoreError> {
        self.with(|conn| write_record(conn, record))
    }

    fn remove(&self, hash: &KeyHash) -> Result<bool, StoreError> {
        self.with(|conn| {
            let n = conn.execute("DELETE FROM records WHERE key_hash = ?1", params![hash.as_str()]).map_err(db_err)?;
            Ok(n > 0)
        })
    }

    fn list(&self) -> Result<Listing, StoreError> {
        self.with(|conn| {
            let mut stmt = conn.prepare("SELECT key_hash, record FROM records ORDER BY key_hash").map_err(db_err)?;
            let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)))).map_err(db_err)?;
            let mut listing = Listing::default();
            for row in rows {
                let (hash, text) = row.map_err(db_err)?;
                match decode_row(&hash, text) {
                    Some(r) => listing.records.push(r),
                    None => listing.undecodable += 1,
                }
            }
            Ok(listing)
        })
    }

    fn set_state(&self, key: &CacheKey, state: RecordState) -> Result<bool, StoreError> {
        self.with(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db_err)?;
            let Some(mut record) = read_record(&tx, key.hash().as_str())? else {
                return Ok(false);
            };
            record.state = state;
            write_record(&tx, &record)?;
            tx.commit().map_err(db_err)?;
            Ok(true)
        })
    }

    fn merge(&self, incoming: &CacheRecord) -> Result<MergeOutcome, StoreError> {
        self.with(|conn| {
            incoming.validate()?;
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db_err)?;
            let existing = read_record(&tx, incoming.key.hash().as_str())?;
            let (outcome, chosen) = merge_choice(existing.as_ref(), incoming);
            if outcome != MergeOutcome::Kept {
                write_record(&tx, &chosen)?;
            }
            tx.commit().map_err(db_err)?;
            Ok(outcome)
        })
    }
}

impl Journal for SqliteStore {
    fn load(&self, session: &str) -> Result<Vec<Trial>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn
                .prepare("SELECT candidate, trial FROM journal WHERE session = ?1 ORDER BY rowid")
                .map_err(db_err)?;
            let rows = stmt
                .query_map(params![session], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1))))
                .map_err(db_err)?;
            let mut out = Vec::new();
            for row in rows {
                let (id, text) = row.map_err(db_err)?;
                match text.map_err(|e| e.to_string()).and_then(|t| Trial::decode(&t).map_err(|e| e.to_string())) {
                    Ok(trial) if trial.candidate.id() == id => out.push(trial),
                    Ok(_) => tracing::warn!("skipping a tuning-journal entry stored under the wrong candidate"),
                    Err(e) => tracing::warn!("skipping an undecodable tuning-journal entry: {e}"),
                }
            }
            Ok(out)
        })
    }

    fn append(&self, session: &str, trial: &Trial) -> Result<(), StoreError> {
        const SQL: &str = "INSERT INTO journal (session, candidate, trial, updated_unix) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(session, candidate) DO UPDATE SET trial = excluded.trial, updated_unix = excluded.updated_unix";
        let text = serde_json::to_string(trial)?;
        self.with(|conn| {
            conn.execute(SQL, params![session, trial.candidate.id(), text, unix_now_i64()]).map_err(db_err)?;
            Ok(())
        })
    }

    fn clear(&self, session: &str) -> Result<(), StoreError> {
        self.with(|conn| {
            conn.execute("DELETE FROM journal WHERE session = ?1", params![session]).map_err(db_err)?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::record::tests::record;

    #[test]
    fn put_get_list_remove() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("sub").join("db.sqlite3")).unwrap();
        let r = record(100);
        assert_eq!(store.get(&r.key).unwrap(), None);
        store.put(&r).unwrap();
        assert_eq!(store.get(&r.key).unwrap(), Some(r.clone()));
        let mut faster = r.clone();
        faster.time_ns = 50;
        store.put(&faster).unwrap();
        assert_eq!(store.list().unwrap(), Listing { records: vec![faster.clone()], undecodable: 0 });
        assert!(store.set_state(&r.key, RecordState::Quarantined).unwrap());
        assert_eq!(store.get(&r.key).unwrap().unwrap().state, RecordState::Quarantined);
        assert!(store.remove(&r.key.hash()).unwrap());
        assert!(!store.remove(&r.key.hash()).unwrap());
        assert!(!store.set_state(&r.key, RecordState::Fresh).unwrap());
    }

    #[test]
    fn same_arch_finds_other_devices_only() {
        let store = SqliteStore::in_memory().unwrap();
        let a = record(100);
        let mut b = record(80);
        b.key.device.name = "NVIDIA H100 PCIe".into();
        b.key.device.sm_count = Some(114);
        let mut c = record(70);
        c.key.device.arch = "sm_80".into();
        for r in [&a, &b, &c] {
            store.put(r).unwrap();
        }
        assert_eq!(store.same_arch(&a.key).unwrap(), vec![b.clone()]);
    }

    #[test]
    fn invalid_records_are_refused() {
        let store = SqliteStore::in_memory().unwrap();
        let mut r = record(100);
        r.schedule.warps = 1000;
        assert!(matches!(store.put(&r), Err(StoreError::Invalid(_))));
        assert!(matches!(store.merge(&r), Err(StoreError::Invalid(_))));
    }
}
