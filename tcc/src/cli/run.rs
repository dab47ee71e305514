//! `tcc run FILE`: run a fn on random normal inputs and summarize each output.

use std::time::Instant;

use tcc_ir::interp::{InterpError, Tensor};

use super::args::RunArgs;
use super::error::CliError;
use super::inputs::random_inputs;
use super::load::{bind, load, select_fn};

/// Runs `tcc run`.
pub fn run(args: &RunArgs) -> Result<(), CliError> {
    if args.target != "interp" {
        return Err(CliError::invalid(format!(
            "unknown or unavailable target `{}` (this build runs: interp)",
            args.target
        )));
    }
    let loaded = load(&args.program.file)?;
    let graph = select_fn(&loaded, &args.program)?;
    let bindings = bind(graph, &args.dims)?;
    let inputs = random_inputs(graph, &bindings, args.seed, args.max_memory)?;
    let start = Instant::now();
    let outputs = tcc_ir::interp::run_graph_with_limit(graph, &inputs, args.max_memory).map_err(classify)?;
    let elapsed = start.elapsed();
    println!("fn {} on {} (seed {}) in {:.3} ms", graph.name, args.target, args.seed, elapsed.as_secs_f64() * 1e3);
    for (i, t) in outputs.iter().enumerate() {
        println!("output {i}: {}", summarize(t));
    }
    Ok(())
}

fn classify(error: InterpError) -> CliError {
    match error {
        InterpError::MemoryLimit { .. } => CliError::invalid(format!("{error} (raise it with --max-memory)")),
        other => CliError::Environment(format!("the interpreter failed: {other}")),
    }
}

/// One line: dtype and shape, then min, max, mean, std, NaN/inf counts and the first values.
pub fn summarize(t: &Tensor) -> String {
    let finite: Vec<f64> = t.data.iter().copied().filter(|v| v.is_finite()).collect();
    let nan = t.data.iter().filter(|v| v.is_nan()).count();
    let inf = t.data.iter().filter(|v| v.is_infinite()).count();
    let n = finite.len() as f64;
    let mean = if finite.is_empty() { f64::NAN } else { finite.iter().sum::<f64>() / n };
    let var = if finite.is_empty() { f64::NAN } else { finite.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n };
    let min = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let max = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let head: Vec<String> = t.data.iter().take(6).map(|v| format!("{v:.6}")).collect();
    let more = if t.data.len() > 6 { ", ..." } else { "" };
    format!(
        "{}{:?} min={min:.6} max={max:.6} mean={mean:.6} std={:.6} nan={nan} inf={inf} values=[{}{more}]",
        t.dtype,
        t.shape,
        var.sqrt(),
        head.join(", ")
    )
}
