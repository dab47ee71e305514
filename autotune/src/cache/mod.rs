//! The tuning cache: keys, records (data only, bounds-checked on decode), the local SQLite store,
//! the shared Redis store, the layered cache tcc uses, JSONL export/import, lockfiles, and the
//! repair of a damaged local database.

mod jsonl;
mod key;
mod layered;
mod lockfile;
mod paths;
mod record;
#[cfg(feature = "shared-cache")]
mod redis_store;
mod remote;
mod repair;
mod salvage;
mod sqlite;
mod store;

pub use jsonl::{ImportReport, Parsed, Skipped, export, export_file, import, merge, parse, to_jsonl};
pub use key::{CacheKey, DeviceKey, KeyHash};
pub use layered::{
    CACHE_PREFIX_ENV, CACHE_READ_ONLY_ENV, CACHE_URL_ENV, HitKind, Layered, Lookup, RemoteHealth, Shared, warn_once,
};
pub use lockfile::{Drift, LOCKFILE_HEADER, LockChoice, LockEntry, Lockfile, LockfileError};
pub use paths::{CACHE_DIR_ENV, DB_FILE_NAME, default_cache_dir};
pub use record::{CacheRecord, DecodeError, RecordState, RunnerUp, Searched, Standing, prefer};
#[cfg(feature = "shared-cache")]
pub use redis_store::RedisStore;
pub use remote::{CACHE_CA_ENV, RedisOptions, redact_url};
pub use repair::{RepairReport, repair};
pub use sqlite::{GcOptions, GcReport, SqliteStore};
pub use store::{CacheStore, Listing, MergeOutcome, Stats, StoreError, merge_choice};
