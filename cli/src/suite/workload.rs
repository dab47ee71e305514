//! The public benchmark suite's schema (`bench/workloads.json`, a copy of the shared suite) and the
//! tcc program each workload stands for.

use std::path::Path;

use tcc_ir::{CompareOp, DType, Graph};

use tcc::builder::{Builder, BuilderError, Tensor, dims};

/// One workload of the suite: a tensor program at fixed shapes.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
pub struct Workload {
    /// Its name, shared with the peers' rows.
    pub name: String,
    /// `gemm`, `elementwise`, `softmax`, `layernorm`, `rowsum` or `attention`.
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
    /// Attention: sequences.
    #[serde(default)]
    pub batch: Option<u64>,
    /// Attention: query heads.
    #[serde(default)]
    pub heads: Option<u64>,
    /// Attention: key/value heads (fewer than `heads`: grouped-query attention).
    #[serde(default)]
    pub kv_heads: Option<u64>,
    /// Attention: queries, the last `q_len` positions of a sequence of `kv_len`.
    #[serde(default)]
    pub q_len: Option<u64>,
    /// Attention: keys and values.
    #[serde(default)]
    pub kv_len: Option<u64>,
    /// Attention: the size of one head.
    #[serde(default)]
    pub head_dim: Option<u64>,
    /// Attention: `none`, `causal` or `window:W`.
    #[serde(default)]
    pub mask: Option<String>,
    /// Attention: the score transform, `none`, `alibi` or `softcap:C`.
    #[serde(default)]
    pub score: Option<String>,
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
            "attention" => {
                let a = self.attention()?;
                let (b, h, hk, q, kv, d) = (
                    a.batch as f64,
                    a.heads as f64,
                    a.kv_heads as f64,
                    a.q_len as f64,
                    a.kv_len as f64,
                    a.head_dim as f64,
                );
                Ok((4.0 * b * h * d * a.pairs() as f64, elt * (2.0 * b * h * q * d + 2.0 * b * hk * kv * d)))
            }
            other => Err(self.invalid(format!("unknown kind `{other}`"))),
        }
    }

    /// The sizes, mask and score transform of an attention workload, checked.
    pub fn attention(&self) -> Result<Attention, WorkloadError> {
        let a = Attention {
            batch: self.field(self.batch, "batch")?,
            heads: self.field(self.heads, "heads")?,
            kv_heads: self.field(self.kv_heads, "kv_heads")?,
            q_len: self.field(self.q_len, "q_len")?,
            kv_len: self.field(self.kv_len, "kv_len")?,
            head_dim: self.field(self.head_dim, "head_dim")?,
            mask: match self.mask.as_deref().unwrap_or("none") {
                "none" => Mask::None,
                "causal" => Mask::Causal,
                other => match other.strip_prefix("window:").map(str::parse::<u64>) {
                    Some(Ok(w)) if w >= 1 => Mask::Window(w),
                    _ => {
                        return Err(
                            self.invalid(format!("unknown mask `{other}` (none, causal, window:W with W >= 1)"))
                        );
                    }
                },
            },
            score: match self.score.as_deref().unwrap_or("none") {
                "none" => Score::None,
                "alibi" => Score::Alibi,
                other => match other.strip_prefix("softcap:").map(str::parse::<f64>) {
                    Some(Ok(c)) if c.is_finite() && c > 0.0 => Score::Softcap(c),
                    _ => {
                        return Err(
                            self.invalid(format!("unknown score `{other}` (none, alibi, softcap:C with C > 0)"))
                        );
                    }
                },
            },
        };
        if a.heads == 0 || a.kv_heads == 0 || !a.heads.is_multiple_of(a.kv_heads) {
            return Err(
                self.invalid(format!("heads ({}) must be a positive multiple of kv_heads ({})", a.heads, a.kv_heads))
            );
        }
        if a.q_len > a.kv_len {
            return Err(self.invalid(format!(
                "q_len ({}) exceeds kv_len ({}): queries are the last q_len positions of the sequence",
                a.q_len, a.kv_len
            )));
        }
        if a.head_dim == 0 {
            return Err(self.invalid("head_dim must be positive"));
        }
        if a.kv_len > i32::MAX as u64 {
            return Err(self.invalid("kv_len must fit i32 (positions are i32)"));
        }
        Ok(a)
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
            "attention" => self.attention()?.build(&b, dtype),
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

/// An attention workload's mask: which keys a query sees. Queries are the last `q_len` positions of
/// a sequence of `kv_len`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mask {
    /// Every key.
    None,
    /// Keys at or before the query's position.
    Causal,
    /// Keys at or before the query's position and fewer than `W` positions back.
    Window(u64),
}

/// An attention workload's score transform, applied after the scale and before the mask.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Score {
    /// The scaled scores.
    None,
    /// `+ slope_h * (key position - query position)`, `slope_h = 2^(-8 (h + 1) / heads)`.
    Alibi,
    /// `C * tanh(score / C)`.
    Softcap(f64),
}

/// An attention workload, checked: Q `[batch, heads, q_len, head_dim]`, K and V
/// `[batch, kv_heads, kv_len, head_dim]`, output `[batch, heads, q_len, head_dim]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Attention {
    /// Sequences.
    pub batch: u64,
    /// Query heads.
    pub heads: u64,
    /// Key/value heads; query head `i` uses head `i / (heads / kv_heads)`.
    pub kv_heads: u64,
    /// Queries.
    pub q_len: u64,
    /// Keys and values.
    pub kv_len: u64,
    /// The size of one head.
    pub head_dim: u64,
    /// Which keys each query sees.
    pub mask: Mask,
    /// The score transform.
    pub score: Score,
}

impl Attention {
    /// The (query, key) pairs the mask keeps, per head: peers.py's `attention_pairs`.
    pub fn pairs(&self) -> u64 {
        let offset = self.kv_len - self.q_len;
        let seen = |i: u64| match self.mask {
            Mask::None => self.kv_len,
            Mask::Causal => self.kv_len.min(i + offset + 1),
            Mask::Window(w) => w.min(i + offset + 1),
        };
        (0..self.q_len).map(seen).sum()
    }

    /// The program, written as plain tensor math the way a user would: scores `Q Kᵀ` (input dtype,
    /// f32 accumulation) in f32 times `1/sqrt(head_dim)`, the score transform, the mask as `select`
    /// with `-inf` on comparisons of `iota` positions, the max-subtract softmax in f32, the
    /// probabilities in the input dtype times V (as PyTorch's formula in peers.py). Grouped heads
    /// read K and V through `reshape`/`broadcast_to`, never a copy.
    fn build(&self, b: &Builder, dtype: DType) -> Tensor {
        let (bt, h, hk, q, kv, d) = (self.batch, self.heads, self.kv_heads, self.q_len, self.kv_len, self.head_dim);
        let f32 = DType::F32;
        let query = b.input("q", dtype, dims![bt, h, q, d]);
        let (mut key, mut value) =
            (b.input("k", dtype, dims![bt, hk, kv, d]), b.input("v", dtype, dims![bt, hk, kv, d]));
        if hk != h {
            // Each K/V head serves `group` consecutive query heads.
            let group = h / hk;
            let expand = |t: &Tensor| {
                t.reshape(dims![bt, hk, 1, kv, d])
                    .broadcast_to(dims![bt, hk, group, kv, d])
                    .reshape(dims![bt, h, kv, d])
            };
            (key, value) = (expand(&key), expand(&value));
        }
        let mut s = query.matmul(&key.t());
        if dtype != f32 {
            s = s.cast(f32);
        }
        s = s.mul(&b.constant(1.0 / (d as f64).sqrt(), f32));
        // Positions: queries are the last q_len of the sequence, keys all of it.
        let key_pos = b.iota(kv);
        let mut query_pos = b.iota(q).reshape(dims![q, 1]);
        if kv != q {
            query_pos = query_pos.add(&b.constant((kv - q) as f64, DType::I32));
        }
        match self.score {
            Score::None => {}
            Score::Softcap(c) => {
                let cap = b.constant(c, f32);
                s = cap.mul(&s.div(&cap).tanh());
            }
            Score::Alibi => {
                // slope_h = 2^(-8 (h + 1) / heads), one per head: [heads, 1, 1].
                let exponent = b.iota(h).cast(f32).add(&b.constant(1.0, f32)).mul(&b.constant(-8.0 / h as f64, f32));
                let slope = b.constant(2.0, f32).pow(&exponent).reshape(dims![h, 1, 1]);
                let distance = key_pos.sub(&query_pos).cast(f32);
                s = s.add(&slope.mul(&distance));
            }
        }
        let neg_inf = b.constant(f64::NEG_INFINITY, f32);
        match self.mask {
            Mask::None => {}
            Mask::Causal => s = query_pos.compare(&key_pos, CompareOp::Ge).select(&s, &neg_inf),
            Mask::Window(w) => {
                let seen = query_pos.compare(&key_pos, CompareOp::Ge);
                let near = query_pos.sub(&key_pos).compare(&b.constant(w as f64, DType::I32), CompareOp::Lt);
                s = near.select(&seen.select(&s, &neg_inf), &neg_inf);
            }
        }
        let e = s.sub(&s.max(&[-1], true)).exp();
        let mut p = e.div(&e.sum(&[-1], true));
        if dtype != f32 {
            p = p.cast(dtype);
        }
        p.matmul(&value)
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
            ..Workload::default()
        };
        assert_eq!(w.flops_bytes().unwrap(), (48.0, 2.0 * (8.0 + 12.0 + 6.0 + 3.0)));
    }

    fn attention(dtype: &str, sizes: [u64; 6], mask: &str, score: &str) -> Workload {
        let [batch, heads, kv_heads, q_len, kv_len, head_dim] = sizes;
        Workload {
            name: format!("attn_{mask}_{score}"),
            kind: "attention".into(),
            dtype: dtype.into(),
            batch: Some(batch),
            heads: Some(heads),
            kv_heads: Some(kv_heads),
            q_len: Some(q_len),
            kv_len: Some(kv_len),
            head_dim: Some(head_dim),
            mask: Some(mask.into()),
            score: Some(score.into()),
            ..Workload::default()
        }
    }

    #[test]
    fn attention_flops_count_the_pairs_the_mask_keeps() {
        // peers.py: causal with 2 queries at the end of 5 keys sees 4 + 5 pairs; window:2 sees 2 + 2.
        let elt = 2.0;
        let bytes = elt * (2.0 * 2.0 * 3.0 * 2.0 * 8.0 + 2.0 * 2.0 * 1.0 * 5.0 * 8.0);
        for (mask, pairs) in [("none", 10.0), ("causal", 9.0), ("window:2", 4.0)] {
            let w = attention("f16", [2, 3, 1, 2, 5, 8], mask, "none");
            assert_eq!(w.flops_bytes().unwrap(), (4.0 * 2.0 * 3.0 * 8.0 * pairs, bytes), "{mask}");
        }
        for (bad, field) in [
            (attention("f16", [1, 3, 2, 4, 4, 8], "none", "none"), "kv_heads"),
            (attention("f16", [1, 2, 2, 5, 4, 8], "none", "none"), "q_len"),
            (attention("f16", [1, 2, 2, 4, 4, 8], "window:0", "none"), "mask"),
            (attention("f16", [1, 2, 2, 4, 4, 8], "none", "softcap:x"), "score"),
        ] {
            let e = bad.graph().unwrap_err().to_string();
            assert!(e.contains(field), "{e}");
        }
    }

    /// Attention as the workloads file's `about` defines it, in f64 loops: an independent check of
    /// the program `graph` builds (head mapping, positions, slopes, mask alignment).
    fn reference_attention(a: &Attention, q: &[f64], k: &[f64], v: &[f64]) -> Vec<f64> {
        let (h, hk, sq, sk, d) =
            (a.heads as usize, a.kv_heads as usize, a.q_len as usize, a.kv_len as usize, a.head_dim as usize);
        let mut out = vec![0.0; a.batch as usize * h * sq * d];
        for bi in 0..a.batch as usize {
            for hi in 0..h {
                let kh = hi * hk / h;
                let slope = 2f64.powf(-8.0 * (hi + 1) as f64 / h as f64);
                for i in 0..sq {
                    let qp = i + sk - sq;
                    let row = &q[((bi * h + hi) * sq + i) * d..][..d];
                    let scores: Vec<f64> = (0..sk)
                        .map(|j| {
                            let key = &k[((bi * hk + kh) * sk + j) * d..][..d];
                            let mut s = row.iter().zip(key).map(|(x, y)| x * y).sum::<f64>() / (d as f64).sqrt();
                            match a.score {
                                Score::None => {}
                                Score::Alibi => s += slope * (j as f64 - qp as f64),
                                Score::Softcap(c) => s = c * (s / c).tanh(),
                            }
                            let keep = match a.mask {
                                Mask::None => true,
                                Mask::Causal => j <= qp,
                                Mask::Window(w) => j <= qp && qp - j < w as usize,
                            };
                            if keep { s } else { f64::NEG_INFINITY }
                        })
                        .collect();
                    let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
                    let total: f64 = e.iter().sum();
                    for (j, ej) in e.iter().enumerate() {
                        let val = &v[((bi * hk + kh) * sk + j) * d..][..d];
                        let o = &mut out[((bi * h + hi) * sq + i) * d..][..d];
                        for (o, x) in o.iter_mut().zip(val) {
                            *o += ej / total * x;
                        }
                    }
                }
            }
        }
        out
    }

    #[test]
    fn attention_programs_agree_with_the_definition() {
        use tcc_ir::interp::{Tensor as Value, run_graph};
        let cases = [
            ("f32", [1, 2, 2, 5, 5, 4], "none", "none"),
            ("f32", [2, 2, 2, 5, 5, 4], "causal", "none"),
            ("f32", [1, 4, 2, 3, 7, 4], "causal", "none"),
            ("f32", [1, 2, 1, 6, 6, 8], "window:3", "none"),
            ("f32", [1, 3, 3, 2, 9, 4], "window:4", "none"),
            ("f32", [1, 4, 4, 4, 6, 4], "causal", "alibi"),
            ("f32", [1, 2, 2, 4, 4, 4], "none", "softcap:0.5"),
            ("f32", [1, 4, 1, 1, 8, 4], "causal", "none"),
        ];
        let mut seed = 7u64;
        let mut random = |n: usize| -> Vec<f64> {
            (0..n)
                .map(|_| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    // Exactly representable in f32: multiples of 1/64 in [-2, 2).
                    ((seed >> 33) % 256) as f64 / 64.0 - 2.0
                })
                .collect()
        };
        for (dtype, sizes, mask, score) in cases {
            let w = attention(dtype, sizes, mask, score);
            let a = w.attention().unwrap();
            let g = w.graph().unwrap();
            tcc_ir::verify::verify(&g).unwrap();
            let [b, h, hk, sq, sk, d] = sizes.map(|x| x as usize);
            let (q, k, v) = (random(b * h * sq * d), random(b * hk * sk * d), random(b * hk * sk * d));
            let inputs = [
                Value::new(DType::F32, vec![b, h, sq, d], q.clone()).unwrap(),
                Value::new(DType::F32, vec![b, hk, sk, d], k.clone()).unwrap(),
                Value::new(DType::F32, vec![b, hk, sk, d], v.clone()).unwrap(),
            ];
            let got = run_graph(&g, &inputs).unwrap();
            assert_eq!(got[0].shape, vec![b, h, sq, d]);
            let want = reference_attention(&a, &q, &k, &v);
            let worst = got[0].data.iter().zip(&want).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
            assert!(worst < 1e-5, "{}: max abs error {worst}", w.name);
        }
    }
}
