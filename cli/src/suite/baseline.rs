//! cuBLAS as the in-process baseline of GEMM workloads on a GPU: one extra row (`impl` =
//! `cublas`) timed like tcc's (events, warm-up, L2 flushed, median of 20), and tcc's result
//! compared with cuBLAS's on the whole output. cuBLAS runs no epilogue: for a workload with one
//! its plain GEMM is timed into a note only, never a row, so that reports do not rank tcc's
//! fused kernel against a product that skips the epilogue.

use tcc_report::BenchRow;
use tcc_runtime::HostTensor;
use tcc_runtime::cuda::{Cublas, CudaDevice, GemmShape, TimingOptions};

use super::{BenchError, BenchResult, Workload, relative_norm_error, round_measure, round_sig};

/// Times cuBLAS on the workload's A and B (`host[0]`, `host[1]`) and appends its row (plain
/// GEMMs only) and the cross-check to `result`; a missing libcublas or a failing call becomes a
/// note, not an error.
pub(super) fn cublas(
    device: &CudaDevice,
    workload: &Workload,
    host: &[HostTensor],
    tcc_out: Option<&HostTensor>,
    result: &mut BenchResult,
) -> Result<(), BenchError> {
    let (Some(m), Some(n), Some(k)) = (workload.m, workload.n, workload.k) else { return Ok(()) };
    let (Some(a), Some(b)) = (host.first(), host.get(1)) else { return Ok(()) };
    let shape = GemmShape {
        m: m as usize,
        n: n as usize,
        k: k as usize,
        dtype: workload.dtype()?,
        b_nk: workload.b_layout.as_deref() == Some("nk"),
    };
    let blas = match Cublas::new(device) {
        Ok(b) => b,
        Err(e) => {
            result.notes.push(format!("{}: no cuBLAS row: {e}", workload.name));
            return Ok(());
        }
    };
    let options = TimingOptions { warmup: 5, repetitions: 20, flush_l2: true };
    let (timing, out) = match blas.time_gemm(device, shape, a, b, options) {
        Ok(r) => r,
        Err(e) => {
            result.notes.push(format!("{}: cuBLAS failed: {e}", workload.name));
            return Ok(());
        }
    };
    let (flops, bytes) = workload.flops_bytes()?;
    let ms = timing.median_ms;
    let epilogue = if workload.epilogue.is_empty() { "" } else { " (plain GEMM, no epilogue)" };
    let vs = match tcc_out {
        Some(t) if workload.epilogue.is_empty() => {
            let e = relative_norm_error(&t.to_interp(), &out.to_interp());
            format!("tcc vs cuBLAS rel err {:.2e}", round_sig(e, 3))
        }
        _ => "not compared (epilogue)".into(),
    };
    result.notes.push(format!("{}: cuBLAS {:.4} ms{epilogue}; {vs}", workload.name, ms));
    if !workload.epilogue.is_empty() {
        return Ok(());
    }
    result.rows.push(BenchRow {
        workload: workload.name.clone(),
        implementation: "cublas".into(),
        median_ms: round_measure(ms, 5),
        gflops: Some(round_measure(flops / ms / 1e6, 1)),
        gbps: Some(round_measure(bytes / ms / 1e6, 1)),
        max_rel_err: None,
        first_call_s: None,
    });
    Ok(())
}
