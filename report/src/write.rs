//! Writing the report's files, each atomically (a temporary file in the same folder, then rename).

use std::path::{Path, PathBuf};

use crate::analysis::analyse;
use crate::error::ReportError;
use crate::input::ReportInput;
use crate::markdown::markdown_report;
use crate::roofline::roofline_svg;
use crate::speedup::speedup_svg;

/// The files [`write_report`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportFiles {
    /// `DIR/roofline.svg`.
    pub roofline: PathBuf,
    /// `DIR/speedup.svg`.
    pub speedup: PathBuf,
    /// `DIR/report.md`.
    pub markdown: PathBuf,
}

/// Renders the report and writes `roofline.svg`, `speedup.svg` and `report.md` into `dir`
/// (created if missing). Everything is rendered before the first file is written, and each file
/// is written to a temporary file in `dir` and renamed into place.
pub fn write_report(input: &ReportInput, dir: &Path) -> Result<ReportFiles, ReportError> {
    validate(input)?;
    let analysis = analyse(input);
    let roofline = roofline_svg(&analysis, &input.ceilings, &input.device)?;
    let speedup = speedup_svg(&analysis, &input.device)?;
    let markdown = markdown_report(input);
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Io { path: dir.to_path_buf(), source })?;
    let files = ReportFiles {
        roofline: dir.join("roofline.svg"),
        speedup: dir.join("speedup.svg"),
        markdown: dir.join("report.md"),
    };
    write_atomically(&files.roofline, roofline.as_bytes())?;
    write_atomically(&files.speedup, speedup.as_bytes())?;
    write_atomically(&files.markdown, markdown.as_bytes())?;
    Ok(files)
}

/// Checks what the charts divide by or take logarithms of.
fn validate(input: &ReportInput) -> Result<(), ReportError> {
    let c = &input.ceilings;
    if !(c.bandwidth_gbps.is_finite() && c.bandwidth_gbps > 0.0) {
        return Err(ReportError::BadCeiling(format!("bandwidth must be positive, got {} GB/s", c.bandwidth_gbps)));
    }
    if c.compute.is_empty() {
        return Err(ReportError::BadCeiling("no compute ceiling was given".to_string()));
    }
    for cc in &c.compute {
        if !(cc.gflops.is_finite() && cc.gflops > 0.0) {
            return Err(ReportError::BadCeiling(format!("{} must be positive, got {} GFLOP/s", cc.label, cc.gflops)));
        }
    }
    for r in input.rows.iter().chain(&input.peers) {
        if let Err(message) = r.check() {
            return Err(ReportError::BadRow {
                workload: r.workload.clone(),
                implementation: r.implementation.clone(),
                message,
            });
        }
    }
    Ok(())
}

/// Writes `bytes` to `path` whole or not at all (`tcc_files::write_atomically`).
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    tcc_files::write_atomically(path, bytes).map_err(|source| ReportError::Io { path: path.to_path_buf(), source })
}
