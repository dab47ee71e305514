//! Where the local cache lives.

use std::path::PathBuf;

use crate::cache::store::StoreError;

/// Environment variable that overrides the cache directory.
pub const CACHE_DIR_ENV: &str = "TCC_CACHE_DIR";

/// The file name of the local database inside the cache directory.
pub const DB_FILE_NAME: &str = "tuning.sqlite3";

/// `$TCC_CACHE_DIR` if set and non-empty, else the user's cache directory (`$XDG_CACHE_HOME` or
/// `~/.cache` on Linux) joined with `tcc`.
pub fn default_cache_dir() -> Result<PathBuf, StoreError> {
    if let Some(dir) = std::env::var_os(CACHE_DIR_ENV).filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    dirs::cache_dir()
        .map(|d| d.join("tcc"))
        .ok_or_else(|| StoreError::Config(format!("no user cache directory found; set {CACHE_DIR_ENV}")))
}
