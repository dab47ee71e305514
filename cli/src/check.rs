//! `tcc check FILE`: parse and type-check every fn.

use super::args::CheckArgs;
use super::error::CliError;
use super::load::{load, select_fn};

/// Runs `tcc check`.
pub fn check(args: &CheckArgs) -> Result<(), CliError> {
    let loaded = load(&args.program.file)?;
    let graphs: Vec<&tcc_ir::Graph> = match &args.program.function {
        Some(_) => vec![select_fn(&loaded, &args.program)?],
        None => loaded.module.functions.iter().collect(),
    };
    for g in graphs {
        let signature = g.params.iter().map(|p| format!("{}: {}", p.name, p.ty)).collect::<Vec<_>>().join(", ");
        let results = g.outputs.iter().filter_map(|&o| g.ty(o).map(ToString::to_string)).collect::<Vec<_>>().join(", ");
        println!("ok: fn {}({signature}) -> ({results}), {} ops", g.name, g.nodes.len());
    }
    Ok(())
}
