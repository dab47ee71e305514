//! Measuring in child worker processes: results, wrong answers, crashes and hangs.

use std::time::{Duration, Instant};

use tcc_autotune::search::worker::Timing;
use tcc_autotune::search::{
    Budget, Candidate, Outcome, ProcessBenchmarker, SearchSpace, Strategy, Tuner, TunerOptions,
};

use crate::common::{child_command, schedule};

fn bench(timeout: Duration) -> ProcessBenchmarker {
    ProcessBenchmarker::new(child_command("worker", &[]), serde_json::json!({"kernel": "test"}))
        .with_timeout(timeout)
        .with_timing(Timing { warmup: 1, repeats: 3 })
}

fn candidate(tile_m: u32, tile_n: u32) -> Candidate {
    Candidate { variant: 0, schedule: schedule(tile_m, tile_n, 8), cost: 0.0 }
}

#[test]
fn a_worker_reports_each_kind_of_outcome() {
    let b = bench(Duration::from_secs(20));
    match b.run_worker(&candidate(64, 64), None) {
        Outcome::Ok { time_ns } => assert!(time_ns >= 64 * 100_000, "slept 6.4 ms, reported {time_ns} ns"),
        other => panic!("expected ok, got {other}"),
    }
    assert_eq!(b.run_worker(&candidate(16, 64), None), Outcome::Wrong { detail: "max abs error 0.5".into() });
    match b.run_worker(&candidate(32, 64), None) {
        Outcome::Failed { detail } => assert!(detail.contains("signal"), "{detail}"),
        other => panic!("expected a crash, got {other}"),
    }
    match b.run_worker(&candidate(256, 64), None) {
        Outcome::Failed { detail } => assert!(detail.contains("status 3"), "{detail}"),
        other => panic!("expected a failure, got {other}"),
    }
}

#[test]
fn a_hanging_candidate_is_killed_by_the_timeout() {
    let b = bench(Duration::from_millis(1500));
    let started = Instant::now();
    assert_eq!(b.run_worker(&candidate(128, 64), None), Outcome::Timeout { after_ms: 1500 });
    assert!(started.elapsed() < Duration::from_secs(6), "took {:?}", started.elapsed());
}

#[test]
fn a_missing_worker_program_is_a_failed_trial() {
    let mut cmd = child_command("worker", &[]);
    cmd.program = "/nonexistent/tcc-worker".into();
    let b = ProcessBenchmarker::new(cmd, serde_json::Value::Null);
    assert!(matches!(b.run_worker(&candidate(64, 64), None), Outcome::Failed { .. }));
}

#[test]
fn tuning_continues_past_hangs_crashes_and_wrong_answers() {
    let cands: Vec<Candidate> = [(16, 8), (32, 8), (128, 8), (256, 8), (64, 32), (64, 8), (8, 16)]
        .iter()
        .enumerate()
        .map(|(i, &(m, n))| Candidate { cost: i as f64, ..candidate(m, n) })
        .collect();
    let space = SearchSpace::new(cands);
    let b = bench(Duration::from_millis(1500));
    let options = TunerOptions {
        budget: Budget::unlimited(),
        strategy: Strategy::Exhaustive,
        compile_threads: 2,
        progress: false,
    };
    let report = Tuner::new(&space, options).run(&b);
    assert_eq!(report.trials.len(), 7);
    let c = report.counts();
    assert_eq!((c.ok, c.wrong, c.failed, c.timeout), (3, 1, 2, 1));
    // tile_n 8 sleeps 0.8 ms per run; tile_n 16 and 32 sleep 2 and 4 times longer.
    assert_eq!(report.best().unwrap().candidate.schedule, schedule(64, 8, 8));
}
