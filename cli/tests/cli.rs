//! The `tcc` binary: exit codes and outputs of contract §3-§4.

use std::process::{Command, Output};

use crate::common::{root, text};

fn tcc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcc")).args(args).current_dir(root()).output().expect("tcc runs")
}

const EXAMPLE_RUNS: &[(&str, &[&str])] = &[
    ("examples/mlp.tc", &["--dim", "M=3"]),
    ("examples/softmax.tc", &["--dim", "N=5", "--dim", "D=7"]),
    ("examples/layernorm.tc", &["--dim", "N=2", "--dim", "D=13"]),
    ("examples/rmsnorm.tc", &["--dim", "N=3", "--dim", "D=5"]),
    ("examples/attention_scores.tc", &["--fn", "attention_scores", "--dim", "S=4", "--dim", "T=6"]),
    ("examples/residual.tc", &["--fn", "residual", "--dim", "N=2"]),
];

#[test]
fn check_accepts_every_example() {
    for entry in std::fs::read_dir(root().join("examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "tc") {
            let out = tcc(&["check", path.to_str().unwrap()]);
            assert_eq!(out.status.code(), Some(0), "{}: {}", path.display(), text(&out.stderr));
            assert!(text(&out.stdout).starts_with("ok: fn "), "{}", text(&out.stdout));
        }
    }
}

#[test]
fn run_executes_every_example_on_each_target() {
    for target in ["interp", "cpu", "cpu:cranelift"] {
        for (file, extra) in EXAMPLE_RUNS {
            let mut args = vec!["run", file, "--seed", "7", "--target", target, "--check"];
            args.extend_from_slice(extra);
            let out = tcc(&args);
            assert_eq!(out.status.code(), Some(0), "{file} on {target}: {}", text(&out.stderr));
            let stdout = text(&out.stdout);
            assert!(stdout.contains("output 0: f32["), "{file}: {stdout}");
            assert!(stdout.contains("nan=0 inf=0"), "{file}: {stdout}");
            assert!(stdout.contains("vs the interpreter") && stdout.contains(": ok"), "{file}: {stdout}");
            assert!(!stdout.contains("MISMATCH"), "{file}: {stdout}");
        }
    }
}

#[test]
fn the_default_target_is_the_cpu_jit() {
    let out = tcc(&["run", "examples/softmax.tc", "--dim", "N=3", "--dim", "D=5"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let tier = if cfg!(feature = "llvm") { "on cpu:llvm" } else { "on cpu:cranelift" };
    assert!(text(&out.stdout).contains(tier), "{}", text(&out.stdout));
}

#[test]
fn run_is_deterministic_for_a_seed() {
    let a = tcc(&["run", "examples/softmax.tc", "--dim", "N=3", "--dim", "D=4", "--seed", "3"]);
    let b = tcc(&["run", "examples/softmax.tc", "--dim", "N=3", "--dim", "D=4", "--seed", "3"]);
    let strip = |o: &Output| text(&o.stdout).lines().skip(1).collect::<Vec<_>>().join("\n");
    assert_eq!(strip(&a), strip(&b));
}

#[test]
fn ir_prints_text_that_parses_back() {
    let out = tcc(&["ir", "examples/layernorm.tc"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    let module = tcc_ir::text::parse_module(&printed).expect("printed IR parses");
    assert_eq!(module.functions.len(), 1);
    assert_eq!(tcc_ir::text::print_module(&module), printed);
}

#[test]
fn unbound_dims_exit_1_naming_every_variable() {
    let out = tcc(&["run", "examples/attention_scores.tc", "--fn", "attention_scores"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("`S`") && stderr.contains("`T`"), "{stderr}");
}

#[test]
fn unused_dims_are_ignored() {
    let out = tcc(&["run", "examples/rmsnorm.tc", "--dim", "N=2", "--dim", "D=3", "--dim", "Q=9"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn several_fns_need_a_choice() {
    let out = tcc(&["run", "examples/residual.tc", "--dim", "N=2"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("--fn"), "{}", text(&out.stderr));
    let out = tcc(&["run", "examples/residual.tc", "--fn", "nope", "--dim", "N=2"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("`residual`"), "{}", text(&out.stderr));
}

#[test]
fn bad_arguments_exit_1_and_help_exits_0() {
    assert_eq!(tcc(&["run", "examples/mlp.tc", "--frobnicate"]).status.code(), Some(1));
    assert_eq!(tcc(&["run", "examples/mlp.tc", "--dim", "M"]).status.code(), Some(1));
    assert_eq!(tcc(&["run", "examples/mlp.tc", "--dim", "M=2", "--target", "tpu"]).status.code(), Some(1));
    assert_eq!(tcc(&[]).status.code(), Some(1));
    for sub in [&["--help"][..], &["check", "--help"], &["ir", "--help"], &["run", "--help"]] {
        let out = tcc(sub);
        assert_eq!(out.status.code(), Some(0), "{sub:?}");
        assert!(text(&out.stdout).contains("Usage"), "{sub:?}");
    }
}

#[test]
fn missing_file_is_an_error_not_a_crash() {
    let out = tcc(&["check", "examples/does_not_exist.tc"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("does_not_exist.tc"));
}

#[test]
fn memory_limit_refuses_large_inputs() {
    let out = tcc(&["run", "examples/mlp.tc", "--dim", "M=4", "--max-memory", "1000"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("--max-memory"), "{}", text(&out.stderr));
}

#[test]
fn every_bad_program_exits_1_with_a_diagnostic() {
    let dir = root().join("tests/bad");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "tc") {
            continue;
        }
        count += 1;
        let out = tcc(&["check", path.to_str().unwrap()]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{}: {stderr}", path.display());
        assert!(stderr.contains("error"), "{}: {stderr}", path.display());
        assert!(!stderr.contains("panicked") && !stderr.contains("internal error"), "{stderr}");
    }
    assert!(count >= 25, "only {count} bad programs");
}

#[test]
fn a_generated_huge_expression_is_handled() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.tc");
    let body = vec!["x"; 100_001].join(" + ");
    std::fs::write(&path, format!("fn f(x: f32[4]) -> f32[4] {{ {body} }}")).unwrap();
    let out = tcc(&["check", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("100000"), "{}", text(&out.stderr));
}

#[test]
fn explain_prints_kernels_and_writes_dot() {
    let dir = tempfile::tempdir().unwrap();
    let dot = dir.path().join("softmax.dot");
    let out = tcc(&["explain", "examples/softmax.tc", "--dim", "N=64", "--dot", dot.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    // `cpu` is resolved once, to the tier `run` uses: the line names it.
    let tier = if cfg!(feature = "llvm") { "cpu:llvm" } else { "cpu:cranelift" };
    assert!(stdout.contains(&format!("fn softmax on {tier}: 1 kernels")), "{stdout}");
    assert!(stdout.contains("[row-reduction]") && stdout.contains("formed by:"), "{stdout}");
    let dot_text = std::fs::read_to_string(&dot).unwrap();
    assert!(dot_text.starts_with("digraph \"softmax\""), "{dot_text}");
    let out = tcc(&["explain", "examples/mlp.tc", "--target", "sm_90a"]);
    assert!(text(&out.stdout).contains("[matmul]"), "{}", text(&out.stdout));
    assert_eq!(tcc(&["explain", "examples/mlp.tc", "--target", "tpu"]).status.code(), Some(1));
}

#[test]
fn explain_refuses_to_overwrite_its_input() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("s.tc");
    std::fs::copy(root().join("examples/softmax.tc"), &src).unwrap();
    let before = std::fs::read(&src).unwrap();
    let out = tcc(&["explain", src.to_str().unwrap(), "--dot", src.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read(&src).unwrap(), before);
}

#[test]
fn compile_emits_each_stage() {
    let dir = tempfile::tempdir().unwrap();
    let out = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let base = ["compile", "examples/softmax.tc", "--dim", "N=8", "--dim", "D=33"];
    let cases: &[(&[&str], &str, &str)] = &[
        (&["--target", "cpu", "--emit", "ir"], "p.ir", "// kernel k0_"),
        (&["--target", "cpu:cranelift", "--emit", "clif"], "p.clif", "function"),
        (&["--target", "sm_90a", "--emit", "llvm"], "p.ll", "nvptx64-nvidia-cuda"),
        (&["--target", "sm_80", "--emit", "ir"], "p80.ir", "[row-reduction]"),
    ];
    for (extra, file, needle) in cases {
        let mut args: Vec<&str> = base.to_vec();
        args.extend_from_slice(extra);
        let path = out(file);
        args.extend_from_slice(&["-o", &path]);
        let result = tcc(&args);
        assert_eq!(result.status.code(), Some(0), "{extra:?}: {}", text(&result.stderr));
        let written = std::fs::read_to_string(&path).unwrap();
        assert!(written.contains(needle), "{extra:?}: {written}");
    }
    let bad = tcc(&[
        "compile",
        "examples/softmax.tc",
        "--dim",
        "N=8",
        "--dim",
        "D=3",
        "--target",
        "cpu",
        "--emit",
        "ptx",
        "-o",
        "-",
    ]);
    assert_eq!(bad.status.code(), Some(1));
    let unbound = tcc(&["compile", "examples/softmax.tc", "--target", "cpu", "--emit", "ir", "-o", "-"]);
    assert_eq!(unbound.status.code(), Some(1));
    assert!(text(&unbound.stderr).contains("`D`") && text(&unbound.stderr).contains("`N`"));
}

#[test]
fn bench_writes_rows_and_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let workloads = dir.path().join("w.json");
    std::fs::write(
        &workloads,
        r#"{"cpu": [
            {"name": "tiny_gemm", "kind": "gemm", "dtype": "f32", "m": 17, "n": 31, "k": 13, "epilogue": ["bias", "relu"]},
            {"name": "tiny_axpb", "kind": "elementwise", "dtype": "f32", "n": 1001},
            {"name": "tiny_softmax", "kind": "softmax", "dtype": "f32", "rows": 7, "cols": 129}
        ], "gpu": []}"#,
    )
    .unwrap();
    let peers = dir.path().join("peers.jsonl");
    std::fs::write(&peers, "{\"workload\": \"tiny_softmax\", \"impl\": \"numpy\", \"median_ms\": 1.0, \"gflops\": 1.0, \"gbps\": 1.0, \"max_rel_err\": 0.0}\n").unwrap();
    let rows = dir.path().join("rows.jsonl");
    let report = dir.path().join("report");
    let out = tcc(&[
        "bench",
        "--workloads",
        workloads.to_str().unwrap(),
        "--suite",
        "cpu",
        "--out",
        rows.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--peers",
        peers.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let written = std::fs::read_to_string(&rows).unwrap();
    assert_eq!(written.lines().count(), 3, "{written}");
    for line in written.lines() {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        // `cpu` is the best tier built in: the LLVM tier with feature `llvm`.
        let tier = if cfg!(feature = "llvm") { "tcc:cpu:llvm" } else { "tcc:cpu:cranelift" };
        assert_eq!(row["impl"], tier);
        assert!(row["median_ms"].as_f64().unwrap() > 0.0);
        assert!(row["max_rel_err"].as_f64().unwrap() < 1e-5, "{line}");
    }
    for f in ["report.md", "roofline.svg", "speedup.svg"] {
        assert!(report.join(f).exists(), "{f}");
    }
    let gpu = tcc(&["bench", "--workloads", workloads.to_str().unwrap(), "--suite", "gpu", "--out", "-"]);
    assert_eq!(gpu.status.code(), Some(1));
}

#[test]
fn bench_times_attention_workloads_and_checks_them_against_the_interpreter() {
    let dir = tempfile::tempdir().unwrap();
    let workloads = dir.path().join("w.json");
    // Every mask and score transform of the suite's attention kind at small sizes: grouped heads,
    // fewer queries than keys (the last positions), one query (decode), each dtype.
    let attention = |name: &str, dtype: &str, sizes: [u32; 6], mask: &str, score: &str| {
        let [b, h, kv_heads, q, kv, d] = sizes;
        format!(
            r#"{{"name": "{name}", "kind": "attention", "dtype": "{dtype}", "batch": {b}, "heads": {h},
                "kv_heads": {kv_heads}, "q_len": {q}, "kv_len": {kv}, "head_dim": {d}, "mask": "{mask}", "score": "{score}"}}"#
        )
    };
    let cases = [
        attention("tiny_attn", "f32", [2, 2, 2, 9, 9, 8], "none", "none"),
        attention("tiny_attn_causal_f16", "f16", [1, 2, 2, 17, 17, 16], "causal", "none"),
        attention("tiny_attn_gqa_causal", "f32", [1, 4, 2, 5, 11, 8], "causal", "none"),
        attention("tiny_attn_window_bf16", "bf16", [1, 2, 1, 12, 12, 8], "window:4", "none"),
        attention("tiny_attn_alibi_causal", "f32", [1, 4, 4, 6, 6, 8], "causal", "alibi"),
        attention("tiny_attn_softcap_bf16", "bf16", [1, 2, 2, 7, 7, 8], "none", "softcap:30"),
        attention("tiny_attn_decode", "f32", [2, 4, 1, 1, 13, 8], "causal", "none"),
    ];
    std::fs::write(&workloads, format!(r#"{{"cpu": [{}], "gpu": []}}"#, cases.join(",\n"))).unwrap();
    let rows = dir.path().join("rows.jsonl");
    let out =
        tcc(&["bench", "--workloads", workloads.to_str().unwrap(), "--suite", "cpu", "--out", rows.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let written = std::fs::read_to_string(&rows).unwrap();
    assert_eq!(written.lines().count(), cases.len(), "{written}");
    for line in written.lines() {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        let name = row["workload"].as_str().unwrap();
        assert!(row["impl"].as_str().unwrap().starts_with("tcc:cpu:"), "{line}");
        for field in ["median_ms", "gflops", "gbps", "first_call_s"] {
            assert!(row[field].as_f64().unwrap() > 0.0, "{field}: {line}");
        }
        // The f64 interpreter ran the same program on the last queries of the first sequence (every
        // head): f32 agrees closely, f16/bf16 within rounding.
        let tolerance = if name.contains("f16") { 2e-2 } else { 1e-5 };
        assert!(row["max_rel_err"].as_f64().unwrap() < tolerance, "{line}");
    }
}

#[test]
fn a_directory_and_sizes_over_the_limit_are_invalid_input() {
    let out = tcc(&["check", "examples"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("is a directory"), "{}", text(&out.stderr));
    for command in [
        vec!["compile", "examples/mlp.tc", "--target", "cpu:cranelift", "--emit", "asm", "-o", "-"],
        vec!["run", "examples/mlp.tc"],
        vec!["bench", "examples/mlp.tc"],
    ] {
        let mut args = command.clone();
        args.extend_from_slice(&["--dim", "M=1099511627775"]);
        let out = tcc(&args);
        assert_eq!(out.status.code(), Some(1), "{command:?}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains("over the limit of 2^40"), "{command:?}: {}", text(&out.stderr));
    }
}

#[test]
fn empty_outputs_and_empty_budgets_say_so() {
    let out = tcc(&["run", "examples/mlp.tc", "--target", "cpu:cranelift", "--dim", "M=0"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("f32[0, 64] min=- max=- mean=- std=- nan=0 inf=0 values=[]"), "{stdout}");
    assert!(!stdout.contains("inf max") && !stdout.contains("NaN"), "{stdout}");
    let out = tcc(&["tune", "examples/mlp.tc", "--dim", "M=2", "--budget", "0trials"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("at least 1"), "{}", text(&out.stderr));
}

#[test]
fn max_memory_counts_every_tensor_of_the_run() {
    // The scores are f32[S, T]: 40 GB at 100000 x 100000 (it used to abort with a failed
    // allocation), 3.6 GB at 30000 x 30000 against a 1 GB limit (after 33 s of work).
    let base = ["run", "examples/attention_scores.tc", "--fn", "attention_scores", "--target", "cpu:cranelift"];
    for (dims, limit) in
        [(["--dim", "S=100000", "--dim", "T=100000"], None), (["--dim", "S=30000", "--dim", "T=30000"], Some("1G"))]
    {
        let mut args = base.to_vec();
        args.extend_from_slice(&dims);
        if let Some(limit) = limit {
            args.extend_from_slice(&["--max-memory", limit]);
        }
        let start = std::time::Instant::now();
        let out = tcc(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("the largest tensor is") && err.contains("--max-memory"), "{err}");
        assert!(start.elapsed().as_secs() < 30, "refused only after {:?}", start.elapsed());
    }
}

#[test]
fn a_dimension_only_an_iota_has_runs_and_checks_on_the_interpreter_and_the_cpu() {
    // `N` is bound by --dim only: no parameter has an axis of length N, only the iota.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pos.tc");
    std::fs::write(&file, "fn pos(x: f32[M]) -> f32[M, N] {\n    x.reshape([M, 1]) + iota(N).cast::<f32>()\n}\n")
        .unwrap();
    for target in ["interp", "cpu"] {
        let out = tcc(&["run", file.to_str().unwrap(), "--dim", "M=3", "--dim", "N=5", "--target", target, "--check"]);
        assert_eq!(out.status.code(), Some(0), "{target}: {}", text(&out.stderr));
        assert!(text(&out.stdout).contains("f32[3, 5]"), "{target}: {}", text(&out.stdout));
        assert!(!text(&out.stdout).contains("MISMATCH"), "{target}: {}", text(&out.stdout));
    }
}
