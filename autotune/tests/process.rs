//! Measuring in child worker processes with the one benchmarker, [`WorkerBenchmarker`]: results,
//! wrong answers, crashes and hangs, before and after compiling.

use std::time::{Duration, Instant};

use tcc_autotune::search::worker::Timing;
use tcc_autotune::search::{
    Benchmarker, Budget, Candidate, Outcome, SearchSpace, Strategy, Tuner, TunerOptions, WorkerBenchmarker,
};

use crate::common::{child_command, schedule};

fn bench(timeout: Duration) -> WorkerBenchmarker {
    WorkerBenchmarker::new(child_command("worker", &[]), &serde_json::json!({"kernel": "test"}))
        .unwrap()
        .with_timeouts(timeout, timeout)
        .with_timing(Timing { warmup: 1, repeats: 3 })
}

/// Compiles `candidate` in a worker and measures it, as the tuner does; a compile error is a
/// failed trial.
fn run(b: &WorkerBenchmarker, candidate: &Candidate) -> Outcome {
    match b.compile(candidate) {
        Ok(worker) => b.measure(candidate, &worker),
        Err(detail) => Outcome::Failed { detail },
    }
}

fn candidate(tile_m: u32, tile_n: u32) -> Candidate {
    Candidate { variant: 0, schedule: schedule(tile_m, tile_n, 8), cost: 0.0 }
}

#[test]
fn a_worker_reports_each_kind_of_outcome() {
    let b = bench(Duration::from_secs(20));
    match run(&b, &candidate(64, 64)) {
        Outcome::Ok { time_ns } => assert!(time_ns >= 64 * 100_000, "slept 6.4 ms, reported {time_ns} ns"),
        other => panic!("expected ok, got {other}"),
    }
    assert_eq!(run(&b, &candidate(16, 64)), Outcome::Wrong { detail: "max abs error 0.5".into() });
    match run(&b, &candidate(32, 64)) {
        Outcome::Failed { detail } => assert!(detail.contains("signal"), "{detail}"),
        other => panic!("expected a crash, got {other}"),
    }
    match run(&b, &candidate(256, 64)) {
        Outcome::Failed { detail } => assert!(detail.contains("status 3"), "{detail}"),
        other => panic!("expected a failure, got {other}"),
    }
}

#[test]
fn a_hanging_candidate_is_killed_by_the_timeout() {
    let b = bench(Duration::from_millis(1500));
    let started = Instant::now();
    assert_eq!(run(&b, &candidate(128, 64)), Outcome::Timeout { after_ms: 1500 });
    assert!(started.elapsed() < Duration::from_secs(6), "took {:?}", started.elapsed());
}

#[test]
fn a_worker_that_hangs_or_fails_before_compiling_is_a_compile_error() {
    let b = bench(Duration::from_millis(1500));
    let started = Instant::now();
    let hung = b.compile(&candidate(512, 64)).map(drop);
    assert!(matches!(&hung, Err(detail) if detail.starts_with("not compiled after")), "{hung:?}");
    assert!(started.elapsed() < Duration::from_secs(6), "took {:?}", started.elapsed());
    let failed = b.compile(&candidate(1024, 64)).map(drop);
    assert_eq!(failed, Err("compile: no such tile".to_string()));
}

#[test]
fn a_missing_worker_program_is_a_failed_trial() {
    let mut cmd = child_command("worker", &[]);
    cmd.program = "/nonexistent/tcc-worker".into();
    let b = WorkerBenchmarker::new(cmd, &serde_json::Value::Null).unwrap();
    assert!(matches!(run(&b, &candidate(64, 64)), Outcome::Failed { .. }));
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
