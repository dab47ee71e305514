//! What a report is built from: the run's rows, the peers' rows and the measured ceilings.

use crate::row::BenchRow;

/// One measured compute ceiling, e.g. back-to-back `mma.sync` on f16 or FMA on f32.
#[derive(Debug, Clone, PartialEq)]
pub struct ComputeCeiling {
    /// What was measured, shown on the chart and in the table (e.g. `mma.sync f16`, `FMA f32`).
    pub label: String,
    /// The measured issue rate, in GFLOP/s.
    pub gflops: f64,
}

/// The device's ceilings, measured by tcc in the same run as the rows (never a datasheet number).
#[derive(Debug, Clone, PartialEq)]
pub struct Ceilings {
    /// Measured memory bandwidth in GB/s (bytes read plus written per second).
    pub bandwidth_gbps: f64,
    /// How the bandwidth was measured (e.g. `device-to-device copy of 1 GiB`).
    pub bandwidth_method: String,
    /// Measured compute ceilings, at least one.
    pub compute: Vec<ComputeCeiling>,
    /// The device they were measured on.
    pub device: String,
    /// When they were measured (free text, e.g. an RFC 3339 time).
    pub measured_at: String,
}

/// Everything one report shows.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportInput {
    /// tcc's rows from this run (one per workload and tcc implementation).
    pub rows: Vec<BenchRow>,
    /// The peers' rows (from `--peers FILE`, the output of peers.py).
    pub peers: Vec<BenchRow>,
    /// The ceilings measured in this run.
    pub ceilings: Ceilings,
    /// The device the rows were measured on.
    pub device: String,
    /// The date of the run (free text).
    pub date: String,
    /// The command line that produced the run, as the user typed it.
    pub command_line: String,
}
