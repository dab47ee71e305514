//! The report crate's tests: one binary, one module per concern.

// Test code: a failed unwrap is a failed test (clippy.toml exempts #[test] fns, not helpers).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod markdown;
mod rows;
mod svg;

use std::path::PathBuf;

use tcc_report::{BenchRow, Ceilings, ComputeCeiling, ReportInput, read_rows_jsonl};

/// A file under `tests/fixtures/`.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// The invented tcc rows of the fixture (see tests/fixtures/README.md: not measurements).
pub fn tcc_rows() -> Vec<BenchRow> {
    read_rows_jsonl(&fixture("tcc_rows_invented.jsonl")).unwrap()
}

/// The real numpy rows copied from ../shared/bench/peers_cpu_2core.jsonl.
pub fn peer_rows() -> Vec<BenchRow> {
    read_rows_jsonl(&fixture("peers_cpu_2core.jsonl")).unwrap()
}

/// A report input from the fixtures, with ceilings that are fixture values, not measurements.
pub fn fixture_input() -> ReportInput {
    ReportInput {
        rows: tcc_rows(),
        peers: peer_rows(),
        ceilings: Ceilings {
            bandwidth_gbps: 20.0,
            bandwidth_method: "fixture value, not measured".to_string(),
            compute: vec![ComputeCeiling { label: "fixture FMA f32".to_string(), gflops: 600.0 }],
            device: "fixture device".to_string(),
            measured_at: "fixture time".to_string(),
        },
        device: "fixture device (2-core CPU)".to_string(),
        date: "2026-01-01 (fixture)".to_string(),
        command_line: "tcc bench --workloads workloads.json --suite cpu --out x.jsonl --report out --peers `p`.jsonl"
            .to_string(),
    }
}
