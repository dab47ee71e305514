//! The shared cache's settings and URL handling (credentials never appear in messages). The
//! Redis client itself is `RedisStore` (feature `shared-cache`, in `redis_store.rs`): `redis://`
//! in clear on a trusted network, `rediss://` over TLS with the server's certificate verified.

use std::path::PathBuf;
use std::time::Duration;

/// Environment variable naming a PEM file of the CA certificates a `rediss://` server's
/// certificate must chain to, instead of the system's trusted roots.
pub const CACHE_CA_ENV: &str = "TCC_CACHE_CA";

/// Settings of a Redis store (`RedisStore`, feature `shared-cache`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisOptions {
    /// For `rediss://`: a PEM file of the CA certificates to trust instead of the system's
    /// roots (`TCC_CACHE_CA`).
    pub ca_file: Option<PathBuf>,
    /// Prefix of every key (letters, digits, `_ : . -`; at most 64 bytes).
    pub prefix: String,
    /// Refuse every write (for users who may read but not write).
    pub read_only: bool,
    /// Longest wait to connect.
    pub connect_timeout: Duration,
    /// Longest wait for one reply.
    pub io_timeout: Duration,
    /// After a failure, how long to answer "unavailable" without trying again.
    pub retry_after: Duration,
}

impl Default for RedisOptions {
    fn default() -> RedisOptions {
        RedisOptions {
            ca_file: None,
            prefix: "tcc:".to_string(),
            read_only: false,
            connect_timeout: Duration::from_millis(500),
            io_timeout: Duration::from_secs(2),
            retry_after: Duration::from_secs(30),
        }
    }
}

/// A URL with any user name and password replaced by `***`, safe to print.
pub fn redact_url(url: &str) -> String {
    match split_userinfo(url) {
        Some((scheme_end, at, _)) => format!("{}***{}", &url[..scheme_end], &url[at..]),
        None => url.to_string(),
    }
}

/// (end of `scheme://`, index of `@`, userinfo) when the URL has credentials.
pub(crate) fn split_userinfo(url: &str) -> Option<(usize, usize, &str)> {
    let scheme_end = url.find("://")? + 3;
    let rest = &url[scheme_end..];
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let at = rest[..authority_len].rfind('@')?;
    Some((scheme_end, scheme_end + at, &rest[..at]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction() {
        assert_eq!(redact_url("redis://:s3cret@127.0.0.1:6379/0"), "redis://***@127.0.0.1:6379/0");
        assert_eq!(redact_url("redis://user:pw@host"), "redis://***@host");
        assert_eq!(redact_url("redis://host:6379"), "redis://host:6379");
        assert_eq!(redact_url("redis://host/0?x=a@b"), "redis://host/0?x=a@b");
    }
}
