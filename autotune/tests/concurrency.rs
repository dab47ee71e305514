//! Several processes on one cache, and a tuning run killed with SIGKILL.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tcc_autotune::cache::{CacheStore, SqliteStore};
use tcc_autotune::search::{Journal, Strategy, Tuner, TunerOptions};

use crate::common::{DB_ENV, FakeBench, bowl, child_process, cpu, grid_space, key, schedule};

#[test]
fn two_processes_tuning_the_same_kernel_leave_one_valid_record() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tuning.sqlite3");
    let db_text = db.to_str().unwrap();
    let children: Vec<_> = (0..2)
        .map(|_| {
            child_process("tune", &[(DB_ENV, db_text)]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "child failed: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).contains("recorded"));
    }
    let store = SqliteStore::open(&db).unwrap();
    let listing = store.list().unwrap();
    assert_eq!(listing.undecodable, 0);
    assert_eq!(listing.records.len(), 1);
    let r = &listing.records[0];
    assert_eq!(r.key, key("concurrent", cpu()));
    assert_eq!(r.validate(), Ok(()));
    assert_eq!(r.schedule, schedule(8, 8, 8));
    assert_eq!(store.journal_len().unwrap(), 0, "the finished runs cleared their journal");
}

#[test]
fn a_run_killed_with_sigkill_loses_at_most_the_candidate_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tuning.sqlite3");
    let mut child = child_process("killme", &[(DB_ENV, db.to_str().unwrap())])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Read the child's announcements (each printed after its trial is journaled) until a few
    // are in, then kill it with SIGKILL mid-run.
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut announced = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while announced.len() < 5 && Instant::now() < deadline {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(id) = line.strip_prefix("finished ") {
                    announced.push(id.to_string());
                }
            }
            _ => break,
        }
    }
    assert_eq!(announced.len(), 5, "the child did not report progress");
    std::thread::sleep(Duration::from_millis(15)); // land somewhere inside a measurement
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();
    for line in lines.map_while(Result::ok) {
        if let Some(id) = line.strip_prefix("finished ") {
            announced.push(id.to_string());
        }
    }

    let store = SqliteStore::open(&db).unwrap();
    let session = key("killed", cpu()).hash();
    let journaled: HashSet<String> =
        store.load(session.as_str()).unwrap().into_iter().map(|t| t.candidate.id()).collect();
    assert!(announced.iter().all(|id| journaled.contains(id)), "an announced trial is missing from the journal");
    assert!(journaled.len() <= announced.len() + 1, "journal {} vs announced {}", journaled.len(), announced.len());

    // Resuming measures exactly the candidates not journaled, and finds the same best.
    let space = grid_space(4);
    let bench = FakeBench::new(bowl);
    let options = TunerOptions { strategy: Strategy::Exhaustive, progress: false, ..TunerOptions::default() };
    let report = Tuner::new(&space, options).with_journal(&store, session.as_str()).run(&bench);
    assert_eq!(bench.measured().len(), 64 - journaled.len());
    assert!(bench.measured().iter().all(|id| !journaled.contains(id)));
    assert_eq!(report.trials.len(), 64);
    assert_eq!(report.best().unwrap().candidate.schedule, schedule(8, 8, 8));
}
