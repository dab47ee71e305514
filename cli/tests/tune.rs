//! `tcc tune`, `tcc cache`, `tcc worker` and cached schedules (`tcc::tuning`): on the CPU, with
//! tiny shapes and small budgets, each test with its own cache directory (`TCC_CACHE_DIR`).

// Test helpers outside `#[test]` functions unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use tcc::ir::ScheduleSource;
use tcc::pipeline::{Pipeline, PlanOptions};
use tcc::tuning::{CacheStore, Layered, Lockfile, Lookup, SqliteStore, Tuning, WorkerCommand};

use crate::common::{root, tcc_isolated, text};

fn tcc_in(cache: &Path, args: &[&str]) -> Output {
    tcc_isolated(cache, args, &[])
}

const MLP: &[&str] = &["tune", "examples/mlp.tc", "--dim", "M=4", "--budget", "6trials"];

fn tune_mlp(cache: &Path, extra: &[&str]) -> String {
    let mut args = MLP.to_vec();
    args.extend_from_slice(extra);
    let out = tcc_in(cache, &args);
    assert_eq!(out.status.code(), Some(0), "{}\n{}", text(&out.stdout), text(&out.stderr));
    assert!(!text(&out.stderr).contains("internal error"), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// The program `tcc run --target cpu` runs for mlp with M=4, and its bindings.
fn mlp_program() -> (tcc::ir::Program, tcc::ir::Bindings) {
    let source = std::fs::read_to_string(root().join("examples/mlp.tc")).unwrap();
    let module = tcc::frontend::parse_source("mlp.tc", &source).unwrap();
    let graph = module.function("mlp").unwrap();
    let bindings: tcc::ir::Bindings = [("M".to_string(), 4u64)].into_iter().collect();
    let target = tcc::target::resolve(tcc::ir::TargetSpec::BestCpu).unwrap();
    let optimized = Pipeline::untuned(target).optimize(graph, &bindings, PlanOptions::default()).unwrap();
    (optimized.program, bindings)
}

fn tuning(cache: &Path) -> Tuning {
    let store = SqliteStore::open(&cache.join("tuning.sqlite3")).unwrap();
    let worker = WorkerCommand {
        program: PathBuf::from(env!("CARGO_BIN_EXE_tcc")),
        args: vec!["worker".into()],
        env: Vec::new(),
    };
    Tuning::new(Layered::new(store), tcc::ir::TargetSpec::BestCpu, worker).unwrap()
}

#[test]
fn tune_finds_winners_and_a_warm_cache_runs_no_trials() {
    let cache = tempfile::tempdir().unwrap();
    let first = tune_mlp(cache.path(), &[]);
    assert_eq!(first.matches("winner (tuned").count(), 2, "{first}");
    assert!(first.contains("6 trials run; 2 tuned"), "{first}");
    assert!(first.contains("ok ") && first.contains(" us "), "{first}");

    let ls = tcc_in(cache.path(), &["cache", "ls"]);
    assert_eq!(ls.status.code(), Some(0));
    assert_eq!(text(&ls.stdout).lines().filter(|l| l.contains("cpu:cranelift")).count(), 2, "{}", text(&ls.stdout));

    let second = tune_mlp(cache.path(), &[]);
    assert!(second.contains("0 trials run; 0 tuned, 2 cached"), "{second}");

    // What `tcc run` does with the warm cache: the recorded winners, and no measurement.
    let (mut program, bindings) = mlp_program();
    let report = tuning(cache.path()).apply(&mut program, &bindings).unwrap();
    assert_eq!(report.trials, 0);
    assert_eq!(report.decisions.len(), 2);
    for (d, launch) in report.decisions.iter().zip(&program.launches) {
        assert_eq!(d.source, ScheduleSource::Cached, "{}", report.summary());
        assert_eq!(launch.kernel.schedule, d.schedule);
        assert_eq!(d.record.as_ref().unwrap().schedule, d.schedule);
    }
}

#[test]
fn a_lockfile_decides_every_kernel_of_a_run() {
    let tuned_cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lock_path = dir.path().join("tcc.lock");
    let out = tune_mlp(tuned_cache.path(), &["--lock", lock_path.to_str().unwrap()]);
    assert!(out.contains("2 entries written, 2 in all"), "{out}");
    let lock = Lockfile::read(&lock_path).unwrap();
    assert_eq!(lock.len(), 2);

    // Another machine: an empty cache, the same lockfile.
    let empty_cache = tempfile::tempdir().unwrap();
    let (mut program, bindings) = mlp_program();
    let tuning = tuning(empty_cache.path()).with_lock(lock.clone());
    let report = tuning.apply(&mut program, &bindings).unwrap();
    assert_eq!(report.trials, 0);
    for launch in &program.launches {
        let key = tuning.key(&launch.kernel, &bindings).unwrap();
        let entry = lock.entries().find(|e| e.key == key).expect("every kernel is locked");
        assert_eq!(launch.kernel.schedule, entry.schedule);
    }
    assert!(report.decisions.iter().all(|d| d.source == ScheduleSource::Locked), "{}", report.summary());

    // Updating the lockfile keeps it whole (written atomically: no temporary file is left).
    tune_mlp(tuned_cache.path(), &["--lock", lock_path.to_str().unwrap()]);
    assert_eq!(Lockfile::read(&lock_path).unwrap(), lock);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn export_then_import_round_trips_and_imports_are_checked_once() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let (one, two) = (files.path().join("one.jsonl"), files.path().join("two.jsonl"));
    tune_mlp(a.path(), &[]);
    let export = tcc_in(a.path(), &["cache", "export", one.to_str().unwrap()]);
    assert_eq!(export.status.code(), Some(0), "{}", text(&export.stderr));
    let stdout_export = tcc_in(a.path(), &["cache", "export", "-"]);
    assert_eq!(text(&stdout_export.stdout), std::fs::read_to_string(&one).unwrap());

    let import = tcc_in(b.path(), &["cache", "import", one.to_str().unwrap()]);
    assert_eq!(import.status.code(), Some(0), "{}", text(&import.stderr));
    assert!(text(&import.stdout).contains("2 added"), "{}", text(&import.stdout));
    assert_eq!(tcc_in(b.path(), &["cache", "export", two.to_str().unwrap()]).status.code(), Some(0));
    let exported = std::fs::read_to_string(&one).unwrap();
    let reexported = std::fs::read_to_string(&two).unwrap();
    assert_eq!(exported.lines().count(), 2);
    // Imported records are the same decisions, marked to be checked on this machine.
    assert_eq!(reexported.replace("\"state\":\"unverified\"", "\"state\":\"fresh\""), exported);

    // A run checks each imported winner once before using it; without a worker it cannot, and
    // leaves them unused.
    let (program, bindings) = mlp_program();
    let unchecked = tuning(b.path()).without_validation().apply(&mut program.clone(), &bindings).unwrap();
    assert_eq!(unchecked.trials, 0);
    assert!(unchecked.decisions.iter().all(|d| d.source == ScheduleSource::Default), "{}", unchecked.summary());
    let checked = tuning(b.path()).apply(&mut program.clone(), &bindings).unwrap();
    assert_eq!(checked.trials, 2);
    assert!(checked.decisions.iter().all(|d| d.source == ScheduleSource::Borrowed), "{}", checked.summary());
    let warm = tuning(b.path()).apply(&mut program.clone(), &bindings).unwrap();
    assert_eq!(warm.trials, 0);
    assert!(warm.decisions.iter().all(|d| d.source == ScheduleSource::Cached), "{}", warm.summary());

    // So does `tcc tune`, then it uses them as they are.
    let c = tempfile::tempdir().unwrap();
    assert_eq!(tcc_in(c.path(), &["cache", "import", one.to_str().unwrap()]).status.code(), Some(0));
    let checked = tune_mlp(c.path(), &[]);
    assert!(checked.contains("2 trials run; 0 tuned, 0 cached, 2 borrowed"), "{checked}");
    let warm = tune_mlp(c.path(), &[]);
    assert!(warm.contains("0 trials run; 0 tuned, 2 cached"), "{warm}");

    // A file that holds no record is invalid input; a missing one too.
    let junk = files.path().join("junk.jsonl");
    std::fs::write(&junk, "not json\n").unwrap();
    let out = tcc_in(b.path(), &["cache", "import", junk.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    // Each skipped line is reported once (it used to be warned about twice).
    let warnings = text(&out.stderr).lines().filter(|l| l.starts_with("warning:")).count();
    assert_eq!(warnings, 1, "{}", text(&out.stderr));
    assert_eq!(tcc_in(b.path(), &["cache", "import", "/nonexistent/x.jsonl"]).status.code(), Some(1));
}

#[test]
fn cache_show_and_stats() {
    let cache = tempfile::tempdir().unwrap();
    tune_mlp(cache.path(), &[]);
    let ls = text(&tcc_in(cache.path(), &["cache", "ls"]).stdout);
    let prefix = ls.lines().next().unwrap().split_whitespace().next().unwrap().to_string();
    let show = tcc_in(cache.path(), &["cache", "show", &prefix]);
    assert_eq!(show.status.code(), Some(0), "{}", text(&show.stderr));
    assert!(text(&show.stdout).contains("\"schedule\""), "{}", text(&show.stdout));
    for unknown in ["0123456789abcdef", "zz", "12"] {
        let out = tcc_in(cache.path(), &["cache", "show", unknown]);
        assert_eq!(out.status.code(), Some(1), "{unknown}: {}", text(&out.stderr));
        assert!(text(&out.stderr).starts_with("error: "), "{}", text(&out.stderr));
    }
    let stats = tcc_in(cache.path(), &["cache", "stats"]);
    assert!(text(&stats.stdout).contains("records: 2 (0 undecodable)"), "{}", text(&stats.stdout));
    let gc = tcc_in(cache.path(), &["cache", "gc"]);
    assert_eq!(gc.status.code(), Some(0));
    assert_eq!(text(&tcc_in(cache.path(), &["cache", "ls"]).stdout), ls);
}

#[test]
fn a_corrupt_cache_database_is_reported_and_skipped() {
    let cache = tempfile::tempdir().unwrap();
    let garbage: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    std::fs::write(cache.path().join("tuning.sqlite3"), &garbage).unwrap();
    let mut args = MLP.to_vec();
    args[5] = "2trials";
    let out = tcc_in(cache.path(), &args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("warning: cannot open the tuning cache"), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("2 tuned"), "{}", text(&out.stdout));
    let ls = tcc_in(cache.path(), &["cache", "ls"]);
    assert_eq!(ls.status.code(), Some(2));
    assert!(text(&ls.stderr).contains("cannot open the tuning cache"), "{}", text(&ls.stderr));
    assert!(!text(&ls.stderr).contains("internal error"));
}

#[test]
fn a_worker_fed_garbage_fails_and_tuning_continues() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tcc"))
        .arg("worker")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"{\"protocol\": 1, garbage\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("TCC-WORKER-RESULT {\"status\":\"failed\""), "{}", text(&out.stdout));

    // The first worker of a tuning run gets garbage instead of its request; the run goes on.
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("worker.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nif [ ! -e \"$MARK\" ]; then : > \"$MARK\"; echo garbage | \"$TCC\" worker; exit $?; fi\nexec \"$TCC\" worker\n",
    )
    .unwrap();
    #[cfg(unix)]
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mark = dir.path().join("mark");
    let env = [
        ("TCC_TUNE_WORKER", script.to_str().unwrap()),
        ("MARK", mark.to_str().unwrap()),
        ("TCC", env!("CARGO_BIN_EXE_tcc")),
    ];
    let out = tcc_isolated(
        cache.path(),
        &["tune", "examples/softmax.tc", "--dim", "N=3", "--dim", "D=8", "--budget", "3trials", "--jobs", "1"],
        &env,
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", text(&out.stderr));
    assert!(mark.exists());
    assert!(stdout.contains("1 failed"), "{stdout}");
    assert!(stdout.contains("winner (tuned"), "{stdout}");
}

#[test]
fn bad_targets_and_sizes_have_their_exit_codes() {
    let cache = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| tcc_in(cache.path(), args).status.code();
    assert_eq!(run(&["tune", "examples/mlp.tc", "--target", "interp", "--dim", "M=2"]), Some(1));
    assert_eq!(run(&["tune", "examples/mlp.tc", "--target", "sm_99", "--dim", "M=2"]), Some(1));
    // A GPU target: not built in without LLVM (a bad argument for this build), else no GPU here.
    let gpu_code = if cfg!(feature = "llvm") { 2 } else { 1 };
    assert_eq!(run(&["tune", "examples/mlp.tc", "--target", "sm_90a", "--dim", "M=2"]), Some(gpu_code));
    assert_eq!(run(&["tune", "examples/mlp.tc"]), Some(1));
    assert_eq!(run(&["tune", "examples/mlp.tc", "--dim", "M=2", "--budget", "fast"]), Some(1));
    assert_eq!(run(&["tune", "examples/mlp.tc", "--dim", "M=2", "--lock", "examples/mlp.tc"]), Some(1));
    let help = tcc_in(cache.path(), &["--help"]);
    let listed = text(&help.stdout).lines().any(|l| l.trim_start().starts_with("worker"));
    assert!(!listed, "the worker subcommand is hidden: {}", text(&help.stdout));
}

#[test]
fn a_cached_schedule_for_another_tier_is_never_used() {
    let cache = tempfile::tempdir().unwrap();
    tune_mlp(cache.path(), &[]);
    let (mut program, bindings) = mlp_program();
    let tuning = tuning(cache.path());
    let kernel = program.launches[0].kernel.clone();
    let Lookup::Hit { mut record, .. } = tuning.cache().lookup(&tuning.key(&kernel, &bindings).unwrap()) else {
        panic!("tuned kernels are cached");
    };
    record.schedule = tcc::ir::Schedule::default_for(tcc::ir::Tier::Ptx);
    tuning.cache().local().put(&record).unwrap();
    let report = tuning.apply(&mut program, &bindings).unwrap();
    assert_eq!(report.decisions[0].source, ScheduleSource::Default);
    assert_eq!(program.launches[0].kernel.schedule, kernel.schedule);
    assert_eq!(report.decisions[1].source, ScheduleSource::Cached);
}
