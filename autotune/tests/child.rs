//! The child-process side of the process tests: when `TCC_AUTOTUNE_TEST_ROLE` is set, the test
//! binary started with `child::entry --exact --ignored` acts as a worker or as a tuning process.

use std::io::Write;
use std::time::Duration;

use tcc_autotune::cache::{Layered, SqliteStore};
use tcc_autotune::search::worker::{Check, serve, validate_then_time};
use tcc_autotune::search::{Outcome, Strategy, Trial, Tuner, TunerOptions};
use tcc_autotune::tune_and_record;

use crate::common::{DB_ENV, FakeBench, ROLE_ENV, bowl, cpu, grid_space, key};

/// Worker behaviour by `tile_m`, once compiled: 16 wrong, 32 crashes, 128 hangs, 256 exits
/// without a result; anything else validates and runs for `tile_n` × 100 µs. Before compiling:
/// 512 hangs, 1024 fails to compile.
fn worker() {
    let served = serve(
        std::io::stdin().lock(),
        std::io::stdout().lock(),
        |_| Ok(()),
        |req, ()| match req.candidate.schedule.tile_m {
            512 => loop {
                std::thread::sleep(Duration::from_secs(1));
            },
            1024 => Err("no such tile".to_string()),
            _ => Ok(req.candidate.schedule),
        },
        |req, (), s| match s.tile_m {
            16 => validate_then_time(&req.timing, || Ok(Check::Wrong("max abs error 0.5".into())), || Ok(())),
            32 => std::process::abort(),
            128 => loop {
                std::thread::sleep(Duration::from_secs(1));
            },
            256 => {
                println!("garbage");
                std::process::exit(3)
            }
            _ => validate_then_time(
                &req.timing,
                || Ok(Check::Pass),
                || {
                    std::thread::sleep(Duration::from_micros(u64::from(s.tile_n) * 100));
                    Ok(())
                },
            ),
        },
    );
    served.unwrap();
}

fn tune() {
    let store = SqliteStore::open(std::path::Path::new(&std::env::var(DB_ENV).unwrap())).unwrap();
    let cache = Layered::new(store);
    let space = grid_space(4);
    let mut bench = FakeBench::new(bowl);
    bench.measure_sleep = Duration::from_millis(5);
    let options = TunerOptions { strategy: Strategy::Exhaustive, progress: false, ..TunerOptions::default() };
    let (_, record, _) = tune_and_record(&cache, &key("concurrent", cpu()), &space, &[], options, &bench, "fake");
    println!("recorded {}", record.unwrap());
}

fn killme() {
    let store = SqliteStore::open(std::path::Path::new(&std::env::var(DB_ENV).unwrap())).unwrap();
    let space = grid_space(4);
    let mut bench = FakeBench::new(bowl);
    bench.measure_sleep = Duration::from_millis(40);
    let options =
        TunerOptions { strategy: Strategy::Exhaustive, progress: false, compile_threads: 1, ..TunerOptions::default() };
    let session = key("killed", cpu()).hash();
    let announce = |t: &Trial| {
        let mut out = std::io::stdout().lock();
        writeln!(out, "finished {}", t.candidate.id()).unwrap();
        out.flush().unwrap();
    };
    let report = Tuner::new(&space, options).with_journal(&store, session.as_str()).on_trial(&announce).run(&bench);
    assert!(report.trials.iter().all(|t| matches!(t.outcome, Outcome::Ok { .. })));
}

fn cachedir() {
    let cache = Layered::open_default().unwrap();
    println!("db {}", cache.local().path().display());
}

#[test]
#[ignore = "entry point of the child processes the process tests start"]
fn entry() {
    match std::env::var(ROLE_ENV).as_deref() {
        Ok("worker") => worker(),
        Ok("tune") => tune(),
        Ok("killme") => killme(),
        Ok("cachedir") => cachedir(),
        Ok(other) => panic!("unknown child role {other}"),
        Err(_) => eprintln!("child::entry does nothing unless {ROLE_ENV} is set"),
    }
}
