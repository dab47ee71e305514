//! The report's error type.

use std::path::PathBuf;

use thiserror::Error;

/// Why a report could not be built or written.
#[derive(Debug, Error)]
pub enum ReportError {
    /// A ceiling is missing, zero, negative or not a number.
    #[error("invalid ceiling: {0}")]
    BadCeiling(String),
    /// A row holds a number the report cannot use.
    #[error("invalid row {workload} ({implementation}): {message}")]
    BadRow {
        /// The row's workload.
        workload: String,
        /// The row's implementation.
        implementation: String,
        /// What is wrong with it.
        message: String,
    },
    /// plotters failed to draw a chart.
    #[error("drawing {chart}: {message}")]
    Render {
        /// Which chart.
        chart: &'static str,
        /// plotters' message.
        message: String,
    },
    /// A file or folder could not be written.
    #[error("writing {}: {source}", path.display())]
    Io {
        /// The path being written.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// Turns a plotters error into [`ReportError::Render`] for `chart`.
pub(crate) fn render<E: std::fmt::Display>(chart: &'static str) -> impl Fn(E) -> ReportError {
    move |e| ReportError::Render { chart, message: e.to_string() }
}
