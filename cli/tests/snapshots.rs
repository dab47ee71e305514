//! Snapshots of `tcc compile --emit ir` for every example fn on every target (and, with the `llvm`
//! feature, `--emit ptx` on both GPU architectures): the kernels the
//! optimizer forms, each with its class, typed schedule and source, and its fused graph. A change
//! that moves code without meaning to change what is compiled leaves them as they are; one that
//! changes fusion or schedules shows its effect here (`cargo insta review`, or
//! `INSTA_UPDATE=always` to accept).

use std::path::PathBuf;
use std::process::Command;

use crate::common::root;

/// Sizes for the examples' shape variables: ragged where the name suggests rows.
fn size_of(var: &str) -> u64 {
    match var {
        "M" => 100,
        "N" => 37,
        "S" => 64,
        "T" => 80,
        _ => 96,
    }
}

#[test]
fn emitted_ir_of_every_example_on_every_target() {
    let snapshots = snapshot_every_example(&["cpu:cranelift", "cpu:llvm", "sm_80", "sm_90a"], "ir", "");
    assert!(snapshots >= 32, "{snapshots} snapshots: the examples went missing");
}

/// Snapshots of `tcc compile --emit ptx` for every example fn on both GPU architectures: the
/// kernels' code as LLVM 19's NVPTX backend writes it (feature `llvm`; CI runs it in its LLVM
/// section). The CPU tiers' code (`--emit clif`, `--emit llvm` for the CPU) depends on the host's
/// features, so it has no snapshot; `codegen/examples/dump_kernels` compares it byte for byte on
/// one machine.
#[cfg(feature = "llvm")]
#[test]
fn emitted_ptx_of_every_example_on_both_gpu_architectures() {
    let snapshots = snapshot_every_example(&["sm_80", "sm_90a"], "ptx", "__ptx");
    assert!(snapshots >= 16, "{snapshots} snapshots: the examples went missing");
}

/// Compiles every fn of every example for each of `targets`, emitting `emit`, and checks the
/// output against its snapshot (named `<file>__<fn>__<target><suffix>`); returns how many.
fn snapshot_every_example(targets: &[&str], emit: &str, suffix: &str) -> usize {
    let cache = tempfile::tempdir().unwrap();
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tc"))
        .collect();
    files.sort();
    let mut snapshots = 0;
    for file in files {
        let source = std::fs::read_to_string(&file).unwrap();
        let module = tcc::frontend::parse_source(&file.display().to_string(), &source).unwrap();
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        for graph in &module.functions {
            let dims: Vec<String> = graph.shape_vars().iter().map(|v| format!("{v}={}", size_of(v))).collect();
            for &target in targets {
                // Relative to the repository root (the command's working directory), so the
                // snapshots do not name the checkout's path.
                let relative = format!("examples/{stem}.tc");
                let mut args = vec!["compile".to_string(), relative, "--fn".into(), graph.name.clone()];
                for d in &dims {
                    args.extend(["--dim".to_string(), d.clone()]);
                }
                args.extend(["--target", target, "--emit", emit, "-o", "-"].map(String::from));
                let out = Command::new(env!("CARGO_BIN_EXE_tcc"))
                    .args(&args)
                    .current_dir(root())
                    .env("TCC_CACHE_DIR", cache.path())
                    .env_remove("TCC_CACHE_URL")
                    .env_remove("TCC_LOCKFILE")
                    .output()
                    .unwrap();
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
                let name = format!("{stem}__{}__{}{suffix}", graph.name, target.replace(':', "_"));
                let text = format!("tcc {}\n\n{}", args.join(" "), String::from_utf8_lossy(&out.stdout));
                insta::assert_snapshot!(name, text);
                snapshots += 1;
            }
        }
    }
    snapshots
}
