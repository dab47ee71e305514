//! The fault catalogue of RELIABILITY.md at the command line: no GPU or no driver, an output path
//! that cannot be written or a full disk (a clear error, exit 2, nothing half-written and nothing
//! overwritten), a tuning cache that cannot be opened or is corrupt (run goes on with a warning;
//! the corrupt file is left as it was), and a full disk while tuning (the cache keeps what it had).
//!
//! "Full disk" is a file-size limit (`ulimit -f 0`, SIGXFSZ ignored): every write to a regular file
//! then fails with EFBIG, as writes to a full disk fail with ENOSPC; tests run as root, where
//! read-only permission bits do not stop writes, use paths no one can create (under a regular file,
//! under /proc) for "cannot be written".

use std::path::Path;
use std::process::{Command, Output};

use crate::common::{root, tcc_isolated, text};

/// `tcc args` from the repository root, with a private tuning cache directory `cache`.
fn tcc(args: &[&str], cache: &Path) -> Output {
    tcc_isolated(cache, args, &[])
}

/// `tcc args` with a file-size limit of 0: every write to a regular file fails (EFBIG).
fn tcc_disk_full(args: &[&str], cache: &Path) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg("ulimit -f 0 && trap '' XFSZ && exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_tcc"))
        .args(args)
        .current_dir(root())
        .env("TCC_CACHE_DIR", cache)
        .env_remove("TCC_CACHE_URL")
        .output()
        .unwrap()
}

const SOFTMAX: [&str; 5] = ["examples/softmax.tc", "--dim", "N=8", "--dim", "D=33"];

fn compile_to(out: &str) -> Vec<&str> {
    let mut args = vec!["compile"];
    args.extend(SOFTMAX);
    args.extend(["--target", "cpu:cranelift", "--emit", "ir", "-o", out]);
    args
}

fn dir_entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[test]
fn the_cuda_target_without_a_gpu_is_a_clear_error() {
    let cache = tempfile::tempdir().unwrap();
    let mut args = vec!["run"];
    args.extend(SOFTMAX);
    args.extend(["--target", "cuda"]);
    let out = tcc(&args, cache.path());
    let stderr = text(&out.stderr);
    if !cfg!(feature = "llvm") {
        // Not built in: a bad argument (exit 1) that says what is missing.
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("`cuda`") && stderr.contains("`llvm` feature"), "{stderr}");
    } else if stderr.contains("no CUDA driver") {
        // Built in, no driver: the environment failed (exit 2), with the reason.
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("`cuda`") && stderr.contains("no CUDA driver found (libcuda.so)"), "{stderr}");
    } else {
        // A machine with a GPU: the program runs.
        assert_eq!(out.status.code(), Some(0), "{stderr}");
    }
}

#[test]
fn an_output_path_that_cannot_be_created_is_exit_2_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let under_file = file.join("p.ir");
    for target in [under_file.to_str().unwrap(), "/proc/tcc-no-such-dir/p.ir", "/nonexistent-tcc-dir/p.ir"] {
        let out = tcc(&compile_to(target), dir.path());
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{target}: {stderr}");
        assert!(stderr.contains(&format!("cannot write `{target}`")), "{stderr}");
        assert!(!Path::new(target).exists());
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
}

#[test]
fn a_full_disk_leaves_no_half_written_file_and_keeps_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let target = dir.path().join("p.ir");
    let target_str = target.to_str().unwrap();
    // A new file: nothing is left behind, not even the temporary file.
    let out = tcc_disk_full(&compile_to(target_str), cache.path());
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("cannot write `{target_str}`")), "{stderr}");
    assert!(dir_entries(dir.path()).is_empty(), "left behind: {:?}", dir_entries(dir.path()));
    // An existing file: still there, unchanged.
    std::fs::write(&target, "the previous output\n").unwrap();
    let out = tcc_disk_full(&compile_to(target_str), cache.path());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "the previous output\n");
    assert_eq!(dir_entries(dir.path()), ["p.ir"]);
    // With room on the disk the same command writes the whole file.
    let out = tcc(&compile_to(target_str), cache.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(std::fs::read_to_string(&target).unwrap().contains("// kernel k0_"));
}

/// `tcc tune` and `tcc cache ls` on a corrupt database: `tune.rs`
/// (`a_corrupt_cache_database_is_reported_and_skipped`). Here: `tcc run`, a directory that cannot
/// be created, and the damaged file left untouched.
#[test]
fn a_tuning_cache_that_cannot_be_opened_costs_only_speed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let corrupt_dir = dir.path().join("corrupt");
    std::fs::create_dir(&corrupt_dir).unwrap();
    let garbage: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    std::fs::write(corrupt_dir.join("tuning.sqlite3"), &garbage).unwrap();
    let mut run = vec!["run"];
    run.extend(SOFTMAX);
    run.extend(["--target", "cpu:cranelift"]);
    for cache in [file.join("cache"), corrupt_dir.clone()] {
        let out = tcc(&run, &cache);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{}: {stderr}", cache.display());
        assert!(stderr.contains("warning") && stderr.contains("tuning cache"), "{stderr}");
        assert!(!text(&out.stdout).is_empty());
    }
    // Nothing lost: the damaged file is left as it was, for whoever wants to look at it.
    assert_eq!(std::fs::read(corrupt_dir.join("tuning.sqlite3")).unwrap(), garbage);
}

#[test]
fn a_full_disk_while_tuning_is_a_clear_error_and_the_cache_keeps_its_records() {
    let cache = tempfile::tempdir().unwrap();
    let tune = |dims: [&'static str; 4]| {
        let mut args = vec!["tune", "examples/softmax.tc", "--target", "cpu:cranelift", "--budget", "2trials"];
        args.extend(dims);
        args
    };
    let out = tcc(&tune(["--dim", "N=4", "--dim", "D=8"]), cache.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let before = tcc(&["cache", "ls"], cache.path());
    assert_eq!(before.status.code(), Some(0));
    assert_eq!(text(&before.stdout).lines().count(), 1, "{}", text(&before.stdout));

    let out = tcc_disk_full(&tune(["--dim", "N=8", "--dim", "D=9"]), cache.path());
    let stderr = text(&out.stderr);
    // A result that cannot be recorded is lost: exit 2 saying so (it used to exit 0).
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("tuning cache") || stderr.contains("cannot write"), "{stderr}");

    let after = tcc(&["cache", "ls"], cache.path());
    assert_eq!(after.status.code(), Some(0), "{}", text(&after.stderr));
    assert!(text(&after.stdout).contains(text(&before.stdout).trim()), "lost: {}", text(&after.stdout));
}
