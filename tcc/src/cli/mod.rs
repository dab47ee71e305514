//! The `tcc` command line (contract §3): argument grammar, one module per subcommand.

mod args;
mod atomic;
mod bench;
mod cache;
mod check;
mod compile;
mod error;
mod explain;
pub(crate) mod inputs;
mod ir_cmd;
mod json;
mod load;
mod run;
mod tracing_setup;
mod tune;
mod worker;

use std::process::ExitCode;

use clap::Parser;

pub use args::{Cli, Command};
pub use atomic::write_output;
pub use error::CliError;

/// Runs the command line of this process and returns its exit code.
pub fn main() -> ExitCode {
    tracing_setup::install();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let is_info = matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp
                    | clap::error::ErrorKind::DisplayVersion
                    | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            );
            // Printing can only fail if stdout/stderr are closed; there is nothing left to tell then.
            let _ = e.print();
            return if is_info && e.kind() != clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            };
        }
    };
    match execute(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            let printed = matches!(error, CliError::Invalid { printed: true, .. });
            if !printed {
                eprintln!("error: {error}");
            }
            error.exit_code()
        }
    }
}

/// Runs one parsed command.
pub fn execute(cli: &Cli) -> Result<(), CliError> {
    match &cli.command {
        Command::Check(a) => check::check(a),
        Command::Ir(a) => ir_cmd::ir(a),
        Command::Run(a) => run::run(a),
        Command::Explain(a) => explain::explain(a),
        Command::Bench(a) => bench::bench(a),
        Command::Compile(a) => compile::compile(a),
        Command::Tune(a) => tune::tune(a),
        Command::Cache(a) => cache::cache(a),
        Command::Worker(a) => worker::worker(a),
    }
}
