//! `tcc ir FILE`: print the tensor IR in its canonical text form.

use super::args::IrArgs;
use super::error::CliError;
use super::load::{load, select_fn};

/// Runs `tcc ir`.
pub fn ir(args: &IrArgs) -> Result<(), CliError> {
    let loaded = load(&args.program.file)?;
    match &args.program.function {
        Some(_) => print!("{}", tcc_ir::text::print_graph(select_fn(&loaded, &args.program)?)),
        None => print!("{}", tcc_ir::text::print_module(&loaded.module)),
    }
    Ok(())
}
