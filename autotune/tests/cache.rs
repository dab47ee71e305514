//! The cache on real files: corrupt rows, stale versions, truncated exports, imports,
//! re-validation, borrowing, a layered remote, lockfiles.

use std::io::Write;

use tcc_autotune::cache::{
    self, CacheStore, Drift, GcOptions, HitKind, Layered, Lockfile, Lookup, RecordState, RemoteHealth, Shared,
    SqliteStore, StoreError,
};
use tcc_autotune::search::{Budget, Journal, StopReason};
use tcc_autotune::search::{Candidate, Outcome, Strategy, TunerOptions};
use tcc_autotune::{CacheKey, CacheRecord, Plan, journal_session, plan, revalidate, tune_and_record};

use crate::common::{FakeBench, borrowed_record, bowl, cpu, grid_space, h100, h100_pcie, key, record, schedule};

fn local(dir: &tempfile::TempDir) -> SqliteStore {
    SqliteStore::open(&dir.path().join("tuning.sqlite3")).unwrap()
}

fn raw_insert(dir: &tempfile::TempDir, key_hash: &str, text: &str) {
    let conn = rusqlite::Connection::open(dir.path().join("tuning.sqlite3")).unwrap();
    conn.execute(
        "INSERT OR REPLACE INTO records (key_hash, arch_hash, record, updated_unix) VALUES (?1, 'x', ?2, 0)",
        rusqlite::params![key_hash, text],
    )
    .unwrap();
}

#[test]
fn a_corrupt_row_is_skipped_with_a_warning_and_collected() {
    let dir = tempfile::tempdir().unwrap();
    let store = local(&dir);
    let good = record(key("good", cpu()), schedule(8, 8, 8), 500);
    store.put(&good).unwrap();
    let bad_key = key("bad", cpu());
    raw_insert(&dir, bad_key.hash().as_str(), "{\"key\": garbage");
    // A well-formed record with an absurd knob, and one stored under another key's name.
    let mut absurd = record(key("absurd", cpu()), schedule(8, 8, 8), 500);
    absurd.schedule.tile_m = 3000;
    raw_insert(&dir, absurd.key.hash().as_str(), &absurd.encode().unwrap());
    raw_insert(&dir, &"ab".repeat(32), &good.encode().unwrap());

    assert_eq!(store.get(&bad_key).unwrap(), None);
    assert_eq!(store.get(&absurd.key).unwrap(), None);
    let listing = store.list().unwrap();
    assert_eq!((listing.records.len(), listing.undecodable), (1, 3));
    let cache = Layered::new(store);
    assert_eq!(cache.lookup(&bad_key), Lookup::Miss);
    assert!(matches!(cache.lookup(&good.key), Lookup::Hit { .. }));

    let gc = cache
        .local()
        .gc(&GcOptions {
            codegen_version: tcc_ir::CODEGEN_VERSION,
            drop_other_versions: false,
            drop_quarantined: true,
            journal_older_than: std::time::Duration::from_secs(3600),
        })
        .unwrap();
    assert_eq!(gc.undecodable, 3);
    assert_eq!(cache.local().list().unwrap().undecodable, 0);
    assert_eq!(cache.local().list().unwrap().records, vec![good]);
}

#[test]
fn a_file_that_is_not_a_database_is_an_error_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tuning.sqlite3"), vec![0x5a_u8; 8192]).unwrap();
    let err = SqliteStore::open(&dir.path().join("tuning.sqlite3")).unwrap_err();
    assert!(matches!(err, StoreError::Damaged { .. }), "{err}");
    assert!(err.to_string().contains("tcc cache repair"), "{err}");
}

/// `seed`-determined bytes (a fixed xorshift stream: the same damage on every run).
fn random_bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Issue 21, defect 5: 300 random bytes at offset 4104 of a database of many records (inside the
/// records table's root page). Lookups warn once and find nothing; `repair` salvages every record
/// and the journal into a fresh database and keeps the damaged file beside it.
#[test]
fn a_damaged_database_is_salvaged_into_a_fresh_one_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tuning.sqlite3");
    let mut written = Vec::new();
    {
        let store = SqliteStore::open(&path).unwrap();
        for i in 0..400 {
            let mut r = record(key(&format!("x=[{i},64]"), cpu()), schedule(1 << (i % 4), 2, 4), 100 + i);
            if i % 5 == 0 {
                r.state = RecordState::Unverified;
            }
            store.put(&r).unwrap();
            written.push(r);
        }
        let trial = tcc_autotune::Trial {
            candidate: Candidate { variant: 0, schedule: schedule(8, 8, 8), cost: 1.0 },
            outcome: Outcome::Ok { time_ns: 77 },
            wall_ms: 3,
            resumed: false,
        };
        tcc_autotune::search::Journal::append(&store, "a-session", &trial).unwrap();
    }
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() > 100 * 4096, "many pages: {}", bytes.len());
    bytes[4104..4404].copy_from_slice(&random_bytes(21, 300));
    std::fs::write(&path, &bytes).unwrap();

    // As `tcc run` meets it: one warning, then the cache is left alone; nothing is found.
    let damaged = SqliteStore::check_file(&path).unwrap_err();
    assert!(
        matches!(damaged, StoreError::Damaged { .. }) && damaged.to_string().contains("tcc cache repair"),
        "{damaged}"
    );
    let cache = Layered::new(SqliteStore::open(&path).unwrap());
    for r in written.iter().take(5) {
        assert_eq!(cache.lookup(&r.key), Lookup::Miss);
    }
    assert!(cache.local_is_damaged());
    assert_eq!(cache.warnings().len(), 1, "{:?}", cache.warnings());
    assert!(cache.warnings()[0].contains("tcc cache repair"), "{:?}", cache.warnings());
    drop(cache);

    let report = cache::repair(&path).unwrap();
    assert_eq!((report.saved, report.lost, report.journal), (400, 0, 1), "{report:?}");
    // The damaged file is kept, byte for byte, beside the fresh one.
    assert_eq!(std::fs::read(&report.damaged_copy).unwrap(), bytes);
    let name = report.damaged_copy.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("tuning.sqlite3.damaged-"), "{name}");
    SqliteStore::check_file(&path).unwrap();
    let fresh = SqliteStore::open(&path).unwrap();
    let listing = fresh.list().unwrap();
    assert_eq!(listing.undecodable, 0);
    let mut expected = written.clone();
    expected.sort_by_key(|r| r.key.hash());
    assert_eq!(listing.records, expected, "every record, as it was (states included)");
    assert_eq!(tcc_autotune::search::Journal::load(&fresh, "a-session").unwrap().len(), 1);
    // A second damage, a second repair: both damaged files are kept.
    drop(fresh);
    let mut again = std::fs::read(&path).unwrap();
    again[4104..4404].copy_from_slice(&random_bytes(22, 300));
    std::fs::write(&path, &again).unwrap();
    let second = cache::repair(&path).unwrap();
    assert_ne!(second.damaged_copy, report.damaged_copy);
    assert!(report.damaged_copy.exists() && second.damaged_copy.exists());
}

#[test]
fn a_record_of_another_code_generator_is_borrowed_then_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Layered::new(local(&dir));
    let k = key("stale", cpu());
    let mut old = record(k.clone(), schedule(2, 2, 2), 9_000);
    old.provenance.codegen_version = 0; // written before the code-generator version was recorded
    old.provenance.tcc_version = tcc_autotune::TCC_VERSION.into(); // the crate version does not matter
    cache.local().put(&old).unwrap();

    let lookup = cache.lookup(&k);
    assert_eq!(
        lookup,
        Lookup::Hit {
            record: old.clone(),
            kind: HitKind::Borrowed { from: old.provenance.describe(), checked: false }
        }
    );
    assert_eq!(
        plan(None, &lookup, false),
        Plan::Validate { variant: 0, schedule: schedule(2, 2, 2), tune_if_wrong: false }
    );
    let Plan::Tune { seed: Some((variant, seed)) } = plan(None, &lookup, true) else { panic!("expected tuning") };

    let mut space = grid_space(4);
    let seed_index = space.seed(variant, seed).unwrap();
    let bench = FakeBench::new(bowl);
    let options = TunerOptions { strategy: Strategy::Exhaustive, progress: false, ..TunerOptions::default() };
    let (report, written, recorded) = tune_and_record(&cache, &k, &space, &[seed_index], options, &bench, "fake");
    assert_eq!(bench.measured()[0], space.candidates()[seed_index].id(), "the borrowed choice is re-measured first");
    assert!(recorded.is_ok(), "{recorded:?}");
    let written = written.unwrap();
    assert_eq!(written.provenance.codegen_version, tcc_ir::CODEGEN_VERSION);
    assert_eq!(written.provenance.device.as_ref(), Some(&k.device));
    assert_eq!(report.best().unwrap().candidate.schedule, written.schedule);
    assert_eq!(cache.lookup(&k), Lookup::Hit { record: written, kind: HitKind::Fresh });
    assert_eq!(cache.local().journal_len().unwrap(), 0);
}

/// Issue 21, defect 2: a record measured on another host is used by a run once checked there, but
/// the check never makes it fresh, and tuning re-measures it.
#[test]
fn a_borrowed_record_is_checked_once_never_promoted_and_re_measured_by_tuning() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Layered::new(local(&dir));
    let k = key("borrowed", cpu());
    let theirs = borrowed_record(k.clone(), schedule(2, 2, 2), 50);
    cache::import(cache.local(), &cache::Parsed { records: vec![theirs.clone()], skipped: vec![] }).unwrap();
    let Lookup::Hit { record: found, kind: HitKind::Borrowed { checked: false, .. } } = cache.lookup(&k) else {
        panic!("expected a borrowed record: {:?}", cache.lookup(&k))
    };
    assert_eq!(found.standing(cache.here()), cache::Standing::Borrowed);
    // A run (no tuning) checks it once...
    assert!(matches!(plan(None, &cache.lookup(&k), false), Plan::Validate { .. }));
    let bench = FakeBench::new(bowl);
    assert!(matches!(revalidate(&cache, &k, &found, &bench, "fake"), Outcome::Ok { .. }));
    assert_eq!(bench.measured().len(), 1);
    // ...then uses it without another check, still borrowed: not fresh, the time is theirs.
    let after = cache.lookup(&k);
    let Lookup::Hit { record: checked, kind: HitKind::Borrowed { checked: true, .. } } = &after else {
        panic!("expected a checked borrowed record: {after:?}")
    };
    assert_eq!(plan(None, &after, false), Plan::Use { variant: 0, schedule: schedule(2, 2, 2) });
    assert_eq!(checked.standing(cache.here()), cache::Standing::Borrowed);
    assert_ne!(checked.state, RecordState::Fresh);
    assert_eq!((checked.time_ns, &checked.provenance), (theirs.time_ns, &theirs.provenance));
    // Tuning re-measures it, starting from its schedule, and records a fresh measurement.
    let Plan::Tune { seed: Some((variant, seed)) } = plan(None, &after, true) else { panic!("expected tuning") };
    let mut space = grid_space(3);
    let seeds: Vec<usize> = space.seed(variant, seed).into_iter().collect();
    let tuner = FakeBench::new(bowl);
    let options = TunerOptions { strategy: Strategy::Exhaustive, progress: false, ..TunerOptions::default() };
    let (report, written, recorded) = tune_and_record(&cache, &k, &space, &seeds, options, &tuner, "fake");
    assert!(recorded.is_ok());
    assert_eq!(report.measured(), space.len(), "every candidate measured, none taken from the record");
    assert_eq!(tuner.measured()[0], space.candidates()[seeds[0]].id());
    let written = written.unwrap();
    assert_eq!(written.standing(cache.here()), cache::Standing::Fresh);
    assert!(matches!(cache.lookup(&k), Lookup::Hit { kind: HitKind::Fresh, .. }));
}

/// Issue 21, defect 3: a search a budget cut short is recorded as such, and the next tune goes on
/// from the journal (the same state that resumes a killed run) instead of calling it done.
#[test]
fn a_search_cut_short_goes_on_from_where_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Layered::new(local(&dir));
    let k = key("partial", cpu());
    let space = grid_space(3);
    let options = |budget| TunerOptions { budget, strategy: Strategy::Exhaustive, progress: false, compile_threads: 1 };
    let first = FakeBench::new(bowl);
    let (r1, w1, ok1) = tune_and_record(&cache, &k, &space, &[], options(Budget::trials(4)), &first, "fake");
    assert!(ok1.is_ok());
    assert_eq!((r1.stop, r1.measured()), (StopReason::TrialBudget, 4));
    let w1 = w1.unwrap();
    assert_eq!(w1.searched, Some(cache::Searched { trials: 4, space: 27, complete: false }));
    assert_eq!(cache.local().load(&journal_session(&k)).unwrap().len(), 4, "the search state is kept");
    // The record is fresh (a run uses it), but tuning is not done with it.
    let lookup = cache.lookup(&k);
    assert!(matches!(lookup, Lookup::Hit { kind: HitKind::Fresh, .. }));
    assert_eq!(plan(None, &lookup, false), Plan::Use { variant: 0, schedule: w1.schedule });
    assert!(matches!(plan(None, &lookup, true), Plan::Tune { .. }));

    let second = FakeBench::new(bowl);
    let (r2, w2, ok2) = tune_and_record(&cache, &k, &space, &[], options(Budget::unlimited()), &second, "fake");
    assert!(ok2.is_ok());
    assert_eq!(r2.stop, StopReason::Exhausted);
    assert_eq!((r2.resumed(), r2.measured(), r2.trials.len()), (4, 23, 27));
    assert!(first.measured().iter().all(|id| !second.measured().contains(id)), "nothing measured twice");
    assert!(r2.table().starts_with("27 trials of 27 candidates (exhaustive; search space exhausted; resumed: 4 measured by an earlier run, 23 now)"), "{}", r2.table());
    let w2 = w2.unwrap();
    assert_eq!(w2.searched, Some(cache::Searched { trials: 27, space: 27, complete: true }));
    assert_eq!(w2.schedule, schedule(4, 4, 4), "the best of the whole space");
    assert_eq!(cache.local().journal_len().unwrap(), 0, "a complete search clears its journal");
    assert!(matches!(plan(None, &cache.lookup(&k), true), Plan::Use { .. }), "done: nothing left to tune");
}

#[test]
fn a_truncated_export_imports_what_it_can() {
    let dir = tempfile::tempdir().unwrap();
    let store = local(&dir);
    for (i, shapes) in ["a", "b", "c"].iter().enumerate() {
        store.put(&record(key(shapes, cpu()), schedule(4, 4, 4), 100 + i as u64)).unwrap();
    }
    let path = dir.path().join("export.jsonl");
    assert_eq!(cache::export_file(&store, &path).unwrap(), 3);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text, cache::to_jsonl(&store.list().unwrap().records).unwrap(), "export is stable");
    std::fs::write(&path, &text[..text.len() - 40]).unwrap();

    let parsed = cache::parse(std::io::BufReader::new(std::fs::File::open(&path).unwrap())).unwrap();
    assert_eq!(parsed.records.len(), 2);
    assert_eq!(parsed.skipped.len(), 1);
    assert_eq!(parsed.skipped[0].line, 3);

    let other = tempfile::tempdir().unwrap();
    let target = local(&other);
    let report = cache::import(&target, &parsed).unwrap();
    assert_eq!((report.added, report.replaced, report.kept, report.skipped), (2, 0, 0, 1));
    assert!(target.list().unwrap().records.iter().all(|r| r.state == RecordState::Unverified));
}

#[test]
fn merge_of_exports_keeps_the_faster_measurement() {
    let dir = tempfile::tempdir().unwrap();
    let k = key("m", cpu());
    let ours = cache::to_jsonl(&[
        record(k.clone(), schedule(4, 4, 4), 300),
        record(key("only-ours", cpu()), schedule(1, 1, 1), 5),
    ])
    .unwrap();
    let theirs = cache::to_jsonl(&[record(k.clone(), schedule(8, 8, 8), 200)]).unwrap();
    let all: Vec<CacheRecord> =
        [ours, theirs].iter().flat_map(|t| cache::parse(t.as_bytes()).unwrap().records).collect();
    let merged = cache::merge(all.clone());
    assert_eq!(merged.len(), 2);
    assert_eq!(merged.iter().find(|r| r.key == k).unwrap().schedule, schedule(8, 8, 8));
    assert_eq!(cache::merge(all.into_iter().rev()), merged);
    // Importing a slower measurement keeps the stored one.
    let store = local(&dir);
    store.put(&record(k.clone(), schedule(2, 2, 2), 100)).unwrap();
    let report = cache::import(&store, &cache::Parsed { records: merged, skipped: vec![] }).unwrap();
    assert_eq!((report.added, report.kept), (1, 1));
    assert_eq!(store.get(&k).unwrap().unwrap().schedule, schedule(2, 2, 2));
}

#[test]
fn an_imported_winner_is_revalidated_once_or_quarantined() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Layered::new(local(&dir));
    let good_key = key("good", cpu());
    let bad_key = key("bad", cpu());
    let parsed = cache::Parsed {
        records: vec![
            record(good_key.clone(), schedule(8, 8, 8), 100),
            record(bad_key.clone(), schedule(1, 1, 1), 100),
        ],
        skipped: vec![],
    };
    cache::import(cache.local(), &parsed).unwrap();
    let bench = FakeBench::new(|c: &Candidate| {
        if c.schedule.tile_m == 1 { Outcome::Wrong { detail: "mismatch".into() } } else { Outcome::Ok { time_ns: 120 } }
    });

    let Lookup::Hit { record: good, kind: HitKind::Unverified } = cache.lookup(&good_key) else {
        panic!("expected unverified")
    };
    assert!(matches!(plan(None, &cache.lookup(&good_key), true), Plan::Validate { .. }));
    assert!(matches!(revalidate(&cache, &good_key, &good, &bench, "fake"), Outcome::Ok { .. }));
    assert!(matches!(cache.lookup(&good_key), Lookup::Hit { kind: HitKind::Fresh, .. }));

    let Lookup::Hit { record: bad, .. } = cache.lookup(&bad_key) else { panic!("expected a hit") };
    assert!(matches!(revalidate(&cache, &bad_key, &bad, &bench, "fake"), Outcome::Wrong { .. }));
    assert_eq!(cache.lookup(&bad_key), Lookup::Miss);
    assert_eq!(plan(None, &cache.lookup(&bad_key), true), Plan::Tune { seed: None });
    assert_eq!(bench.measured().len(), 2, "each checked once");
    // Re-importing the same failed choice does not resurrect it.
    cache::import(cache.local(), &parsed).unwrap();
    assert_eq!(cache.lookup(&bad_key), Lookup::Miss);
}

#[test]
fn another_device_of_the_same_architecture_is_borrowed() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Layered::new(local(&dir));
    let sxm = record(key("b", h100()), schedule(8, 8, 8), 100);
    let mut ampere = record(key("b", h100()), schedule(2, 2, 2), 10);
    ampere.key.device.arch = "sm_80".into();
    cache.local().put(&sxm).unwrap();
    cache.local().put(&ampere).unwrap();
    let pcie = key("b", h100_pcie());
    assert_eq!(
        cache.lookup(&pcie),
        Lookup::Hit {
            record: sxm.clone(),
            kind: HitKind::Borrowed { from: sxm.provenance.describe(), checked: false }
        }
    );
    assert_eq!(plan(None, &cache.lookup(&pcie), true), Plan::Tune { seed: Some((0, schedule(8, 8, 8))) });
    let mut other_arch = key("b", h100_pcie());
    other_arch.device.arch = "sm_100".into();
    assert_eq!(cache.lookup(&other_arch), Lookup::Miss);
}

/// A remote store that is always down.
struct DownStore;

impl CacheStore for DownStore {
    fn describe(&self) -> String {
        "redis://***@down".into()
    }
    fn get(&self, _: &CacheKey) -> Result<Option<CacheRecord>, StoreError> {
        Err(StoreError::Unavailable("connection refused".into()))
    }
    fn same_arch(&self, _: &CacheKey) -> Result<Vec<CacheRecord>, StoreError> {
        Err(StoreError::Unavailable("connection refused".into()))
    }
    fn put(&self, _: &CacheRecord) -> Result<(), StoreError> {
        Err(StoreError::Unavailable("connection refused".into()))
    }
    fn remove(&self, _: &tcc_autotune::cache::KeyHash) -> Result<bool, StoreError> {
        Err(StoreError::Unavailable("connection refused".into()))
    }
    fn list(&self) -> Result<tcc_autotune::cache::Listing, StoreError> {
        Err(StoreError::Unavailable("connection refused".into()))
    }
}

#[test]
fn a_layered_remote_reads_through_writes_back_and_falls_back() {
    let (a, b, shared) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let remote = || Box::new(local(&shared)) as Box<dyn CacheStore>;
    let machine_a = Layered::new(local(&a)).with_remote(remote());
    let machine_b = Layered::new(local(&b)).with_remote(remote());
    let k = key("shared", cpu());
    let r = record(k.clone(), schedule(4, 8, 8), 250);
    machine_a.record(&r).unwrap();
    assert_eq!(machine_a.lookup(&k), Lookup::Hit { record: r.clone(), kind: HitKind::Fresh });
    let Lookup::Hit { record: seen, kind: HitKind::Unverified } = machine_b.lookup(&k) else {
        panic!("expected read-through")
    };
    assert_eq!(seen.schedule, r.schedule);
    assert_eq!(machine_b.local().get(&k).unwrap().unwrap().state, RecordState::Unverified, "copied locally");
    assert_eq!(machine_b.remote_health(), RemoteHealth::Ok);

    let down = Layered::new(local(&b)).with_remote(Box::new(DownStore));
    assert!(matches!(down.lookup(&k), Lookup::Hit { kind: HitKind::Unverified, .. }), "served from the local copy");
    assert_eq!(down.lookup(&key("absent", cpu())), Lookup::Miss);
    down.record(&record(key("new", cpu()), schedule(1, 2, 4), 10)).unwrap();
    assert!(matches!(down.remote_health(), RemoteHealth::Unavailable(_)));
    assert_eq!(down.warnings().len(), 1, "one warning per outage: {:?}", down.warnings());
}

/// Issue 27: a shard whose winners could not be shared finds out which (`Shared::Failed`) and
/// pushes them when the shared cache answers again; `tcc lock` takes the winner of exactly this
/// key from either cache, measured on any host, by this code generator only.
#[test]
fn winners_are_shared_again_and_a_lock_takes_them_from_either_cache() {
    let (a, b, shared) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let k = key("shard", cpu());
    let r = record(k.clone(), schedule(4, 8, 8), 250);
    let down = Layered::new(local(&a)).with_remote(Box::new(DownStore));
    down.record(&r).unwrap();
    assert!(matches!(down.share(&r), Shared::Failed(why) if why.contains("connection refused")));
    assert_eq!(Layered::new(local(&a)).share(&r), Shared::NoRemote);

    let back = Layered::new(local(&a)).with_remote(Box::new(local(&shared)));
    assert_eq!(back.share(&r), Shared::Pushed);
    assert_eq!(back.share(&r), Shared::Already);
    assert_eq!(local(&shared).get(&k).unwrap().map(|s| s.schedule), Some(r.schedule));
    // A faster choice another host shared meanwhile is kept; a slower one is replaced.
    let theirs = borrowed_record(k.clone(), schedule(8, 8, 8), 200);
    local(&shared).put(&theirs).unwrap();
    assert_eq!(back.share(&r), Shared::Already);
    assert_eq!(local(&shared).get(&k).unwrap().map(|s| s.schedule), Some(theirs.schedule));
    local(&shared).put(&borrowed_record(k.clone(), schedule(8, 8, 8), 900)).unwrap();
    assert_eq!(back.share(&r), Shared::Pushed);
    assert_eq!(local(&shared).get(&k).unwrap().map(|s| s.schedule), Some(r.schedule));

    // Another machine: the shared record (measured on another host of the same device) is the
    // winner; a faster local one beats it; one of another code generator or quarantined never.
    let other = Layered::new(local(&b)).with_remote(Box::new(local(&shared)));
    assert_eq!(other.winner(&k).map(|w| w.time_ns), Some(250));
    assert_eq!(other.winner(&key("absent", cpu())), None);
    let mut faster = borrowed_record(k.clone(), schedule(2, 8, 8), 100);
    local(&b).put(&faster).unwrap();
    assert_eq!(other.winner(&k).map(|w| w.schedule), Some(schedule(2, 8, 8)));
    faster.state = RecordState::Quarantined;
    local(&b).put(&faster).unwrap();
    assert_eq!(other.winner(&k).map(|w| w.time_ns), Some(250));
    let mut old = record(k.clone(), schedule(1, 1, 1), 10);
    old.provenance.codegen_version = tcc_ir::CODEGEN_VERSION.wrapping_sub(1);
    local(&shared).remove(&k.hash()).unwrap();
    local(&shared).put(&old).unwrap();
    assert_eq!(Layered::new(local(&shared)).winner(&k), None, "another code generator's record is no winner");
}

#[test]
fn a_lockfile_pins_choices_and_reports_drift() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Layered::new(local(&dir));
    let k1 = key("l1", h100());
    let k2 = key("l2", h100());
    let r1 = record(k1.clone(), schedule(8, 8, 8), 100);
    let r2 = record(k2.clone(), schedule(4, 4, 4), 100);
    let path = dir.path().join("tcc.lock");
    Lockfile::from_records([&r1, &r2]).write(&path).unwrap();
    let lock = Lockfile::read(&path).unwrap();
    assert_eq!(lock.len(), 2);

    // The cache disagrees on k2 and lacks k1: the lockfile still decides, and drift is reported.
    cache.record(&record(k2.clone(), schedule(1, 1, 1), 50)).unwrap();
    let choice = lock.choose(&k2).unwrap();
    assert_eq!(plan(Some(&choice), &cache.lookup(&k2), true), Plan::Use { variant: 0, schedule: schedule(4, 4, 4) });
    let drift = lock.check_drift(cache.local()).unwrap();
    assert_eq!(drift.len(), 2);
    assert!(drift.iter().any(|d| matches!(d, Drift::NotInCache { key } if *key == k1.hash())));
    assert!(drift.iter().any(|d| matches!(d, Drift::Differs { key, .. } if *key == k2.hash())));

    // Another rank on another device of the kernel uses the same choice, with drift noted.
    let other = lock.choose(&key("l1", h100_pcie())).unwrap();
    assert_eq!(other.entry.schedule, schedule(8, 8, 8));
    assert!(matches!(other.drift, Some(Drift::OtherDevice { .. })));

    // A damaged lockfile is an error, not a silent partial lock.
    let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    writeln!(f, "{{\"key\":").unwrap();
    assert!(Lockfile::read(&path).is_err());
}

#[test]
fn the_default_cache_dir_honours_tcc_cache_dir() {
    // In a child process, so that no thread of this one races on the environment.
    let dir = tempfile::tempdir().unwrap();
    let dir_text = dir.path().to_str().unwrap();
    let out = crate::common::child_process("cachedir", &[(cache::CACHE_DIR_ENV, dir_text), (cache::CACHE_URL_ENV, "")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let expected = dir.path().join(cache::DB_FILE_NAME);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("db {}", expected.display())));
    assert!(expected.exists());
}

/// A winner that cannot be written is reported to the caller (which exits 2 in `tcc tune`); it used
/// to be a warning, and the result was lost while the command succeeded.
#[test]
fn a_result_that_cannot_be_recorded_is_an_error_for_the_caller() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Layered::new(local(&dir));
    // The records table disappears under the tuner (the journal stays, so tuning itself works).
    let conn = rusqlite::Connection::open(dir.path().join("tuning.sqlite3")).unwrap();
    conn.execute("DROP TABLE records", []).unwrap();
    let space = grid_space(3);
    let options = TunerOptions { strategy: Strategy::Exhaustive, progress: false, ..TunerOptions::default() };
    let (report, written, recorded) =
        tune_and_record(&cache, &key("unrecorded", cpu()), &space, &[], options, &FakeBench::new(bowl), "fake");
    assert!(report.best().is_some());
    assert!(written.is_some());
    assert!(recorded.is_err(), "{recorded:?}");
}
