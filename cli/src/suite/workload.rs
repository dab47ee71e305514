//! The public benchmark suite's schema (`bench/workloads.json`, a copy of the shared suite) and the
//! tcc program each workload stands for.

use std::path::Path;

use tcc_ir::{DType, Graph};

use tcc::builder::{Builder, BuilderError, Tensor, dims};

/// One workload of the suite: a tensor program at fixed shapes.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct Workload {
    /// Its name, shared with the peers' rows.
    pub name: String,
    /// `gemm`, `elementwise`, `softmax`, `layernorm` or `rowsum`.
    pub kind: String,
    /// `f32`, `f16` or `bf16`.
    pub dtype: String,
    /// GEMM rows.
    #[serde(default)]
    pub m: Option<u64>,
    /// GEMM columns, or the elementwise length.
    #[serde(default)]
    pub n: Option<u64>,
    /// GEMM depth.
    #[serde(default)]
    pub k: Option<u64>,
    /// GEMM epilogue: any of `bias`, `gelu`, `relu`, in order.
    #[serde(default)]
    pub epilogue: Vec<String>,
    /// `kn` (default) or `nk` (B stored transposed, as a linear layer's weight).
    #[serde(default)]
    pub b_layout: Option<String>,
    /// Rows of row-wise workloads.
    #[serde(default)]
    pub rows: Option<u64>,
    /// Columns of row-wise workloads.
    #[serde(default)]
    pub cols: Option<u64>,
}

/// The two suites of the file.
#[derive(Debug, serde::Deserialize)]
struct SuiteFile {
    #[serde(default)]
    gpu: Vec<Workload>,
    #[serde(default)]
    cpu: Vec<Workload>,
}

/// Why a suite or workload cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The file cannot be read.
    #[error("cannot read `{path}`: {message}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// The file is not a valid suite.
    #[error("`{path}` is not a workloads file: {message}")]
    Parse {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// A workload is missing a field or names something unknown.
    #[error("workload `{name}`: {message}")]
    Invalid {
        /// The workload.
        name: String,
        /// Why.
        message: String,
    },
}

/// Reads `suite` (`cpu` or `gpu`) from a workloads file.
pub fn load_suite(path: &Path, suite: &str) -> Result<Vec<Workload>, WorkloadError> {
    let display = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| WorkloadError::Io { path: display.clone(), message: e.to_string() })?;
    let file: SuiteFile = serde_json::from_str(&text)
        .map_err(|e| WorkloadError::Parse { path: display.clone(), message: e.to_string() })?;
    match suite {
        "cpu" => Ok(file.cpu),
        "gpu" => Ok(file.gpu),
        other => Err(WorkloadError::Invalid { name: other.to_string(), message: "suites are `cpu` and `gpu`".into() }),
    }
}

impl Workload {
    fn invalid(&self, message: impl Into<String>) -> WorkloadError {
        WorkloadError::Invalid { name: self.name.clone(), message: message.into() }
    }

    fn field(&self, value: Option<u64>, name: &str) -> Result<u64, WorkloadError> {
        value.ok_or_else(|| self.invalid(format!("missing `{name}`")))
    }

    /// The element type.
    pub fn dtype(&self) -> Result<DType, WorkloadError> {
        match self.dtype.as_str() {
            "f32" => Ok(DType::F32),
            "f16" => Ok(DType::F16),
            "bf16" => Ok(DType::BF16),
            other => Err(self.invalid(format!("unsupported dtype `{other}`"))),
        }
    }

    /// Flops and bytes with the formulas of peers.py's `flops_bytes`, so rows compare directly.
    pub fn flops_bytes(&self) -> Result<(f64, f64), WorkloadError> {
        let elt = self.dtype()?.size_bytes() as f64;
        match self.kind.as_str() {
            "gemm" => {
                let (m, n, k) =
                    (self.field(self.m, "m")? as f64, self.field(self.n, "n")? as f64, self.field(self.k, "k")? as f64);
                let extra = if self.epilogue.iter().any(|e| e == "bias") { n } else { 0.0 };
                Ok((2.0 * m * n * k, elt * (m * k + k * n + m * n + extra)))
            }
            "elementwise" => {
                let n = self.field(self.n, "n")? as f64;
                Ok((2.0 * n, elt * 4.0 * n))
            }
            "softmax" | "layernorm" => {
                let (r, c) = (self.field(self.rows, "rows")? as f64, self.field(self.cols, "cols")? as f64);
                Ok((5.0 * r * c, elt * 2.0 * r * c))
            }
            "rowsum" => {
                let (r, c) = (self.field(self.rows, "rows")? as f64, self.field(self.cols, "cols")? as f64);
                Ok((r * c, elt * (r * c + r)))
            }
            other => Err(self.invalid(format!("unknown kind `{other}`"))),
        }
    }

    /// The workload as a tcc program, written with the builder API the way a user would.
    pub fn graph(&self) -> Result<Graph, WorkloadError> {
        let dtype = self.dtype()?;
        let b = Builder::new(&self.name);
        let output = match self.kind.as_str() {
            "gemm" => self.gemm(&b, dtype)?,
            "elementwise" => {
                let n = self.field(self.n, "n")?;
                let (x, a, c) =
                    (b.input("x", dtype, dims![n]), b.input("a", dtype, dims![n]), b.input("b", dtype, dims![n]));
                x.mul(&a).add(&c).relu()
            }
            "softmax" => {
                let x = b.input("x", dtype, dims![self.field(self.rows, "rows")?, self.field(self.cols, "cols")?]);
                let e = x.sub(&x.max(&[-1], true)).exp();
                e.div(&e.sum(&[-1], true))
            }
            "layernorm" => {
                let cols = self.field(self.cols, "cols")?;
                let x = b.input("x", dtype, dims![self.field(self.rows, "rows")?, cols]);
                let (w, bias) = (b.input("weight", dtype, dims![cols]), b.input("bias", dtype, dims![cols]));
                let xc = x.sub(&x.mean(&[-1], true));
                let var = xc.mul(&xc).mean(&[-1], true);
                xc.mul(&var.add(&b.constant(1e-5, dtype)).rsqrt()).mul(&w).add(&bias)
            }
            "rowsum" => {
                let x = b.input("x", dtype, dims![self.field(self.rows, "rows")?, self.field(self.cols, "cols")?]);
                x.sum(&[-1], false)
            }
            other => return Err(self.invalid(format!("unknown kind `{other}`"))),
        };
        b.finish(&[output]).map_err(|e: BuilderError| self.invalid(e.to_string()))
    }

    fn gemm(&self, b: &Builder, dtype: DType) -> Result<Tensor, WorkloadError> {
        let (m, n, k) = (self.field(self.m, "m")?, self.field(self.n, "n")?, self.field(self.k, "k")?);
        let a = b.input("a", dtype, dims![m, k]);
        let w = match self.b_layout.as_deref() {
            None | Some("kn") => b.input("b", dtype, dims![k, n]),
            Some("nk") => b.input("b", dtype, dims![n, k]).t(),
            Some(other) => return Err(self.invalid(format!("unknown b_layout `{other}`"))),
        };
        let mut y = a.matmul(&w);
        for step in &self.epilogue {
            y = match step.as_str() {
                "bias" => y.add(&b.input("bias", dtype, dims![n])),
                "gelu" => y.gelu(),
                "relu" => y.relu(),
                other => return Err(self.invalid(format!("unknown epilogue step `{other}`"))),
            };
        }
        Ok(y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_of_the_suite_builds() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/workloads.json");
        for suite in ["cpu", "gpu"] {
            let workloads = load_suite(&path, suite).unwrap();
            assert!(!workloads.is_empty());
            for w in workloads {
                let g = w.graph().unwrap();
                tcc_ir::verify::verify(&g).unwrap();
                let (flops, bytes) = w.flops_bytes().unwrap();
                assert!(flops > 0.0 && bytes > 0.0, "{}", w.name);
            }
        }
    }

    #[test]
    fn flops_match_peers_formulas() {
        let w = Workload {
            name: "g".into(),
            kind: "gemm".into(),
            dtype: "f16".into(),
            m: Some(2),
            n: Some(3),
            k: Some(4),
            epilogue: vec!["bias".into()],
            b_layout: None,
            rows: None,
            cols: None,
        };
        assert_eq!(w.flops_bytes().unwrap(), (48.0, 2.0 * (8.0 + 12.0 + 6.0 + 3.0)));
    }
}
