//! `tcc explain FILE`: optimize a fn for a target and print what the optimizer chose and why.

use tcc_ir::Bindings;
use tcc_passes::{OptimizeOptions, TargetModel, optimize};

use super::args::ExplainArgs;
use super::atomic::write_output;
use super::error::CliError;
use super::load::{load, select_fn};

/// Runs `tcc explain`.
pub fn explain(args: &ExplainArgs) -> Result<(), CliError> {
    let target = TargetModel::for_target_name(&args.target).ok_or_else(|| {
        CliError::invalid(format!(
            "unknown target `{}`; expected interp, cpu, cpu:cranelift, cpu:llvm, sm_80 or sm_90a",
            args.target
        ))
    })?;
    let loaded = load(&args.program.file)?;
    let graph = select_fn(&loaded, &args.program)?;
    let mut options = OptimizeOptions::new(target);
    options.explain = true;
    // Unbound variables are allowed here: the cost model assumes a default size for them.
    options.bindings = graph
        .shape_vars()
        .into_iter()
        .filter_map(|v| args.dims.iter().rev().find(|(n, _)| *n == v).map(|(_, value)| (v, *value)))
        .collect::<Bindings>();
    let optimized = optimize(graph, &options)
        .map_err(|e| CliError::Environment(format!("the optimizer failed on `{}`: {e}", graph.name)))?;
    print!("{}", optimized.report);
    if let Some(dot) = &args.dot {
        write_output(dot, optimized.report.to_dot().as_bytes(), Some(&args.program.file))?;
    }
    Ok(())
}
