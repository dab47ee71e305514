//! The cache as tcc uses it: the local SQLite store plus an optional shared remote, read-through
//! and write-back, with version-, device- and trust-aware lookup.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::cache::key::CacheKey;
use crate::cache::record::{CacheRecord, RecordState};
#[cfg(feature = "shared-cache")]
use crate::cache::redis_store::RedisStore;
#[cfg(feature = "shared-cache")]
use crate::cache::remote::RedisOptions;
use crate::cache::sqlite::SqliteStore;
use crate::cache::store::{CacheStore, StoreError};
use crate::provenance::{Here, Provenance};

/// Environment variable naming the shared cache (`redis://:password@host:6379`).
pub const CACHE_URL_ENV: &str = "TCC_CACHE_URL";
/// Environment variable that makes the shared cache read-only when set to `1`, `true` or `yes`.
pub const CACHE_READ_ONLY_ENV: &str = "TCC_CACHE_READONLY";
/// Environment variable replacing the shared cache's key prefix (`tcc:` by default), so several
/// teams or test runs can share one server without seeing each other's records.
pub const CACHE_PREFIX_ENV: &str = "TCC_CACHE_PREFIX";

/// Most warnings a [`Layered`] keeps for [`Layered::warnings`].
const MAX_WARNINGS: usize = 32;

/// Sends `message` to `tracing` as a warning the first time this process gives it, and returns
/// whether it did: a damaged or unopenable cache is one warning per process, however many caches a
/// command opens and however many lookups fail.
pub fn warn_once(message: &str) -> bool {
    let first = first_in_process(message);
    if first {
        tracing::warn!("{message}");
    }
    first
}

fn first_in_process(message: &str) -> bool {
    static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if seen.iter().any(|m| m == message) {
        return false;
    }
    if seen.len() < MAX_WARNINGS {
        seen.push(message.to_string());
    }
    true
}

/// What a lookup found.
// A lookup result is a short-lived value returned once per kernel; boxing the record would only
// make matching on it clumsier.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// A usable record.
    Hit {
        /// The record.
        record: CacheRecord,
        /// How far it can be trusted.
        kind: HitKind,
    },
    /// Nothing usable.
    Miss,
}

/// How a hit may be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HitKind {
    /// Measured on this device by this code generator and checked here: use directly.
    Fresh,
    /// Measured on this device by this code generator, but known from elsewhere (a shared cache,
    /// an import): validate once on this device, then [`Layered::mark_validated`] or
    /// [`Layered::quarantine`].
    Unverified,
    /// Measured on another device or host, or by another code-generator or schedule-format
    /// version (see [`crate::provenance::Here`]): a starting point, re-measured whenever tuning
    /// is allowed and never made fresh by a run. Without tuning it is used once checked here.
    Borrowed {
        /// Where and by what it was measured ([`crate::Provenance::describe`]).
        from: String,
        /// True when its choice was already checked to run correctly here (so a run uses it
        /// without checking again).
        checked: bool,
    },
}

/// How the shared cache is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteHealth {
    /// No shared cache is configured.
    NotConfigured,
    /// The last request succeeded (or none was made).
    Ok,
    /// The last request failed; the local cache is used alone until it answers again.
    Unavailable(String),
}

/// Whether a winner is in the shared cache ([`Layered::share`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shared {
    /// No shared cache is configured.
    NoRemote,
    /// The shared cache is read-only (`TCC_CACHE_READONLY`): nothing is written to it.
    ReadOnly,
    /// The shared cache already had this choice, or one at least as fast.
    Already,
    /// Written to the shared cache now.
    Pushed,
    /// The shared cache did not answer (why); the record is only in the local cache.
    Failed(String),
}

/// Local cache plus optional shared remote.
pub struct Layered {
    local: SqliteStore,
    remote: Option<Box<dyn CacheStore>>,
    here: Here,
    local_damaged: AtomicBool,
    remote_down: AtomicBool,
    last_remote_error: Mutex<Option<String>>,
    warnings: Mutex<Vec<String>>,
}

impl std::fmt::Debug for Layered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Layered")
            .field("local", &self.local.describe())
            .field("remote", &self.remote.as_ref().map(|r| r.describe()))
            .field("here", &self.here)
            .finish_non_exhaustive()
    }
}

impl Layered {
    /// The local cache alone.
    pub fn new(local: SqliteStore) -> Layered {
        Layered {
            local,
            remote: None,
            here: Here::this_machine(),
            local_damaged: AtomicBool::new(false),
            remote_down: AtomicBool::new(false),
            last_remote_error: Mutex::new(None),
            warnings: Mutex::new(Vec::new()),
        }
    }

    /// Adds a shared remote (read-through; written back unless read-only).
    pub fn with_remote(mut self, remote: Box<dyn CacheStore>) -> Layered {
        self.remote = Some(remote);
        self
    }

    /// Judges freshness as the machine `here` would instead of this one (for tests and tools).
    pub fn with_here(mut self, here: Here) -> Layered {
        self.here = here;
        self
    }

    /// The default cache: the local database in [`crate::cache::default_cache_dir`], plus Redis
    /// when `TCC_CACHE_URL` is set (read-only when `TCC_CACHE_READONLY` is `1`, `true` or `yes`;
    /// keys under `TCC_CACHE_PREFIX` when set; for `rediss://`, the CA file `TCC_CACHE_CA` when
    /// set, else the system's roots); in a build without feature `shared-cache` the URL is reported
    /// and only the local cache is used. A shared cache that is misconfigured (a bad URL, prefix,
    /// scheme or CA file) is one warning: the local cache keeps working.
    pub fn open_default() -> Result<Layered, StoreError> {
        let remote = Layered::remote_from_env().unwrap_or_else(|e| {
            tracing::warn!("the shared tuning cache is not used: {e}; going on with the local cache");
            None
        });
        let layered = Layered::new(SqliteStore::open_default()?);
        #[cfg(feature = "shared-cache")]
        let layered = match remote {
            Some(remote) => layered.with_remote(Box::new(remote)),
            None => layered,
        };
        #[cfg(not(feature = "shared-cache"))]
        let _: Option<std::convert::Infallible> = remote;
        Ok(layered)
    }

    /// The shared store the environment configures (`TCC_CACHE_URL`, `TCC_CACHE_READONLY`,
    /// `TCC_CACHE_PREFIX`, `TCC_CACHE_CA`), or `None` when `TCC_CACHE_URL` is unset or empty.
    /// Nothing is sent to the server yet.
    #[cfg(feature = "shared-cache")]
    pub fn remote_from_env() -> Result<Option<RedisStore>, StoreError> {
        match std::env::var(CACHE_URL_ENV) {
            Ok(url) if !url.trim().is_empty() => {
                let read_only = std::env::var(CACHE_READ_ONLY_ENV)
                    .is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes"));
                let mut options = RedisOptions { read_only, ..RedisOptions::default() };
                if let Ok(prefix) = std::env::var(CACHE_PREFIX_ENV)
                    && !prefix.trim().is_empty()
                {
                    options.prefix = prefix.trim().to_string();
                }
                if let Some(ca) = std::env::var_os(crate::cache::CACHE_CA_ENV).filter(|v| !v.is_empty()) {
                    options.ca_file = Some(std::path::PathBuf::from(ca));
                }
                RedisStore::open(url.trim(), options).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Without feature `shared-cache` there is no shared store (never `Some`): a `TCC_CACHE_URL`
    /// is reported (with its credentials redacted) and ignored.
    #[cfg(not(feature = "shared-cache"))]
    pub fn remote_from_env() -> Result<Option<std::convert::Infallible>, StoreError> {
        if let Ok(url) = std::env::var(CACHE_URL_ENV)
            && !url.trim().is_empty()
        {
            tracing::warn!(
                "{CACHE_URL_ENV}={} is ignored: this build has no shared tuning cache (feature `shared-cache` of \
                 tcc); only the local cache is used",
                crate::cache::redact_url(url.trim())
            );
        }
        Ok(None)
    }

    /// The local store (also the tuning journal).
    pub fn local(&self) -> &SqliteStore {
        &self.local
    }

    /// The remote store, if any.
    pub fn remote(&self) -> Option<&dyn CacheStore> {
        self.remote.as_deref()
    }

    /// The machine and build records are judged for.
    pub fn here(&self) -> &Here {
        &self.here
    }

    /// How the shared cache is doing.
    pub fn remote_health(&self) -> RemoteHealth {
        if self.remote.is_none() {
            return RemoteHealth::NotConfigured;
        }
        if self.remote_down.load(Ordering::Relaxed) {
            let last = self.last_remote_error.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
            return RemoteHealth::Unavailable(last.unwrap_or_default());
        }
        RemoteHealth::Ok
    }

    /// Warnings issued so far (also sent to `tracing`), oldest first, at most 32.
    pub fn warnings(&self) -> Vec<String> {
        self.warnings.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn warn(&self, message: String) {
        tracing::warn!("{message}");
        let mut w = self.warnings.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if w.len() < MAX_WARNINGS {
            w.push(message);
        }
    }

    /// Runs a remote call, turning failure into `None` with one warning per outage.
    fn remote_call<T>(&self, what: &str, f: impl FnOnce(&dyn CacheStore) -> Result<T, StoreError>) -> Option<T> {
        let remote = self.remote.as_deref()?;
        match f(remote) {
            Ok(v) => {
                if self.remote_down.swap(false, Ordering::Relaxed) {
                    tracing::info!("shared tuning cache {} answers again", remote.describe());
                }
                Some(v)
            }
            Err(e) => {
                let message = e.to_string();
                *self.last_remote_error.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Some(message.clone());
                let first = !self.remote_down.swap(true, Ordering::Relaxed);
                if first || !matches!(e, StoreError::Unavailable(_)) {
                    self.warn(format!("{what} the shared tuning cache failed, using the local cache: {message}"));
                }
                None
            }
        }
    }

    /// Runs a local call, turning failure into `None` with a warning. A damaged database is
    /// warned about once per process and not asked again: the run goes on without it.
    fn local_call<T>(&self, what: &str, f: impl FnOnce(&SqliteStore) -> Result<T, StoreError>) -> Option<T> {
        if self.local_damaged.load(Ordering::Relaxed) {
            return None;
        }
        match f(&self.local) {
            Ok(v) => Some(v),
            Err(e @ StoreError::Damaged { .. }) => {
                self.local_damaged.store(true, Ordering::Relaxed);
                let message = format!("going on without the tuning cache: {e}");
                if first_in_process(&message) {
                    self.warn(message);
                }
                None
            }
            Err(e) => {
                self.warn(format!("{what} the local tuning cache failed: {e}"));
                None
            }
        }
    }

    /// True once a lookup found the local database damaged: it is not used for the rest of
    /// this process (`tcc cache repair` salvages it).
    pub fn local_is_damaged(&self) -> bool {
        self.local_damaged.load(Ordering::Relaxed)
    }

    fn classify(&self, record: &CacheRecord, key: &CacheKey) -> HitKind {
        if !record.measured_here(key, &self.here) {
            HitKind::Borrowed {
                from: record.provenance.describe(),
                checked: record.checked_here(key, &self.here) && record.state != RecordState::Quarantined,
            }
        } else if record.state == RecordState::Fresh {
            HitKind::Fresh
        } else {
            HitKind::Unverified
        }
    }

    /// Finds the best usable record for `key`: a record measured here (local, then shared; a
    /// shared one is copied into the local cache as unverified), else a borrowed exact record
    /// (local first), else one of another device of the same architecture (borrowed), else a
    /// miss. Quarantined records are never returned, nor a shared record naming the same choice
    /// as a quarantined one. Never fails: store errors become warnings.
    pub fn lookup(&self, key: &CacheKey) -> Lookup {
        let exact = self.local_call("reading", |s| s.get(key)).flatten();
        let quarantined = exact.as_ref().filter(|r| r.state == RecordState::Quarantined);
        let usable = exact.as_ref().filter(|r| r.state != RecordState::Quarantined);
        if let Some(r) = usable
            && r.measured_here(key, &self.here)
        {
            return Lookup::Hit { record: r.clone(), kind: self.classify(r, key) };
        }
        if let Some(mut shared) = self.remote_call("reading", |s| s.get(key)).flatten() {
            let same_as_bad = quarantined.is_some_and(|q| q.schedule == shared.schedule && q.variant == shared.variant);
            let measured_here = shared.measured_here(key, &self.here);
            if !same_as_bad && (usable.is_none() || measured_here) {
                shared.state = RecordState::Unverified;
                shared.checked = None;
                self.local_call("caching a shared record in", |s| s.put(&shared));
                let kind = self.classify(&shared, key);
                return Lookup::Hit { record: shared, kind };
            }
        }
        if let Some(r) = usable {
            return Lookup::Hit { record: r.clone(), kind: self.classify(r, key) };
        }
        self.borrow(key)
    }

    fn borrow(&self, key: &CacheKey) -> Lookup {
        let mut all = self.local_call("reading", |s| s.same_arch(key)).unwrap_or_default();
        all.extend(self.remote_call("reading", |s| s.same_arch(key)).unwrap_or_default());
        let best = all
            .into_iter()
            .filter(|r| r.state != RecordState::Quarantined && r.key.arch_hash() == key.arch_hash())
            .min_by_key(|r| {
                let this_codegen = r.provenance.codegen_version == self.here.codegen_version;
                (!this_codegen, r.time_ns, r.key.hash())
            });
        match best {
            Some(record) => {
                let kind = self.classify(&record, key);
                Lookup::Hit { record, kind }
            }
            None => Lookup::Miss,
        }
    }

    /// Stores a new measurement locally and writes it back to the shared cache unless that is
    /// read-only. Only a local failure is an error; a shared one is a warning.
    pub fn record(&self, record: &CacheRecord) -> Result<(), StoreError> {
        self.local.put(record).inspect_err(|e| {
            if matches!(e, StoreError::Damaged { .. }) {
                self.local_damaged.store(true, Ordering::Relaxed);
            }
        })?;
        if self.remote.as_ref().is_some_and(|r| !r.is_read_only()) {
            self.remote_call("writing to", |s| s.put(record));
        }
        Ok(())
    }

    /// Makes sure the shared cache has `record`'s choice (a winner measured here that an earlier
    /// run could not share): asks for `record.key` and writes `record` unless the shared record
    /// names the same choice or one at least as fast (measured elsewhere: it is kept). Never
    /// fails: see [`Shared`].
    pub fn share(&self, record: &CacheRecord) -> Shared {
        match self.remote.as_deref() {
            None => return Shared::NoRemote,
            Some(remote) if remote.is_read_only() => return Shared::ReadOnly,
            Some(_) => {}
        }
        let outcome = self.remote_call("sharing a record with", |s| {
            let there = s.get(&record.key)?;
            let kept = there.is_some_and(|r| {
                (r.schedule == record.schedule && r.variant == record.variant) || r.time_ns <= record.time_ns
            });
            if kept {
                return Ok(Shared::Already);
            }
            s.put(record).map(|()| Shared::Pushed)
        });
        outcome.unwrap_or_else(|| {
            let why = self.last_remote_error.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
            Shared::Failed(why.unwrap_or_default())
        })
    }

    /// The winner a lockfile takes for `key` from the caches alone (measuring nothing): the
    /// faster of the local and the shared record measured for exactly this key (this device) by
    /// this code generator in this schedule format, on any host; quarantined records never.
    pub fn winner(&self, key: &CacheKey) -> Option<CacheRecord> {
        let usable = |r: &CacheRecord| {
            r.key == *key && r.state != RecordState::Quarantined && r.by_codegen(self.here.codegen_version)
        };
        let local = self.local_call("reading", |s| s.get(key)).flatten().filter(usable);
        let shared = self.remote_call("reading", |s| s.get(key)).flatten().filter(usable);
        match (local, shared) {
            (Some(a), Some(b)) => Some(crate::cache::record::prefer(&a, &b).clone()),
            (a, b) => a.or(b),
        }
    }

    /// Marks this machine's copy of `key`'s record (measured here, known from elsewhere) as
    /// validated here. False if there is none.
    pub fn mark_validated(&self, key: &CacheKey) -> Result<bool, StoreError> {
        self.local.set_state(key, RecordState::Fresh)
    }

    /// Notes in the local cache that `record`, measured elsewhere, ran correctly for `key` here
    /// (checked by `checked_by`): a copy stored under `key` keeps the record's provenance and time,
    /// so it stays borrowed (the next tune re-measures it), but a run uses it without checking
    /// again. Returns the stored copy.
    pub fn mark_checked(
        &self,
        key: &CacheKey,
        record: &CacheRecord,
        checked_by: Provenance,
    ) -> Result<CacheRecord, StoreError> {
        let mut copy = record.clone();
        if copy.provenance.device.is_none() {
            // Records written before provenance named the device were measured on their key's.
            copy.provenance.device = Some(record.key.device.clone());
        }
        copy.key = key.clone();
        copy.state = RecordState::Unverified;
        copy.checked = Some(checked_by);
        self.local.put(&copy)?;
        Ok(copy)
    }

    /// Quarantines this machine's copy of a record that failed validation here: it is never used
    /// again (nor borrowed) and the kernel is re-tuned. A record known only from the shared cache
    /// is copied locally first, so the quarantine sticks.
    pub fn quarantine(&self, record: &CacheRecord) -> Result<(), StoreError> {
        if !self.local.set_state(&record.key, RecordState::Quarantined)? {
            let mut copy = record.clone();
            copy.state = RecordState::Quarantined;
            self.local.put(&copy)?;
        }
        Ok(())
    }
}
