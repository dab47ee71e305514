//! `tcc tune`, `tcc cache`, `tcc worker` and cached schedules (`tcc_autotune::tuning`): on the CPU, with
//! tiny shapes and small budgets, each test with its own cache directory (`TCC_CACHE_DIR`).

// Test helpers outside `#[test]` functions unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use tcc::ir::ScheduleSource;
use tcc::pipeline::{Pipeline, PlanOptions};
use tcc_autotune::tuning::{CacheStore, Layered, Lockfile, Lookup, SqliteStore, Tuning, WorkerCommand};

use crate::common::{root, tcc_isolated, text};

fn tcc_in(cache: &Path, args: &[&str]) -> Output {
    tcc_isolated(cache, args, &[])
}

/// A budget that searches both kernels' spaces (37 and 73 candidates) to the end.
const MLP: &[&str] = &["tune", "examples/mlp.tc", "--dim", "M=4", "--budget", "120trials"];

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
    let target = tcc::target::tuning_target(tcc::ir::TargetSpec::BestCpu).unwrap();
    Tuning::for_target(Layered::new(store), target, worker).unwrap()
}

#[test]
fn tune_finds_winners_and_a_warm_cache_runs_no_trials() {
    let cache = tempfile::tempdir().unwrap();
    let first = tune_mlp(cache.path(), &[]);
    assert_eq!(first.matches("winner (tuned").count(), 2, "{first}");
    assert!(first.contains("110 trials run; 2 tuned"), "{first}");
    assert_eq!(first.matches("search space exhausted").count(), 2, "{first}");
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

/// `tcc run ARGS` on mlp with M=4 (the kernels `tune_mlp` tunes) on the CPU tier the tests tune.
fn run_mlp(cache: &Path) -> Output {
    let target = tcc::target::resolve(tcc::ir::TargetSpec::BestCpu).unwrap().name();
    tcc_in(cache, &["run", "examples/mlp.tc", "--dim", "M=4", "--target", target])
}

/// A file that is not a database at all: every `tcc cache` command but `repair` exits 2 naming
/// `tcc cache repair`, `tune` too (before measuring: its results could not be kept), `run` warns
/// once and goes on; `repair` keeps the file and starts a fresh database.
#[test]
fn a_corrupt_cache_database_is_reported_and_repaired() {
    let cache = tempfile::tempdir().unwrap();
    let garbage: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    std::fs::write(cache.path().join("tuning.sqlite3"), &garbage).unwrap();
    let mut args = MLP.to_vec();
    args[5] = "2trials";
    let out = tcc_in(cache.path(), &args);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("tcc cache repair"), "{}", text(&out.stderr));
    assert!(!text(&out.stdout).contains("winner"), "nothing is measured: {}", text(&out.stdout));
    let ls = tcc_in(cache.path(), &["cache", "ls"]);
    assert_eq!(ls.status.code(), Some(2));
    assert!(text(&ls.stderr).contains("cannot open the tuning cache"), "{}", text(&ls.stderr));
    assert!(text(&ls.stderr).contains("tcc cache repair"), "{}", text(&ls.stderr));
    assert!(!text(&ls.stderr).contains("internal error"));

    let repair = tcc_in(cache.path(), &["cache", "repair"]);
    assert_eq!(repair.status.code(), Some(0), "{}", text(&repair.stderr));
    assert!(text(&repair.stdout).contains("0 records saved"), "{}", text(&repair.stdout));
    let kept: Vec<_> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("tuning.sqlite3.damaged-"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(std::fs::read(&kept[0]).unwrap(), garbage, "the damaged file is kept as it was");
    let out = tcc_in(cache.path(), &args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("2 tuned"), "{}", text(&out.stdout));
}

/// Issue 21, defect 5: a database of many records with 300 random bytes written at offset 4104
/// (the records table's root page). `run` and `compile` warn once and go on without the cache;
/// every other `tcc cache` command exits 2 naming `tcc cache repair`; `repair` saves every record
/// into a fresh database (readable again, used again) and keeps the damaged file beside it.
#[test]
fn a_damaged_database_is_one_warning_for_run_and_repair_saves_its_records() {
    let cache = tempfile::tempdir().unwrap();
    tune_mlp(cache.path(), &[]);
    let db = cache.path().join("tuning.sqlite3");
    // Many records besides the two tuned ones: copies of them under other shapes.
    {
        let store = SqliteStore::open(&db).unwrap();
        let tuned = store.list().unwrap().records;
        assert_eq!(tuned.len(), 2);
        for i in 0..300 {
            let mut r = tuned[i % 2].clone();
            r.key.shapes = format!("{} copy={i}", r.key.shapes);
            store.put(&r).unwrap();
        }
    }
    let ls_before = text(&tcc_in(cache.path(), &["cache", "ls"]).stdout);
    assert_eq!(ls_before.lines().count(), 302);
    let mut bytes = std::fs::read(&db).unwrap();
    let mut x: u32 = 2_463_534_242;
    for b in &mut bytes[4104..4404] {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = (x >> 24) as u8;
    }
    std::fs::write(&db, &bytes).unwrap();

    let run = run_mlp(cache.path());
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr.lines().filter(|l| l.starts_with("warning:")).count(), 1, "{stderr}");
    assert!(stderr.contains("damaged") && stderr.contains("tcc cache repair"), "{stderr}");
    assert!(text(&run.stdout).contains("(default)"), "{}", text(&run.stdout));
    let out = tempfile::tempdir().unwrap();
    let ir = out.path().join("mlp.ir");
    let compile = tcc_in(
        cache.path(),
        &["compile", "examples/mlp.tc", "--dim", "M=4", "--target", "cpu", "--emit", "ir", "-o", ir.to_str().unwrap()],
    );
    let stderr = text(&compile.stderr);
    assert_eq!(compile.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr.lines().filter(|l| l.starts_with("warning:")).count(), 1, "{stderr}");
    for args in [&["cache", "ls"][..], &["cache", "stats"], &["cache", "gc"], &["cache", "export", "-"]] {
        let out = tcc_in(cache.path(), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains("tcc cache repair"), "{args:?}: {}", text(&out.stderr));
    }
    let tune = tcc_in(cache.path(), MLP);
    assert_eq!(tune.status.code(), Some(2), "{}", text(&tune.stderr));
    assert_eq!(std::fs::read(&db).unwrap(), bytes, "no command wrote to the damaged file");

    let repair = tcc_in(cache.path(), &["cache", "repair"]);
    let said = text(&repair.stdout);
    assert_eq!(repair.status.code(), Some(0), "{}", text(&repair.stderr));
    assert!(said.contains("302 records saved, 0 lost"), "{said}");
    let kept = said.rsplit_once("kept as `").unwrap().1.trim_end().trim_end_matches('`').to_string();
    assert_eq!(std::fs::read(&kept).unwrap(), bytes, "the damaged file is kept beside the fresh one");
    assert_eq!(text(&tcc_in(cache.path(), &["cache", "ls"]).stdout), ls_before, "every record, as it was");
    let run = run_mlp(cache.path());
    assert!(text(&run.stderr).is_empty(), "{}", text(&run.stderr));
    assert_eq!(text(&run.stdout).matches("(cached)").count(), 2, "{}", text(&run.stdout));
    let again = tcc_in(cache.path(), &["cache", "repair"]);
    assert!(text(&again.stdout).contains("not damaged"), "{}", text(&again.stdout));
}

/// Issue 21, defect 2: records measured on another machine, or by another code-generator version,
/// are borrowed: `tcc run` uses them (after one check) but never makes them fresh, `cache ls`
/// says `borrowed`, and `tcc tune` re-measures them instead of answering `cached, 0 trials`.
#[test]
fn borrowed_records_stay_borrowed_after_a_run_and_tune_re_measures_them() {
    let a = tempfile::tempdir().unwrap();
    tune_mlp(a.path(), &[]);
    let export = text(&tcc_in(a.path(), &["cache", "export", "-"]).stdout);
    assert_eq!(export.lines().count(), 2);
    let dir = tempfile::tempdir().unwrap();
    for (what, change) in [
        (
            "another machine",
            &(|p: &mut serde_json::Value| p["host"] = "a-teammates-box".into()) as &dyn Fn(&mut serde_json::Value),
        ),
        ("another code generator", &|p: &mut serde_json::Value| p["codegen_version"] = 0.into()),
    ] {
        let mut lines = String::new();
        for line in export.lines() {
            let mut record: serde_json::Value = serde_json::from_str(line).unwrap();
            change(&mut record["provenance"]);
            lines.push_str(&serde_json::to_string(&record).unwrap());
            lines.push('\n');
        }
        let file = dir.path().join("theirs.jsonl");
        std::fs::write(&file, lines).unwrap();
        let b = tempfile::tempdir().unwrap();
        assert_eq!(tcc_in(b.path(), &["cache", "import", file.to_str().unwrap()]).status.code(), Some(0));
        let ls = text(&tcc_in(b.path(), &["cache", "ls"]).stdout);
        assert_eq!(ls.matches("[borrowed ").count(), 2, "{what}: {ls}");

        // Runs use them (checked once), and they stay borrowed.
        for _ in 0..2 {
            let run = run_mlp(b.path());
            assert_eq!(run.status.code(), Some(0), "{what}: {}", text(&run.stderr));
            assert_eq!(text(&run.stdout).matches("(borrowed)").count(), 2, "{what}: {}", text(&run.stdout));
        }
        let ls = text(&tcc_in(b.path(), &["cache", "ls"]).stdout);
        assert_eq!(ls.matches("[borrowed ").count(), 2, "{what}: a run made them fresh: {ls}");
        let json = text(&tcc_in(b.path(), &["cache", "ls", "--json"]).stdout);
        for line in json.lines() {
            let r: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(r["state"], "borrowed", "{what}: {line}");
        }

        // Tuning re-measures them: a real search, not `cached, 0 trials`.
        let tuned = tune_mlp(b.path(), &[]);
        assert!(tuned.contains("110 trials run; 2 tuned, 0 cached, 0 borrowed"), "{what}: {tuned}");
        assert!(!tuned.contains("cached, 0 trials"), "{what}: {tuned}");
        let ls = text(&tcc_in(b.path(), &["cache", "ls"]).stdout);
        assert_eq!(ls.matches("[fresh ").count(), 2, "{what}: {ls}");
        let warm = tune_mlp(b.path(), &[]);
        assert!(warm.contains("0 trials run; 0 tuned, 2 cached"), "{what}: {warm}");
    }
}

/// Issue 21, defects 3 and 8: a tune cut short by its budget records how far it got; the next tune
/// goes on from there (says so, and its counts agree) instead of `winner (cached, 0 trials)`, and
/// a complete search is then cached.
#[test]
fn a_tune_cut_short_goes_on_from_where_it_stopped() {
    let cache = tempfile::tempdir().unwrap();
    let budget = |b: &'static str| {
        let mut args = MLP.to_vec();
        args[5] = b;
        let out = tcc_in(cache.path(), &args);
        assert_eq!(out.status.code(), Some(0), "{}\n{}", text(&out.stdout), text(&out.stderr));
        text(&out.stdout)
    };
    let first = budget("2trials");
    assert!(first.contains("2 trials run; 2 tuned"), "{first}");
    assert!(first.contains("1 trials of 37 candidates (exhaustive; trial budget reached)"), "{first}");
    let json = text(&tcc_in(cache.path(), &["cache", "ls", "--json"]).stdout);
    for line in json.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(r["searched"]["complete"], false, "{line}");
        assert_eq!(r["searched"]["trials"], 1, "{line}");
    }

    let second = budget("60s");
    assert!(!second.contains("cached, 0 trials"), "{second}");
    assert!(
        second.contains("37 trials of 37 candidates (exhaustive; search space exhausted; resumed: 1 measured by an earlier run, 36 now)"),
        "{second}"
    );
    assert!(second.contains("winner (tuned, 36 trials)"), "{second}");
    assert!(second.contains("winner (tuned, 72 trials)"), "{second}");
    assert!(second.contains("108 trials run; 2 tuned"), "{second}");
    let json = text(&tcc_in(cache.path(), &["cache", "ls", "--json"]).stdout);
    let searched: Vec<(u64, bool)> = json
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|r| (r["searched"]["trials"].as_u64().unwrap(), r["searched"]["complete"].as_bool().unwrap()))
        .collect();
    assert_eq!(searched.iter().filter(|(_, complete)| *complete).count(), 2, "{json}");
    assert_eq!(searched.iter().map(|(t, _)| t).sum::<u64>(), 110, "{json}");
    let stats = text(&tcc_in(cache.path(), &["cache", "stats"]).stdout);
    assert!(stats.contains("journal: 0 trials"), "a finished search clears its journal: {stats}");

    let third = budget("60s");
    assert!(third.contains("0 trials run; 0 tuned, 2 cached"), "{third}");
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

#[test]
fn devices_name_gpus_and_a_cpu_target_refuses_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = MLP.to_vec();
    args.extend_from_slice(&["--devices", "all"]);
    let out = tcc_in(dir.path(), &args);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--devices names GPUs"), "{}", text(&out.stderr));
    for bad in ["0,0", "first"] {
        let mut args = MLP.to_vec();
        args.extend_from_slice(&["--devices", bad]);
        let out = tcc_in(dir.path(), &args);
        assert_eq!(out.status.code(), Some(1), "{bad}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains("--devices"), "{}", text(&out.stderr));
    }
}
