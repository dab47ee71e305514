//! Shards of a tuning plan: which of N parts of a plan's kernels one process tunes (`--shard I/N`,
//! or a Slurm array task, or a Kubernetes Indexed Job's pod), and the deterministic, balanced split
//! of the kernels into those parts.

use std::fmt;

/// Slurm: this array task's id.
pub const SLURM_TASK_ID_ENV: &str = "SLURM_ARRAY_TASK_ID";
/// Slurm: the array's smallest task id.
pub const SLURM_TASK_MIN_ENV: &str = "SLURM_ARRAY_TASK_MIN";
/// Slurm: the array's step between task ids (1 when unset).
pub const SLURM_TASK_STEP_ENV: &str = "SLURM_ARRAY_TASK_STEP";
/// Slurm: the number of tasks of the array.
pub const SLURM_TASK_COUNT_ENV: &str = "SLURM_ARRAY_TASK_COUNT";
/// Kubernetes (Indexed Job): this pod's completion index.
pub const K8S_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";
/// The number of shards of a Kubernetes Indexed Job (its `completions`), set in the manifest.
pub const SHARDS_ENV: &str = "TCC_SHARDS";

/// Most shards a plan may be split into.
pub const MAX_SHARDS: usize = 100_000;

/// The `index`-th of `count` parts (0 ≤ index < count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// Which part, from 0.
    pub index: usize,
    /// How many parts.
    pub count: usize,
}

/// Where a process's shard came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardSource {
    /// `--shard I/N`.
    Flag,
    /// A Slurm array task (`SLURM_ARRAY_TASK_ID`, `_MIN`, `_STEP`, `_COUNT`).
    Slurm,
    /// A Kubernetes Indexed Job (`JOB_COMPLETION_INDEX`, `TCC_SHARDS`).
    Kubernetes,
    /// None of those: the whole plan.
    Whole,
}

impl ShardSource {
    /// A short name for output (`flag`, `slurm`, `kubernetes`, `whole`).
    pub fn name(self) -> &'static str {
        match self {
            ShardSource::Flag => "flag",
            ShardSource::Slurm => "slurm",
            ShardSource::Kubernetes => "kubernetes",
            ShardSource::Whole => "whole",
        }
    }
}

/// A shard that could not be made out (always the user's input or environment: exit 1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    /// `--shard` is not `I/N` with 0 ≤ I < N.
    #[error("--shard `{0}` is not I/N with 0 <= I < N (e.g. 0/4)")]
    BadFlag(String),
    /// An environment variable is not a number, or is missing beside the others.
    #[error("{name}={value:?}: {why}")]
    BadEnv {
        /// The variable.
        name: &'static str,
        /// Its value (empty when unset).
        value: String,
        /// What is wrong.
        why: String,
    },
    /// The index the environment gives is not below the count.
    #[error("shard {index} of {count} (from {from}) does not exist: the index must be below the count")]
    OutOfRange {
        /// The index.
        index: usize,
        /// The count.
        count: usize,
        /// The variables it came from.
        from: &'static str,
    },
}

impl Shard {
    /// The whole plan: part 0 of 1.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Parses `I/N` (0 ≤ I < N ≤ [`MAX_SHARDS`]).
    pub fn parse(text: &str) -> Result<Shard, ShardError> {
        let bad = || ShardError::BadFlag(text.to_string());
        let (i, n) = text.trim().split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || count > MAX_SHARDS || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// The shard the environment gives (`var` reads a variable): a Slurm array task
    /// (index `(SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP`, count
    /// `SLURM_ARRAY_TASK_COUNT`), else a Kubernetes Indexed Job's pod (index
    /// `JOB_COMPLETION_INDEX`, count `TCC_SHARDS`, which must be set beside it), else the whole
    /// plan.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<(Shard, ShardSource), ShardError> {
        let get = |name: &'static str| var(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let number = |name: &'static str| -> Result<usize, ShardError> {
            let value = get(name).unwrap_or_default();
            value.parse::<usize>().map_err(|_| ShardError::BadEnv {
                name,
                value: value.clone(),
                why: if value.is_empty() { "unset".into() } else { "not a non-negative integer".into() },
            })
        };
        if get(SLURM_TASK_ID_ENV).is_some() {
            let id = number(SLURM_TASK_ID_ENV)?;
            let min = number(SLURM_TASK_MIN_ENV)?;
            let step = if get(SLURM_TASK_STEP_ENV).is_some() { number(SLURM_TASK_STEP_ENV)?.max(1) } else { 1 };
            let count = number(SLURM_TASK_COUNT_ENV)?;
            let offset = id.checked_sub(min).ok_or_else(|| ShardError::BadEnv {
                name: SLURM_TASK_ID_ENV,
                value: id.to_string(),
                why: format!("below {SLURM_TASK_MIN_ENV}={min}"),
            })?;
            return checked(offset / step, count, "SLURM_ARRAY_TASK_*").map(|s| (s, ShardSource::Slurm));
        }
        if get(K8S_INDEX_ENV).is_some() {
            let index = number(K8S_INDEX_ENV)?;
            let count = number(SHARDS_ENV)?;
            return checked(index, count, "JOB_COMPLETION_INDEX and TCC_SHARDS").map(|s| (s, ShardSource::Kubernetes));
        }
        Ok((Shard::WHOLE, ShardSource::Whole))
    }

    /// The positions (into `estimates`) of the items this shard gets, in their original order.
    /// See [`assign`].
    pub fn pick(&self, estimates: &[f64]) -> Vec<usize> {
        assign(estimates, self.count)
            .into_iter()
            .enumerate()
            .filter(|&(_, s)| s == self.index)
            .map(|(i, _)| i)
            .collect()
    }
}

fn checked(index: usize, count: usize, from: &'static str) -> Result<Shard, ShardError> {
    if count == 0 || count > MAX_SHARDS || index >= count {
        return Err(ShardError::OutOfRange { index, count, from });
    }
    Ok(Shard { index, count })
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Splits items (in a fixed order every shard agrees on) into `count` parts balanced by their
/// estimated cost: longest first (ties: the earlier item), each into the least-loaded part (ties:
/// the lowest part). Returns each item's part. A negative or NaN estimate counts as 0. The same
/// estimates give the same split in every process.
pub fn assign(estimates: &[f64], count: usize) -> Vec<usize> {
    let count = count.max(1);
    let cost = |i: usize| estimates.get(i).copied().filter(|e| e.is_finite() && *e > 0.0).unwrap_or(0.0);
    let mut order: Vec<usize> = (0..estimates.len()).collect();
    order.sort_by(|&a, &b| cost(b).total_cmp(&cost(a)).then(a.cmp(&b)));
    let mut load = vec![0.0f64; count];
    let mut part = vec![0usize; estimates.len()];
    for i in order {
        let lightest = (0..count).min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b))).unwrap_or(0);
        load[lightest] += cost(i);
        part[i] = lightest;
    }
    part
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |name| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn the_flag_is_i_of_n() {
        assert_eq!(Shard::parse("0/1"), Ok(Shard { index: 0, count: 1 }));
        assert_eq!(Shard::parse(" 2/3 "), Ok(Shard { index: 2, count: 3 }));
        for bad in ["3/3", "0/0", "1", "-1/2", "a/b", "1/2/3", "", "/2", "0/100001"] {
            assert_eq!(Shard::parse(bad), Err(ShardError::BadFlag(bad.to_string())), "{bad}");
        }
        assert_eq!(Shard { index: 1, count: 4 }.to_string(), "1/4");
    }

    #[test]
    fn slurm_then_kubernetes_then_the_whole_plan() {
        let slurm = env(&[
            ("SLURM_ARRAY_TASK_ID", "7"),
            ("SLURM_ARRAY_TASK_MIN", "5"),
            ("SLURM_ARRAY_TASK_COUNT", "3"),
            ("JOB_COMPLETION_INDEX", "0"),
            ("TCC_SHARDS", "9"),
        ]);
        assert_eq!(Shard::from_env(slurm), Ok((Shard { index: 2, count: 3 }, ShardSource::Slurm)));
        let stepped = env(&[
            ("SLURM_ARRAY_TASK_ID", "14"),
            ("SLURM_ARRAY_TASK_MIN", "10"),
            ("SLURM_ARRAY_TASK_STEP", "2"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
        ]);
        assert_eq!(Shard::from_env(stepped), Ok((Shard { index: 2, count: 4 }, ShardSource::Slurm)));
        let k8s = env(&[("JOB_COMPLETION_INDEX", "1"), ("TCC_SHARDS", "2")]);
        assert_eq!(Shard::from_env(k8s), Ok((Shard { index: 1, count: 2 }, ShardSource::Kubernetes)));
        assert_eq!(Shard::from_env(env(&[("TCC_SHARDS", "4")])), Ok((Shard::WHOLE, ShardSource::Whole)));
        assert_eq!(Shard::from_env(env(&[])), Ok((Shard::WHOLE, ShardSource::Whole)));
    }

    #[test]
    fn a_bad_environment_is_named() {
        let e = Shard::from_env(env(&[("JOB_COMPLETION_INDEX", "1")])).unwrap_err();
        assert!(e.to_string().contains("TCC_SHARDS") && e.to_string().contains("unset"), "{e}");
        let e = Shard::from_env(env(&[("JOB_COMPLETION_INDEX", "2"), ("TCC_SHARDS", "2")])).unwrap_err();
        assert_eq!(e, ShardError::OutOfRange { index: 2, count: 2, from: "JOB_COMPLETION_INDEX and TCC_SHARDS" });
        let e = Shard::from_env(env(&[
            ("SLURM_ARRAY_TASK_ID", "x"),
            ("SLURM_ARRAY_TASK_MIN", "0"),
            ("SLURM_ARRAY_TASK_COUNT", "3"),
        ]))
        .unwrap_err();
        assert!(e.to_string().contains("SLURM_ARRAY_TASK_ID") && e.to_string().contains("not a"), "{e}");
        let e = Shard::from_env(env(&[
            ("SLURM_ARRAY_TASK_ID", "1"),
            ("SLURM_ARRAY_TASK_MIN", "2"),
            ("SLURM_ARRAY_TASK_COUNT", "3"),
        ]))
        .unwrap_err();
        assert!(e.to_string().contains("below SLURM_ARRAY_TASK_MIN=2"), "{e}");
        let e = Shard::from_env(env(&[("SLURM_ARRAY_TASK_ID", "1"), ("SLURM_ARRAY_TASK_MIN", "0")])).unwrap_err();
        assert!(e.to_string().contains("SLURM_ARRAY_TASK_COUNT=\"\": unset"), "{e}");
    }

    #[test]
    fn the_split_is_longest_first_into_the_least_loaded_part() {
        // 10 → part 0; 7 → 1; 5 → 2; 4 → 2 (5 is the lightest); 3 → 1 (7); 1 → 2 (9, the others 10).
        let estimates = [3.0, 10.0, 1.0, 7.0, 5.0, 4.0];
        assert_eq!(assign(&estimates, 3), vec![1, 0, 2, 1, 2, 2]);
        let picks: Vec<Vec<usize>> = (0..3).map(|i| Shard { index: i, count: 3 }.pick(&estimates)).collect();
        assert_eq!(picks, vec![vec![1], vec![0, 3], vec![2, 4, 5]]);
        // Every item in exactly one part, for any count.
        for count in 1..8 {
            let mut all: Vec<usize> = (0..count).flat_map(|i| Shard { index: i, count }.pick(&estimates)).collect();
            all.sort_unstable();
            assert_eq!(all, (0..estimates.len()).collect::<Vec<_>>(), "{count} parts");
        }
        // Equal estimates go round-robin in item order; bad ones count as 0.
        assert_eq!(assign(&[1.0; 4], 2), vec![0, 1, 0, 1]);
        assert_eq!(assign(&[f64::NAN, -1.0, 2.0], 2), vec![1, 1, 0]);
        assert!(assign(&[], 3).is_empty());
    }
}
