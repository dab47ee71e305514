//! The search with injected fake benchmarkers.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tcc_autotune::search::{
    Budget, Candidate, MemoryJournal, Outcome, SearchSpace, StopReason, Strategy, Tuner, TunerOptions,
};

use crate::common::{FakeBench, bowl, grid_space, schedule};

fn options(strategy: Strategy, budget: Budget) -> TunerOptions {
    TunerOptions { budget, strategy, compile_threads: 2, progress: false }
}

#[test]
fn exhaustive_search_finds_the_known_best() {
    let space = grid_space(4);
    let bench = FakeBench::new(bowl);
    let report = Tuner::new(&space, options(Strategy::Exhaustive, Budget::unlimited())).run(&bench);
    assert_eq!(report.stop, StopReason::Exhausted);
    assert_eq!(report.trials.len(), 64);
    assert_eq!(bench.measured().len(), 64);
    let best = report.best().unwrap();
    assert_eq!(best.candidate.schedule, schedule(8, 8, 8), "the bowl's minimum within tiles ≤ 8");
    // The winner is not the cost model's first choice: measurement decides.
    assert_ne!(space.candidates()[0].schedule, best.candidate.schedule);
    assert_eq!(report.runners_up(3).len(), 3);
    assert!(report.runners_up(3).iter().all(|r| r.time_ns >= best.outcome.time_ns().unwrap()));
}

#[test]
fn a_wrong_candidate_is_never_chosen() {
    let space = grid_space(4);
    // The fastest candidates give wrong results, fail or hang; the best valid one must win.
    let bench = FakeBench::new(|c: &Candidate| match (c.schedule.tile_m, c.schedule.tile_n) {
        (8, 8) => Outcome::Wrong { detail: "max error 1e3".into() },
        (8, 4) => Outcome::Failed { detail: "crashed".into() },
        (4, 8) => Outcome::Timeout { after_ms: 10 },
        (1, 1) => Outcome::Ok { time_ns: 0 },
        _ => Outcome::Ok {
            time_ns: 10_000 - u64::from(c.schedule.tile_m * 100 + c.schedule.tile_n * 10 + c.schedule.tile_k),
        },
    });
    let report = Tuner::new(&space, options(Strategy::Exhaustive, Budget::unlimited())).run(&bench);
    let best = report.best().unwrap();
    assert!(matches!(best.outcome, Outcome::Ok { .. }));
    assert_eq!(best.candidate.schedule, schedule(8, 2, 8));
    let counts = report.counts();
    assert_eq!((counts.wrong, counts.failed, counts.timeout), (4, 4 + 4, 4), "a claimed 0 ns is a failure");
    assert!(report.ranked().iter().all(|t| t.outcome.time_ns().is_some()));
    assert!(report.table().contains("wrong"));
}

#[test]
fn evolutionary_search_under_a_trial_budget_finds_the_bowl_minimum() {
    let space = grid_space(8); // 512 candidates: beyond exhaustive for Auto
    let bench = FakeBench::new(bowl);
    let opts = options(Strategy::Auto, Budget::trials(150));
    let report = Tuner::new(&space, opts).run(&bench);
    assert!(matches!(report.strategy, Strategy::Evolutionary { .. }));
    assert_eq!(report.stop, StopReason::TrialBudget);
    assert_eq!(bench.measured().len(), 150);
    assert_eq!(report.best().unwrap().candidate.schedule, schedule(16, 32, 8));
    // Same seed, same search.
    let again = FakeBench::new(bowl);
    let report2 = Tuner::new(&space, opts).run(&again);
    assert_eq!(bench.measured(), again.measured());
    assert_eq!(report2.best(), report.best());
}

#[test]
fn guided_search_finds_the_bowl_minimum_within_a_quarter_of_the_space() {
    let space = grid_space(8);
    let bench = FakeBench::new(bowl);
    let budget = Budget::trials(space.len() / 4);
    let report = Tuner::new(&space, options(Strategy::Guided { top_fraction: 0.05 }, budget)).run(&bench);
    assert_eq!(report.stop, StopReason::TrialBudget);
    assert_eq!(report.trials.len(), space.len() / 4);
    assert_eq!(report.best().unwrap().candidate.schedule, schedule(16, 32, 8));
    // Hill-climbing reaches it well before the budget ends.
    let at = report.trials.iter().position(|t| t.candidate.schedule == schedule(16, 32, 8)).unwrap();
    assert!(at < space.len() / 8, "found at trial {at}");
    // Without a budget it goes on until every candidate is measured.
    let all = Tuner::new(&space, options(Strategy::Guided { top_fraction: 0.05 }, Budget::unlimited()))
        .run(&FakeBench::new(bowl));
    assert_eq!(all.stop, StopReason::Exhausted);
    assert_eq!(all.trials.len(), space.len());
}

#[test]
fn a_time_budget_returns_the_best_so_far() {
    let space = grid_space(4);
    let mut bench = FakeBench::new(bowl);
    bench.measure_sleep = Duration::from_millis(30);
    let started = Instant::now();
    let report =
        Tuner::new(&space, options(Strategy::Exhaustive, Budget::time(Duration::from_millis(200)))).run(&bench);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(report.stop, StopReason::TimeBudget);
    assert!(!report.trials.is_empty() && report.trials.len() < 64);
    assert!(report.best().is_some());
}

#[test]
fn candidates_compile_in_parallel() {
    let space = grid_space(2);
    let mut bench = FakeBench::new(bowl);
    bench.compile_sleep = Duration::from_millis(30);
    let opts = TunerOptions { compile_threads: 4, ..options(Strategy::Exhaustive, Budget::unlimited()) };
    let report = Tuner::new(&space, opts).run(&bench);
    assert_eq!(report.trials.len(), 8);
    assert!(bench.max_compiling.load(Ordering::SeqCst) >= 2);
}

#[test]
fn compile_errors_and_panics_are_failed_trials() {
    struct Flaky;
    impl tcc_autotune::Benchmarker for Flaky {
        type Artifact = ();
        fn compile(&self, c: &Candidate) -> Result<(), String> {
            match c.schedule.tile_m {
                1 => Err("unsupported tile".into()),
                2 => panic!("compiler bug"),
                _ => Ok(()),
            }
        }
        fn measure(&self, c: &Candidate, _: &()) -> Outcome {
            if c.schedule.tile_n == 2 {
                panic!("benchmarker bug");
            }
            Outcome::Ok { time_ns: u64::from(c.schedule.tile_m) }
        }
    }
    let space = grid_space(3);
    let report = Tuner::new(&space, options(Strategy::Exhaustive, Budget::unlimited())).run(&Flaky);
    assert_eq!(report.trials.len(), 27);
    assert_eq!(report.counts().failed, 9 + 9 + 3);
    assert_eq!(report.best().unwrap().candidate.schedule.tile_m, 4);
}

#[test]
fn a_resumed_run_skips_journaled_candidates() {
    let space = grid_space(4);
    let journal = MemoryJournal::new();
    let first = FakeBench::new(bowl);
    let opts = options(Strategy::Exhaustive, Budget::trials(10));
    let r1 = Tuner::new(&space, opts).with_journal(&journal, "k").run(&first);
    assert_eq!(r1.trials.len(), 10);
    let second = FakeBench::new(bowl);
    let r2 =
        Tuner::new(&space, options(Strategy::Exhaustive, Budget::unlimited())).with_journal(&journal, "k").run(&second);
    assert_eq!(second.measured().len(), 54);
    assert_eq!(r2.trials.len(), 64);
    assert_eq!(r2.trials.iter().filter(|t| t.resumed).count(), 10);
    assert!(first.measured().iter().all(|id| !second.measured().contains(id)));
    // Another session is separate.
    let third = FakeBench::new(bowl);
    Tuner::new(&space, options(Strategy::Exhaustive, Budget::trials(3))).with_journal(&journal, "other").run(&third);
    assert_eq!(third.measured().len(), 3);
}

#[test]
fn seeds_are_measured_first() {
    let mut space = grid_space(4);
    let seed = space.seed(0, schedule(2, 4, 8)).unwrap();
    let bench = FakeBench::new(bowl);
    Tuner::new(&space, options(Strategy::Exhaustive, Budget::trials(1))).with_seeds(&[seed]).run(&bench);
    assert_eq!(bench.measured(), vec![space.candidates()[seed].id()]);
}

#[test]
fn an_empty_space_reports_no_best() {
    let space = SearchSpace::new(vec![]);
    let report = Tuner::new(&space, options(Strategy::Auto, Budget::unlimited())).run(&FakeBench::new(bowl));
    assert_eq!(report.stop, StopReason::Exhausted);
    assert!(report.best().is_none());
}
