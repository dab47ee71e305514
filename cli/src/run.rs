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
        check_against_interpreter(graph, &inputs, &bindings, &outputs, args.max_memory)?;
    }
    Ok(())
}

fn check_against_interpreter(
    graph: &Graph,
    inputs: &[Tensor],
    bindings: &tcc_ir::Bindings,
    outputs: &[Tensor],
    max_memory: u64,
) -> Result<(), CliError> {
    let expected = tcc_ir::interp::run_graph_within(graph, inputs, bindings, max_memory).map_err(|e| match e {
        InterpError::MemoryLimit { .. } => CliError::invalid(format!("{e} (raise it with --max-memory)")),
        other => CliError::Environment(format!("the interpreter failed: {other}")),
    })?;
    for (i, (want, got)) in expected.iter().zip(outputs).enumerate() {
        let Comparison { error: err, tolerance: tol, reference_overflows } = compare(want, got);
        let verdict = if err <= tol { "ok" } else { "MISMATCH" };
        let overflow = if reference_overflows > 0 {
            format!(
                "; the reference itself overflows {} at {reference_overflows} values (inf or NaN) where tcc differs, not compared",
                want.dtype
            )
        } else {
            String::new()
        };
        println!(
            "check output {i}: max relative error {err:.3e} vs the interpreter (tolerance {tol:.0e}){overflow}: {verdict}"
        );
        if err > tol {
            return Err(CliError::Environment(format!(
                "output {i} differs from the reference interpreter by {err:.3e} (tolerance {tol:.0e}); this is a tcc bug"
            )));
        }
    }
    Ok(())
}

/// How an output compares with the reference.
struct Comparison {
    /// The largest `|a - b| / max(1, |a|)` where the reference is finite (NaN matching NaN and
    /// equal values count as equal); infinite for a different dtype or shape.
    error: f64,
    /// The tolerance of the dtype.
    tolerance: f64,
    /// Values where the reference is itself inf or NaN (it overflowed the dtype: for example an f16
    /// product the interpreter rounds at each op while a fused kernel keeps f32) and the output
    /// differs: reported, not counted as errors.
    reference_overflows: usize,
}

fn compare(want: &Tensor, got: &Tensor) -> Comparison {
    let tolerance = match want.dtype {
        DType::F32 => 1e-4,
        DType::F16 => 1e-2,
        DType::BF16 => 5e-2,
        DType::I32 | DType::Bool => 0.0,
    };
    if want.shape != got.shape || want.dtype != got.dtype {
        return Comparison { error: f64::INFINITY, tolerance, reference_overflows: 0 };
    }
    let mut error: f64 = 0.0;
    let mut reference_overflows = 0;
    for (a, b) in want.data.iter().zip(&got.data) {
        if (a.is_nan() && b.is_nan()) || a == b {
            continue;
        }
        if !a.is_finite() {
            reference_overflows += 1;
            continue;
        }
        let e = (a - b).abs() / a.abs().max(1.0);
        error = if e.is_nan() { f64::INFINITY } else { error.max(e) };
    }
    Comparison { error, tolerance, reference_overflows }
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
    if !min.is_finite() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_that_overflows_is_reported_not_called_a_bug() {
        let want = Tensor::new(DType::F16, vec![3], vec![f64::INFINITY, 1.0, f64::NAN]).unwrap();
        let got = Tensor::new(DType::F16, vec![3], vec![65504.0, 1.0, 2.0]).unwrap();
        let c = compare(&want, &got);
        assert_eq!((c.error, c.reference_overflows), (0.0, 2));
        // A finite reference still counts.
        let off = Tensor::new(DType::F16, vec![3], vec![f64::INFINITY, 1.5, f64::NAN]).unwrap();
        let c = compare(&want, &off);
        assert!(c.error > c.tolerance, "{}", c.error);
    }
}
