//! Derived numbers: rows grouped by workload, the best peer of each workload, and speedups.

use crate::input::ReportInput;
use crate::row::BenchRow;

/// The rows of one workload that tcc ran.
#[derive(Debug)]
pub(crate) struct WorkloadGroup<'a> {
    /// 1-based number, used to label the workload's points on the roofline.
    pub number: usize,
    /// The workload's name.
    pub name: &'a str,
    /// tcc's rows, in input order.
    pub tcc: Vec<&'a BenchRow>,
    /// The peers' rows, in input order.
    pub peers: Vec<&'a BenchRow>,
    /// The peer row with the smallest median time (the first one on a tie).
    pub best_peer: Option<&'a BenchRow>,
}

impl WorkloadGroup<'_> {
    /// All rows of the workload: tcc's first, then the peers'.
    pub fn all_rows(&self) -> impl Iterator<Item = &BenchRow> {
        self.tcc.iter().chain(self.peers.iter()).copied()
    }
}

/// The report's rows, grouped.
#[derive(Debug)]
pub(crate) struct Analysis<'a> {
    /// Workloads in the order tcc's rows first name them.
    pub workloads: Vec<WorkloadGroup<'a>>,
    /// Peer rows whose workload has no tcc row in this run (left out of table and charts).
    pub unmatched_peers: Vec<&'a BenchRow>,
    /// Implementation names, tcc's first, then peers', each once, in first-seen order.
    pub impls: Vec<&'a str>,
}

/// Groups the input's rows by workload.
pub(crate) fn analyse(input: &ReportInput) -> Analysis<'_> {
    let mut workloads: Vec<WorkloadGroup<'_>> = Vec::new();
    for row in &input.rows {
        match workloads.iter_mut().find(|g| g.name == row.workload) {
            Some(g) => g.tcc.push(row),
            None => workloads.push(WorkloadGroup {
                number: workloads.len() + 1,
                name: &row.workload,
                tcc: vec![row],
                peers: Vec::new(),
                best_peer: None,
            }),
        }
    }
    let mut unmatched_peers = Vec::new();
    for row in &input.peers {
        match workloads.iter_mut().find(|g| g.name == row.workload) {
            Some(g) => {
                g.peers.push(row);
                if g.best_peer.is_none_or(|b| row.median_ms < b.median_ms) {
                    g.best_peer = Some(row);
                }
            }
            None => unmatched_peers.push(row),
        }
    }
    let mut impls: Vec<&str> = Vec::new();
    for g in &workloads {
        for r in &g.tcc {
            push_unique(&mut impls, &r.implementation);
        }
    }
    for g in &workloads {
        for r in &g.peers {
            push_unique(&mut impls, &r.implementation);
        }
    }
    Analysis { workloads, unmatched_peers, impls }
}

fn push_unique<'a>(list: &mut Vec<&'a str>, name: &'a str) {
    if !list.contains(&name) {
        list.push(name);
    }
}

/// tcc's speed against the best peer on one workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Speedup {
    /// The workload.
    pub workload: String,
    /// The tcc implementation.
    pub tcc_impl: String,
    /// tcc's median time, in milliseconds.
    pub tcc_ms: f64,
    /// The fastest peer on this workload.
    pub best_peer_impl: String,
    /// That peer's median time, in milliseconds.
    pub best_peer_ms: f64,
    /// `best_peer_ms / tcc_ms`: above 1, tcc is faster.
    pub speedup: f64,
}

/// One speedup per tcc row whose workload has a peer row, in the order of the table.
pub fn speedups(input: &ReportInput) -> Vec<Speedup> {
    let analysis = analyse(input);
    let mut out = Vec::new();
    for g in &analysis.workloads {
        let Some(best) = g.best_peer else { continue };
        for r in &g.tcc {
            out.push(Speedup {
                workload: g.name.to_string(),
                tcc_impl: r.implementation.clone(),
                tcc_ms: r.median_ms,
                best_peer_impl: best.implementation.clone(),
                best_peer_ms: best.median_ms,
                speedup: best.median_ms / r.median_ms,
            });
        }
    }
    out
}
