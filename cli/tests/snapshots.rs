//! Snapshots of `tcc compile --emit ir` for every example fn on every target: the kernels the
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
            for target in ["cpu:cranelift", "cpu:llvm", "sm_80", "sm_90a"] {
                // Relative to the repository root (the command's working directory), so the
                // snapshots do not name the checkout's path.
                let relative = format!("examples/{stem}.tc");
                let mut args = vec!["compile".to_string(), relative, "--fn".into(), graph.name.clone()];
                for d in &dims {
                    args.extend(["--dim".to_string(), d.clone()]);
                }
                args.extend(["--target", target, "--emit", "ir", "-o", "-"].map(String::from));
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
                let name = format!("{stem}__{}__{}", graph.name, target.replace(':', "_"));
                let text = format!("tcc {}\n\n{}", args.join(" "), String::from_utf8_lossy(&out.stdout));
                insta::assert_snapshot!(name, text);
                snapshots += 1;
            }
        }
    }
    assert!(snapshots >= 32, "{snapshots} snapshots: the examples went missing");
}
