//! What the binary's tests share: the repository root, output as text, and `tcc` run with its own
//! tuning cache and nothing of the caller's environment that would change what it decides.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root (the examples' paths are relative to it).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Process output as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `tcc ARGS` in the repository root with the tuning cache in `cache`, no shared cache, lockfile,
/// worker or shard (a Slurm array task, a Kubernetes Indexed Job) from the caller's environment,
/// then `env`.
pub fn tcc_isolated(cache: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcc"))
        .args(args)
        .current_dir(root())
        .env("TCC_CACHE_DIR", cache)
        .env_remove("TCC_CACHE_URL")
        .env_remove("TCC_CACHE_READONLY")
        .env_remove("TCC_CACHE_PREFIX")
        .env_remove("TCC_CACHE_CA")
        .env_remove("TCC_TUNE_WORKER")
        .env_remove("TCC_LOCKFILE")
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("JOB_COMPLETION_INDEX")
        .envs(env.iter().copied())
        .output()
        .expect("tcc runs")
}
