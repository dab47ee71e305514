//! `tcc bench`: times the public suite's workloads on a target and writes one JSONL row per
//! workload in the peers' schema (`workload`, `impl`, `median_ms`, `gflops`, `gbps`, `max_rel_err`),
//! so ../shared/bench/compare.py and `--report` can join them with the peers' rows.

#[cfg(feature = "llvm")]
mod baseline;
pub mod count;
pub mod workload;

use std::time::Instant;

use tcc_ir::interp::Tensor;
use tcc_report::BenchRow;
use tcc_runtime::HostTensor;

use tcc::engine::{Engine, EngineError, Prepared};
use tcc::pipeline::Pipeline;
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
#[cfg(test)]
fn bench_workload(
    engine: &Engine,
    pipeline: &Pipeline,
    workload: &Workload,
    timing: Timing,
    seed: u64,
) -> Result<BenchRow, BenchError> {
    Ok(bench_with_baseline(engine, pipeline, workload, timing, seed)?.rows.swap_remove(0))
}

/// What [`bench_with_baseline`] measured.
#[derive(Debug, Clone)]
pub struct BenchResult {
    /// tcc's row first, then cuBLAS's (plain GEMMs on a GPU, when libcublas loads).
    pub rows: Vec<BenchRow>,
    /// Checks and notes for the log: the cross-check against cuBLAS, or why it is missing.
    pub notes: Vec<String>,
}

/// Times one workload (like [`bench_workload`]); for a GEMM on a GPU also times cuBLAS on the
/// same inputs in the same process and compares the two results on sampled entries. A GEMM too
/// large for the full reference is checked against the f64 interpreter on sampled rows.
pub fn bench_with_baseline(
    engine: &Engine,
    pipeline: &Pipeline,
    workload: &Workload,
    timing: Timing,
    seed: u64,
) -> Result<BenchResult, BenchError> {
    let graph = workload.graph()?;
    let bindings = tcc_ir::Bindings::new();
    let inputs = crate::inputs::random_inputs(&graph, &bindings, seed, u64::MAX)
        .map_err(|e| EngineError::Interpreter(e.to_string()))?;
    let host: Vec<HostTensor> = inputs
        .iter()
        .map(HostTensor::from_interp)
        .collect::<Result<_, _>>()
        .map_err(|e| EngineError::Interpreter(e.to_string()))?;
    let first_start = Instant::now();
    let prepared = engine.prepare(pipeline, &graph, &bindings)?;
    let first = run_once(engine, &prepared, &host)?;
    let first_call_s = first_start.elapsed().as_secs_f64();
    let median_ms = prepared.time_ms(&host, timing.min_reps, timing.max_reps, timing.max_seconds)?;

    let (flops, _) = workload.flops_bytes()?;
    // The f64 interpreter checks every element when that is affordable (all but the largest GEMMs).
    // Attention is checked on a few queries whatever its size: the interpreter materializes K and
    // V broadcast to every query head (a decode workload's 32 heads x 8192 keys x 128 in f64 are
    // 8.6 GB), though its flops are few.
    let max_rel_err = if flops <= REFERENCE_FLOP_LIMIT && workload.kind != "attention" {
        let reference = tcc_ir::interp::run_graph_with_limit(&graph, &inputs, u64::MAX)
            .map_err(|e| EngineError::Interpreter(e.to_string()))?;
        let got: Vec<Tensor> = first.iter().map(HostTensor::to_interp).collect();
        Some(round_sig(reference.iter().zip(&got).map(|(r, g)| relative_norm_error(g, r)).fold(0.0, f64::max), 3))
    } else if workload.kind == "gemm" {
        let got = first.first().map(HostTensor::to_interp);
        got.map(|g| sampled_rows_error(workload, &inputs, &g)).transpose()?.map(|e| round_sig(e, 3))
    } else if workload.kind == "attention" {
        let got = first.first().map(HostTensor::to_interp);
        got.map(|g| sampled_queries_error(workload, &inputs, &g)).transpose()?.map(|e| round_sig(e, 3))
    } else {
        None
    };

    let (flops, bytes) = workload.flops_bytes()?;
    #[cfg_attr(not(feature = "llvm"), allow(unused_mut))] // only the GPU adds the cuBLAS row
    let mut result = BenchResult {
        rows: vec![BenchRow {
            workload: workload.name.clone(),
            implementation: format!("tcc:{}", engine.name()),
            median_ms: round_measure(median_ms, 5),
            gflops: Some(round_measure(flops / median_ms / 1e6, 1)),
            gbps: Some(round_measure(bytes / median_ms / 1e6, 1)),
            max_rel_err,
            first_call_s: Some(round_measure(first_call_s, 2)),
        }],
        notes: Vec::new(),
    };
    #[cfg(feature = "llvm")]
    if let (Engine::Cuda { device, .. }, "gemm") = (engine, workload.kind.as_str()) {
        baseline::cublas(device, workload, &host, first.first(), &mut result)?;
    }
    Ok(result)
}

/// Rows of a GEMM's output checked: the f64 interpreter runs the workload on these rows of A only.
const SAMPLED_ROWS: usize = 4;

/// `||got - want|| / ||want||` over a few rows of a GEMM workload's output, the reference computed
/// by the f64 interpreter on the same rows of A (every other input whole).
fn sampled_rows_error(workload: &Workload, inputs: &[Tensor], got: &Tensor) -> Result<f64, BenchError> {
    let interp = |e: String| BenchError::Engine(EngineError::Interpreter(e));
    let (Some(a), Some(&m)) = (inputs.first(), workload.m.as_ref()) else { return Ok(f64::NAN) };
    let (m, k) = (m as usize, a.shape.last().copied().unwrap_or(0));
    let n = got.shape.last().copied().unwrap_or(0);
    let rows: Vec<usize> = (0..SAMPLED_ROWS.min(m)).map(|i| (i * 7919 + 13) % m).collect();
    let mut small = workload.clone();
    small.m = Some(rows.len() as u64);
    let graph = small.graph()?;
    let mut sub = inputs.to_vec();
    let data: Vec<f64> = rows.iter().flat_map(|&r| a.data[r * k..(r + 1) * k].iter().copied()).collect();
    sub[0] = Tensor::new(a.dtype, vec![rows.len(), k], data).map_err(|e| interp(e.to_string()))?;
    let want = tcc_ir::interp::run_graph_with_limit(&graph, &sub, u64::MAX).map_err(|e| interp(e.to_string()))?;
    let Some(want) = want.first() else { return Ok(f64::NAN) };
    let got_rows: Vec<f64> = rows.iter().flat_map(|&r| got.data[r * n..(r + 1) * n].iter().copied()).collect();
    let got = Tensor::new(got.dtype, vec![rows.len(), n], got_rows).map_err(|e| interp(e.to_string()))?;
    Ok(relative_norm_error(&got, want))
}

/// `||got - want|| / ||want||` over the last few queries of the first sequence of an attention
/// workload (every head), the reference computed by the f64 interpreter on those queries against
/// the first sequence's keys and values: queries are the last `q_len` positions of the sequence,
/// so the last rows of a shorter workload are the same rows of the whole.
fn sampled_queries_error(workload: &Workload, inputs: &[Tensor], got: &Tensor) -> Result<f64, BenchError> {
    let interp = |e: String| BenchError::Engine(EngineError::Interpreter(e));
    let a = workload.attention()?;
    let (Some(q), Some(k), Some(v)) = (inputs.first(), inputs.get(1), inputs.get(2)) else { return Ok(f64::NAN) };
    let (heads, q_len, head_dim) = (a.heads as usize, a.q_len as usize, a.head_dim as usize);
    let rows = SAMPLED_ROWS.min(q_len);
    // The last `rows` queries of every head of sequence 0, from a `[batch, heads, q_len, d]` tensor.
    let last_rows = |t: &Tensor| -> Vec<f64> {
        (0..heads)
            .flat_map(|h| {
                let start = (h * q_len + q_len - rows) * head_dim;
                t.data.get(start..start + rows * head_dim).unwrap_or(&[]).iter().copied()
            })
            .collect()
    };
    let first_sequence = |t: &Tensor| -> Result<Tensor, BenchError> {
        let mut shape = t.shape.clone();
        let per = t.data.len() / shape.first().copied().unwrap_or(1).max(1);
        if let Some(b) = shape.first_mut() {
            *b = 1;
        }
        Tensor::new(t.dtype, shape, t.data.get(..per).unwrap_or(&[]).to_vec()).map_err(|e| interp(e.to_string()))
    };
    let mut small = workload.clone();
    (small.batch, small.q_len) = (Some(1), Some(rows as u64));
    let graph = small.graph()?;
    let shape = vec![1, heads, rows, head_dim];
    let sub = [
        Tensor::new(q.dtype, shape.clone(), last_rows(q)).map_err(|e| interp(e.to_string()))?,
        first_sequence(k)?,
        first_sequence(v)?,
    ];
    let want = tcc_ir::interp::run_graph_with_limit(&graph, &sub, u64::MAX).map_err(|e| interp(e.to_string()))?;
    let Some(want) = want.first() else { return Ok(f64::NAN) };
    let got = Tensor::new(got.dtype, shape, last_rows(got)).map_err(|e| interp(e.to_string()))?;
    Ok(relative_norm_error(&got, want))
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

/// A measurement rounded to `decimals` decimals, but never to fewer than three significant digits:
/// a tiny workload's throughput (0.04 GB/s) must not print as 0.0.
pub(crate) fn round_measure(value: f64, decimals: i32) -> f64 {
    if value == 0.0 || !value.is_finite() {
        return value;
    }
    let magnitude = value.abs().log10().floor() as i32;
    round_to(value, decimals.max(2 - magnitude))
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
        let engine = Engine::for_spec(tcc_ir::TargetSpec::BestCpu).unwrap();
        let pipeline = Pipeline::untuned(engine.target());
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
            ..Workload::default()
        };
        let row =
            bench_workload(&engine, &pipeline, &w, Timing { min_reps: 3, max_reps: 3, max_seconds: 0.0 }, 1).unwrap();
        // `cpu` is the best CPU tier built in: cranelift, or LLVM with feature `llvm`.
        assert!(row.implementation.starts_with("tcc:cpu:"), "{}", row.implementation);
        assert!(row.median_ms > 0.0);
        assert!(row.max_rel_err.unwrap() < 1e-5, "{row:?}");
        let interp = Engine::open(tcc_ir::Target::Interp).unwrap();
        let untuned = Pipeline::untuned(tcc_ir::Target::Interp);
        assert!(matches!(bench_workload(&interp, &untuned, &w, Timing::default(), 1), Err(BenchError::NotCompiled(_))));
    }

    #[test]
    fn sampled_queries_check_the_last_rows_of_the_first_sequence() {
        let w = Workload {
            name: "tiny_gqa_window".into(),
            kind: "attention".into(),
            dtype: "f32".into(),
            batch: Some(2),
            heads: Some(4),
            kv_heads: Some(2),
            q_len: Some(6),
            kv_len: Some(9),
            head_dim: Some(8),
            mask: Some("window:5".into()),
            score: Some("alibi".into()),
            ..Workload::default()
        };
        let graph = w.graph().unwrap();
        let inputs = crate::inputs::random_inputs(&graph, &tcc_ir::Bindings::new(), 3, u64::MAX).unwrap();
        let whole = tcc_ir::interp::run_graph(&graph, &inputs).unwrap().swap_remove(0);
        assert!(sampled_queries_error(&w, &inputs, &whole).unwrap() < 1e-12);
        // A wrong value in the last query of head 3 of sequence 0 is seen; one in sequence 1 is not.
        let mut wrong = whole.clone();
        wrong.data[(3 * 6 + 5) * 8 + 2] += 1.0;
        assert!(sampled_queries_error(&w, &inputs, &wrong).unwrap() > 1e-3);
        let mut elsewhere = whole;
        elsewhere.data[4 * 6 * 8 + 5] += 1.0;
        assert!(sampled_queries_error(&w, &inputs, &elsewhere).unwrap() < 1e-12);
    }

    #[test]
    fn rounding_keeps_significant_digits() {
        assert_eq!(round_sig(0.000123456, 3), 0.000123);
        assert_eq!(round_to(1.23456, 2), 1.23);
        assert_eq!(round_measure(0.0412, 1), 0.0412);
        assert_eq!(round_measure(712.3456, 1), 712.3);
        assert_eq!(round_measure(0.000012345, 5), 0.0000123);
    }
}
