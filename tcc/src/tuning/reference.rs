//! The trusted side of validation: random inputs for a kernel and the reference interpreter's
//! outputs on them, computed once per kernel by the tuner and handed to every worker in a small
//! binary file, and the tolerance a candidate's outputs must meet.
//!
//! File format (little-endian): the magic `TCCREF1\n`, the number of inputs and of expected
//! outputs (u32 each), then per tensor its dtype name's length (u8) and name, its rank (u32), its
//! dims (u64 each) and its values as f64.

use std::io::Write;
use std::path::Path;

use rand::SeedableRng;
use tcc_ir::interp::Tensor;
use tcc_ir::{Bindings, DType, Kernel};

use super::TuningError;
use crate::cli::inputs::sample;

const MAGIC: &[u8; 8] = b"TCCREF1\n";

/// Inputs of one kernel and the interpreter's outputs on them.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// One tensor per kernel parameter.
    pub inputs: Vec<Tensor>,
    /// The interpreter's outputs.
    pub expected: Vec<Tensor>,
}

impl Reference {
    /// Random normal inputs for `kernel` under `bindings` (deterministic for `seed`) and the
    /// interpreter's outputs, refusing any tensor above `max_bytes`.
    pub fn compute(kernel: &Kernel, bindings: &Bindings, seed: u64, max_bytes: u64) -> Result<Reference, TuningError> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut inputs = Vec::with_capacity(kernel.graph.params.len());
        for p in &kernel.graph.params {
            let shape = p.ty.shape.resolve(bindings).ok_or_else(|| {
                TuningError::Unbound(format!("kernel `{}` input `{}` has an unbound shape", kernel.name, p.name))
            })?;
            let numel = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d as u64));
            let bytes = numel.and_then(|n| n.checked_mul(8));
            let n = match (numel, bytes) {
                (Some(n), Some(b)) if b <= max_bytes => usize::try_from(n).unwrap_or(usize::MAX),
                _ => {
                    return Err(TuningError::MemoryLimit(format!(
                        "kernel `{}` input `{}` of shape {shape:?} needs more than {max_bytes} bytes",
                        kernel.name, p.name
                    )));
                }
            };
            let data: Vec<f64> = (0..n).map(|_| sample(&mut rng, p.ty.dtype)).collect();
            let t = Tensor::new(p.ty.dtype, shape, data).map_err(|e| TuningError::Internal(e.to_string()))?;
            inputs.push(t);
        }
        let expected =
            tcc_ir::interp::run_graph_with_limit(&kernel.graph, &inputs, max_bytes).map_err(|e| match e {
                tcc_ir::interp::InterpError::MemoryLimit { .. } => TuningError::MemoryLimit(e.to_string()),
                other => TuningError::Internal(format!("the interpreter failed on kernel `{}`: {other}", kernel.name)),
            })?;
        Ok(Reference { inputs, expected })
    }

    /// Writes the file format above.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
        out.write_all(MAGIC)?;
        for n in [self.inputs.len(), self.expected.len()] {
            out.write_all(&u32::try_from(n).map_err(std::io::Error::other)?.to_le_bytes())?;
        }
        for t in self.inputs.iter().chain(&self.expected) {
            let name = t.dtype.name().as_bytes();
            out.write_all(&[u8::try_from(name.len()).map_err(std::io::Error::other)?])?;
            out.write_all(name)?;
            out.write_all(&u32::try_from(t.shape.len()).map_err(std::io::Error::other)?.to_le_bytes())?;
            for &d in &t.shape {
                out.write_all(&(d as u64).to_le_bytes())?;
            }
            for v in &t.data {
                out.write_all(&v.to_le_bytes())?;
            }
        }
        out.flush()
    }

    /// Reads the file format above, checking every count against the bytes present.
    pub fn read(path: &Path) -> Result<Reference, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mut r = Reader { bytes: &bytes, at: 0 };
        if r.take(MAGIC.len())? != MAGIC {
            return Err("not a reference file".into());
        }
        let (n_in, n_out) = (r.u32()?, r.u32()?);
        let mut tensors = Vec::new();
        for _ in 0..u64::from(n_in) + u64::from(n_out) {
            tensors.push(r.tensor()?);
        }
        if r.at != bytes.len() {
            return Err("trailing bytes in the reference file".into());
        }
        let expected = tensors.split_off(n_in as usize);
        Ok(Reference { inputs: tensors, expected })
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or("truncated reference file")?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b: [u8; 4] = self.take(4)?.try_into().map_err(|_| "truncated")?;
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self) -> Result<u64, String> {
        let b: [u8; 8] = self.take(8)?.try_into().map_err(|_| "truncated")?;
        Ok(u64::from_le_bytes(b))
    }

    fn tensor(&mut self) -> Result<Tensor, String> {
        let len = usize::from(*self.take(1)?.first().ok_or("truncated")?);
        let name = std::str::from_utf8(self.take(len)?).map_err(|_| "bad dtype name")?;
        let dtype = DType::from_name(name).ok_or_else(|| format!("unknown dtype `{name}`"))?;
        let rank = self.u32()?;
        if rank > 8 {
            return Err(format!("rank {rank} is above the limit of 8"));
        }
        let mut shape = Vec::new();
        for _ in 0..rank {
            shape.push(usize::try_from(self.u64()?).map_err(|_| "dimension too large")?);
        }
        let numel = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or("element count overflows")?;
        let raw = self.take(numel.checked_mul(8).ok_or("element count overflows")?)?;
        let data =
            raw.chunks_exact(8).map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])).collect();
        Tensor::new(dtype, shape, data).map_err(|e| e.to_string())
    }
}

/// The largest error a candidate's value may have, relative to `max(1, |expected|)`: a few
/// hundred f32 rounding steps (f32 accumulation order differs from the f64 reference), a few f16
/// or bf16 steps, and exact integers and booleans.
pub fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 1e-3,
        DType::F16 => 2e-2,
        DType::BF16 => 1e-1,
        DType::I32 | DType::Bool => 0.0,
    }
}

/// Checks a candidate's outputs against the reference: same count, dtypes and shapes, and every
/// value within [`tolerance`] (NaN matches NaN, an infinity only the same infinity). The error
/// names the first difference.
pub fn compare(expected: &[Tensor], actual: &[Tensor]) -> Result<(), String> {
    if expected.len() != actual.len() {
        return Err(format!("{} outputs, expected {}", actual.len(), expected.len()));
    }
    for (i, (e, a)) in expected.iter().zip(actual).enumerate() {
        if e.dtype != a.dtype || e.shape != a.shape || e.data.len() != a.data.len() {
            return Err(format!("output {i} is {}{:?}, expected {}{:?}", a.dtype, a.shape, e.dtype, e.shape));
        }
        let tol = tolerance(e.dtype);
        let bad = e.data.iter().zip(&a.data).enumerate().find(|&(_, (&x, &y))| {
            if x.is_nan() || y.is_nan() {
                return !(x.is_nan() && y.is_nan());
            }
            if x.is_infinite() || y.is_infinite() {
                return x != y;
            }
            (x - y).abs() > tol * x.abs().max(1.0)
        });
        if let Some((at, (x, y))) = bad {
            return Err(format!("output {i} element {at}: expected {x}, got {y} (tolerance {tol:e})"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_round_trip_and_truncation() {
        let r = Reference {
            inputs: vec![Tensor::new(DType::F16, vec![2, 3], vec![1.0, -2.0, 0.5, 3.0, 4.0, -0.25]).unwrap()],
            expected: vec![
                Tensor::new(DType::I32, vec![2], vec![7.0, -1.0]).unwrap(),
                Tensor::scalar(DType::Bool, 1.0),
            ],
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ref.bin");
        r.write(&path).unwrap();
        assert_eq!(Reference::read(&path).unwrap(), r);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        assert!(Reference::read(&path).is_err());
        std::fs::write(&path, b"garbage").unwrap();
        assert!(Reference::read(&path).is_err());
    }

    #[test]
    fn compare_applies_the_tolerance() {
        let t = |v: Vec<f64>| Tensor::new(DType::F32, vec![v.len()], v).unwrap();
        assert!(compare(&[t(vec![1.0, f64::NAN])], &[t(vec![1.0 + 1e-5, f64::NAN])]).is_ok());
        assert!(compare(&[t(vec![1.0, 2.0])], &[t(vec![1.0, 2.1])]).unwrap_err().contains("element 1"));
        assert!(compare(&[t(vec![f64::INFINITY])], &[t(vec![1e30])]).is_err());
        assert!(compare(&[t(vec![1.0])], &[]).is_err());
    }
}
