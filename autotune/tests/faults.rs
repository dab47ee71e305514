//! The fault catalogue of RELIABILITY.md, as far as the tuning cache goes, for what no other test
//! of this crate covers without extra services: a cache directory that cannot be created or
//! written, a shared (Redis) cache that is down or silent — no redis-server needed, so these run in
//! every `cargo test` — with the local cache still serving, and nothing recorded lost.
//!
//! Covered elsewhere (RELIABILITY.md lists them): a corrupt row or a file that is not a database
//! (`cache.rs`), a hanging candidate (`process.rs`), a tuning run killed with SIGKILL
//! (`concurrency.rs`), Redis against a real server (`redis.rs`, ignored unless asked for).

#[cfg(feature = "shared-cache")]
use std::io::Read;
#[cfg(feature = "shared-cache")]
use std::net::TcpListener;
#[cfg(feature = "shared-cache")]
use std::time::{Duration, Instant};

#[cfg(feature = "shared-cache")]
use tcc_autotune::cache::{CacheStore, HitKind, Lookup, RedisOptions, RedisStore, RemoteHealth};
use tcc_autotune::cache::{Layered, SqliteStore};

#[cfg(feature = "shared-cache")]
use crate::common::{cpu, key, record, schedule};

/// Paths no process can create, even as root (these tests may run as root, where permission bits
/// do not stop writes): under a regular file, and under /proc.
fn uncreatable_paths(dir: &tempfile::TempDir) -> Vec<std::path::PathBuf> {
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    vec![file.join("cache/tuning.sqlite3"), "/proc/tcc-no-such-dir/tuning.sqlite3".into()]
}

#[test]
fn a_cache_directory_that_cannot_be_created_is_an_error_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    for path in uncreatable_paths(&dir) {
        let text = match SqliteStore::open(&path) {
            Ok(_) => panic!("{} opened", path.display()),
            Err(err) => err.to_string(),
        };
        // The error names the folder that could not be created.
        let folder = path.parent().unwrap().display().to_string();
        assert!(text.starts_with("cannot create the tuning cache folder") && text.contains(&folder), "{text}");
    }
}

#[test]
fn the_default_cache_in_an_uncreatable_directory_is_an_error() {
    // In a child process: the environment variable must not race with other tests' threads.
    if std::env::var_os("TCC_FAULTS_CHILD").is_some() {
        match Layered::open_default() {
            Ok(_) => panic!("the default cache opened in an uncreatable directory"),
            Err(err) => println!("child error: {err}"),
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bad = uncreatable_paths(&dir).remove(0);
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "faults::the_default_cache_in_an_uncreatable_directory_is_an_error", "--nocapture"])
        .env("TCC_FAULTS_CHILD", "1")
        .env("TCC_CACHE_DIR", bad.parent().unwrap())
        .env_remove("TCC_CACHE_URL")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("child error: cannot create the tuning cache folder"), "{stdout}");
}

#[cfg(feature = "shared-cache")]
#[test]
fn a_redis_server_that_is_down_or_silent_falls_back_to_the_local_cache() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("tuning.sqlite3")).unwrap();
    let before = record(key("kept", cpu()), schedule(8, 8, 8), 100);
    store.put(&before).unwrap();

    // Down: nothing listens on a port that was just free.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let down = RedisStore::open(&format!("redis://:secret-pw@127.0.0.1:{port}"), RedisOptions::default()).unwrap();
    let cache = Layered::new(store).with_remote(Box::new(down));
    let started = Instant::now();
    assert!(matches!(cache.lookup(&before.key), Lookup::Hit { kind: HitKind::Fresh, .. }));
    assert_eq!(cache.lookup(&key("absent", cpu())), Lookup::Miss);
    let during = record(key("during", cpu()), schedule(4, 4, 4), 50);
    cache.record(&during).unwrap();
    assert!(started.elapsed() < Duration::from_secs(3), "a down server stalls: {:?}", started.elapsed());
    assert!(matches!(cache.remote_health(), RemoteHealth::Unavailable(_)));
    let warnings = cache.warnings();
    assert_eq!(warnings.len(), 1, "one warning per outage: {warnings:?}");
    assert!(!warnings[0].contains("secret-pw"), "the password leaked: {warnings:?}");
    // Nothing lost: both records are in the local cache.
    assert_eq!(cache.local().get(&before.key).unwrap().map(|r| r.schedule), Some(before.schedule));
    assert_eq!(cache.local().get(&during.key).unwrap().map(|r| r.schedule), Some(during.schedule));

    // Slow: a server that accepts connections and never answers; the I/O timeout applies.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let holder = std::thread::spawn(move || {
        if let Ok((mut conn, _)) = silent.accept() {
            conn.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
            let deadline = Instant::now() + Duration::from_secs(4);
            let mut buf = [0u8; 256];
            while Instant::now() < deadline && !matches!(conn.read(&mut buf), Ok(0)) {}
        }
    });
    let options = RedisOptions {
        io_timeout: Duration::from_millis(300),
        connect_timeout: Duration::from_millis(300),
        ..RedisOptions::default()
    };
    let slow = RedisStore::open(&format!("redis://127.0.0.1:{silent_port}"), options).unwrap();
    let cache =
        Layered::new(SqliteStore::open(&dir.path().join("tuning.sqlite3")).unwrap()).with_remote(Box::new(slow));
    let started = Instant::now();
    assert!(matches!(cache.lookup(&during.key), Lookup::Hit { kind: HitKind::Fresh, .. }));
    assert_eq!(cache.lookup(&key("absent", cpu())), Lookup::Miss);
    assert!(started.elapsed() < Duration::from_secs(3), "a silent server stalls: {:?}", started.elapsed());
    assert!(matches!(cache.remote_health(), RemoteHealth::Unavailable(_)));
    drop(cache);
    holder.join().unwrap();
}
