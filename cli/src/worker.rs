//! `tcc worker` (hidden): measures one autotuning candidate in this process, which the tuner
//! started for it, so a crash or hang of the candidate never reaches the tuner or the cache. The
//! protocol is in `tcc_autotune::tuning::worker` (on `tcc_autotune::search::worker::serve`).

use super::args::WorkerArgs;
use super::error::CliError;
use tcc_autotune::tuning::worker::{WorkerError, serve};

/// Runs `tcc worker`: exit 0 after a result (good or bad), 1 for a request it cannot understand,
/// 2 if standard input or output fail.
pub fn worker(_args: &WorkerArgs) -> Result<(), CliError> {
    match serve(std::io::stdin().lock(), std::io::stdout().lock()) {
        Ok(()) => Ok(()),
        Err(e @ WorkerError::BadRequest(_)) => Err(CliError::invalid(e.to_string())),
        Err(e @ WorkerError::Io(_)) => Err(CliError::Environment(e.to_string())),
    }
}
