//! Assembling PTX with NVIDIA's `ptxas` (no GPU needed): registers, spills and errors per entry.
//!
//! `ptxas` is found through `TCC_PTXAS`, then `PATH`, then the PyPI wheel `nvidia-cuda-nvcc-cu12`
//! (`pip install nvidia-cuda-nvcc-cu12`; the binary is `nvidia/cuda_nvcc/bin/ptxas` in
//! site-packages).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use super::arch::GpuArch;

/// Why ptxas could not be found or failed.
#[derive(Debug, thiserror::Error)]
pub enum PtxasError {
    /// No ptxas binary was found.
    #[error(
        "ptxas not found: set TCC_PTXAS to its path, put it on PATH, or `pip install nvidia-cuda-nvcc-cu12` \
         (it installs site-packages/nvidia/cuda_nvcc/bin/ptxas)"
    )]
    NotFound,
    /// Running ptxas or writing its input failed.
    #[error("running {path}: {source}")]
    Io {
        /// The binary or file involved.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// ptxas rejected the PTX.
    #[error("ptxas -arch={arch} rejected the PTX:\n{output}")]
    Rejected {
        /// The target.
        arch: &'static str,
        /// Its output.
        output: String,
    },
}

/// What ptxas reported for one entry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EntryReport {
    /// The entry's name.
    pub name: String,
    /// Registers per thread.
    pub registers: u32,
    /// Bytes of spill stores.
    pub spill_stores: u32,
    /// Bytes of spill loads.
    pub spill_loads: u32,
    /// Bytes of stack frame.
    pub stack_bytes: u32,
}

/// What ptxas reported for a module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxasReport {
    /// One report per entry.
    pub entries: Vec<EntryReport>,
    /// ptxas's whole output (`-v`).
    pub output: String,
}

impl PtxasReport {
    /// Total spill bytes (stores plus loads) over every entry.
    pub fn spill_bytes(&self) -> u64 {
        self.entries.iter().map(|e| u64::from(e.spill_stores) + u64::from(e.spill_loads)).sum()
    }
}

fn runs(path: &Path) -> bool {
    Command::new(path).arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Finds ptxas: `TCC_PTXAS`, then `ptxas` on `PATH`, then the `nvidia-cuda-nvcc-cu12` wheel
/// through `python3`.
pub fn find_ptxas() -> Result<PathBuf, PtxasError> {
    if let Some(p) = std::env::var_os("TCC_PTXAS") {
        let p = PathBuf::from(p);
        return if runs(&p) { Ok(p) } else { Err(PtxasError::NotFound) };
    }
    let on_path = PathBuf::from("ptxas");
    if runs(&on_path) {
        return Ok(on_path);
    }
    let script = "import nvidia.cuda_nvcc as m; print(list(m.__path__)[0])";
    if let Ok(out) = Command::new("python3").args(["-c", script]).output()
        && out.status.success()
    {
        let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let p = Path::new(&dir).join("bin").join("ptxas");
        if runs(&p) {
            return Ok(p);
        }
    }
    Err(PtxasError::NotFound)
}

fn number_before(line: &str, unit: &str) -> Option<u32> {
    let i = line.find(unit)?;
    line[..i].split_whitespace().last()?.parse().ok()
}

fn parse(output: &str) -> Vec<EntryReport> {
    let mut entries: Vec<EntryReport> = Vec::new();
    for line in output.lines() {
        if let Some(rest) = line.split("Function properties for ").nth(1) {
            entries.push(EntryReport { name: rest.trim().to_string(), ..EntryReport::default() });
        } else if let Some(e) = entries.last_mut() {
            if line.contains("spill stores") {
                e.stack_bytes = number_before(line, "bytes stack frame").unwrap_or(0);
                e.spill_stores = number_before(line, "bytes spill stores").unwrap_or(0);
                e.spill_loads = number_before(line, "bytes spill loads").unwrap_or(0);
            } else if line.contains("Used") && line.contains("registers") {
                e.registers = number_before(line, "registers").unwrap_or(0);
            }
        }
    }
    entries
}

/// Assembles `ptx` for `arch` with `ptxas -v --warn-on-spills` (output discarded) and reports
/// registers and spills per entry.
pub fn assemble(ptxas: &Path, ptx: &str, arch: GpuArch) -> Result<PtxasReport, PtxasError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let file = std::env::temp_dir().join(format!("tcc-ptxas-{}-{n}.ptx", std::process::id()));
    std::fs::write(&file, ptx).map_err(|source| PtxasError::Io { path: file.display().to_string(), source })?;
    let result = Command::new(ptxas)
        .arg(format!("-arch={}", arch.name()))
        .args(["-v", "--warn-on-spills", "-o", "/dev/null"])
        .arg(&file)
        .output();
    let _ = std::fs::remove_file(&file);
    let out = result.map_err(|source| PtxasError::Io { path: ptxas.display().to_string(), source })?;
    let output = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        return Err(PtxasError::Rejected { arch: arch.name(), output });
    }
    Ok(PtxasReport { entries: parse(&output), output })
}
