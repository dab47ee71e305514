//! Against a real redis-server: ignored unless asked for (`cargo test --workspace --tests -- --ignored
//! redis::`, as CI runs them). `TCC_TEST_REDIS` names the server, for example
//! `redis://:password@127.0.0.1:6379`, or `rediss://...` for TLS with `TCC_CACHE_CA` naming the CA
//! file that signed the server's certificate; without it every test here fails saying so, and so
//! does the TLS test without a `rediss://` server.

use std::io::Read;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use tcc_autotune::cache::{
    self, CacheStore, Drift, HitKind, KeyHash, Layered, Lockfile, Lookup, MergeOutcome, RecordState, RedisOptions,
    RedisStore, RemoteHealth, SqliteStore, StoreError,
};
use tcc_autotune::search::{Strategy, TunerOptions};
use tcc_autotune::{Plan, plan, tune_and_record};

use crate::common::{FakeBench, bowl, cpu, grid_space, h100, h100_pcie, key, record, schedule};

fn redis_url() -> String {
    match std::env::var("TCC_TEST_REDIS") {
        Ok(url) if !url.trim().is_empty() => url.trim().to_string(),
        _ => panic!(
            "TCC_TEST_REDIS is not set: these tests need a running redis-server, \
             e.g. TCC_TEST_REDIS=redis://:password@127.0.0.1:6379"
        ),
    }
}

/// The CA file of `TCC_CACHE_CA`, if set.
fn ca_file() -> Option<std::path::PathBuf> {
    std::env::var_os(cache::CACHE_CA_ENV).filter(|v| !v.is_empty()).map(std::path::PathBuf::from)
}

/// Options for the test server: its CA when it speaks TLS.
fn options() -> RedisOptions {
    RedisOptions { ca_file: ca_file(), ..RedisOptions::default() }
}

/// A plain client of `url` (for what the store does not do: garbage values, ACL users, clean-up),
/// over TLS with the test CA when the URL is `rediss://`.
fn client(url: &str) -> redis::RedisResult<redis::Client> {
    match ca_file().filter(|_| url.starts_with("rediss://")) {
        Some(ca) => {
            let _ = rustls::crypto::ring::default_provider().install_default();
            let root_cert = Some(std::fs::read(ca)?);
            redis::Client::build_with_tls(url, redis::TlsCertificates { client_tls: None, root_cert })
        }
        None => redis::Client::open(url),
    }
}

/// The password part of the URL (to check it never leaks into messages).
fn password(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let userinfo = rest.split_once('@')?.0;
    userinfo.split_once(':').map(|(_, p)| p.to_string()).filter(|p| !p.is_empty())
}

/// A key prefix of its own for each test; its keys are deleted when dropped.
struct Prefix {
    url: String,
    prefix: String,
}

impl Prefix {
    fn new(name: &str) -> Prefix {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        Prefix { url: redis_url(), prefix: format!("tcc-test:{}-{nanos}:{name}:", std::process::id()) }
    }

    fn store(&self, read_only: bool) -> RedisStore {
        RedisStore::open(&self.url, RedisOptions { prefix: self.prefix.clone(), read_only, ..options() }).unwrap()
    }

    fn raw(&self) -> redis::Connection {
        client(&self.url).unwrap().get_connection_with_timeout(Duration::from_secs(2)).unwrap()
    }

    /// Creates (through `raw`) a Redis ACL user with password `pw`, keys under this prefix only
    /// and the command `rules`, and returns the server's URL logging in as that user.
    fn acl_user(&self, raw: &mut redis::Connection, user: &str, pw: &str, rules: &[&str]) -> String {
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg(user)
            .arg("reset")
            .arg("on")
            .arg(format!(">{pw}"))
            .arg(format!("~{}*", self.prefix))
            .arg(rules)
            .query(raw)
            .unwrap();
        let (scheme, rest) = self.url.split_once("://").unwrap();
        let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
        format!("{scheme}://{user}:{pw}@{host}")
    }
}

impl Drop for Prefix {
    fn drop(&mut self) {
        let Ok(mut c) = client(&self.url).and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2))) else {
            return;
        };
        let keys: Vec<String> = redis::cmd("KEYS").arg(format!("{}*", self.prefix)).query(&mut c).unwrap_or_default();
        for k in keys {
            let _: redis::RedisResult<i64> = redis::cmd("DEL").arg(k).query(&mut c);
        }
    }
}

fn local() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("tuning.sqlite3")).unwrap();
    (dir, store)
}

#[test]
#[ignore = "needs a redis-server at TCC_TEST_REDIS: run with --ignored (CI starts one)"]
fn round_trip() {
    let p = Prefix::new("round-trip");
    let store = p.store(false);
    let r = record(key("rt", h100()), schedule(8, 16, 32), 1234);
    assert_eq!(store.get(&r.key).unwrap(), None);
    store.put(&r).unwrap();
    assert_eq!(store.get(&r.key).unwrap(), Some(r.clone()));
    let sibling = record(key("rt", h100_pcie()), schedule(4, 4, 4), 999);
    store.put(&sibling).unwrap();
    assert_eq!(store.same_arch(&r.key).unwrap(), vec![sibling.clone()]);
    assert!(store.set_state(&r.key, RecordState::Quarantined).unwrap());
    assert_eq!(store.get(&r.key).unwrap().unwrap().state, RecordState::Quarantined);
    let mut faster = sibling.clone();
    faster.time_ns = 10;
    faster.schedule = schedule(2, 2, 2);
    assert_eq!(store.merge(&faster).unwrap(), MergeOutcome::Replaced);
    assert_eq!(store.merge(&sibling).unwrap(), MergeOutcome::Kept);

    // Garbage and oversized values are skipped and counted, never fatal.
    let garbage = key("garbage", h100());
    let huge = key("huge", h100());
    let mut raw = p.raw();
    let _: () =
        redis::cmd("SET").arg(format!("{}rec:{}", p.prefix, garbage.hash())).arg("{not json").query(&mut raw).unwrap();
    let _: () = redis::cmd("SET")
        .arg(format!("{}rec:{}", p.prefix, huge.hash()))
        .arg("x".repeat(1 << 20))
        .query(&mut raw)
        .unwrap();
    assert_eq!(store.get(&garbage).unwrap(), None);
    assert_eq!(store.get(&huge).unwrap(), None);
    let listing = store.list().unwrap();
    assert_eq!((listing.records.len(), listing.undecodable), (2, 2));

    assert!(store.remove(&r.key.hash()).unwrap());
    assert!(!store.remove(&KeyHash::parse(r.key.hash().as_str()).unwrap()).unwrap());
    assert_eq!(store.get(&r.key).unwrap(), None);
}

#[test]
#[ignore = "needs a redis-server at TCC_TEST_REDIS: run with --ignored (CI starts one)"]
fn read_only_mode() {
    let p = Prefix::new("read-only");
    let writer = p.store(false);
    let shared = record(key("ro", cpu()), schedule(8, 8, 8), 500);
    writer.put(&shared).unwrap();

    let reader = p.store(true);
    assert!(reader.is_read_only());
    assert_eq!(reader.get(&shared.key).unwrap(), Some(shared.clone()));
    assert!(matches!(reader.put(&shared), Err(StoreError::ReadOnly(_))));
    assert!(matches!(reader.remove(&shared.key.hash()), Err(StoreError::ReadOnly(_))));

    let (_dir, store) = local();
    let cache = Layered::new(store).with_remote(Box::new(p.store(true)));
    assert!(matches!(cache.lookup(&shared.key), Lookup::Hit { kind: HitKind::Unverified, .. }));
    let mine = record(key("mine", cpu()), schedule(4, 4, 4), 300);
    cache.record(&mine).unwrap();
    assert_eq!(cache.local().get(&mine.key).unwrap(), Some(mine.clone()));
    assert_eq!(writer.get(&mine.key).unwrap(), None, "a read-only cache never writes back");
    assert!(cache.warnings().is_empty(), "{:?}", cache.warnings());

    // A server-side read-only user (ACL): reads work, writes are refused by the server, and the
    // error names neither password.
    let user = format!("tcc-ro-{}", std::process::id());
    let user_pw = "ro-user-secret-pw";
    let mut raw = p.raw();
    let ro_url = p.acl_user(&mut raw, &user, user_pw, &["+@read", "+@connection"]);
    let acl_store = RedisStore::open(&ro_url, RedisOptions { prefix: p.prefix.clone(), ..options() }).unwrap();
    let got = acl_store.get(&shared.key);
    let put = acl_store.put(&mine);
    let _: redis::RedisResult<i64> = redis::cmd("ACL").arg("DELUSER").arg(&user).query(&mut raw);
    assert_eq!(got.unwrap(), Some(shared));
    let message = put.unwrap_err().to_string();
    assert!(message.contains("NOPERM") || message.to_lowercase().contains("permission"), "{message}");
    assert!(!message.contains(user_pw), "{message}");
}

#[test]
#[ignore = "needs a redis-server at TCC_TEST_REDIS: run with --ignored (CI starts one)"]
fn server_down_falls_back_to_the_local_cache_with_a_warning() {
    let url = redis_url();
    let (_dir, store) = local();
    let local_record = record(key("down", cpu()), schedule(8, 8, 8), 100);
    store.put(&local_record).unwrap();

    // Nothing listens on a port that was just free.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dead_url = format!("redis://:dead-server-pw@127.0.0.1:{port}");
    let cache =
        Layered::new(store).with_remote(Box::new(RedisStore::open(&dead_url, RedisOptions::default()).unwrap()));
    let started = Instant::now();
    assert_eq!(cache.lookup(&key("absent", cpu())), Lookup::Miss);
    assert!(matches!(cache.lookup(&local_record.key), Lookup::Hit { kind: HitKind::Fresh, .. }));
    cache.record(&record(key("new", cpu()), schedule(2, 2, 2), 5)).unwrap();
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    assert!(matches!(cache.remote_health(), RemoteHealth::Unavailable(_)));
    let warnings = cache.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(!warnings[0].contains("dead-server-pw"), "{warnings:?}");

    // A server that accepts but never answers: the I/O timeout applies.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let holder = std::thread::spawn(move || {
        let (mut conn, _) = silent.accept().unwrap();
        let mut buf = [0u8; 256];
        let deadline = Instant::now() + Duration::from_secs(5);
        conn.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        while Instant::now() < deadline {
            if let Ok(0) = conn.read(&mut buf) {
                break;
            }
        }
    });
    let slow = RedisStore::open(
        &format!("redis://127.0.0.1:{silent_port}"),
        RedisOptions {
            io_timeout: Duration::from_millis(300),
            connect_timeout: Duration::from_millis(300),
            ..RedisOptions::default()
        },
    )
    .unwrap();
    let started = Instant::now();
    assert!(matches!(slow.get(&local_record.key), Err(StoreError::Unavailable(_))));
    assert!(slow.get(&local_record.key).is_err(), "still down, not retried at once");
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    drop(slow);
    holder.join().unwrap();

    // The real server with a wrong password: an error that does not show it.
    if let Some(pw) = password(&url) {
        let wrong = url.replacen(&format!(":{pw}@"), ":wrong-pw-123@", 1);
        let err = RedisStore::open(&wrong, options()).unwrap().get(&local_record.key).unwrap_err().to_string();
        assert!(!err.contains("wrong-pw-123") && !err.contains(&pw), "{err}");
    }
}

#[test]
#[ignore = "needs a redis-server at TCC_TEST_REDIS: run with --ignored (CI starts one)"]
fn export_import_merge() {
    let p = Prefix::new("export");
    let (_a, a_local) = local();
    let machine_a = Layered::new(a_local).with_remote(Box::new(p.store(false)));
    let keys: Vec<_> = ["e1", "e2", "e3"].iter().map(|s| key(s, cpu())).collect();
    for (i, k) in keys.iter().enumerate() {
        machine_a.record(&record(k.clone(), schedule(4, 4, 4), 200 + i as u64)).unwrap();
    }
    // Export the shared cache, then import it on a machine that already has a faster e1 and a
    // slower e2.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("team.jsonl");
    assert_eq!(cache::export_file(&p.store(true), &path).unwrap(), 3);
    let (_b, b_local) = local();
    b_local.put(&record(keys[0].clone(), schedule(8, 8, 8), 100)).unwrap();
    b_local.put(&record(keys[1].clone(), schedule(1, 1, 1), 900)).unwrap();
    let parsed = cache::parse(std::io::BufReader::new(std::fs::File::open(&path).unwrap())).unwrap();
    let report = cache::import(&b_local, &parsed).unwrap();
    assert_eq!((report.added, report.replaced, report.kept, report.skipped), (1, 1, 1, 0));
    assert_eq!(b_local.get(&keys[0]).unwrap().unwrap().schedule, schedule(8, 8, 8));
    assert_eq!(b_local.get(&keys[1]).unwrap().unwrap().schedule, schedule(4, 4, 4));
    assert_eq!(b_local.get(&keys[1]).unwrap().unwrap().state, RecordState::Unverified);

    // Merging B's export back into the shared cache: the faster e1 wins there too.
    let b_export = cache::to_jsonl(&b_local.list().unwrap().records).unwrap();
    let shared = p.store(false);
    for r in cache::parse(b_export.as_bytes()).unwrap().records {
        shared.merge(&r).unwrap();
    }
    assert_eq!(shared.get(&keys[0]).unwrap().unwrap().time_ns, 100);
    assert_eq!(shared.get(&keys[2]).unwrap().unwrap().time_ns, 202);
}

#[test]
#[ignore = "needs a redis-server at TCC_TEST_REDIS: run with --ignored (CI starts one)"]
fn lockfile_across_machines() {
    let p = Prefix::new("lock");
    let options = TunerOptions { strategy: Strategy::Exhaustive, progress: false, ..TunerOptions::default() };
    let k1 = key("lock1", h100());
    let k2 = key("lock2", h100());

    // Machine A tunes two kernels and writes the lockfile (`tcc tune --lock`).
    let (_a, a_local) = local();
    let machine_a = Layered::new(a_local).with_remote(Box::new(p.store(false)));
    let space = grid_space(3);
    let mut records = Vec::new();
    for k in [&k1, &k2] {
        let (_, r, _) = tune_and_record(&machine_a, k, &space, &[], options, &FakeBench::new(bowl), "fake");
        records.push(r.unwrap());
    }
    let dir = tempfile::tempdir().unwrap();
    let lock_path = dir.path().join("tcc.lock");
    Lockfile::from_records(&records).write(&lock_path).unwrap();
    assert!(machine_a.warnings().is_empty(), "{:?}", machine_a.warnings());

    // Machine B reads the shared cache through and agrees with the lockfile.
    let lock = Lockfile::read(&lock_path).unwrap();
    let (_b, b_local) = local();
    let machine_b = Layered::new(b_local).with_remote(Box::new(p.store(true)));
    for k in [&k1, &k2] {
        let lookup = machine_b.lookup(k);
        assert!(matches!(lookup, Lookup::Hit { kind: HitKind::Unverified, .. }));
        let choice = lock.choose(k).unwrap();
        assert_eq!(choice.drift, None);
        assert!(matches!(plan(Some(&choice), &lookup, true), Plan::Use { .. }));
    }
    assert_eq!(lock.check_drift(machine_b.local()).unwrap(), vec![]);

    // Someone re-tunes k1 differently in the shared cache: machine C still uses the locked
    // choice, and the drift is reported.
    let mut changed = records[0].clone();
    changed.schedule = schedule(1, 1, 1);
    changed.time_ns = 1;
    p.store(false).put(&changed).unwrap();
    let (_c, c_local) = local();
    let machine_c = Layered::new(c_local).with_remote(Box::new(p.store(true)));
    let lookup = machine_c.lookup(&k1);
    let locked = lock.choose(&k1).unwrap();
    assert_eq!(
        plan(Some(&locked), &lookup, true),
        Plan::Use { variant: records[0].variant, schedule: records[0].schedule }
    );
    let drift = lock.check_drift(machine_c.local()).unwrap();
    assert!(drift.iter().any(|d| matches!(d, Drift::Differs { key, .. } if *key == k1.hash())), "{drift:?}");
    assert!(drift.iter().any(|d| matches!(d, Drift::NotInCache { key } if *key == k2.hash())), "{drift:?}");

    // A rank on another device of the same kernel uses the same choice too, with drift noted.
    let other = lock.choose(&key("lock1", h100_pcie())).unwrap();
    assert_eq!(other.entry.schedule, records[0].schedule);
    assert!(matches!(other.drift, Some(Drift::OtherDevice { .. })));
}

/// Issue 21, defect 9: the shared cache over TLS. With the CA that signed the server's certificate
/// (`TCC_CACHE_CA`) records travel encrypted; without it (the system's roots do not hold a
/// throwaway CA) the server is refused: one clear warning, and the local cache goes on alone.
#[test]
#[ignore = "needs a redis-server at TCC_TEST_REDIS: run with --ignored (CI starts one)"]
fn tls_verifies_the_server_and_refuses_one_it_does_not_trust() {
    let url = redis_url();
    assert!(
        url.starts_with("rediss://") && ca_file().is_some(),
        "this test needs a TLS server: TCC_TEST_REDIS=rediss://... and {} naming its CA file",
        cache::CACHE_CA_ENV
    );
    let p = Prefix::new("tls");
    let r = record(key("tls", cpu()), schedule(8, 8, 8), 100);
    p.store(false).put(&r).unwrap();
    assert_eq!(p.store(true).get(&r.key).unwrap(), Some(r.clone()));

    let untrusting = RedisStore::open(&url, RedisOptions { prefix: p.prefix.clone(), ..RedisOptions::default() });
    let (_dir, store) = local();
    let cache = Layered::new(store).with_remote(Box::new(untrusting.unwrap()));
    assert_eq!(cache.lookup(&r.key), Lookup::Miss);
    assert_eq!(cache.lookup(&key("other", cpu())), Lookup::Miss);
    cache.record(&record(key("mine", cpu()), schedule(2, 2, 2), 5)).unwrap();
    let warnings = cache.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("TLS certificate is not trusted") && warnings[0].contains(cache::CACHE_CA_ENV),
        "{warnings:?}"
    );
    if let Some(pw) = password(&url) {
        assert!(!warnings[0].contains(&pw), "{warnings:?}");
    }
    // The same server in clear is no server at all: the TLS port speaks only TLS.
    let clear = url.replacen("rediss://", "redis://", 1);
    let e = RedisStore::open(&clear, RedisOptions::default()).unwrap().get(&r.key).unwrap_err();
    assert!(matches!(e, StoreError::Unavailable(_)), "{e}");
}

/// The README's ACL user for a team cache: only the commands tcc sends (see `redis_store.rs`),
/// only keys under its prefix. Everything tcc does works with it; anything else is refused.
#[test]
#[ignore = "needs a redis-server at TCC_TEST_REDIS: run with --ignored (CI starts one)"]
fn an_acl_user_with_only_the_commands_tcc_sends_is_enough() {
    let p = Prefix::new("acl");
    let user = format!("tcc-team-{}", std::process::id());
    let user_pw = "team-user-secret-pw";
    let mut raw = p.raw();
    let rules = ["resetchannels", "-@all", "+getrange", "+srandmember", "+scan", "+set", "+sadd", "+del", "+srem"];
    let url = p.acl_user(&mut raw, &user, user_pw, &rules);
    let store = RedisStore::open(&url, RedisOptions { prefix: p.prefix.clone(), ..options() }).unwrap();
    let outcome = (|| -> Result<(), StoreError> {
        let a = record(key("acl", h100()), schedule(8, 8, 8), 100);
        let b = record(key("acl", h100_pcie()), schedule(4, 4, 4), 90);
        store.put(&a)?;
        store.put(&b)?;
        assert_eq!(store.get(&a.key)?, Some(a.clone()));
        assert_eq!(store.same_arch(&a.key)?, vec![b.clone()]);
        assert_eq!(store.list()?.records.len(), 2);
        assert!(store.remove(&a.key.hash())?);
        Ok(())
    })();
    // A command tcc never sends, on a key it may use: refused.
    let other: redis::RedisResult<Option<String>> = client(&url)
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
        .and_then(|mut c| redis::cmd("GET").arg(format!("{}rec:x", p.prefix)).query(&mut c));
    let _: redis::RedisResult<i64> = redis::cmd("ACL").arg("DELUSER").arg(&user).query(&mut raw);
    outcome.unwrap();
    let refused = other.unwrap_err().to_string();
    assert!(refused.contains("NOPERM") || refused.to_lowercase().contains("permission"), "{refused}");
}
