//! The `tcc` command line (contract §3): argument grammar, one module per subcommand, and the
//! public suite's benchmarks (`suite`). The library it drives is the `tcc` crate; this crate adds
//! what only the command line needs (clap, progress bars, report charts, the shared cache).

mod args;
mod atomic;
mod bench;
mod cache;
mod check;
mod compile;
mod devices;
mod error;
mod explain;
mod inputs;
mod ir_cmd;
mod json;
mod load;
mod lock;
mod plan_file;
mod plan_kernels;
mod run;
mod suite;
mod tracing_setup;
mod tune;
mod tune_plan;
mod worker;

use std::process::ExitCode;

use clap::Parser;

/// The optimizer makes millions of small, short-lived allocations (e-nodes, kernel bodies, merge
/// caches): glibc's malloc and free took about a fifth of a 10,000-op compile in a profile, which
/// mimalloc serves faster (BENCHMARKS.md, session 12's compile time).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use args::{Cli, Command};
use error::CliError;

fn main() -> ExitCode {
    // A panic is a bug in tcc: report it as an internal error (exit 2), never as a crash.
    std::panic::set_hook(Box::new(|info| {
        // A closed stdout (`tcc ir f.tc | head`) is how pipelines end, not a bug: stop quietly with
        // the status a shell expects from SIGPIPE.
        if info.to_string().contains("Broken pipe") {
            std::process::exit(141);
        }
        eprintln!("error: internal error in tcc (this is a bug): {info}");
    }));
    std::panic::catch_unwind(run_command_line).unwrap_or(ExitCode::from(2))
}

/// Runs the command line of this process and returns its exit code.
fn run_command_line() -> ExitCode {
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
fn execute(cli: &Cli) -> Result<(), CliError> {
    match &cli.command {
        Command::Check(a) => check::check(a),
        Command::Ir(a) => ir_cmd::ir(a),
        Command::Run(a) => run::run(a),
        Command::Explain(a) => explain::explain(a),
        Command::Bench(a) => bench::bench(a),
        Command::Compile(a) => compile::compile(a),
        Command::Tune(a) => tune::tune(a),
        Command::Cache(a) => cache::cache(a),
        Command::Lock(a) => lock::lock(a),
        Command::Worker(a) => worker::worker(a),
    }
}
