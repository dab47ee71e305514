//! Tensor-core GEMMs on a CUDA device (feature `gpu-tests`): tcc's matmuls against the
//! interpreter on random shapes (1, off the tile grid, rows not 16-byte aligned), both B layouts,
//! f16 and bf16, batches, fused epilogues, k splits and sampled schedules; and (ignored unless
//! asked) a timing sweep of the benchmark shapes against cuBLAS in the same process, with
//! alternative or explicitly given schedules.

#![cfg(feature = "gpu-tests")]

use std::sync::OnceLock;

use tcc_codegen::ptx::{self, BLayout, GpuArch, MatmulProblem};
use tcc_ir::interp::{Tensor, run_graph};
use tcc_ir::testing::{Tolerance, compare_outputs, random_inputs};
use tcc_ir::{Bindings, DType, Graph, KernelClass, Op, Program, ReduceOp, Schedule, Shape, TensorType, WgmmaSchedule};
use tcc_runtime::HostTensor;
use tcc_runtime::cuda::{Cublas, CudaDevice, GemmShape, TimingOptions};

use crate::common::whole;

/// The CUDA device the tests run on (opened once).
pub(super) fn device() -> &'static CudaDevice {
    static D: OnceLock<CudaDevice> = OnceLock::new();
    D.get_or_init(|| match CudaDevice::open(0) {
        Ok(d) => d,
        Err(e) => panic!("feature `gpu-tests` needs a CUDA device: {e}"),
    })
}

/// A tensor type with constant dims.
pub(super) fn t(dtype: DType, dims: &[u64]) -> TensorType {
    TensorType { dtype, shape: Shape::from_consts(dims) }
}

/// `gelu(a @ b + bias)` (or the plain product) with B stored `[k, n]` or `[n, k]`
/// ([`tcc_ir::testing::gemm_graph`]).
pub(super) fn gemm_graph(dtype: DType, batch: &[u64], m: u64, n: u64, k: u64, nk: bool, epilogue: bool) -> Graph {
    tcc_ir::testing::gemm_graph(dtype, batch, (m, n, k), nk, epilogue).unwrap()
}

/// Two outputs of one product ([`tcc_ir::testing::gemm_two_outputs_graph`]).
fn gemm_two_outputs_graph(dtype: DType, batch: &[u64], m: u64, n: u64, k: u64, nk: bool) -> Graph {
    tcc_ir::testing::gemm_two_outputs_graph(dtype, batch, (m, n, k), nk).unwrap()
}

/// One shape of a timing sweep (run with `--ignored --nocapture` on a GPU): its graph and
/// inputs, a sampled f64 reference, and cuBLAS's time and output on the same inputs.
pub(super) struct SweepShape {
    /// The workload's name in the printed lines.
    pub(super) name: String,
    /// The GEMM graph.
    pub(super) g: Graph,
    /// Its inputs.
    pub(super) host: Vec<HostTensor>,
    /// Sampled f64 reference entries of the plain product.
    want: Vec<(usize, f64)>,
    /// Floating-point operations of the product.
    flops: f64,
    /// cuBLAS's median, in TFLOP/s.
    cublas_tflops: f64,
    /// cuBLAS's output.
    cublas_out: Tensor,
    /// The graph has a fused epilogue (outputs are not compared with the plain product's).
    epilogue: bool,
}

impl SweepShape {
    /// Builds the shape's graph and inputs, times cuBLAS on them and prints its line.
    // Reason: one benchmark shape's fields, as the sweeps' tables list them.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        dev: &CudaDevice,
        blas: &Cublas,
        name: &str,
        dtype: DType,
        (m, n, k): (u64, u64, u64),
        nk: bool,
        epilogue: bool,
        opts: TimingOptions,
    ) -> SweepShape {
        let g = gemm_graph(dtype, &[], m, n, k, nk, epilogue);
        let inputs = random_inputs(&g, &Bindings::new(), 1).unwrap();
        let host: Vec<HostTensor> = inputs.iter().map(|t| HostTensor::from_interp(t).unwrap()).collect();
        let flops = 2.0 * (m * n * k) as f64;
        let want = reference(&inputs[0], &inputs[1], m as usize, n as usize, k as usize, nk, 256);
        let shape = GemmShape { m: m as usize, n: n as usize, k: k as usize, dtype, b_nk: nk };
        let (ct, cout) = blas.time_gemm(dev, shape, &host[0], &host[1], opts).unwrap();
        let cublas_out = cout.to_interp();
        let cublas_tflops = flops / ct.median_ms / 1e9;
        println!(
            "SWEEP {name} cublas median_ms={:.4} tflops={cublas_tflops:.1} ref_err={:.2e}",
            ct.median_ms,
            sampled_rel_err(&cublas_out, &want)
        );
        SweepShape { name: name.to_string(), g, host, want, flops, cublas_tflops, cublas_out, epilogue }
    }

    /// Times tcc with `schedule` (the default when `None`) and prints its line: TFLOP/s, the
    /// ratio to cuBLAS and (for plain products) the sampled errors against the reference and
    /// against cuBLAS's output.
    pub(super) fn time(&self, dev: &CudaDevice, label: &str, schedule: Option<Schedule>, opts: TimingOptions) {
        let name = &self.name;
        let prog = program(&self.g, schedule);
        let start = unix_seconds();
        let tt = match dev.time_program(&prog, &self.host, opts) {
            Ok(t) => t,
            Err(e) => {
                println!("SWEEP {name} tcc [{label}] error: {e}");
                return;
            }
        };
        if std::env::var("TCC_SWEEP_REPS").is_ok() {
            // The timing's window, to match clocks and power sampled beside it.
            println!("SWEEP {name} tcc [{label}] window={start:.3}-{:.3}", unix_seconds());
        }
        let out = dev.run_program(&prog, &self.host).unwrap()[0].to_interp();
        let picks: Vec<(usize, f64)> = self.want.iter().map(|&(i, _)| (i, self.cublas_out.data[i])).collect();
        let cublas_diff = if self.epilogue { f64::NAN } else { sampled_rel_err(&out, &picks) };
        let ref_err = if self.epilogue { f64::NAN } else { sampled_rel_err(&out, &self.want) };
        let tf = self.flops / tt.median_ms / 1e9;
        println!(
            "SWEEP {name} tcc [{label}] median_ms={:.4} tflops={tf:.1} vs_cublas={:.3} ref_err={ref_err:.2e} cublas_diff={cublas_diff:.2e}",
            tt.median_ms,
            tf / self.cublas_tflops,
        );
    }
}

/// Seconds since the Unix epoch.
fn unix_seconds() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// `g` as one matmul kernel, with `schedule` when given.
pub(super) fn program(g: &Graph, schedule: Option<Schedule>) -> Program {
    let mut p = whole(g, KernelClass::MatMul);
    if let Some(s) = schedule {
        p.launches[0].kernel.schedule = s;
    }
    p
}

fn arch() -> GpuArch {
    device().info().arch
}

/// A plain (unbatched) tensor-core problem.
pub(super) fn problem(dtype: DType, m: u64, n: u64, k: u64, nk: bool) -> MatmulProblem {
    MatmulProblem { m, n, k, batch: 1, dtype, b_layout: if nk { BLayout::NK } else { BLayout::KN } }
}

/// Runs `g` under `schedule` on random inputs and compares with the interpreter.
pub(super) fn check(g: &Graph, schedule: Option<Schedule>, seed: u64) -> Result<(), String> {
    check_within(g, schedule, seed, &Tolerance { outlier_fraction: 0.001, ..Tolerance::default() }.scaled(4.0))
}

fn check_within(g: &Graph, schedule: Option<Schedule>, seed: u64, tol: &Tolerance) -> Result<(), String> {
    let inputs = random_inputs(g, &Bindings::new(), seed).map_err(|e| e.to_string())?;
    let expected = run_graph(g, &inputs).map_err(|e| format!("interp: {e}"))?;
    let host: Vec<HostTensor> = inputs.iter().map(|t| HostTensor::from_interp(t).unwrap()).collect();
    let out = device().run_program(&program(g, schedule), &host).map_err(|e| e.to_string())?;
    let actual: Vec<Tensor> = out.iter().map(HostTensor::to_interp).collect();
    compare_outputs(&expected, &actual, tol).map_err(|m| m.to_string())
}

/// A joined product (sibling products' weights side by side along the columns): under the
/// default schedule (B packed), and on sm_90a every TMA warpgroup schedule of the space at four
/// stages (k splits and 192-wide tiles included), which
/// read each weight in place from its own tensor map where every tile lies in one weight (rows
/// off the tiles, parts of 256 and 512 columns), else pack it.
#[test]
fn joined_products_match_the_interpreter() {
    let mut failures = Vec::new();
    let cases: [(u64, u64, &[u64]); 3] =
        [(300, 512, &[512, 256, 256]), (1000, 128, &[256, 768]), (77, 64, &[256, 256])];
    for (i, (m, k, parts)) in cases.into_iter().enumerate() {
        let dtype = if i % 2 == 0 { DType::BF16 } else { DType::F16 };
        let g = tcc_ir::testing::joined_gemm_graph(dtype, (m, k), parts).unwrap();
        let n: u64 = parts.iter().sum();
        let mut schedules = vec![None];
        if arch() == GpuArch::Sm90a {
            let p = problem(dtype, m, n, k, true);
            let space = ptx::wgmma::wgmma_schedule_space(&p, GpuArch::Sm90a);
            let tma = |s: &Schedule| WgmmaSchedule::decode(s).is_ok_and(|w| w.tma && w.stages == 4);
            schedules.extend(space.into_iter().filter(tma).map(Some));
        }
        for (j, s) in schedules.iter().enumerate() {
            if let Err(e) = check(&g, *s, 40 + j as u64) {
                failures.push(format!("{m}x{n}x{k} parts {parts:?} [{s:?}]: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// k splits on the warpgroup kernel (issue 26): every split TMA schedule of the space at four
/// stages (each tiling, every split it lists) computes long-k products with a fused epilogue
/// (bias + gelu, run by the reduce entry) and without, rows and columns off the tiles, both B
/// layouts, 129 k-tiles in splits of a k-tile more (the last split's past the end), within the
/// interpreter's bound plus the f32 accumulation allowance of their depth.
#[test]
fn split_warpgroup_gemms_match_the_interpreter() {
    if arch() != GpuArch::Sm90a {
        return;
    }
    let base = Tolerance { outlier_fraction: 0.0, ..Tolerance::default() }.scaled(4.0);
    let mut failures = Vec::new();
    let mut count = 0;
    for (i, (m, n, k, nk, epilogue)) in
        [(300u64, 264u64, 16384u64, true, true), (130, 512, 8200, false, false)].into_iter().enumerate()
    {
        let dtype = if i == 0 { DType::BF16 } else { DType::F16 };
        let g = gemm_graph(dtype, &[], m, n, k, nk, epilogue);
        let inputs = random_inputs(&g, &Bindings::new(), 60 + i as u64).unwrap();
        let expected = run_graph(&g, &inputs).unwrap();
        let host: Vec<HostTensor> = inputs.iter().map(|t| HostTensor::from_interp(t).unwrap()).collect();
        let tol = base.with_accumulation(k);
        let p = problem(dtype, m, n, k, nk);
        let space = ptx::wgmma::wgmma_schedule_space(&p, GpuArch::Sm90a);
        for s in space.into_iter().filter(|s| s.split_k > 1 && s.stages == 4) {
            count += 1;
            let outcome =
                device().run_program(&program(&g, Some(s)), &host).map_err(|e| e.to_string()).and_then(|out| {
                    let actual: Vec<Tensor> = out.iter().map(HostTensor::to_interp).collect();
                    compare_outputs(&expected, &actual, &tol).map_err(|e| e.to_string())
                });
            if let Err(e) = outcome {
                failures.push(format!("{dtype} {m}x{n}x{k} nk={nk} epi={epilogue} {s}: {e}"));
            }
        }
    }
    assert!(count >= 20, "{count} split schedules");
    assert!(failures.is_empty(), "{} failures of {count}:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn tensor_core_gemms_match_the_interpreter() {
    let shapes: [(u64, u64, u64); 7] =
        [(1, 1, 1), (1, 8, 16), (77, 50, 33), (128, 256, 64), (200, 136, 520), (16, 512, 1024), (129, 257, 31)];
    let mut failures = Vec::new();
    let mut case = 0u64;
    for dtype in [DType::F16, DType::BF16] {
        for (m, n, k) in shapes {
            for nk in [false, true] {
                for epilogue in [false, true] {
                    case += 1;
                    let g = gemm_graph(dtype, &[], m, n, k, nk, epilogue);
                    let p = problem(dtype, m, n, k, nk);
                    let mut schedules = vec![None, Some(ptx::default_matmul_schedule(&p, arch()))];
                    let space = ptx::matmul_schedule_space(&p, arch());
                    if !space.is_empty() {
                        // Two more from the space, split-k ones included when there are any.
                        schedules.push(space.get((case as usize * 7919) % space.len()).copied());
                        schedules.push(space.iter().rev().find(|s| s.split_k > 1).copied());
                    }
                    for s in schedules.into_iter().flatten().map(Some).chain([None]) {
                        if let Err(e) = check(&g, s, case) {
                            failures.push(format!("{dtype} {m}x{n}x{k} nk={nk} epi={epilogue} {s:?}: {e}"));
                        }
                    }
                }
            }
        }
    }
    for nk in [false, true] {
        let g = gemm_graph(DType::F16, &[3], 40, 24, 64, nk, true);
        if let Err(e) = check(&g, None, 5) {
            failures.push(format!("batched nk={nk}: {e}"));
        }
        let g = gemm_graph(DType::BF16, &[2], 33, 17, 9, nk, false);
        if let Err(e) = check(&g, None, 6) {
            failures.push(format!("batched ragged nk={nk}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// The staged epilogue with a residual read as vectors, a scale, a cast and two outputs: n a
/// multiple of 8, 4, 2 and odd (store vectors of 8, 4, 2 and 1), rows off the tile grid, a
/// batch, both layouts, the default and sampled schedules (k splits and warps splitting k
/// included).
#[test]
fn staged_epilogues_with_a_residual_a_cast_and_two_outputs_match_the_interpreter() {
    let cases: [(&[u64], u64, u64, u64); 7] = [
        (&[], 128, 256, 64),
        (&[], 64, 132, 64),
        (&[], 33, 18, 16),
        (&[], 77, 51, 40),
        (&[2], 40, 24, 64),
        (&[], 16, 264, 1000),
        (&[], 200, 136, 520),
    ];
    let mut failures = Vec::new();
    let mut checked = 0;
    for (i, (batch, m, n, k)) in cases.into_iter().enumerate() {
        for nk in [false, true] {
            let dtype = if i % 3 == 2 { DType::BF16 } else { DType::F16 };
            let g = gemm_two_outputs_graph(dtype, batch, m, n, k, nk);
            let p = problem(dtype, m, n, k, nk);
            let mut schedules = vec![None];
            if batch.is_empty() {
                let space = ptx::matmul_schedule_space(&p, arch());
                schedules.push(Some(ptx::default_matmul_schedule(&p, arch())));
                schedules.extend(space.get((i * 7919 + usize::from(nk) * 31) % space.len().max(1)).copied().map(Some));
                schedules.extend(space.iter().rev().find(|s| s.split_k > 1).copied().map(Some));
            }
            // The f32 output is the product rounded to f16/bf16 and widened: an f32 accumulation
            // in another order than the interpreter's may round it one f16/bf16 unit apart.
            let base = Tolerance { outlier_fraction: 0.001, ..Tolerance::default() };
            let tol = Tolerance { f32: Tolerance::default_for(dtype), ..base }.scaled(4.0);
            for s in schedules {
                checked += 1;
                if let Err(e) = check_within(&g, s, 200 + i as u64, &tol) {
                    failures.push(format!("{dtype} {batch:?} {m}x{n}x{k} nk={nk} {s:?}: {e}"));
                }
            }
        }
    }
    assert!(checked >= 30, "{checked}");
    assert!(failures.is_empty(), "{} of {checked} failed:\n{}", failures.len(), failures.join("\n"));
}

/// One-warp-tile blocks whose warps split k (each warp its own ring, sums through shared memory),
/// the skinny default: against the interpreter for 1, 7, 16 and 33 rows, n and k off the tile
/// grid (and rows of B not 16-byte aligned), both layouts, with and without an epilogue, 2, 4
/// and 8 warps and k splits across blocks.
#[test]
fn skinny_gemms_with_warps_splitting_k_match_the_interpreter() {
    let mut failures = Vec::new();
    let mut checked = 0;
    let shapes: [(u64, u64, u64); 6] =
        [(1, 1000, 1000), (7, 520, 4104), (16, 1000, 999), (16, 264, 2056), (33, 136, 1000), (16, 1001, 300)];
    for (case, (m, n, k)) in shapes.into_iter().enumerate() {
        for nk in [false, true] {
            let epilogue = case % 2 == 1;
            let dtype = if case == 3 { DType::BF16 } else { DType::F16 };
            let g = gemm_graph(dtype, &[], m, n, k, nk, epilogue);
            let p = problem(dtype, m, n, k, nk);
            let sliced: Vec<Schedule> = ptx::matmul_schedule_space(&p, arch())
                .into_iter()
                .filter(|s| s.tile_m == s.micro_m && s.tile_n == s.micro_n && s.warps > 1)
                .collect();
            let mut schedules = vec![ptx::default_matmul_schedule(&p, arch())];
            for kw in [2, 4, 8] {
                schedules.extend(sliced.iter().filter(|s| s.warps == kw).nth(case * 5 + usize::from(nk)).copied());
            }
            schedules.extend(sliced.iter().rev().find(|s| s.split_k > 1).copied());
            for s in schedules {
                checked += 1;
                if let Err(e) = check(&g, Some(s), 100 + case as u64) {
                    failures.push(format!("{dtype} {m}x{n}x{k} nk={nk} epi={epilogue} {s}: {e}"));
                }
            }
        }
    }
    assert!(checked >= 30, "{checked}");
    assert!(failures.is_empty(), "{} of {checked} failed:\n{}", failures.len(), failures.join("\n"));
}

/// `||got - want|| / ||want||` over sampled entries of two `[m, n]` results.
pub(super) fn sampled_rel_err(got: &Tensor, want: &[(usize, f64)]) -> f64 {
    let (mut d, mut w) = (0.0, 0.0);
    for &(i, v) in want {
        d += (got.data[i] - v) * (got.data[i] - v);
        w += v * v;
    }
    (d / w.max(1e-30)).sqrt()
}

/// The f64 product at sampled entries.
pub(super) fn reference(
    a: &Tensor,
    b: &Tensor,
    m: usize,
    n: usize,
    k: usize,
    nk: bool,
    samples: usize,
) -> Vec<(usize, f64)> {
    (0..samples)
        .map(|s| {
            let i = (s * 7919 + 13) % m;
            let j = (s * 104_729 + 7) % n;
            let v: f64 =
                (0..k).map(|p| a.data[i * k + p] * if nk { b.data[j * k + p] } else { b.data[p * n + j] }).sum();
            (i * n + j, v)
        })
        .collect()
}

/// Times reading a `[k, n]` operand once with tcc's row reduction (its sum over rows), the same
/// way as the GEMMs: what streaming B costs after an L2 flush without any cache policy.
fn read_floor(dev: &CudaDevice, b: &HostTensor, opts: TimingOptions) {
    let dims: Vec<u64> = b.shape().iter().map(|&d| d as u64).collect();
    let mut g = Graph::new("read_floor");
    let x = g.add_param("b", t(b.dtype(), &dims)).unwrap();
    let y = g.push(Op::Reduce { op: ReduceOp::Sum, input: x, axes: vec![1], keepdim: false }).unwrap();
    g.outputs.push(y);
    match dev.time_program(&whole(&g, KernelClass::RowReduction), std::slice::from_ref(b), opts) {
        Ok(t) => println!(
            "SWEEP read_floor {:?} median_ms={:.4} gbps={:.1}",
            dims,
            t.median_ms,
            (dims.iter().product::<u64>() * b.dtype().size_bytes() as u64) as f64 / t.median_ms / 1e6
        ),
        Err(e) => println!("SWEEP read_floor error: {e}"),
    }
}

/// An alternative schedule of the sweep: (tile m, n, k, warp tile m, n, stages, split_k, warps);
/// warps beyond the warp tiles of a one-warp-tile block split k inside it.
type Alt = (u32, u32, u32, u32, u32, u32, u32, u32);

/// Times the benchmark shapes with tcc's default and alternative schedules and with cuBLAS;
/// prints one line per measurement. Run with `--ignored --nocapture` on the GPU machine.
#[test]
#[ignore]
fn gemm_sweep_against_cublas() {
    let dev = device();
    let blas = Cublas::new(dev).unwrap();
    let opts = TimingOptions { warmup: 3, repetitions: 20, flush_l2: true };
    let shapes: &[(&str, DType, u64, u64, u64, bool, bool)] = &[
        ("gemm_f16_4096", DType::F16, 4096, 4096, 4096, false, false),
        ("gemm_bf16_4096", DType::BF16, 4096, 4096, 4096, false, false),
        ("gemm_f16_4096_bt", DType::F16, 4096, 4096, 4096, true, false),
        ("gemm_bias_gelu_f16_4096", DType::F16, 4096, 4096, 4096, false, true),
        ("gemm_f16_skinny_m16", DType::F16, 16, 4096, 4096, false, false),
        ("gemm_f16_ragged", DType::F16, 1999, 3001, 997, false, false),
        ("gemm_f16_8192", DType::F16, 8192, 8192, 8192, false, false),
        ("gemm_f16_llm_up", DType::F16, 8192, 14336, 4096, false, false),
        ("gemm_f32_4096", DType::F32, 4096, 4096, 4096, false, false),
    ];
    // TCC_SWEEP_SHAPES="name,m,n,k,nk;..." adds f16 products (nk 1: B transposed).
    let extra: Vec<(String, DType, u64, u64, u64, bool, bool)> = std::env::var("TCC_SWEEP_SHAPES")
        .ok()
        .into_iter()
        .flat_map(|list| {
            list.split(';')
                .filter_map(|item| {
                    let f: Vec<&str> = item.split(',').map(str::trim).collect();
                    let num = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok());
                    Some((f.first()?.to_string(), DType::F16, num(1)?, num(2)?, num(3)?, num(4)? == 1, false))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let shapes: Vec<(&str, DType, u64, u64, u64, bool, bool)> = shapes
        .iter()
        .copied()
        .chain(extra.iter().map(|(name, d, m, n, k, nk, e)| (name.as_str(), *d, *m, *n, *k, *nk, *e)))
        .collect();
    let only = std::env::var("TCC_SWEEP_ONLY").ok();
    for &(name, dtype, m, n, k, nk, epi) in &shapes {
        if only.as_ref().is_some_and(|o| !o.split(',').any(|x| x == name)) {
            continue;
        }
        let shape = SweepShape::new(dev, &blas, name, dtype, (m, n, k), nk, epi, opts);
        if m <= 32 && std::env::var("TCC_SWEEP_ALT").is_ok() {
            read_floor(dev, &shape.host[1], opts);
        }
        let mut schedules: Vec<(String, Option<Schedule>)> = vec![("default".into(), None)];
        if dtype != DType::F32 && !epi && std::env::var("TCC_SWEEP_ALT").is_ok() {
            let p = problem(dtype, m, n, k, nk);
            let base = ptx::default_matmul_schedule(&p, arch());
            let alts: &[Alt] = if m <= 32 {
                &[
                    (16, 32, 128, 16, 16, 8, 1, 2),
                    (16, 32, 64, 16, 32, 4, 1, 4),
                    (16, 32, 64, 16, 32, 6, 1, 4),
                    (16, 32, 32, 16, 32, 6, 1, 4),
                    (16, 32, 32, 16, 32, 4, 1, 8),
                    (16, 32, 64, 16, 32, 3, 1, 8),
                    (16, 32, 64, 16, 32, 6, 1, 2),
                    (16, 32, 128, 16, 32, 3, 1, 4),
                    (16, 16, 64, 16, 16, 4, 1, 4),
                    (16, 16, 128, 16, 16, 4, 1, 4),
                    (16, 64, 32, 16, 64, 4, 1, 4),
                    (16, 64, 32, 16, 64, 6, 1, 4),
                    (16, 64, 32, 16, 64, 3, 1, 8),
                    (16, 64, 64, 16, 64, 4, 2, 4),
                    (16, 128, 32, 16, 64, 4, 4, 2),
                ]
            } else {
                &[
                    (128, 256, 32, 64, 64, 3, 1, 8),
                    (128, 256, 32, 64, 64, 4, 1, 8),
                    (256, 128, 32, 64, 64, 3, 1, 8),
                    (128, 128, 64, 64, 64, 3, 1, 4),
                    (64, 128, 32, 32, 64, 4, 1, 4),
                ]
            };
            for &(bm, bn, bk, wm, wn, st, sk, warps) in alts {
                let s = Schedule {
                    tile_m: bm,
                    tile_n: bn,
                    tile_k: bk,
                    micro_m: wm,
                    micro_n: wn,
                    stages: st,
                    split_k: sk,
                    warps,
                    ..base
                };
                match ptx::validate_matmul_schedule(&p, &s, arch()) {
                    Ok(()) if s != base => schedules.push((format!("{s}"), Some(s))),
                    Ok(()) => {}
                    Err(e) => println!("SWEEP {name} skipped: {e}"),
                }
            }
        }
        // TCC_SWEEP_SCHEDULES="bm,bn,bk,wm,wn,stages,split_k,warps[,vector_width];..." times
        // these tensor-core schedules on every selected shape, fused epilogues included (the
        // same schedule on a plain and a fused GEMM shows what the epilogue costs); a vector
        // width of 64 asks for a warpgroup schedule's TMA copies.
        if let Some(list) = std::env::var("TCC_SWEEP_SCHEDULES").ok().filter(|_| dtype != DType::F32) {
            let p = problem(dtype, m, n, k, nk);
            let base = ptx::default_matmul_schedule(&p, arch());
            for item in list.split(';').filter(|x| !x.trim().is_empty()) {
                let v: Vec<u32> = item.split(',').filter_map(|x| x.trim().parse().ok()).collect();
                let (&[bm, bn, bk, wm, wn, stages, split_k, warps], rest) = v.split_at(v.len().min(8)) else {
                    println!("SWEEP {name} skipped: `{item}` is not 8 or 9 numbers");
                    continue;
                };
                let vector_width = rest.first().copied().unwrap_or(base.vector_width);
                let s = Schedule {
                    tile_m: bm,
                    tile_n: bn,
                    tile_k: bk,
                    micro_m: wm,
                    micro_n: wn,
                    stages,
                    split_k,
                    warps,
                    vector_width,
                    ..base
                };
                let valid = if ptx::wgmma::is_wgmma_schedule(&s) && arch() == GpuArch::Sm90a {
                    ptx::wgmma::validate_wgmma_schedule(&p, &s, arch())
                } else {
                    ptx::validate_matmul_schedule(&p, &s, arch())
                };
                match valid {
                    Ok(()) => schedules.push((format!("{s}"), Some(s))),
                    Err(e) => println!("SWEEP {name} skipped: {e}"),
                }
            }
        }
        if dtype == DType::F32 && std::env::var("TCC_SWEEP_ALT").is_ok() {
            // SIMT tiles: (tile_m, tile_n, tile_k, per-thread m, per-thread n).
            for (bm, bn, bk, tm, tn) in
                [(128, 128, 8, 8, 8), (128, 64, 8, 8, 4), (64, 128, 8, 4, 8), (64, 64, 16, 4, 4)]
            {
                let s = Schedule {
                    tile_m: bm,
                    tile_n: bn,
                    tile_k: bk,
                    micro_m: tm,
                    micro_n: tn,
                    ..Schedule::default_for(tcc_ir::Tier::Ptx)
                };
                schedules.push((format!("{s}"), Some(s)));
            }
        }
        // TCC_SWEEP_PICK=i times only the i-th alternative (a fault then names its schedule).
        if let Some(i) = std::env::var("TCC_SWEEP_PICK").ok().and_then(|v| v.parse::<usize>().ok()) {
            schedules = schedules.into_iter().skip(1).nth(i).into_iter().collect();
        }
        for (label, s) in schedules {
            shape.time(dev, &label, s, opts);
        }
    }
}

/// Issue 26: every schedule the tuner may try is right. The schedules of the mma.sync space (and
/// on sm_90a of the wgmma space) compute a product within the interpreter's bound plus the f32
/// accumulation allowance of its depth (`tcc_ir::accuracy`): on long-K products every schedule
/// without a k split and a quarter of the others, else the whole spaces. The tuner had rejected
/// no-split schedules of 256x256x49152 as wrong: their f32 sums were up to 0.017 from the f64
/// reference on values near zero, the error any order of f32 accumulation makes over 49,152
/// terms, not a wrong kernel. One test per product (each compiles hundreds of kernels), each wrong
/// schedule printed as it is found.
fn every_schedule_of_the_spaces_is_right(case: u64, dtype: DType, (m, n, k): (u64, u64, u64), nk: bool) {
    let base = Tolerance { outlier_fraction: 0.0, ..Tolerance::default() }.scaled(4.0);
    let g = gemm_graph(dtype, &[], m, n, k, nk, false);
    let inputs = random_inputs(&g, &Bindings::new(), 900 + case).unwrap();
    let expected = run_graph(&g, &inputs).unwrap();
    let host: Vec<HostTensor> = inputs.iter().map(|t| HostTensor::from_interp(t).unwrap()).collect();
    let tol = base.with_accumulation(k);
    let p = problem(dtype, m, n, k, nk);
    let mut space = ptx::matmul_schedule_space(&p, arch());
    if arch() == GpuArch::Sm90a {
        space.extend(ptx::wgmma::wgmma_schedule_space(&p, GpuArch::Sm90a));
    }
    assert!(!space.is_empty(), "{dtype} {m}x{n}x{k}: an empty space");
    // Long products: every schedule that sums all of k in one block (where the errors were) and
    // every fourth of the others (thousands of kernels to compile otherwise).
    let long = k > 4096;
    let space: Vec<Schedule> =
        space.into_iter().enumerate().filter(|(i, s)| !long || s.split_k == 1 || i % 4 == 0).map(|(_, s)| s).collect();
    // Eight threads compile and run their share of the space (compiling dominates).
    let check = |s: &Schedule| -> Option<String> {
        let outcome = device().run_program(&program(&g, Some(*s)), &host).map_err(|e| e.to_string()).and_then(|out| {
            let actual: Vec<Tensor> = out.iter().map(HostTensor::to_interp).collect();
            compare_outputs(&expected, &actual, &tol).map_err(|e| e.to_string())
        });
        let line = format!("{dtype} {m}x{n}x{k} nk={nk} {s}: {}", outcome.err()?);
        eprintln!("WRONG {line}");
        Some(line)
    };
    let share = space.len().div_ceil(8).max(1);
    let failures: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> =
            space.chunks(share).map(|part| scope.spawn(|| part.iter().filter_map(check).collect::<Vec<_>>())).collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|_| vec!["a checking thread panicked".into()]))
            .collect()
    });
    eprintln!("{dtype} {m}x{n}x{k}: {} schedules checked, {} wrong", space.len(), failures.len());
    assert!(failures.is_empty(), "{} of {} wrong:\n{}", failures.len(), space.len(), failures.join("\n"));
}

#[test]
fn every_schedule_of_the_spaces_is_right_on_a_long_k_product() {
    every_schedule_of_the_spaces_is_right(0, DType::F16, (128, 128, 32768), true);
}

#[test]
fn every_schedule_of_the_spaces_is_right_on_a_long_bf16_product() {
    every_schedule_of_the_spaces_is_right(1, DType::BF16, (64, 192, 20000), false);
}

#[test]
fn every_schedule_of_the_spaces_is_right_on_an_odd_product() {
    every_schedule_of_the_spaces_is_right(2, DType::F16, (77, 50, 33), true);
}

#[test]
fn every_schedule_of_the_spaces_is_right_on_a_one_element_product() {
    every_schedule_of_the_spaces_is_right(3, DType::F16, (1, 1, 1), false);
}
