//! One benchmark row (the JSONL schema shared with `../shared/bench/peers.py`) and its reader.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// One timed implementation of one workload: a line of the bench JSONL.
///
/// `gflops` and `gbps` are counted with peers.py's `flops_bytes` formulas over the same median
/// time, so `gflops / gbps` is the workload's arithmetic intensity in FLOP per byte. Rows that
/// are not a workload (peers.py's `ceiling_copy_1GiB`) carry no `gflops` or `max_rel_err`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchRow {
    /// Workload name, as in `workloads.json`.
    pub workload: String,
    /// Implementation name: `tcc:cpu:cranelift`, `numpy`, `torch_eager`, ...
    #[serde(rename = "impl")]
    pub implementation: String,
    /// Median time of one run, in milliseconds.
    pub median_ms: f64,
    /// Achieved GFLOP/s, when the row counts flops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gflops: Option<f64>,
    /// Achieved GB/s (bytes read plus written), when the row counts bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gbps: Option<f64>,
    /// Largest relative error against the reference, when checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rel_err: Option<f64>,
    /// Seconds taken by the first call (compile included), when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_call_s: Option<f64>,
}

impl BenchRow {
    /// Arithmetic intensity in FLOP per byte: `gflops / gbps`.
    ///
    /// Both rates divide the workload's fixed flop and byte counts by the same median time, so
    /// their ratio is flops / bytes. `None` when either rate is missing or not positive.
    pub fn arithmetic_intensity(&self) -> Option<f64> {
        match (self.gflops, self.gbps) {
            (Some(f), Some(b)) if f > 0.0 && b > 0.0 => Some(f / b),
            _ => None,
        }
    }

    /// Whether the row can be a point on a log-log roofline (positive GFLOP/s and GB/s).
    pub fn is_plottable(&self) -> bool {
        self.arithmetic_intensity().is_some()
    }

    /// Checks the numbers a report divides by or plots: a positive median time and no negative rate.
    pub(crate) fn check(&self) -> Result<(), String> {
        if !(self.median_ms.is_finite() && self.median_ms > 0.0) {
            return Err(format!("median_ms must be positive, got {}", self.median_ms));
        }
        for (name, v) in [("gflops", self.gflops), ("gbps", self.gbps), ("max_rel_err", self.max_rel_err)] {
            if let Some(v) = v
                && !(v.is_finite() && v >= 0.0)
            {
                return Err(format!("{name} must be a non-negative number, got {v}"));
            }
        }
        if self.workload.is_empty() || self.implementation.is_empty() {
            return Err("workload and impl must not be empty".to_string());
        }
        Ok(())
    }
}

/// Why a JSONL file of rows could not be read.
#[derive(Debug, Error)]
pub enum RowError {
    /// The file could not be opened or read.
    #[error("reading {what}: {source}")]
    Io {
        /// The file, or `input` for a reader.
        what: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// One line is not a valid row.
    #[error("{what}:{line}: {message}")]
    BadLine {
        /// The file, or `input` for a reader.
        what: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
}

/// Reads rows from a JSONL file: one JSON object a line, blank lines skipped.
pub fn read_rows_jsonl(path: &Path) -> Result<Vec<BenchRow>, RowError> {
    let what = path.display().to_string();
    let file = File::open(path).map_err(|source| RowError::Io { what: what.clone(), source })?;
    read_rows_from(BufReader::new(file), &what)
}

/// Reads rows from any buffered reader; `what` names the input in error messages.
pub fn read_rows_from<R: BufRead>(reader: R, what: &str) -> Result<Vec<BenchRow>, RowError> {
    let mut rows = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(|source| RowError::Io { what: what.to_string(), source })?;
        if line.trim().is_empty() {
            continue;
        }
        let bad = |message: String| RowError::BadLine { what: what.to_string(), line: i + 1, message };
        let row: BenchRow = serde_json::from_str(&line).map_err(|e| bad(e.to_string()))?;
        row.check().map_err(bad)?;
        rows.push(row);
    }
    Ok(rows)
}
