//! The trusted side of validation: random inputs for a kernel and the outputs a candidate must
//! reproduce, computed once per kernel by the tuner and handed to every worker in a binary file,
//! and the tolerance a candidate's outputs must meet.
//!
//! Two sources of expected outputs:
//! - the reference interpreter (f64 inside), for kernels whose interpretation costs at most
//!   [`INTERP_MAX_WORK`] element operations;
//! - beyond that (large GEMMs), a known-good kernel: the tuned target's default schedule, run once
//!   in a worker ([`Reference::known_good`]) and, where the kernel is a plain matmul, checked at
//!   [`SPOT_CHECKS`] sampled entries against f64 dot products of the same inputs.
//!
//! File format (little-endian): the magic `TCCREF2\n`, the number of inputs and of expected
//! outputs (u32 each), then per tensor its dtype name's length (u8) and name, its rank (u32), its
//! dims (u64 each) and its elements in their own format (`HostTensor` bytes).

use std::path::Path;

use rand::{Rng, SeedableRng};
use tcc_ir::{Bindings, DType, Kernel, Op};
use tcc_runtime::HostTensor;

use super::TuningError;
use tcc_runtime::inputs::sample;

const MAGIC: &[u8; 8] = b"TCCREF2\n";

/// Most element operations the interpreter is asked for per kernel (a matmul counts `m*n*k`);
/// larger kernels are checked against a known-good kernel instead.
pub const INTERP_MAX_WORK: u64 = 1 << 28;

/// Entries of a known-good plain matmul's output checked against f64 dot products.
pub const SPOT_CHECKS: usize = 256;

/// Inputs of one kernel and the outputs a candidate must reproduce on them.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// One tensor per kernel parameter.
    pub inputs: Vec<HostTensor>,
    /// The expected outputs (empty in a file sent to the worker that computes them).
    pub expected: Vec<HostTensor>,
}

/// The interpreter's cost of `kernel` under `bindings` in element operations (a matmul counts
/// `m*n*k`), saturating; `None` when a shape is unbound.
pub fn interp_work(kernel: &Kernel, bindings: &Bindings) -> Option<u64> {
    let g = &kernel.graph;
    let mut work = 0u64;
    for node in &g.nodes {
        let dims = node.ty.shape.resolve(bindings)?;
        let numel = dims.iter().fold(1u64, |a, &d| a.saturating_mul(d as u64));
        let per = match node.op {
            Op::MatMul(a, _) => g.ty(a)?.shape.resolve(bindings)?.last().map_or(1, |&k| k as u64),
            _ => 1,
        };
        work = work.saturating_add(numel.saturating_mul(per));
    }
    Some(work)
}

impl Reference {
    /// Random normal inputs for `kernel` under `bindings` (deterministic for `seed`), refusing any
    /// tensor whose f64 form would exceed `max_bytes`.
    pub fn inputs(
        kernel: &Kernel,
        bindings: &Bindings,
        seed: u64,
        max_bytes: u64,
    ) -> Result<Vec<HostTensor>, TuningError> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut inputs = Vec::with_capacity(kernel.graph.params.len());
        for p in &kernel.graph.params {
            let shape = p.ty.shape.resolve(bindings).ok_or_else(|| {
                TuningError::Unbound(format!("kernel `{}` input `{}` has an unbound shape", kernel.name, p.name))
            })?;
            let numel = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d as u64));
            let n = match (numel, numel.and_then(|n| n.checked_mul(8))) {
                (Some(n), Some(b)) if b <= max_bytes => usize::try_from(n).unwrap_or(usize::MAX),
                _ => {
                    return Err(TuningError::MemoryLimit(format!(
                        "kernel `{}` input `{}` of shape {shape:?} needs more than {max_bytes} bytes",
                        kernel.name, p.name
                    )));
                }
            };
            let data: Vec<f64> = (0..n).map(|_| sample(&mut rng, p.ty.dtype)).collect();
            inputs.push(
                HostTensor::from_f64(p.ty.dtype, shape, &data).map_err(|e| TuningError::Internal(e.to_string()))?,
            );
        }
        Ok(inputs)
    }

    /// Random inputs and the interpreter's outputs on them (see [`Reference::inputs`]).
    pub fn compute(kernel: &Kernel, bindings: &Bindings, seed: u64, max_bytes: u64) -> Result<Reference, TuningError> {
        let inputs = Reference::inputs(kernel, bindings, seed, max_bytes)?;
        let interp: Vec<_> = inputs.iter().map(HostTensor::to_interp).collect();
        let outputs =
            tcc_ir::interp::run_graph_within(&kernel.graph, &interp, bindings, max_bytes).map_err(|e| match e {
                tcc_ir::interp::InterpError::MemoryLimit { .. } => TuningError::MemoryLimit(e.to_string()),
                other => TuningError::Internal(format!("the interpreter failed on kernel `{}`: {other}", kernel.name)),
            })?;
        let expected = outputs
            .iter()
            .map(HostTensor::from_interp)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TuningError::Internal(format!("an interpreter output of `{}`: {e}", kernel.name)))?;
        Ok(Reference { inputs, expected })
    }

    /// Writes the file format above (to a temporary file renamed into place).
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        tcc_files::write_atomically_with(path, |out| {
            out.write_all(MAGIC)?;
            for n in [self.inputs.len(), self.expected.len()] {
                out.write_all(&u32::try_from(n).map_err(std::io::Error::other)?.to_le_bytes())?;
            }
            for t in self.inputs.iter().chain(&self.expected) {
                let name = t.dtype().name().as_bytes();
                out.write_all(&[u8::try_from(name.len()).map_err(std::io::Error::other)?])?;
                out.write_all(name)?;
                out.write_all(&u32::try_from(t.shape().len()).map_err(std::io::Error::other)?.to_le_bytes())?;
                for &d in t.shape() {
                    out.write_all(&(d as u64).to_le_bytes())?;
                }
                out.write_all(t.bytes())?;
            }
            Ok(())
        })
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

    fn tensor(&mut self) -> Result<HostTensor, String> {
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
        let raw = self.take(numel.checked_mul(dtype.size_bytes()).ok_or("element count overflows")?)?;
        HostTensor::from_bytes(dtype, shape, raw.to_vec()).map_err(|e| e.to_string())
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

/// Whether `actual` is within [`tolerance`] of `expected`, plus `allowance` for floats (NaN
/// matches NaN, an infinity only the same infinity).
fn close(expected: f64, actual: f64, tol: f64, allowance: f64) -> bool {
    if expected.is_nan() || actual.is_nan() {
        return expected.is_nan() && actual.is_nan();
    }
    if expected.is_infinite() || actual.is_infinite() {
        return expected == actual;
    }
    (expected - actual).abs() <= tol * expected.abs().max(1.0) + if tol > 0.0 { allowance } else { 0.0 }
}

/// What a kernel's long sums may add to [`tolerance`] (absolute): the f32 accumulation allowance
/// of its longest sum (`tcc_ir::accuracy`). Without it, products with k in the tens of thousands
/// failed validation under every schedule that does not split k (issue 26).
pub fn allowance(kernel: &Kernel, bindings: &Bindings) -> f64 {
    tcc_ir::accuracy::accumulation_allowance(tcc_ir::accuracy::longest_sum(&kernel.graph, bindings))
}

/// The elements of `t` as f64, decoded one at a time (outputs of large GEMMs are compared without
/// f64 copies of them).
fn values(t: &HostTensor) -> impl Iterator<Item = f64> + '_ {
    let dtype = t.dtype();
    t.bytes().chunks_exact(dtype.size_bytes().max(1)).map(move |b| {
        let arr2 = |b: &[u8]| [b[0], b[1]];
        let arr4 = |b: &[u8]| [b[0], b[1], b[2], b[3]];
        match dtype {
            DType::F32 => f64::from(f32::from_le_bytes(arr4(b))),
            DType::F16 => f64::from(half::f16::from_le_bytes(arr2(b))),
            DType::BF16 => f64::from(half::bf16::from_le_bytes(arr2(b))),
            DType::I32 => f64::from(i32::from_le_bytes(arr4(b))),
            DType::Bool => f64::from(u8::from(b[0] != 0)),
        }
    })
}

/// Checks a candidate's outputs against the reference: same count, dtypes and shapes, and every
/// value within [`tolerance`] plus `allowance` (the kernel's [`allowance`]). The error names the
/// first difference.
pub fn compare(expected: &[HostTensor], actual: &[HostTensor], allowance: f64) -> Result<(), String> {
    if expected.len() != actual.len() {
        return Err(format!("{} outputs, expected {}", actual.len(), expected.len()));
    }
    for (i, (e, a)) in expected.iter().zip(actual).enumerate() {
        if e.dtype() != a.dtype() || e.shape() != a.shape() {
            return Err(format!("output {i} is {}{:?}, expected {}{:?}", a.dtype(), a.shape(), e.dtype(), e.shape()));
        }
        if e.bytes() == a.bytes() {
            continue;
        }
        let tol = tolerance(e.dtype());
        if let Some((at, (x, y))) =
            values(e).zip(values(a)).enumerate().find(|&(_, (x, y))| !close(x, y, tol, allowance))
        {
            return Err(format!(
                "output {i} element {at}: expected {x}, got {y} (tolerance {tol:e}, accumulation {allowance:e})"
            ));
        }
    }
    Ok(())
}

/// If `kernel` is a plain 2-D matmul of its two parameters (`a[m,k] @ b[k,n]`, possibly cast),
/// checks `samples` pseudo-random entries of `outputs[0]` against f64 dot products of `inputs`
/// rounded to the output dtype, and returns how many it checked; 0 for any other kernel.
pub fn spot_check(
    kernel: &Kernel,
    inputs: &[HostTensor],
    outputs: &[HostTensor],
    samples: usize,
    seed: u64,
) -> Result<usize, String> {
    let g = &kernel.graph;
    let [out] = g.outputs.as_slice() else { return Ok(0) };
    let mut node = *out;
    if let Some(Op::Cast(x)) = g.node(node).map(|n| &n.op) {
        node = *x;
    }
    let Some(Op::MatMul(a, b)) = g.node(node).map(|n| &n.op) else { return Ok(0) };
    let param = |id: tcc_ir::NodeId| match g.node(id).map(|n| &n.op) {
        Some(Op::Input { index }) => Some(*index),
        _ => None,
    };
    let (Some(ia), Some(ib)) = (param(*a), param(*b)) else { return Ok(0) };
    let (Some(ta), Some(tb), Some(tc)) = (inputs.get(ia), inputs.get(ib), outputs.first()) else {
        return Err("the reference has fewer tensors than the kernel".into());
    };
    let ([m, k], [k2, n], [m2, n2]) = (ta.shape(), tb.shape(), tc.shape()) else { return Ok(0) };
    if k != k2 || m != m2 || n != n2 || *m == 0 || *n == 0 {
        return Err(format!("shapes {:?} @ {:?} -> {:?} do not agree", ta.shape(), tb.shape(), tc.shape()));
    }
    let (av, bv, cv) = (ta.to_f64_vec(), tb.to_f64_vec(), tc.to_f64_vec());
    let dtype = tc.dtype();
    let tol = tolerance(dtype);
    let allowance = tcc_ir::accuracy::accumulation_allowance(*k as u64);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x5eed);
    for _ in 0..samples {
        let (i, j) = (rng.gen_range(0..*m), rng.gen_range(0..*n));
        let dot: f64 = (0..*k).map(|p| av[i * k + p] * bv[p * n + j]).sum();
        let want = HostTensor::from_f64(dtype, vec![1], &[dot]).map_err(|e| e.to_string())?.to_f64_vec()[0];
        let got = cv[i * n + j];
        if !close(want, got, tol, allowance) {
            return Err(format!("entry ({i}, {j}): f64 reference {want}, known-good kernel {got}"));
        }
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcc_ir::{Graph, KernelClass, Schedule, Shape, TensorType, Tier};

    fn matmul_kernel(m: u64, k: u64, n: u64) -> Kernel {
        let mut g = Graph::new("k");
        let t = |dims: &[u64]| TensorType { dtype: DType::F16, shape: Shape::from_consts(dims) };
        let a = g.add_param("a", t(&[m, k])).unwrap();
        let b = g.add_param("b", t(&[k, n])).unwrap();
        let c = g.push(Op::MatMul(a, b)).unwrap();
        g.outputs = vec![c];
        Kernel { name: "k0".into(), class: KernelClass::MatMul, graph: g, schedule: Schedule::default_for(Tier::Ptx) }
    }

    #[test]
    fn file_round_trip_and_truncation() {
        let r = Reference {
            inputs: vec![HostTensor::from_f64(DType::F16, vec![2, 3], &[1.0, -2.0, 0.5, 3.0, 4.0, -0.25]).unwrap()],
            expected: vec![
                HostTensor::from_f64(DType::I32, vec![2], &[7.0, -1.0]).unwrap(),
                HostTensor::from_f64(DType::Bool, vec![], &[1.0]).unwrap(),
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
    fn decoding_one_element_at_a_time_agrees_with_the_runtime() {
        for dtype in [DType::F32, DType::F16, DType::BF16, DType::I32, DType::Bool] {
            let t = HostTensor::from_f64(dtype, vec![5], &[1.5, -2.25, 0.0, 3.0, 1e4]).unwrap();
            assert_eq!(values(&t).collect::<Vec<_>>(), t.to_f64_vec(), "{dtype}");
        }
    }

    #[test]
    fn compare_applies_the_tolerance() {
        let t = |v: &[f64]| HostTensor::from_f64(DType::F32, vec![v.len()], v).unwrap();
        assert!(compare(&[t(&[1.0, f64::NAN])], &[t(&[1.0 + 1e-5, f64::NAN])], 0.0).is_ok());
        assert!(compare(&[t(&[1.0, 2.0])], &[t(&[1.0, 2.1])], 0.0).unwrap_err().contains("element 1"));
        assert!(compare(&[t(&[f64::INFINITY])], &[t(&[1e30])], 0.0).is_err());
        assert!(compare(&[t(&[1.0])], &[], 0.0).is_err());
    }

    #[test]
    fn interp_work_counts_matmul_depth() {
        let k = matmul_kernel(4, 8, 16);
        assert_eq!(interp_work(&k, &Bindings::new()), Some(4 * 8 + 8 * 16 + 4 * 16 * 8));
        assert!(interp_work(&matmul_kernel(4096, 4096, 4096), &Bindings::new()).unwrap() > INTERP_MAX_WORK);
    }

    #[test]
    fn spot_checks_catch_a_wrong_known_good_output() {
        let k = matmul_kernel(8, 32, 16);
        let r = Reference::compute(&k, &Bindings::new(), 3, 1 << 20).unwrap();
        assert_eq!(spot_check(&k, &r.inputs, &r.expected, 64, 1), Ok(64));
        let mut bad = r.expected[0].to_f64_vec();
        for v in &mut bad {
            *v += 4.0;
        }
        let bad = HostTensor::from_f64(DType::F16, vec![8, 16], &bad).unwrap();
        assert!(spot_check(&k, &r.inputs, &[bad], 64, 1).unwrap_err().contains("known-good"));
        // Not a plain matmul: nothing to check.
        let mut g = k.graph.clone();
        let e = g.push(Op::Unary(tcc_ir::UnaryOp::Exp, g.outputs[0])).unwrap();
        g.outputs = vec![e];
        let other = Kernel { graph: g, ..k };
        assert_eq!(spot_check(&other, &r.inputs, &r.expected, 64, 1), Ok(0));
    }
}
