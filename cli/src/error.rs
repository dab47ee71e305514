//! Errors of the command-line driver and the exit codes of contract §4.

use std::process::ExitCode;

/// Why a command failed; the variant decides the exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The input is invalid (a bad program, bad arguments, unbound dims): exit code 1. The message
    /// has been printed already when `printed` is true (diagnostics).
    #[error("{message}")]
    Invalid {
        /// What is wrong.
        message: String,
        /// True when the diagnostics were already written to stderr.
        printed: bool,
    },
    /// The environment or tcc itself failed (I/O, no GPU, internal error): exit code 2.
    #[error("{0}")]
    Environment(String),
}

impl CliError {
    /// An invalid-input error with `message`.
    pub fn invalid(message: impl Into<String>) -> CliError {
        CliError::Invalid { message: message.into(), printed: false }
    }

    /// The exit code of contract §4 for this error.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            CliError::Invalid { .. } => ExitCode::from(1),
            CliError::Environment(_) => ExitCode::from(2),
        }
    }
}

impl From<tcc::target::TargetUnavailable> for CliError {
    /// A target this build lacks is a bad argument for it (exit 1); a missing or unsuitable GPU
    /// is the environment's fault (exit 2).
    fn from(e: tcc::target::TargetUnavailable) -> CliError {
        match e {
            tcc::target::TargetUnavailable::NeedsLlvm(_) => CliError::invalid(e.to_string()),
            _ => CliError::Environment(e.to_string()),
        }
    }
}

impl From<tcc::pipeline::PipelineError> for CliError {
    fn from(e: tcc::pipeline::PipelineError) -> CliError {
        match e {
            tcc::pipeline::PipelineError::Lockfile { invalid: true, .. } => CliError::invalid(e.to_string()),
            other => CliError::Environment(other.to_string()),
        }
    }
}

impl From<tcc::engine::EngineError> for CliError {
    fn from(e: tcc::engine::EngineError) -> CliError {
        use tcc::engine::EngineError;
        match e {
            EngineError::MemoryLimit(_) => CliError::invalid(e.to_string()),
            EngineError::Pipeline(p) => p.into(),
            EngineError::Unavailable(u) => u.into(),
            other => CliError::Environment(other.to_string()),
        }
    }
}
