//! `tcc bench`: times the public suite's workloads on a target and writes one JSONL row per
//! workload in the peers' schema (`workload`, `impl`, `median_ms`, `gflops`, `gbps`, `max_rel_err`),
//! so ../shared/bench/compare.py and `--report` can join them with the peers' rows.

pub mod workload;

use std::time::Instant;

use tcc_ir::interp::Tensor;
use tcc_report::BenchRow;
use tcc_runtime::HostTensor;

use crate::engine::{Engine, EngineError, Prepared};
pub use workload::{Workload, WorkloadError, load_suite};

/// Workloads above this many flops are not checked by the (single-threaded, f64) interpreter.
pub const REFERENCE_FLOP_LIMIT: f64 = 1.0e10;

/// How long to time each workload: like peers.py's CPU bench, at least `min_reps` repetitions and
/// then more until `max_seconds` have passed or `max_reps` were taken.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Fewest timed repetitions.
    pub min_reps: usize,
    /// Most timed repetitions.
    pub max_reps: usize,
    /// Time budget per workload after the minimum, seconds.
    pub max_seconds: f64,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing { min_reps: 5, max_reps: 200, max_seconds: 2.0 }
    }
}

/// Why a workload could not be benchmarked.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The workload is malformed.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// Preparing or running it failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The engine has no compiled form to time (the interpreter).
    #[error("target `{0}` cannot be benchmarked; choose a compiled target")]
    NotCompiled(String),
}

/// Times one workload and checks its result against the f64 reference interpreter.
pub fn bench_workload(engine: &Engine, workload: &Workload, timing: Timing, seed: u64) -> Result<BenchRow, BenchError> {
    let graph = workload.graph()?;
    let bindings = tcc_ir::Bindings::new();
    let inputs = crate::cli::inputs::random_inputs(&graph, &bindings, seed, u64::MAX)
        .map_err(|e| EngineError::Interpreter(e.to_string()))?;
    let host: Vec<HostTensor> = inputs
        .iter()
        .map(HostTensor::from_interp)
        .collect::<Result<_, _>>()
        .map_err(|e| EngineError::Interpreter(e.to_string()))?;
    let first_start = Instant::now();
    let prepared = engine.prepare(&graph, &bindings)?;
    let first = run_once(engine, &prepared, &host)?;
    let first_call_s = first_start.elapsed().as_secs_f64();
    let median_ms = prepared.time_ms(&host, timing.min_reps, timing.max_reps, timing.max_seconds)?;

    let (flops, _) = workload.flops_bytes()?;
    // The f64 interpreter checks every element when that is affordable (all but the largest GEMMs).
    let max_rel_err = if flops <= REFERENCE_FLOP_LIMIT {
        let reference = tcc_ir::interp::run_graph_with_limit(&graph, &inputs, u64::MAX)
            .map_err(|e| EngineError::Interpreter(e.to_string()))?;
        let got: Vec<Tensor> = first.iter().map(HostTensor::to_interp).collect();
        Some(round_sig(reference.iter().zip(&got).map(|(r, g)| relative_norm_error(g, r)).fold(0.0, f64::max), 3))
    } else {
        None
    };

    let (flops, bytes) = workload.flops_bytes()?;
    Ok(BenchRow {
        workload: workload.name.clone(),
        implementation: format!("tcc:{}", engine.name()),
        median_ms: round_to(median_ms, 5),
        gflops: Some(round_to(flops / median_ms / 1e6, 1)),
        gbps: Some(round_to(bytes / median_ms / 1e6, 1)),
        max_rel_err,
        first_call_s: Some(round_to(first_call_s, 2)),
    })
}

fn run_once(engine: &Engine, prepared: &Prepared<'_>, host: &[HostTensor]) -> Result<Vec<HostTensor>, BenchError> {
    match prepared.run_host(host) {
        Some(result) => Ok(result?),
        None => Err(BenchError::NotCompiled(engine.name().to_string())),
    }
}

/// `||got - want|| / ||want||`, the error measure of peers.py.
pub fn relative_norm_error(got: &Tensor, want: &Tensor) -> f64 {
    if got.data.len() != want.data.len() {
        return f64::INFINITY;
    }
    let diff: f64 = got.data.iter().zip(&want.data).map(|(a, b)| (a - b) * (a - b)).sum();
    let norm: f64 = want.data.iter().map(|b| b * b).sum();
    diff.sqrt() / norm.sqrt().max(1e-30)
}

fn round_to(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

fn round_sig(value: f64, digits: i32) -> f64 {
    if value == 0.0 || !value.is_finite() {
        return value;
    }
    let magnitude = value.abs().log10().floor() as i32;
    round_to(value, digits - 1 - magnitude)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_workload_benchmarks_on_the_cpu() {
        let engine = Engine::for_target("cpu").unwrap();
        let w = Workload {
            name: "tiny_softmax".into(),
            kind: "softmax".into(),
            dtype: "f32".into(),
            m: None,
            n: None,
            k: None,
            epilogue: vec![],
            b_layout: None,
            rows: Some(7),
            cols: Some(33),
        };
        let row = bench_workload(&engine, &w, Timing { min_reps: 3, max_reps: 3, max_seconds: 0.0 }, 1).unwrap();
        assert_eq!(row.implementation, "tcc:cpu:cranelift");
        assert!(row.median_ms > 0.0);
        assert!(row.max_rel_err.unwrap() < 1e-5, "{row:?}");
        let interp = Engine::for_target("interp").unwrap();
        assert!(matches!(bench_workload(&interp, &w, Timing::default(), 1), Err(BenchError::NotCompiled(_))));
    }

    #[test]
    fn rounding_keeps_significant_digits() {
        assert_eq!(round_sig(0.000123456, 3), 0.000123);
        assert_eq!(round_to(1.23456, 2), 1.23);
    }
}
