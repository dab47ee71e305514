//! One pipeline: `run`, `compile`, `explain`, `bench` and `tune` use and show the same schedule
//! for the same kernel under the same lockfile and cache (a regression test for each
//! disagreement of the issue that introduced `tcc::pipeline`), `--json` output, and
//! `tcc bench FILE`.

use std::path::Path;

use serde_json::Value;

use crate::common::{root, tcc_isolated as tcc, text};

/// Runs `tcc ARGS` (which must succeed) and parses every stdout line as JSON.
fn json_lines(cache: &Path, args: &[&str], env: &[(&str, &str)]) -> Vec<Value> {
    let out = tcc(cache, args, env);
    assert_eq!(out.status.code(), Some(0), "{args:?}\n{}\n{}", text(&out.stdout), text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {l}")))
        .collect()
}

/// The kernel objects of `lines` as (kernel, schedule, source).
fn kernels(lines: &[Value]) -> Vec<(String, String, String)> {
    lines
        .iter()
        .filter_map(|v| {
            let kernel = v.get("kernel")?.as_str()?.to_string();
            for key in ["family", "schedule", "source"] {
                assert!(v.get(key).and_then(Value::as_str).is_some(), "kernel object without `{key}`: {v}");
            }
            Some((kernel, v["schedule"].as_str()?.to_string(), v["source"].as_str()?.to_string()))
        })
        .collect()
}

/// The `// kernel NAME [class] SCHEDULE (SOURCE)` headers of `compile --emit ir` as
/// (kernel, schedule, source).
fn compiled_kernels(cache: &Path, target: &str, extra: &[&str]) -> Vec<(String, String, String)> {
    let mut args = vec!["compile", "examples/mlp.tc", "--dim", "M=4", "--target", target, "--emit", "ir", "-o", "-"];
    args.extend_from_slice(extra);
    let out = tcc(cache, &args, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("// kernel "))
        .map(|rest| {
            let (name, rest) = rest.split_once(' ').expect("a name");
            let (_, rest) = rest.split_once("] ").expect("a class");
            let (schedule, source) = rest.rsplit_once(" (").expect("a source");
            (name.to_string(), schedule.to_string(), source.trim_end_matches(')').to_string())
        })
        .collect()
}

const MLP_RUN: [&str; 4] = ["examples/mlp.tc", "--dim", "M=4", "--json"];

fn run_json(cache: &Path, target: &str, extra: &[&str]) -> Vec<(String, String, String)> {
    let mut args = vec!["run"];
    args.extend_from_slice(&MLP_RUN);
    args.extend_from_slice(&["--target", target]);
    args.extend_from_slice(extra);
    kernels(&json_lines(cache, &args, &[]))
}

fn explain_json(cache: &Path, target: &str, extra: &[&str]) -> Vec<(String, String, String)> {
    let mut args = vec!["explain"];
    args.extend_from_slice(&MLP_RUN);
    args.extend_from_slice(&["--target", target]);
    args.extend_from_slice(extra);
    let lines = json_lines(cache, &args, &[]);
    assert!(lines.first().is_some_and(|h| h.get("kernel").is_none() && h.get("function").is_some()), "{lines:?}");
    kernels(&lines)
}

fn tune(cache: &Path, target: &str, extra: &[&str]) {
    let mut args = vec!["tune", "examples/mlp.tc", "--dim", "M=4", "--budget", "4trials", "--target", target];
    args.extend_from_slice(extra);
    let out = tcc(cache, &args, &[]);
    assert_eq!(out.status.code(), Some(0), "{}\n{}", text(&out.stdout), text(&out.stderr));
}

#[test]
fn run_compile_and_explain_show_the_same_cached_schedules() {
    let cache = tempfile::tempdir().unwrap();
    let before = run_json(cache.path(), "cpu:cranelift", &[]);
    assert!(before.iter().all(|(_, _, s)| s == "default"), "{before:?}");
    tune(cache.path(), "cpu:cranelift", &[]);
    let run = run_json(cache.path(), "cpu:cranelift", &[]);
    assert_eq!(run.len(), 2, "{run:?}");
    assert!(run.iter().all(|(_, _, s)| s == "cached"), "{run:?}");
    // `explain` used to print the optimizer's schedules while `run` and `compile` used the cache's.
    assert_eq!(explain_json(cache.path(), "cpu:cranelift", &[]), run);
    assert_eq!(compiled_kernels(cache.path(), "cpu:cranelift", &[]), run);
}

#[test]
fn run_obeys_the_lockfile_like_compile_and_explain() {
    let tuned = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("tcc.lock");
    let lock_arg = lock.to_str().unwrap();
    tune(tuned.path(), "cpu:cranelift", &["--lock", lock_arg]);
    // Another machine: an empty cache, the same lockfile (`tcc run` used to ignore it).
    let empty = tempfile::tempdir().unwrap();
    let run = run_json(empty.path(), "cpu:cranelift", &["--lock", lock_arg]);
    assert_eq!(run.len(), 2);
    assert!(run.iter().all(|(_, _, s)| s == "locked"), "{run:?}");
    assert_eq!(explain_json(empty.path(), "cpu:cranelift", &["--lock", lock_arg]), run);
    assert_eq!(compiled_kernels(empty.path(), "cpu:cranelift", &["--lock", lock_arg]), run);
    // The same through TCC_LOCKFILE, with no flag.
    let mut args = vec!["run"];
    args.extend_from_slice(&MLP_RUN);
    args.extend_from_slice(&["--target", "cpu:cranelift"]);
    assert_eq!(kernels(&json_lines(empty.path(), &args, &[("TCC_LOCKFILE", lock_arg)])), run);
    // A lockfile named on the command line that is not one is invalid input.
    let junk = dir.path().join("junk.lock");
    std::fs::write(&junk, "not a lockfile\n").unwrap();
    let out = tcc(empty.path(), &["run", "examples/mlp.tc", "--dim", "M=4", "--lock", junk.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
}

#[test]
fn cpu_means_one_tier_for_every_command() {
    // In a build with LLVM, `compile --target cpu` used to dump cranelift code while `run --target
    // cpu` ran the LLVM tier: now `cpu` resolves once, so all three name the same schedules.
    let cache = tempfile::tempdir().unwrap();
    let run = run_json(cache.path(), "cpu", &[]);
    assert_eq!(explain_json(cache.path(), "cpu", &[]), run);
    assert_eq!(compiled_kernels(cache.path(), "cpu", &[]), run);
    let tier = if cfg!(feature = "llvm") { "cpu:llvm" } else { "cpu:cranelift" };
    let mut args = vec!["run"];
    args.extend_from_slice(&MLP_RUN);
    let run_lines = json_lines(cache.path(), &args, &[]);
    assert_eq!(run_lines.last().and_then(|l| l["target"].as_str()), Some(tier), "{run_lines:?}");
    let mut args = vec!["explain"];
    args.extend_from_slice(&MLP_RUN);
    let explain_lines = json_lines(cache.path(), &args, &[]);
    assert_eq!(explain_lines.first().and_then(|l| l["target"].as_str()), Some(tier), "{explain_lines:?}");
    let clif = tcc(
        cache.path(),
        &["compile", "examples/mlp.tc", "--dim", "M=4", "--target", "cpu", "--emit", "clif", "-o", "-"],
        &[],
    );
    assert_eq!(clif.status.code(), Some(if cfg!(feature = "llvm") { 1 } else { 0 }), "{}", text(&clif.stderr));
}

#[test]
fn an_unknown_target_is_invalid_input_naming_the_valid_ones() {
    let cache = tempfile::tempdir().unwrap();
    for command in ["run", "explain", "bench", "tune"] {
        let out = tcc(cache.path(), &[command, "examples/mlp.tc", "--dim", "M=4", "--target", "sm_70"], &[]);
        assert_eq!(out.status.code(), Some(1), "{command}: {}", text(&out.stderr));
        let err = text(&out.stderr);
        assert!(err.contains("sm_70") && err.contains("cpu:llvm") && err.contains("sm_90a"), "{command}: {err}");
    }
}

#[test]
fn bench_times_a_program_per_kernel() {
    let cache = tempfile::tempdir().unwrap();
    let args = ["bench", "examples/softmax.tc", "--dim", "N=512", "--dim", "D=512", "--target", "cpu", "--json"];
    let lines = json_lines(cache.path(), &args, &[]);
    let per_kernel = kernels(&lines);
    assert!(!per_kernel.is_empty(), "{lines:?}");
    for line in lines.iter().filter(|l| l.get("kernel").is_some()) {
        assert!(line["median_ms"].as_f64().is_some_and(|ms| ms > 0.0), "{line}");
        assert!(line["bytes_per_s"].as_f64().is_some_and(|b| b > 0.0), "{line}");
    }
    let totals: Vec<&Value> = lines.iter().filter(|l| l.get("kernel").is_none()).collect();
    assert_eq!(totals.len(), 1, "{lines:?}");
    assert!(totals[0]["median_ms"].as_f64().is_some_and(|ms| ms > 0.0), "{}", totals[0]);
    assert!(totals[0]["repetitions"].as_u64().is_some_and(|n| n >= 20), "{}", totals[0]);

    // A product reports FLOP/s; the text form lists every kernel and the total.
    let mlp = json_lines(cache.path(), &["bench", "examples/mlp.tc", "--dim", "M=16", "--json"], &[]);
    assert!(mlp.iter().any(|l| l.get("flop_per_s").and_then(Value::as_f64).is_some_and(|f| f > 0.0)), "{mlp:?}");
    let out = tcc(cache.path(), &["bench", "examples/mlp.tc", "--dim", "M=16"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("fn mlp on cpu:") && stdout.contains("total "), "{stdout}");

    // Unbound variables and the interpreter are refused as invalid input.
    let unbound = tcc(cache.path(), &["bench", "examples/softmax.tc"], &[]);
    assert_eq!(unbound.status.code(), Some(1), "{}", text(&unbound.stderr));
    let interp = tcc(cache.path(), &["bench", "examples/mlp.tc", "--dim", "M=4", "--target", "interp"], &[]);
    assert_eq!(interp.status.code(), Some(1), "{}", text(&interp.stderr));
}

#[test]
fn tune_and_cache_ls_speak_json() {
    let cache = tempfile::tempdir().unwrap();
    let args =
        ["tune", "examples/mlp.tc", "--dim", "M=4", "--budget", "4trials", "--target", "cpu:cranelift", "--json"];
    let lines = json_lines(cache.path(), &args, &[]);
    let tuned = kernels(&lines);
    assert_eq!(tuned.len(), 2, "{lines:?}");
    assert!(tuned.iter().all(|(_, _, s)| s == "tuned"), "{tuned:?}");
    // What tune chose is what run then runs.
    assert_eq!(
        run_json(cache.path(), "cpu:cranelift", &[]).into_iter().map(|(k, s, _)| (k, s)).collect::<Vec<_>>(),
        tuned.into_iter().map(|(k, s, _)| (k, s)).collect::<Vec<_>>()
    );
    let ls = json_lines(cache.path(), &["cache", "ls", "--json"], &[]);
    assert_eq!(ls.len(), 2, "{ls:?}");
    assert!(ls.iter().all(|r| r["hash"].as_str().is_some_and(|h| h.len() == 64)), "{ls:?}");
}

/// On the LLVM CPU tier, winners of `tcc tune --target cpu:llvm` are applied by `tcc run` (they
/// used to be ignored).
#[cfg(feature = "llvm")]
#[test]
fn llvm_tier_winners_are_applied() {
    let cache = tempfile::tempdir().unwrap();
    tune(cache.path(), "cpu:llvm", &[]);
    let run = run_json(cache.path(), "cpu:llvm", &[]);
    assert!(run.iter().all(|(_, _, s)| s == "cached"), "{run:?}");
    assert_eq!(explain_json(cache.path(), "cpu:llvm", &[]), run);
    assert_eq!(compiled_kernels(cache.path(), "cpu:llvm", &[]), run);
}

/// `--emit ptx` writes one module that ptxas accepts with every kernel an entry, and `--emit llvm`
/// one module that llc accepts (they used to be one module per kernel, concatenated).
#[cfg(feature = "llvm")]
#[test]
fn emitted_modules_assemble_as_they_are() {
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Two products and a softmax between them: three kernels, some of several entries.
    let source = dir.path().join("two.tc");
    std::fs::write(
        &source,
        "fn two(x: f16[M, 256], w: f16[256, 512], v: f16[512, 128]) -> f16[M, 128] {
    let s = x @ w;
    let e = exp(s - s.max(-1, keepdim));
    (e / e.sum(-1, keepdim)) @ v
}
",
    )
    .unwrap();
    let source = source.to_str().unwrap();
    let ptxas = tcc_codegen::ptx::find_ptxas();
    for target in ["sm_80", "sm_90a"] {
        let ptx = dir.path().join(format!("{target}.ptx"));
        let args =
            ["compile", source, "--dim", "M=100", "--target", target, "--emit", "ptx", "-o", ptx.to_str().unwrap()];
        let out = tcc(cache.path(), &args, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let text_ptx = std::fs::read_to_string(&ptx).unwrap();
        assert_eq!(text_ptx.matches(".version").count(), 1, "{text_ptx}");
        let entries = text_ptx.matches(".entry").count();
        assert!(entries >= 3, "{entries} entries");
        match &ptxas {
            Ok(ptxas) => {
                let arch = target.parse::<tcc::ir::Target>().unwrap().gpu_arch().unwrap();
                let report = tcc_codegen::ptx::assemble(ptxas, &text_ptx, arch).unwrap();
                assert_eq!(report.entries.len(), entries, "{target}");
            }
            Err(e) => eprintln!("ptxas not found ({e}): {target} assembled only by LLVM"),
        }
        let ll = dir.path().join(format!("{target}.ll"));
        let args =
            ["compile", source, "--dim", "M=100", "--target", target, "--emit", "llvm", "-o", ll.to_str().unwrap()];
        assert_eq!(tcc(cache.path(), &args, &[]).status.code(), Some(0));
        llc_accepts(&ll, &["-march=nvptx64", &format!("-mcpu={target}")]);
    }
    let ll = dir.path().join("cpu.ll");
    let args = [
        "compile",
        "examples/mlp.tc",
        "--dim",
        "M=4",
        "--target",
        "cpu:llvm",
        "--emit",
        "llvm",
        "-o",
        ll.to_str().unwrap(),
    ];
    assert_eq!(tcc(cache.path(), &args, &[]).status.code(), Some(0));
    llc_accepts(&ll, &[]);
}

#[cfg(feature = "llvm")]
fn llc_accepts(file: &Path, flags: &[&str]) {
    let llc = ["/usr/lib/llvm-19/bin/llc", "llc-19", "llc"]
        .into_iter()
        .find(|c| std::process::Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()));
    let Some(llc) = llc else {
        eprintln!("llc not found: {} not checked", file.display());
        return;
    };
    let out = std::process::Command::new(llc).args(flags).arg(file).args(["-o", "/dev/null"]).output().unwrap();
    assert!(out.status.success(), "llc rejects {}: {}", file.display(), text(&out.stderr));
}

/// A GPU target compiled on a machine without that GPU (CI): the lockfile still decides, found by
/// each kernel's key without the device, as a lockfile made on another machine is.
#[test]
fn a_lockfile_decides_gpu_schedules_without_the_gpu() {
    use tcc::ir::Target;
    use tcc_autotune::tuning::{LockEntry, Lockfile};
    if tcc::target::local_gpu(tcc::ir::GpuArch::Sm90a).is_ok() {
        eprintln!("an sm_90a GPU is here: its own records would apply; this test is for machines without one");
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let source = std::fs::read_to_string(root().join("examples/mlp_f16.tc")).unwrap();
    let module = tcc::frontend::parse_source("mlp_f16.tc", &source).unwrap();
    let graph = module.function("mlp_f16").unwrap();
    let bindings: tcc::ir::Bindings = [("M".to_string(), 512u64)].into_iter().collect();
    let target = Target::Gpu(tcc::ir::GpuArch::Sm90a);
    let program =
        tcc::pipeline::Pipeline::untuned(target).optimize(graph, &bindings, Default::default()).unwrap().program;
    // Locked on "another machine": a 64x128 ping-pong warpgroup schedule, not the optimizer's.
    let w = tcc::ir::WgmmaSchedule {
        consumers: 2,
        producer: true,
        pingpong: true,
        bn: 128,
        stages: 4,
        swizzle: 8,
        tma: true,
        splits: 1,
    };
    let elsewhere = tcc_autotune::tuning::DeviceKey {
        name: "NVIDIA H100 80GB HBM3".into(),
        arch: "sm_90a".into(),
        compute_capability: Some((9, 0)),
        sm_count: Some(132),
    };
    let mut lock = Lockfile::new();
    for launch in &program.launches {
        assert_ne!(launch.kernel.schedule, w.encode());
        let key = tcc_autotune::tuning::kernel_key(&launch.kernel, &bindings, target, &elsewhere).unwrap();
        lock.insert(LockEntry { key, variant: 0, schedule: w.encode(), schedule_format: 1, time_ns: 1000 });
    }
    let path = dir.path().join("tcc.lock");
    lock.write(&path).unwrap();
    let args = ["compile", "examples/mlp_f16.tc", "--dim", "M=512", "--target", "sm_90a", "--emit", "ir", "-o", "-"];
    let mut with_lock = args.to_vec();
    with_lock.extend_from_slice(&["--lock", path.to_str().unwrap()]);
    let out = tcc(cache.path(), &with_lock, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let header = text(&out.stdout).lines().next().unwrap_or_default().to_string();
    let want = tcc::ir::ScheduleKind::Wgmma(w).to_string();
    assert!(header.contains(&want) && header.ends_with("(locked)"), "{header}");
    // Without it, the optimizer's.
    let out = tcc(cache.path(), &args, &[]);
    let header = text(&out.stdout).lines().next().unwrap_or_default().to_string();
    assert!(!header.contains(&want) && header.ends_with("(default)"), "{header}");
}

/// A malformed `TCC_CACHE_URL` (issue 21, defect 4), or one asking for TLS without verification, is
/// one warning; the local cache keeps deciding (it used to turn the local cache off too).
#[test]
fn a_bad_shared_cache_url_leaves_the_local_cache_working() {
    let cache = tempfile::tempdir().unwrap();
    tune(cache.path(), "cpu:cranelift", &[]);
    let mut args = vec!["run"];
    args.extend_from_slice(&MLP_RUN);
    args.extend_from_slice(&["--target", "cpu:cranelift"]);
    for url in ["http://foo", "rediss://:secret@host:6380/#insecure"] {
        let out = tcc(cache.path(), &args, &[("TCC_CACHE_URL", url)]);
        assert_eq!(out.status.code(), Some(0), "{url}: {}", text(&out.stderr));
        let lines: Vec<Value> = text(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let sources: Vec<(String, String, String)> = kernels(&lines);
        assert!(sources.iter().all(|(_, _, s)| s == "cached"), "{url}: {sources:?}");
        let err = text(&out.stderr);
        assert_eq!(err.matches("shared tuning cache is not used").count(), 1, "{url}: {err}");
        assert!(!err.contains("secret"), "{err}");
    }
}

/// Warnings written to a pipe carry no colour codes (they did: `key` in italics).
#[test]
fn warnings_to_a_pipe_have_no_colour() {
    let cache = tempfile::tempdir().unwrap();
    tune(cache.path(), "cpu:cranelift", &[]);
    let db = rusqlite::Connection::open(cache.path().join("tuning.sqlite3")).unwrap();
    db.execute("UPDATE records SET record = 'not a record'", []).unwrap();
    drop(db);
    let out = tcc(cache.path(), &["cache", "ls"], &[]);
    let err = text(&out.stderr);
    assert!(err.contains("undecodable") && err.contains("key="), "{err}");
    assert!(!err.contains('\u{1b}'), "{err:?}");
}
