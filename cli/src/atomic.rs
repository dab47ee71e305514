//! Writes files the way contract §4 asks: into a temporary file beside the target, then renamed into
//! place, so a failed write never leaves a half-written file, and never over the command's own input.

use std::io::Write;
use std::path::Path;

use super::error::CliError;

/// Writes `bytes` to `path` atomically; `-` writes to stdout. Refuses to overwrite `input`.
pub fn write_output(path: &Path, bytes: &[u8], input: Option<&Path>) -> Result<(), CliError> {
    if path == Path::new("-") {
        let mut out = std::io::stdout().lock();
        return out
            .write_all(bytes)
            .and_then(|()| out.flush())
            .map_err(|e| CliError::Environment(format!("cannot write to stdout: {e}")));
    }
    if let Some(input) = input {
        let same = match (path.canonicalize(), input.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        if same {
            return Err(CliError::invalid(format!(
                "refusing to overwrite the input file `{}` with the output",
                path.display()
            )));
        }
    }
    tcc_files::write_atomically(path, bytes)
        .map_err(|e| CliError::Environment(format!("cannot write `{}`: {e}", path.display())))
}
