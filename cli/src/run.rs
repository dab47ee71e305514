//! `tcc run FILE`: run a fn on random normal inputs and summarize each output.

use std::time::Instant;

use tcc_ir::interp::{InterpError, Tensor};
use tcc_ir::{DType, Graph};

use super::args::RunArgs;
use super::error::CliError;
use super::inputs::random_inputs;
use super::json;
use super::load::{bind, load, select_fn};
use tcc::engine::Engine;

/// Runs `tcc run`.
pub fn run(args: &RunArgs) -> Result<(), CliError> {
    let engine = Engine::for_spec(args.target)?;
    let pipeline = engine.pipeline(&args.lock.setting())?;
    let loaded = load(&args.program.file)?;
    let graph = select_fn(&loaded, &args.program)?;
    let bindings = bind(graph, &args.dims)?;
    let inputs = random_inputs(graph, &bindings, args.seed, args.max_memory)?;
    let prepared = engine.prepare_within(&pipeline, graph, &bindings, args.max_memory)?;
    let start = Instant::now();
    let outputs = prepared.run(&inputs, args.max_memory)?;
    let elapsed = start.elapsed();
    if args.json {
        for plan in prepared.kernels() {
            json::print_line(&serde_json::Value::Object(json::kernel_object(plan)))?;
        }
        let outputs: Vec<serde_json::Value> = outputs.iter().map(statistics).collect();
        json::print_line(&serde_json::json!({
            "function": graph.name,
            "target": engine.name(),
            "seed": args.seed,
            "ms": elapsed.as_secs_f64() * 1e3,
            "kernels": prepared.kernels().len(),
            "outputs": outputs,
        }))?;
    } else {
        println!(
            "fn {} on {} (seed {}) in {:.3} ms{}",
            graph.name,
            engine.name(),
            args.seed,
            elapsed.as_secs_f64() * 1e3,
            prepared.summary()
        );
        for plan in prepared.kernels() {
            println!("kernel {} [{}] {} ({})", plan.kernel, plan.family, plan.kind, plan.source);
        }
        for (i, t) in outputs.iter().enumerate() {
            println!("output {i}: {}", summarize(t));
        }
    }
    if args.check {
        check_against_interpreter(graph, &inputs, &outputs, args.max_memory)?;
    }
    Ok(())
}

fn check_against_interpreter(
    graph: &Graph,
    inputs: &[Tensor],
    outputs: &[Tensor],
    max_memory: u64,
) -> Result<(), CliError> {
    let expected = tcc_ir::interp::run_graph_with_limit(graph, inputs, max_memory).map_err(|e| match e {
        InterpError::MemoryLimit { .. } => CliError::invalid(format!("{e} (raise it with --max-memory)")),
        other => CliError::Environment(format!("the interpreter failed: {other}")),
    })?;
    for (i, (want, got)) in expected.iter().zip(outputs).enumerate() {
        let (err, tol) = max_relative_error(want, got);
        let verdict = if err <= tol { "ok" } else { "MISMATCH" };
        println!("check output {i}: max relative error {err:.3e} vs the interpreter (tolerance {tol:.0e}): {verdict}");
        if err > tol {
            return Err(CliError::Environment(format!(
                "output {i} differs from the reference interpreter by {err:.3e} (tolerance {tol:.0e}); this is a tcc bug"
            )));
        }
    }
    Ok(())
}

/// The largest `|a - b| / max(1, |a|)` over all elements (NaN matching NaN counts as equal), and the
/// tolerance for the dtype.
fn max_relative_error(want: &Tensor, got: &Tensor) -> (f64, f64) {
    let tol = match want.dtype {
        DType::F32 => 1e-4,
        DType::F16 => 1e-2,
        DType::BF16 => 5e-2,
        DType::I32 | DType::Bool => 0.0,
    };
    if want.shape != got.shape || want.dtype != got.dtype {
        return (f64::INFINITY, tol);
    }
    let err = want
        .data
        .iter()
        .zip(&got.data)
        .map(|(a, b)| if (a.is_nan() && b.is_nan()) || a == b { 0.0 } else { (a - b).abs() / a.abs().max(1.0) })
        .fold(0.0, |acc: f64, e| if e.is_nan() { f64::INFINITY } else { acc.max(e) });
    (err, tol)
}

/// An output's dtype, shape and statistics as a JSON object.
fn statistics(t: &Tensor) -> serde_json::Value {
    let s = Stats::of(t);
    let number = |v: f64| if v.is_finite() { serde_json::json!(v) } else { serde_json::Value::Null };
    serde_json::json!({
        "dtype": t.dtype.to_string(),
        "shape": t.shape,
        "min": number(s.min),
        "max": number(s.max),
        "mean": number(s.mean),
        "std": number(s.std),
        "nan": s.nan,
        "inf": s.inf,
    })
}

/// Summary statistics of a tensor's finite values, with its NaN and infinity counts.
struct Stats {
    min: f64,
    max: f64,
    mean: f64,
    std: f64,
    nan: usize,
    inf: usize,
}

impl Stats {
    fn of(t: &Tensor) -> Stats {
        let finite: Vec<f64> = t.data.iter().copied().filter(|v| v.is_finite()).collect();
        let n = finite.len() as f64;
        let mean = if finite.is_empty() { f64::NAN } else { finite.iter().sum::<f64>() / n };
        let var = if finite.is_empty() { f64::NAN } else { finite.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n };
        Stats {
            min: finite.iter().copied().fold(f64::INFINITY, f64::min),
            max: finite.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            mean,
            std: var.sqrt(),
            nan: t.data.iter().filter(|v| v.is_nan()).count(),
            inf: t.data.iter().filter(|v| v.is_infinite()).count(),
        }
    }
}

/// One line: dtype and shape, then min, max, mean, std, NaN/inf counts and the first values.
pub fn summarize(t: &Tensor) -> String {
    let Stats { min, max, mean, std, nan, inf } = Stats::of(t);
    if t.data.iter().all(|v| !v.is_finite()) {
        // No finite value (an empty tensor, or only NaN and infinities): no statistics to give.
        let head: Vec<String> = t.data.iter().take(6).map(|v| format!("{v}")).collect();
        return format!(
            "{}{:?} min=- max=- mean=- std=- nan={nan} inf={inf} values=[{}]",
            t.dtype,
            t.shape,
            head.join(", ")
        );
    }
    let head: Vec<String> = t.data.iter().take(6).map(|v| format!("{v:.6}")).collect();
    let more = if t.data.len() > 6 { ", ..." } else { "" };
    format!(
        "{}{:?} min={min:.6} max={max:.6} mean={mean:.6} std={:.6} nan={nan} inf={inf} values=[{}{more}]",
        t.dtype,
        t.shape,
        std,
        head.join(", ")
    )
}
