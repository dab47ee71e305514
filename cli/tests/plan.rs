//! Tuning a plan (issue 27): `tcc tune --plan` lists each kernel once, shards split the kernels
//! so that concurrent shards sharing one local cache tune each exactly once, `tcc lock --plan`
//! writes the whole plan's lockfile from the caches alone (and names what is missing), a shard
//! killed mid-run goes on from its journal, and a shared cache that does not answer is named.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tcc_autotune::tuning::{CacheStore, SqliteStore};

use crate::common::{root, tcc_isolated, text};

/// A plan in `dir`: mlp (copied beside the plan, named relatively) at M=4 twice (the second time
/// with its fn named: the same kernels) and softmax at N=8, D=33, by absolute path.
fn write_plan(dir: &Path) -> PathBuf {
    std::fs::copy(root().join("examples/mlp.tc"), dir.join("mlp.tc")).unwrap();
    let softmax = root().join("examples/softmax.tc");
    let plan = dir.join("plan.jsonl");
    let text = format!(
        "{{\"file\": \"mlp.tc\", \"dims\": {{\"M\": 4}}}}\n\n{{\"file\": \"mlp.tc\", \"fn\": \"mlp\", \"dims\": {{\"M\": 4}}, \"target\": \"cpu\"}}\n{{\"file\": {:?}, \"dims\": {{\"N\": 8, \"D\": 33}}}}\n",
        softmax.to_str().unwrap()
    );
    std::fs::write(&plan, text).unwrap();
    plan
}

fn lines(stdout: &[u8]) -> Vec<Value> {
    text(stdout).lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

/// `tcc ARGS` started (not waited for) with its own cache `cache`, stdout piped.
fn spawn(cache: &Path, args: &[&str], env: &[(&str, &str)]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_tcc"))
        .args(args)
        .current_dir(root())
        .env("TCC_CACHE_DIR", cache)
        .env_remove("TCC_CACHE_URL")
        .env_remove("TCC_TUNE_WORKER")
        .env_remove("TCC_LOCKFILE")
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("JOB_COMPLETION_INDEX")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn concurrent_shards_tune_each_kernel_once_and_lock_writes_the_whole_plan() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let plan = write_plan(dir.path());
    let plan = plan.to_str().unwrap();
    let lock = dir.path().join("tcc.lock");
    let lock_args = ["lock", "--plan", plan, "-o", lock.to_str().unwrap()];

    // Nothing tuned yet: every kernel is named, nothing is written.
    let out = tcc_isolated(&cache, &lock_args, &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("3 of the plan's 3 kernels have no winner"), "{stderr}");
    assert!(
        stderr.contains("plan.jsonl:1, ") && stderr.contains("plan.jsonl:3)") && stderr.contains("plan.jsonl:4)"),
        "{stderr}"
    );
    assert!(!lock.exists());

    // Three shards at once, on one local cache.
    let shards: Vec<Child> = (0..3)
        .map(|i| {
            let shard = format!("{i}/3");
            spawn(&cache, &["tune", "--plan", plan, "--shard", &shard, "--budget", "200trials", "--json"], &[])
        })
        .collect();
    let mut ids = Vec::new();
    let mut digests = BTreeSet::new();
    for (i, child) in shards.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "shard {i}: {}\n{}", text(&out.stdout), text(&out.stderr));
        let objects = lines(&out.stdout);
        let header = &objects[0];
        assert_eq!((header["kernels"].as_u64(), header["entries"].as_u64()), (Some(3), Some(3)), "{header}");
        assert_eq!((header["shard"].as_u64(), header["shards"].as_u64()), (Some(i as u64), Some(3)), "{header}");
        assert_eq!(header["shard_from"], "flag");
        digests.insert(header["digest"].as_str().unwrap().to_string());
        let kernels: Vec<&Value> = objects.iter().filter(|o| o.get("kernel").is_some()).collect();
        assert_eq!(kernels.len() as u64, header["this_shard"].as_u64().unwrap(), "{header}");
        assert!(header["listing_s"].as_f64().is_some_and(|s| s > 0.0), "{header}");
        for k in &kernels {
            assert_eq!(k["source"], "tuned", "{k}");
            assert_eq!(k["shared"], "local only", "{k}");
            // Where the time went: the phases fit inside the kernel's wall time; no GPU named.
            assert!(k["device"].is_null(), "{k}");
            let (all, prepare, search) =
                (k["seconds"].as_f64().unwrap(), k["prepare_s"].as_f64().unwrap(), k["search_s"].as_f64().unwrap());
            assert!(prepare > 0.0 && search > 0.0 && prepare + search <= all, "{k}");
            ids.push(k["id"].as_str().unwrap().to_string());
        }
        let summary = objects.last().unwrap();
        assert_eq!(summary["tuned"].as_u64(), Some(kernels.len() as u64), "{summary}");
    }
    assert_eq!(digests.len(), 1, "every shard lists the plan alike: {digests:?}");
    let distinct: BTreeSet<&String> = ids.iter().collect();
    assert_eq!((ids.len(), distinct.len()), (3, 3), "each kernel tuned by exactly one shard: {ids:?}");

    // Every record is whole and complete; the lockfile takes all three.
    let listing = text(&tcc_isolated(&cache, &["cache", "ls", "--json"], &[]).stdout);
    let records: Vec<Value> = listing.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records.len(), 3, "{listing}");
    assert!(records.iter().all(|r| r["searched"]["complete"] == true), "{listing}");
    let out = tcc_isolated(&cache, &lock_args, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lockfile = std::fs::read_to_string(&lock).unwrap();
    assert_eq!(lockfile.lines().count(), 4, "a header and three entries: {lockfile}");
    assert!(text(&out.stderr).contains("3 entries for the plan's 3 kernels"), "{}", text(&out.stderr));
    // The lockfile decides every kernel of every entry's program.
    let run = tcc_isolated(
        &cache,
        &["explain", "examples/mlp.tc", "--dim", "M=4", "--lock", lock.to_str().unwrap(), "--json"],
        &[],
    );
    let sources: Vec<String> =
        lines(&run.stdout).iter().filter_map(|o| o.get("source")).map(|s| s.to_string()).collect();
    assert_eq!(sources, vec!["\"locked\"", "\"locked\""], "{}", text(&run.stderr));

    // The whole plan again: nothing left to measure.
    let out = tcc_isolated(&cache, &["tune", "--plan", plan, "--json"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let objects = lines(&out.stdout);
    assert_eq!(objects[0]["shard_from"], "whole");
    let summary = objects.last().unwrap();
    assert_eq!((summary["cached"].as_u64(), summary["trials"].as_u64()), (Some(3), Some(0)), "{summary}");
}

#[test]
fn shards_come_from_slurm_or_kubernetes_and_bad_input_is_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let plan = write_plan(dir.path());
    let plan = plan.to_str().unwrap();
    let header = |env: &[(&str, &str)]| {
        let out = tcc_isolated(&cache, &["tune", "--plan", plan, "--json", "--budget", "1trials"], env);
        assert_eq!(out.status.code(), Some(0), "{env:?}: {}", text(&out.stderr));
        lines(&out.stdout).remove(0)
    };
    // A shard with no kernel (the plan has 3) measures nothing.
    let slurm =
        header(&[("SLURM_ARRAY_TASK_ID", "12"), ("SLURM_ARRAY_TASK_MIN", "2"), ("SLURM_ARRAY_TASK_COUNT", "11")]);
    assert_eq!(
        (slurm["shard"].as_u64(), slurm["shards"].as_u64(), slurm["this_shard"].as_u64()),
        (Some(10), Some(11), Some(0))
    );
    assert_eq!(slurm["shard_from"], "slurm");
    let k8s = header(&[("JOB_COMPLETION_INDEX", "7"), ("TCC_SHARDS", "8")]);
    assert_eq!(
        (k8s["shard"].as_u64(), k8s["shards"].as_u64(), k8s["shard_from"].as_str()),
        (Some(7), Some(8), Some("kubernetes"))
    );

    let fails = |args: &[&str], env: &[(&str, &str)], expected: &str| {
        let out = tcc_isolated(&cache, args, env);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    };
    let tune = ["tune", "--plan", plan];
    fails(&tune, &[("JOB_COMPLETION_INDEX", "1")], "TCC_SHARDS=\"\": unset");
    fails(&tune, &[("JOB_COMPLETION_INDEX", "3"), ("TCC_SHARDS", "3")], "shard 3 of 3");
    fails(&["tune", "--plan", plan, "--shard", "3/3"], &[], "--shard `3/3` is not I/N");
    fails(&["tune", "--plan", plan, "examples/mlp.tc"], &[], "cannot be used with");
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"file\": \"mlp.tc\", \"dims\": {\"M\": 4}}\n{\"file\": \"mlp.tc\", \"dims\": {}}\n")
        .unwrap();
    fails(&["tune", "--plan", bad.to_str().unwrap()], &[], "bad.jsonl:2: fn `mlp` has unbound shape variables `M`");
    std::fs::write(&bad, "{\"file\": \"mlp.tc\"}\n[1]\n").unwrap();
    fails(&["lock", "--plan", bad.to_str().unwrap(), "-o", "x.lock"], &[], "bad.jsonl:2: not a plan entry");
    std::fs::write(&bad, "{\"file\": \"nothing-here.tc\"}\n").unwrap();
    fails(&["tune", "--plan", bad.to_str().unwrap()], &[], "bad.jsonl:1: cannot read");
}

/// A worker that takes its time, so a shard can be killed in the middle of a kernel's search.
fn slow_worker(dir: &Path) -> PathBuf {
    let script = dir.join("slow-worker.sh");
    std::fs::write(&script, format!("#!/bin/sh\nsleep 0.1\nexec {:?} \"$@\"\n", env!("CARGO_BIN_EXE_tcc"))).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    script
}

#[test]
fn a_shard_killed_mid_run_tunes_only_what_is_missing_when_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    std::fs::copy(root().join("examples/mlp.tc"), dir.path().join("mlp.tc")).unwrap();
    let plan = dir.path().join("plan.jsonl");
    std::fs::write(&plan, "{\"file\": \"mlp.tc\", \"dims\": {\"M\": 4}}\n").unwrap();
    let args =
        ["tune", "--plan", plan.to_str().unwrap(), "--shard", "0/1", "--budget", "200trials", "--jobs", "1", "--json"];
    let worker = slow_worker(dir.path());
    let mut child = spawn(&cache, &args, &[("TCC_TUNE_WORKER", worker.to_str().unwrap())]);
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    // The header, then the first kernel's decision: the second kernel's search has begun.
    let mut first = String::new();
    for _ in 0..2 {
        first.clear();
        stdout.read_line(&mut first).unwrap();
    }
    let first: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(first["source"], "tuned", "{first}");
    // Kill it once the second search has journaled a few trials.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let journaled = SqliteStore::open(&cache.join("tuning.sqlite3")).unwrap().journal_len().unwrap();
        if journaled >= 3 {
            break;
        }
        assert!(Instant::now() < deadline, "the second kernel's search journaled nothing");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let local = SqliteStore::open(&cache.join("tuning.sqlite3")).unwrap();
    assert_eq!(local.list().unwrap().records.len(), 1, "only the first kernel was recorded");

    let out = tcc_isolated(&cache, &args, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let objects = lines(&out.stdout);
    let kernels: Vec<&Value> = objects.iter().filter(|o| o.get("kernel").is_some()).collect();
    assert_eq!(kernels.len(), 2);
    let again = kernels.iter().find(|k| k["id"] == first["id"]).unwrap();
    assert_eq!((again["source"].as_str(), again["trials"].as_u64()), (Some("cached"), Some(0)), "{again}");
    let rest = kernels.iter().find(|k| k["id"] != first["id"]).unwrap();
    assert_eq!(rest["source"], "tuned", "{rest}");
    let resumed = rest["resumed"].as_u64().unwrap();
    assert!(resumed >= 3, "the search went on from its journal: {rest}");
    let listing = text(&tcc_isolated(&cache, &["cache", "ls", "--json"], &[]).stdout);
    let searched: Vec<Value> =
        listing.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["searched"].clone()).collect();
    assert!(searched.iter().all(|s| s["complete"] == true), "{listing}");
    // Every candidate of the second space was measured once: before the kill or after it.
    let space = searched
        .iter()
        .map(|s| s["space"].as_u64().unwrap())
        .find(|&n| n == resumed + rest["trials"].as_u64().unwrap());
    assert!(space.is_some(), "resumed {resumed} + {} now = the space: {listing}", rest["trials"]);
}

#[test]
fn a_shard_that_cannot_reach_the_shared_cache_keeps_its_winners_and_names_them() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let plan = write_plan(dir.path());
    let args = ["tune", "--plan", plan.to_str().unwrap(), "--budget", "3trials", "--json"];
    // Nothing listens on port 1.
    let out = tcc_isolated(&cache, &args, &[("TCC_CACHE_URL", "redis://127.0.0.1:1")]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("3 winners are kept in the local cache but not shared"), "{stderr}");
    assert!(stderr.contains("run this shard again when the shared cache answers"), "{stderr}");
    let objects = lines(&out.stdout);
    let kernels: Vec<&Value> = objects.iter().filter(|o| o.get("kernel").is_some()).collect();
    assert_eq!(kernels.len(), 3);
    for k in &kernels {
        assert_eq!(k["shared"], "not shared", "{k}");
        let name = format!("{} ({})", k["kernel"].as_str().unwrap(), &k["id"].as_str().unwrap()[..12]);
        assert!(stderr.contains(&name), "{name}: {stderr}");
    }
    assert_eq!(objects.last().unwrap()["not_shared"].as_array().map(Vec::len), Some(3));
    let listing = text(&tcc_isolated(&cache, &["cache", "ls", "--json"], &[]).stdout);
    assert_eq!(listing.lines().count(), 3, "kept locally: {listing}");
    let out = tcc_isolated(&cache, &["lock", "--plan", plan.to_str().unwrap(), "-o", "-"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).lines().count(), 4, "{}", text(&out.stdout));
}
