//! The shared cache: a Redis server (sync client; feature `shared-cache`), `redis://` in clear or
//! `rediss://` over TLS (rustls), the server's certificate verified against the system's roots or
//! the CA file of `TCC_CACHE_CA`. Credentials come from the URL and never appear in messages;
//! connect and I/O timeouts make a slow, down or untrusted server an [`StoreError::Unavailable`]
//! the caller falls back from; a read-only store never writes.
//!
//! The commands sent (what a Redis ACL user for tcc needs): `GETRANGE`, `SRANDMEMBER` and `SCAN`
//! to read; `SET`, `SADD`, `DEL` and `SREM` to write; and `AUTH` when connecting (always allowed).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crate::bounds::MAX_RECORD_BYTES;
use crate::cache::key::{CacheKey, KeyHash};
use crate::cache::record::CacheRecord;
use crate::cache::remote::{CACHE_CA_ENV, RedisOptions, redact_url, split_userinfo};
use crate::cache::store::{CacheStore, Listing, StoreError};

/// Most keys [`CacheStore::list`] reads from a server.
const MAX_LIST: usize = 100_000;
/// Most records [`CacheStore::same_arch`] reads.
const MAX_SAME_ARCH: usize = 64;
/// Keys read per pipeline.
const CHUNK: usize = 256;

enum Conn {
    Idle,
    Up(redis::Connection),
    Down(Instant),
}

/// A Redis-backed [`CacheStore`]. Records live at `{prefix}rec:{key hash}` as JSON text; each
/// architecture's key hashes are a set at `{prefix}arch:{arch hash}`.
pub struct RedisStore {
    client: redis::Client,
    shown: String,
    secrets: Vec<String>,
    tls: bool,
    options: RedisOptions,
    conn: Mutex<Conn>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore").field("url", &self.shown).field("options", &self.options).finish_non_exhaustive()
    }
}

impl RedisStore {
    /// A store for `url` (`redis://[user][:password]@host[:port][/db]`, or `rediss://` for TLS:
    /// the server's certificate must chain to [`RedisOptions::ca_file`] when given, else to the
    /// system's trusted roots; verification cannot be turned off). Nothing is sent until first
    /// use.
    pub fn open(url: &str, options: RedisOptions) -> Result<RedisStore, StoreError> {
        let shown = redact_url(url);
        let tls = url.starts_with("rediss://");
        if !tls && !url.starts_with("redis://") {
            return Err(StoreError::Config(format!("{shown}: expected a redis:// or rediss:// (TLS) URL")));
        }
        if url.contains("#insecure") {
            return Err(StoreError::Config(format!(
                "{shown}: tcc always verifies the server's certificate; give the CA that signed it in {CACHE_CA_ENV}"
            )));
        }
        if !tls && let Some(ca) = &options.ca_file {
            return Err(StoreError::Config(format!(
                "{shown}: {CACHE_CA_ENV}={} is set for a URL without TLS; use rediss:// (the password would travel in clear)",
                ca.display()
            )));
        }
        let prefix_ok = options.prefix.len() <= 64
            && options.prefix.bytes().all(|b| b.is_ascii_alphanumeric() || b"_:.-".contains(&b));
        if !prefix_ok {
            return Err(StoreError::Config(format!(
                "key prefix {:?} must be letters, digits, _ : . - (at most 64)",
                options.prefix
            )));
        }
        let mut secrets = Vec::new();
        if let Some((_, _, userinfo)) = split_userinfo(url) {
            for part in userinfo.split(':').filter(|p| p.len() >= 3) {
                secrets.push(part.to_string());
                secrets.push(percent_decode(part));
            }
        }
        let config = |e: redis::RedisError| StoreError::Config(format!("{shown}: {}", scrub(&secrets, &e.to_string())));
        let client = match (&options.ca_file, tls) {
            (Some(ca), true) => {
                let pem = std::fs::read(ca).map_err(|e| {
                    StoreError::Config(format!(
                        "{shown}: cannot read the CA file `{}` ({CACHE_CA_ENV}): {e}",
                        ca.display()
                    ))
                })?;
                if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
                    return Err(StoreError::Config(format!(
                        "{shown}: the CA file `{}` ({CACHE_CA_ENV}) holds no PEM certificate",
                        ca.display()
                    )));
                }
                install_crypto_provider();
                redis::Client::build_with_tls(url, redis::TlsCertificates { client_tls: None, root_cert: Some(pem) })
                    .map_err(config)?
            }
            (_, tls) => {
                if tls {
                    install_crypto_provider();
                }
                redis::Client::open(url).map_err(config)?
            }
        };
        Ok(RedisStore { client, shown, secrets, tls, options, conn: Mutex::new(Conn::Idle) })
    }

    /// Why a connection failed, with a hint when the server's certificate was the reason.
    fn connect_error(&self, e: &redis::RedisError) -> String {
        let text = self.scrubbed(e);
        let untrusted = ["certificate", "UnknownIssuer", "NotValidForName", "BadSignature"];
        if self.tls && untrusted.iter().any(|w| text.contains(w)) {
            let trusted = match &self.options.ca_file {
                Some(ca) => format!("the CA file `{}` ({CACHE_CA_ENV})", ca.display()),
                None => format!("the system's trusted roots (set {CACHE_CA_ENV} to the CA file that signed it)"),
            };
            format!("the server's TLS certificate is not trusted: {text}; it must chain to {trusted}")
        } else {
            text
        }
    }

    fn scrubbed(&self, e: &redis::RedisError) -> String {
        scrub(&self.secrets, &e.to_string())
    }

    fn lock(&self) -> MutexGuard<'_, Conn> {
        // The connection is replaced, never left half-updated, so a poisoned lock is usable.
        self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn rec_key(&self, hash: &str) -> String {
        format!("{}rec:{hash}", self.options.prefix)
    }

    fn arch_key(&self, hash: &KeyHash) -> String {
        format!("{}arch:{hash}", self.options.prefix)
    }

    /// Runs `f` on a connection, connecting first if needed. A connection or I/O failure marks the
    /// server down for [`RedisOptions::retry_after`].
    fn with_conn<T>(&self, f: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>) -> Result<T, StoreError> {
        let mut guard = self.lock();
        if let Conn::Down(since) = *guard {
            if since.elapsed() < self.options.retry_after {
                return Err(StoreError::Unavailable(format!("{} did not answer recently", self.shown)));
            }
            *guard = Conn::Idle;
        }
        if matches!(*guard, Conn::Idle) {
            let connected = self.client.get_connection_with_timeout(self.options.connect_timeout).and_then(|c| {
                c.set_read_timeout(Some(self.options.io_timeout))?;
                c.set_write_timeout(Some(self.options.io_timeout))?;
                Ok(c)
            });
            match connected {
                Ok(c) => *guard = Conn::Up(c),
                Err(e) => {
                    *guard = Conn::Down(Instant::now());
                    return Err(StoreError::Unavailable(format!("{}: {}", self.shown, self.connect_error(&e))));
                }
            }
        }
        let Conn::Up(conn) = &mut *guard else {
            return Err(StoreError::Unavailable(format!("{} is not connected", self.shown)));
        };
        // The client is third-party code talking to a server we do not control: a panic inside it
        // drops the connection and becomes an error, never a crash of tcc.
        let result = match catch_unwind(AssertUnwindSafe(|| f(conn))) {
            Ok(r) => r,
            Err(_) => {
                *guard = Conn::Down(Instant::now());
                return Err(StoreError::Remote(format!("{}: the redis client failed internally", self.shown)));
            }
        };
        match result {
            Ok(v) => Ok(v),
            Err(e) if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_unrecoverable_error() => {
                *guard = Conn::Down(Instant::now());
                Err(StoreError::Unavailable(format!("{}: {}", self.shown, self.scrubbed(&e))))
            }
            Err(e) => Err(StoreError::Remote(format!("{}: {}", self.shown, self.scrubbed(&e)))),
        }
    }

    fn refuse_if_read_only(&self) -> Result<(), StoreError> {
        if self.options.read_only { Err(StoreError::ReadOnly(self.shown.clone())) } else { Ok(()) }
    }

    /// Reads records by key hash, at most [`MAX_RECORD_BYTES`] + 1 bytes each (so a huge value
    /// is rejected without being transferred); missing ones are skipped.
    fn read_many(&self, hashes: &[String]) -> Result<Vec<Option<CacheRecord>>, StoreError> {
        let mut out = Vec::with_capacity(hashes.len());
        for chunk in hashes.chunks(CHUNK) {
            let values: Vec<Vec<u8>> = self.with_conn(|c| {
                let mut pipe = redis::pipe();
                for h in chunk {
                    pipe.cmd("GETRANGE").arg(self.rec_key(h)).arg(0).arg(MAX_RECORD_BYTES);
                }
                pipe.query(c)
            })?;
            for (hash, bytes) in chunk.iter().zip(values) {
                out.push(decode_value(hash, &bytes));
            }
        }
        Ok(out)
    }
}

/// Makes rustls use *ring* for its cryptography (the one provider built in), once per process.
fn install_crypto_provider() {
    // An error means a provider is installed already: nothing to do.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (bytes.get(i + 1).and_then(|&b| hex(b)), bytes.get(i + 2).and_then(|&b| hex(b)))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Replaces every secret in `text` with `***`.
fn scrub(secrets: &[String], text: &str) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        out = out.replace(s.as_str(), "***");
    }
    out
}

/// Decodes a stored value; an empty one is a missing key; anything unusable is skipped with a
/// warning.
fn decode_value(hash: &str, bytes: &[u8]) -> Option<CacheRecord> {
    if bytes.is_empty() {
        return None;
    }
    let decoded = std::str::from_utf8(bytes)
        .map_err(|e| e.to_string())
        .and_then(|text| CacheRecord::decode_stored(hash, text).map_err(|e| e.to_string()));
    match decoded {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::warn!(key = %hash, "skipping an undecodable remote tuning-cache entry: {e}");
            None
        }
    }
}

impl CacheStore for RedisStore {
    fn describe(&self) -> String {
        self.shown.clone()
    }

    fn is_read_only(&self) -> bool {
        self.options.read_only
    }

    fn get(&self, key: &CacheKey) -> Result<Option<CacheRecord>, StoreError> {
        Ok(self.read_many(&[key.hash().to_string()])?.into_iter().flatten().next())
    }

    fn same_arch(&self, key: &CacheKey) -> Result<Vec<CacheRecord>, StoreError> {
        let own = key.hash();
        let arch = key.arch_hash();
        let members: Vec<String> =
            self.with_conn(|c| redis::cmd("SRANDMEMBER").arg(self.arch_key(&arch)).arg(MAX_SAME_ARCH).query(c))?;
        let mut hashes: Vec<String> =
            members.into_iter().filter(|h| KeyHash::parse(h).is_some() && h.as_str() != own.as_str()).collect();
        hashes.sort();
        let records = self.read_many(&hashes)?;
        Ok(records.into_iter().flatten().filter(|r| r.key.arch_hash() == arch).collect())
    }

    fn put(&self, record: &CacheRecord) -> Result<(), StoreError> {
        self.refuse_if_read_only()?;
        record.validate()?;
        let text = record.encode()?;
        let hash = record.key.hash();
        // A plain pipeline, not MULTI/EXEC: redis 1.8.1 panics (index underflow) when the server
        // refuses MULTI itself, as it does for a read-only ACL user. If SADD fails after SET, the
        // record only goes missing from its architecture's index (borrowing), never corrupt.
        self.with_conn(|c| {
            redis::pipe()
                .cmd("SET")
                .arg(self.rec_key(hash.as_str()))
                .arg(&text)
                .ignore()
                .cmd("SADD")
                .arg(self.arch_key(&record.key.arch_hash()))
                .arg(hash.as_str())
                .ignore()
                .query::<()>(c)
        })
    }

    fn remove(&self, hash: &KeyHash) -> Result<bool, StoreError> {
        self.refuse_if_read_only()?;
        let existing = self.read_many(&[hash.to_string()])?.into_iter().flatten().next();
        let removed: i64 = self.with_conn(|c| redis::cmd("DEL").arg(self.rec_key(hash.as_str())).query(c))?;
        if let Some(r) = existing {
            self.with_conn(|c| {
                redis::cmd("SREM").arg(self.arch_key(&r.key.arch_hash())).arg(hash.as_str()).query::<i64>(c)
            })?;
        }
        Ok(removed > 0)
    }

    fn list(&self) -> Result<Listing, StoreError> {
        let pattern = format!("{}rec:*", self.options.prefix);
        let strip = format!("{}rec:", self.options.prefix);
        let mut hashes = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = self.with_conn(|c| {
                redis::cmd("SCAN").arg(cursor).arg("MATCH").arg(&pattern).arg("COUNT").arg(CHUNK).query(c)
            })?;
            hashes.extend(keys.into_iter().filter_map(|k| k.strip_prefix(&strip).map(str::to_string)));
            cursor = next;
            if cursor == 0 || hashes.len() >= MAX_LIST {
                break;
            }
        }
        hashes.sort();
        hashes.dedup();
        hashes.truncate(MAX_LIST);
        let mut listing = Listing::default();
        let valid: Vec<String> = hashes.into_iter().filter(|h| KeyHash::parse(h).is_some()).collect();
        for (hash, record) in valid.iter().zip(self.read_many(&valid)?) {
            match record {
                Some(r) => listing.records.push(r),
                None => {
                    tracing::debug!(key = %hash, "remote entry vanished or could not be decoded");
                    listing.undecodable += 1;
                }
            }
        }
        Ok(listing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_scrubbed() {
        assert_eq!(scrub(&["s3cret".into()], "auth s3cret failed"), "auth *** failed");
        assert_eq!(percent_decode("p%40ss%3A"), "p@ss:");
    }

    #[test]
    fn open_checks_config_without_connecting() {
        // TLS is built in; turning verification off is not.
        let s = RedisStore::open("rediss://:pw123@host", RedisOptions::default()).unwrap();
        assert_eq!(s.describe(), "rediss://***@host");
        let e = RedisStore::open("rediss://:pw123@host/#insecure", RedisOptions::default()).unwrap_err();
        assert!(matches!(e, StoreError::Config(_)) && !e.to_string().contains("pw123"), "{e}");
        // A CA file that cannot be read or holds no certificate, or one given for a URL in clear.
        let dir = tempfile::tempdir().unwrap();
        let not_pem = dir.path().join("ca.txt");
        std::fs::write(&not_pem, "hello").unwrap();
        for ca in [dir.path().join("missing.pem"), not_pem] {
            let options = RedisOptions { ca_file: Some(ca.clone()), ..RedisOptions::default() };
            let e = RedisStore::open("rediss://:pw123@host", options.clone()).unwrap_err();
            assert!(e.to_string().contains(CACHE_CA_ENV) && !e.to_string().contains("pw123"), "{e}");
            let e = RedisStore::open("redis://:pw123@host", options).unwrap_err();
            assert!(e.to_string().contains("in clear"), "{e}");
        }
        assert!(RedisStore::open("http://host", RedisOptions::default()).is_err());
        let bad_prefix = RedisOptions { prefix: "a*b".into(), ..RedisOptions::default() };
        assert!(RedisStore::open("redis://host", bad_prefix).is_err());
        let s = RedisStore::open("redis://:pw123@127.0.0.1:1", RedisOptions::default()).unwrap();
        assert!(!format!("{s:?}").contains("pw123"));
        assert_eq!(s.describe(), "redis://***@127.0.0.1:1");
    }
}
