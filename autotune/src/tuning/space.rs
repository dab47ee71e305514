//! The search space of one kernel: the optimizer's proposals first, then variations of the knobs
//! the target's code generator obeys (cranelift and the LLVM CPU tier here; on a GPU, the
//! tensor-core schedules of `tcc_codegen::ptx::matmul_schedule_space` or a pruned SIMT knob space).
//! For the CPU tiers:
//!
//! - matmul kernels: the register tile (`micro_m x micro_n`, shapes the cranelift tier assembles
//!   as they are on a host with AVX and FMA: 256-bit tiles of at most 12 `ymm` accumulators where
//!   `micro_n` is a multiple of 8, 128-bit ones of 12 `xmm` accumulators where it is not; a host
//!   without them rounds the larger ones down to 12 f32x4 accumulators), the cache blocks
//!   (`tile_m`, `tile_k`, none much larger than the matrix; not `tile_n`: both CPU tiers pack all of
//!   B once and sweep every column, so it changes nothing) and the thread count;
//! - every other class: the thread count (the cranelift tier ignores the vector width, tiles and
//!   GPU knobs there, so varying them would only measure noise).
//!
//! Every candidate is variant 0: a kernel's cache key fixes its ops, so alternatives of the
//! optimizer that fuse differently are different kernels; the alternatives' schedules for this
//! same kernel join the proposals.

use crate::search::{HardwareLimits, Knobs};
use crate::{Candidate, SearchSpace};
use tcc_codegen::ptx::wgmma::wgmma_schedule_space;
use tcc_codegen::ptx::{BLayout, GpuArch, MatmulProblem, matmul_schedule_space, simt_schedule_runs};
use tcc_ir::{Bindings, DType, Kernel, KernelClass, Op, Schedule, Tier};

use tcc_ir::schedule::{AttentionDevice, GpuAttentionSchedule};
use tcc_ir::target::{CpuTier, Target};

/// Register tiles (`micro_m`, `micro_n`) tried for matmul kernels on the cranelift tier: 256-bit
/// tiles first (6 x 16 its default), then 128-bit ones.
pub const MICRO_TILES: [(u32, u32); 9] = [(6, 16), (4, 24), (4, 16), (8, 8), (2, 32), (4, 12), (3, 16), (6, 8), (8, 4)];
/// Cache-block rows tried (at most the next power of two of the matrix's rows).
pub const TILE_M: [u32; 4] = [16, 32, 64, 128];
/// Cache-block depths tried.
pub const TILE_K: [u32; 4] = [32, 64, 128, 256];

/// Thread counts worth trying on a host with `host_threads` cores: 1, the powers of two below
/// it, and all of them.
pub fn thread_choices(host_threads: u32) -> Vec<u32> {
    let host = host_threads.max(1);
    let mut out: Vec<u32> = std::iter::successors(Some(1u32), |t| t.checked_mul(2)).take_while(|&t| t < host).collect();
    out.push(host);
    out
}

/// The `(m, n, k)` of a kernel's matmul under `bindings`, if it has one with bound sizes.
pub fn matmul_dims(kernel: &Kernel, bindings: &Bindings) -> Option<(u64, u64, u64)> {
    let g = &kernel.graph;
    g.nodes.iter().find_map(|node| match node.op {
        Op::MatMul(a, b) => {
            let (a, b) = (g.ty(a)?.shape.resolve(bindings)?, g.ty(b)?.shape.resolve(bindings)?);
            let (m, k) = (*a.get(a.len().checked_sub(2)?)?, *a.last()?);
            let n = *b.last()?;
            Some((m as u64, n as u64, k as u64))
        }
        _ => None,
    })
}

/// Values of `choices` up to the next power of two of `size` (at least the smallest choice).
fn up_to(choices: &[u32], size: u64) -> Vec<u32> {
    let cap = size.max(1).next_power_of_two();
    let mut kept: Vec<u32> = choices.iter().copied().filter(|&c| u64::from(c) <= cap).collect();
    if kept.is_empty() {
        kept.extend(choices.iter().copied().min());
    }
    kept
}

/// The knob variations of `base` for `kernel` on the CPU tier.
pub fn variations(kernel: &Kernel, base: &Schedule, bindings: &Bindings, host_threads: u32) -> Vec<Schedule> {
    let threads = thread_choices(host_threads);
    let mut out = Vec::new();
    match (kernel.class, matmul_dims(kernel, bindings)) {
        (KernelClass::MatMul, Some((m, _, k))) => {
            for &(micro_m, micro_n) in &MICRO_TILES {
                for &tile_m in &up_to(&TILE_M, m) {
                    for &tile_k in &up_to(&TILE_K, k) {
                        for &t in &threads {
                            out.push(Schedule { micro_m, micro_n, tile_m, tile_k, threads: t, ..*base });
                        }
                    }
                }
            }
        }
        _ => out.extend(threads.iter().map(|&t| Schedule { threads: t, ..*base })),
    }
    out
}

/// The search space of `kernel`: `proposals` (the optimizer's schedules for it, best first) come
/// first; variations of the first proposal follow, cheaper the fewer knobs they change. Schedules
/// outside the autotuner's bounds or the host's thread count are dropped.
pub fn cpu_space(kernel: &Kernel, proposals: &[Schedule], bindings: &Bindings, host_threads: u32) -> SearchSpace {
    let base = proposals.first().copied().unwrap_or(kernel.schedule);
    ranked_space(proposals, &base, variations(kernel, &base, bindings, host_threads), host_threads)
}

fn knobs_changed(a: &Schedule, b: &Schedule) -> u32 {
    let pairs = [
        (a.tile_m, b.tile_m),
        (a.tile_n, b.tile_n),
        (a.tile_k, b.tile_k),
        (a.micro_m, b.micro_m),
        (a.micro_n, b.micro_n),
        (a.vector_width, b.vector_width),
        (a.threads, b.threads),
    ];
    pairs.iter().map(|(x, y)| u32::from(x != y)).sum()
}

/// Register tiles (`micro_m`, `micro_n`) tried on the LLVM CPU tier (`micro_n` in elements; the
/// backend rounds it to whole vectors and caps the tile at 28 vector registers).
pub const LLVM_MICRO_TILES: [(u32, u32); 8] =
    [(4, 32), (6, 32), (8, 32), (12, 32), (6, 16), (12, 16), (4, 64), (6, 48)];
/// Cache-block rows tried on the LLVM CPU tier.
pub const LLVM_TILE_M: [u32; 3] = [128, 256, 512];
/// Cache-block depths tried on the LLVM CPU tier.
pub const LLVM_TILE_K: [u32; 3] = [128, 256, 512];

/// The search space of `kernel` on the LLVM CPU tier (whose workers obey the schedule's tiles):
/// the optimizer's proposals, then for matmul kernels the register tiles, cache blocks (none much
/// larger than the matrix) and thread counts above, for other kernels the thread count.
pub fn llvm_cpu_space(kernel: &Kernel, proposals: &[Schedule], bindings: &Bindings, host_threads: u32) -> SearchSpace {
    let base = proposals.first().copied().unwrap_or(kernel.schedule);
    let threads = thread_choices(host_threads);
    let mut variations = Vec::new();
    match (kernel.class, matmul_dims(kernel, bindings)) {
        (KernelClass::MatMul, Some((m, _, k))) => {
            for &(micro_m, micro_n) in &LLVM_MICRO_TILES {
                for &tile_m in &up_to(&LLVM_TILE_M, m) {
                    for &tile_k in &up_to(&LLVM_TILE_K, k) {
                        for &t in &threads {
                            variations.push(Schedule { micro_m, micro_n, tile_m, tile_k, threads: t, ..base });
                        }
                    }
                }
            }
        }
        _ => variations.extend(threads.iter().map(|&t| Schedule { threads: t, ..base })),
    }
    ranked_space(proposals, &base, variations, host_threads)
}

/// Proposals first (in order), then variations of `base`, cheaper the fewer knobs they change;
/// out-of-bounds schedules and thread counts above the host's are dropped.
fn ranked_space(proposals: &[Schedule], base: &Schedule, variations: Vec<Schedule>, host_threads: u32) -> SearchSpace {
    let limits = HardwareLimits {
        max_threads_per_block: 0,
        max_shared_bytes: 0,
        element_bytes: 4,
        max_host_threads: host_threads.max(1),
    };
    let mut candidates: Vec<Candidate> = Vec::new();
    for (i, s) in proposals.iter().enumerate() {
        candidates.push(Candidate { variant: 0, schedule: *s, cost: i as f64 * 1e-3 });
    }
    for (i, s) in variations.into_iter().enumerate() {
        let changed = knobs_changed(base, &s);
        candidates.push(Candidate { variant: 0, schedule: s, cost: f64::from(changed) + i as f64 * 1e-6 });
    }
    candidates.retain(|c| limits.admits(&c.schedule));
    SearchSpace::new(candidates)
}

/// Keeps a GPU matmul schedule the code generator can build for the kernel (the pruning hook of
/// [`gpu_space`]).
pub type GpuPrune<'a> = &'a (dyn Fn(&Schedule) -> bool + Sync);

/// The knob values of the GPU matmul space: block tiles, depth, per-thread (SIMT) or per-warp
/// (tensor-core) register tiles, pipeline stages, warps, split-k (only when the output has too
/// few tiles to fill the GPU) and block swizzle, each no larger than the matrix needs.
pub fn gpu_knobs(base: &Schedule, m: u64, n: u64, k: u64) -> Knobs {
    let fit = |choices: &[u32], size: u64| up_to(choices, size);
    let few_tiles = m.div_ceil(64) * n.div_ceil(64) < 132;
    Knobs {
        tier: Tier::Ptx,
        tile_m: fit(&[16, 32, 64, 128, 256], m),
        tile_n: fit(&[16, 32, 64, 128, 256], n),
        tile_k: fit(&[4, 8, 16, 32, 64], k),
        micro_m: vec![1, 2, 4, 8, 16, 32, 64],
        micro_n: vec![1, 2, 4, 8, 16, 32, 64],
        vector_width: vec![base.vector_width],
        stages: vec![1, 2, 3, 4],
        warps: vec![1, 2, 4, 8, 16],
        split_k: if few_tiles && k >= 1024 { vec![1, 2, 4, 8] } else { vec![1] },
        swizzle: vec![1, 8],
        threads: vec![base.threads],
    }
}

/// Whether the tuner measures `s` for the SIMT matmul on `arch`: the PTX backend runs it as it is
/// ([`tcc_codegen::ptx::simt_schedule_runs`], the lowering's own check), with at most 16 outputs
/// per thread, `warps` saying the thread count, and no knob the lowering ignores set away from its
/// neutral value (so no two candidates are the same kernel).
pub fn simt_admits(s: &Schedule, arch: GpuArch) -> bool {
    let threads = match (s.tile_m.checked_div(s.micro_m), s.tile_n.checked_div(s.micro_n)) {
        (Some(rows), Some(cols)) => u64::from(rows) * u64::from(cols),
        _ => return false,
    };
    simt_schedule_runs(s, arch)
        && u64::from(s.micro_m) * u64::from(s.micro_n) <= 16
        && u64::from(s.warps) * 32 == threads
        && s.stages == 1
        && s.split_k == 1
        && s.swizzle == 1
}

/// A rough model of a GPU matmul schedule's time (lower is better; it only orders the search):
/// global-memory traffic of the operand tiles plus the work of the blocks, rounded up to whole
/// waves over `sm_count` SMs (resident blocks per SM limited by threads and by the shared memory
/// of the pipeline stages), with larger register tiles issuing fewer loads per FMA.
fn gpu_cost(s: &Schedule, m: u64, n: u64, k: u64, sm_count: u32) -> f64 {
    let (bm, bn) = (f64::from(s.tile_m), f64::from(s.tile_n));
    let (m, n, k) = (m as f64, n as f64, k as f64);
    let blocks = (m / bm).ceil() * (n / bn).ceil() * f64::from(s.split_k);
    let by_threads = 2048.0 / (f64::from(s.warps.max(1)) * 32.0);
    let shared = f64::from(s.stages.max(1)) * (bm + bn) * f64::from(s.tile_k) * 2.0;
    let by_shared = (228.0 * 1024.0 / shared.max(1.0)).floor();
    let per_wave = f64::from(sm_count.max(1)) * by_threads.min(by_shared).clamp(1.0, 16.0);
    let waves = (blocks / per_wave).ceil().max(1.0);
    let fill = blocks / (waves * per_wave);
    let traffic = m * n * k * (1.0 / bm + 1.0 / bn) * 2.0;
    let ilp = f64::from(s.micro_m * s.micro_n).max(1.0).sqrt().min(8.0);
    let flops = 2.0 * m * n * k / (fill.max(0.05) * ilp);
    traffic / 10.0 + flops / 100.0 + f64::from(s.stages.saturating_sub(3)) * 1e3
}

/// The tensor-core problem of a kernel's first matmul (f16 or bf16 operands), as the PTX
/// backend sees it: `[batch.., m, k] @ [k, n]`, B transposed (`NK`) when it is a permute that swaps
/// its last two axes.
pub fn matmul_problem(kernel: &Kernel, bindings: &Bindings) -> Option<MatmulProblem> {
    let g = &kernel.graph;
    g.nodes.iter().find_map(|node| {
        let Op::MatMul(a, b) = node.op else { return None };
        let (ta, tb) = (g.ty(a)?, g.ty(b)?);
        if !matches!(ta.dtype, DType::F16 | DType::BF16) || tb.dtype != ta.dtype {
            return None;
        }
        let out = node.ty.shape.resolve(bindings)?;
        let ad = ta.shape.resolve(bindings)?;
        let r = out.len();
        if r < 2 || ad.len() < 2 {
            return None;
        }
        let swapped = match g.node(b).map(|n| &n.op) {
            Some(Op::Permute { perm, .. }) => {
                let p = perm.len();
                p >= 2 && perm[p - 1] == p - 2 && perm[p - 2] == p - 1 && (0..p - 2).all(|i| perm[i] == i)
            }
            _ => false,
        };
        Some(MatmulProblem {
            m: out[r - 2] as u64,
            n: out[r - 1] as u64,
            k: *ad.last()? as u64,
            batch: out[..r - 2].iter().map(|&d| d as u64).product(),
            dtype: ta.dtype,
            b_layout: if swapped { BLayout::NK } else { BLayout::KN },
        })
    })
}

/// The knob-product space of a GPU matmul ([`gpu_knobs`]) kept by `prune` and ordered by the
/// traffic-and-waves model for `sm_count` SMs: the hook for a lowering that publishes only a
/// validator.
pub fn gpu_knob_space(m: u64, n: u64, k: u64, base: &Schedule, sm_count: u32, prune: GpuPrune<'_>) -> Vec<Candidate> {
    let limits = HardwareLimits {
        max_threads_per_block: 1024,
        max_shared_bytes: 227 * 1024,
        element_bytes: 2,
        max_host_threads: 0,
    };
    let model = |_: u32, s: &Schedule| prune(s).then(|| gpu_cost(s, m, n, k, sm_count));
    SearchSpace::enumerate(1, &gpu_knobs(base, m, n, k), &limits, &model, usize::MAX)
        .map(|space| space.candidates().to_vec())
        .unwrap_or_default()
}

/// The search space of `kernel` on the GPU `arch` with `sm_count` SMs. The optimizer's proposals
/// come first. Matmul kernels with f16/bf16 operands take every schedule the tensor-core lowering
/// lists ([`matmul_schedule_space`], each valid by construction); other matmuls (the SIMT lowering)
/// take [`gpu_knob_space`] pruned by [`simt_admits`]; both are ordered by the cost model. Other
/// attention kernels take the attention kernel's space ([`GpuAttentionSchedule::space`]); other
/// kernel classes have nothing the PTX backend varies: their space is the proposals. With
/// `max_len`, the space is thinned evenly along the cost order to at most that many candidates
/// (the proposals are kept).
pub fn gpu_space(
    kernel: &Kernel,
    proposals: &[Schedule],
    bindings: &Bindings,
    arch: GpuArch,
    sm_count: u32,
    max_len: Option<usize>,
) -> SearchSpace {
    let base = proposals.first().copied().unwrap_or(kernel.schedule);
    let mut rest: Vec<Candidate> = Vec::new();
    let mut warpgroup: Vec<Candidate> = Vec::new();
    if kernel.class == KernelClass::MatMul {
        // A dual product's kernel is one product of both products' columns, in the schedules it
        // runs (warpgroup ones only over `[n, k]` Bs).
        let dual = tcc_ir::DualProduct::find(&kernel.graph).is_some();
        let problem =
            matmul_problem(kernel, bindings).map(|p| if dual { MatmulProblem { n: 2 * p.n, ..p } } else { p });
        let runs = |s: &Schedule, p: &MatmulProblem| {
            !dual
                || (tcc_ir::dual::runs_schedule(s)
                    && (p.b_layout == BLayout::NK || !tcc_ir::schedule::is_warpgroup_encoding(s)))
        };
        let listed = problem.map(|p| matmul_schedule_space(&p, arch)).unwrap_or_default();
        if let (Some(p), false) = (problem, listed.is_empty()) {
            let cost = |s: &Schedule| gpu_cost(s, p.m, p.n, p.k * p.batch, sm_count);
            rest = listed
                .into_iter()
                .filter(|s| runs(s, &p))
                .map(|s| Candidate { variant: 0, schedule: s, cost: cost(&s) })
                .collect();
            warpgroup = wgmma_schedule_space(&p, arch)
                .into_iter()
                .filter(|s| runs(s, &p))
                .map(|s| Candidate { variant: 0, schedule: s, cost: cost(&s) * WGMMA_COST_FACTOR })
                .collect();
            rest.sort_by(|a, b| a.cost.total_cmp(&b.cost).then_with(|| a.id().cmp(&b.id())));
        } else if let Some((m, n, k)) = matmul_dims(kernel, bindings) {
            rest = gpu_knob_space(m, n, k, &base, sm_count, &|s: &Schedule| simt_admits(s, arch));
        }
    }
    if kernel.class == KernelClass::Attention
        && let Some(attention) = tcc_ir::attention::GpuAttention::find(&kernel.graph)
    {
        // The attention kernel's space (each schedule fits), in its listed order.
        let shared = AttentionDevice::of(&arch.caps());
        rest = GpuAttentionSchedule::space(&attention.shape(), shared)
            .into_iter()
            .enumerate()
            .map(|(i, a)| Candidate { variant: 0, schedule: a.encode(), cost: i as f64 })
            .collect();
    }
    // Thinning keeps every warpgroup schedule (a small family) while the limit leaves at least half
    // of itself to the rest; a smaller limit thins both, each evenly along its cost order.
    if let Some(limit) = max_len.filter(|&l| l > 0 && rest.len() + warpgroup.len() > l) {
        let keep_rest = limit.saturating_sub(warpgroup.len()).max(limit / 2).min(rest.len());
        let keep_warpgroup = warpgroup.len().min(limit - keep_rest);
        warpgroup.sort_by(|a, b| a.cost.total_cmp(&b.cost).then_with(|| a.id().cmp(&b.id())));
        rest = thin(&rest, keep_rest);
        warpgroup = thin(&warpgroup, keep_warpgroup);
    }
    rest.extend(warpgroup);
    rest.sort_by(|a, b| a.cost.total_cmp(&b.cost).then_with(|| a.id().cmp(&b.id())));
    let mut candidates: Vec<Candidate> = proposals
        .iter()
        .enumerate()
        .map(|(i, s)| Candidate { variant: 0, schedule: *s, cost: -1e300 + i as f64 })
        .collect();
    candidates.extend(rest);
    SearchSpace::new(candidates)
}

/// `keep` of `candidates`, evenly spaced along their order (the first always among them).
fn thin(candidates: &[Candidate], keep: usize) -> Vec<Candidate> {
    let len = candidates.len();
    (0..keep.min(len)).filter_map(|i| candidates.get(i * len / keep.max(1)).cloned()).collect()
}

/// The search-order discount of a warpgroup (`wgmma`) schedule against an `mma.sync` one of the
/// same tiles: one wgmma instruction does the work of 32 `mma.sync` and reads B straight from
/// shared memory, and the first H100 measurements ran the 4096³ GEMM about 1.5x faster with it.
/// It only orders the search; measurements decide.
const WGMMA_COST_FACTOR: f64 = 0.6;

/// The search space of `kernel` for `target` (see [`cpu_space`], [`llvm_cpu_space`] and
/// [`gpu_space`]; `max_len` thins only the GPU's).
pub fn space_for(
    target: Target,
    kernel: &Kernel,
    proposals: &[Schedule],
    bindings: &Bindings,
    host_threads: u32,
    sm_count: u32,
    max_len: Option<usize>,
) -> SearchSpace {
    match target {
        Target::Cpu(CpuTier::Cranelift) => cpu_space(kernel, proposals, bindings, host_threads),
        Target::Cpu(CpuTier::Llvm) => llvm_cpu_space(kernel, proposals, bindings, host_threads),
        Target::Gpu(arch) => gpu_space(kernel, proposals, bindings, arch, sm_count, max_len),
        // The interpreter has no schedules; `tcc::target::tuning_target` refuses it before a space is asked for.
        Target::Interp => SearchSpace::new(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcc_ir::{DType, Graph, Shape, TensorType, Tier};

    fn matmul_kernel() -> Kernel {
        let mut g = Graph::new("k");
        let t = |dims: &[u64]| TensorType { dtype: DType::F32, shape: Shape::from_consts(dims) };
        let a = g.add_param("a", t(&[8, 64])).unwrap();
        let b = g.add_param("b", t(&[64, 256])).unwrap();
        let c = g.push(Op::MatMul(a, b)).unwrap();
        g.outputs = vec![c];
        Kernel {
            name: "k0".into(),
            class: KernelClass::MatMul,
            graph: g,
            schedule: Schedule::default_for(Tier::Cranelift),
        }
    }

    #[test]
    fn threads() {
        assert_eq!(thread_choices(1), vec![1]);
        assert_eq!(thread_choices(2), vec![1, 2]);
        assert_eq!(thread_choices(6), vec![1, 2, 4, 6]);
    }

    #[test]
    fn matmul_space_starts_with_the_proposal_and_stays_in_bounds() {
        let k = matmul_kernel();
        assert_eq!(matmul_dims(&k, &Bindings::new()), Some((8, 256, 64)));
        let proposal = Schedule { tile_m: 32, ..k.schedule };
        let space = cpu_space(&k, &[proposal], &Bindings::new(), 2);
        assert_eq!(space.candidates()[0].schedule, proposal);
        // 8 rows: only 16-row blocks; 64 deep: 32 and 64; two thread counts.
        assert_eq!(space.len(), 1 + MICRO_TILES.len() * 2 * 2);
        assert!(space.candidates().iter().all(|c| c.schedule.tile_n == proposal.tile_n), "tile_n is not a CPU knob");
        for c in space.candidates() {
            let s = c.schedule;
            assert!(s.micro_m * s.micro_n <= 96 && s.micro_n % 4 == 0 && s.micro_n <= 32, "{s}");
            assert!(s.threads <= 2);
        }
    }

    fn gemm(m: u64, n: u64, k: u64, dtype: DType) -> Kernel {
        let mut g = Graph::new("k");
        let t = |dims: &[u64]| TensorType { dtype, shape: Shape::from_consts(dims) };
        let a = g.add_param("a", t(&[m, k])).unwrap();
        let b = g.add_param("b", t(&[k, n])).unwrap();
        let c = g.push(Op::MatMul(a, b)).unwrap();
        g.outputs = vec![c];
        Kernel { name: "k0".into(), class: KernelClass::MatMul, graph: g, schedule: Schedule::default_for(Tier::Ptx) }
    }

    #[test]
    fn the_optimizers_warpgroup_default_is_the_ptx_backends_default() {
        // passes cannot depend on codegen, so its untuned wgmma schedule mirrors
        // `default_wgmma_schedule`: both must name the same kernel (TMA loads included).
        for (m, n, k) in [
            (4096u64, 4096u64, 4096u64),
            (8192, 8192, 8192),
            (8192, 14336, 4096),
            (2048, 2048, 2048),
            (1536, 1536, 512),
            (1024, 1024, 1024),
            (512, 512, 32768),
        ] {
            let g = gemm(m, n, k, DType::F16).graph;
            let opts = tcc_passes::OptimizeOptions::new(tcc_passes::TargetModel::sm_90a());
            let chosen = tcc_passes::optimize(&g, &opts).unwrap().program.launches[0].kernel.schedule;
            let problem = matmul_problem(&gemm(m, n, k, DType::F16), &Bindings::new()).unwrap();
            let backend = tcc_codegen::ptx::wgmma::default_wgmma_schedule(&problem, GpuArch::Sm90a).unwrap();
            assert_eq!(chosen, backend, "{m}x{n}x{k}");
        }
    }

    #[test]
    fn a_dual_products_space_holds_only_schedules_its_kernel_runs() {
        for nk in [true, false] {
            // `silu(a @ g) * (a @ u)`, each B `[k, n]` or a transposed `[n, k]`.
            let mut g = Graph::new("dual");
            let t = |dims: &[u64]| TensorType { dtype: DType::BF16, shape: Shape::from_consts(dims) };
            let a = g.add_param("a", t(&[4096, 4096])).unwrap();
            let mut products = Vec::new();
            for name in ["g", "u"] {
                let b = g.add_param(name, t(&[4096, 4096])).unwrap();
                let b = if nk { g.push(Op::Permute { input: b, perm: vec![1, 0] }).unwrap() } else { b };
                products.push(g.push(Op::MatMul(a, b)).unwrap());
            }
            let sig = g.push(Op::Unary(tcc_ir::UnaryOp::Sigmoid, products[0])).unwrap();
            let silu = g.push(Op::Binary(tcc_ir::BinaryOp::Mul, products[0], sig)).unwrap();
            let y = g.push(Op::Binary(tcc_ir::BinaryOp::Mul, silu, products[1])).unwrap();
            g.outputs = vec![y];
            let k = Kernel {
                name: "k0".into(),
                class: KernelClass::MatMul,
                graph: g,
                schedule: Schedule::default_for(Tier::Ptx),
            };
            for arch in GpuArch::ALL {
                let space = gpu_space(&k, &[k.schedule], &Bindings::new(), arch, 132, None);
                assert!(space.len() >= 50, "{}", space.len());
                let warpgroup =
                    space.candidates()[1..].iter().filter(|c| tcc_ir::schedule::is_warpgroup_encoding(&c.schedule));
                // Warpgroup schedules only on sm_90a over `[n, k]` Bs.
                assert_eq!(warpgroup.count() > 0, nk && arch == GpuArch::Sm90a, "{arch} nk={nk}");
                for c in &space.candidates()[1..] {
                    assert!(tcc_ir::dual::runs_schedule(&c.schedule), "{}", c.schedule);
                }
            }
        }
    }

    #[test]
    fn gpu_gemm_spaces_come_from_the_tensor_core_listing_and_are_large_enough() {
        let k = gemm(4096, 4096, 4096, DType::F16);
        let problem = matmul_problem(&k, &Bindings::new()).unwrap();
        assert_eq!((problem.m, problem.n, problem.k, problem.batch), (4096, 4096, 4096, 1));
        let space = gpu_space(&k, &[k.schedule], &Bindings::new(), GpuArch::Sm90a, 132, None);
        assert!(space.len() >= 200, "{}", space.len());
        assert_eq!(space.candidates()[0].schedule, k.schedule);
        // The lowering sends a valid warpgroup schedule to wgmma, anything else to mma.sync.
        let warpgroup_ok =
            |arch: GpuArch, s: &Schedule| tcc_codegen::ptx::wgmma::validate_wgmma_schedule(&problem, s, arch).is_ok();
        let mut warpgroup = 0;
        for c in &space.candidates()[1..] {
            if warpgroup_ok(GpuArch::Sm90a, &c.schedule) {
                warpgroup += 1;
            } else {
                tcc_codegen::ptx::validate_matmul_schedule(&problem, &c.schedule, GpuArch::Sm90a).unwrap();
            }
        }
        assert!(warpgroup > 0, "sm_90a offers warpgroup schedules");
        // A limit that leaves at least half of itself to the rest (136 warpgroup schedules).
        let thin = gpu_space(&k, &[k.schedule], &Bindings::new(), GpuArch::Sm90a, 132, Some(320));
        assert_eq!(thin.len(), 321.min(space.len()), "space {} warpgroup {warpgroup}", space.len());
        let thin_warpgroup =
            thin.candidates()[1..].iter().filter(|c| warpgroup_ok(GpuArch::Sm90a, &c.schedule)).count();
        assert_eq!(thin_warpgroup, warpgroup, "thinning keeps every warpgroup schedule");
        // A limit below the warpgroup family thins it too: at most 12 besides the proposal.
        let quick = gpu_space(&k, &[k.schedule], &Bindings::new(), GpuArch::Sm90a, 132, Some(12));
        assert_eq!(quick.len(), 13);
        let quick_warpgroup =
            quick.candidates()[1..].iter().filter(|c| warpgroup_ok(GpuArch::Sm90a, &c.schedule)).count();
        assert!((1..12).contains(&quick_warpgroup), "{quick_warpgroup} warpgroup schedules of 12");
        // sm_80 has no wgmma: only mma.sync schedules.
        let ampere = gpu_space(&k, &[k.schedule], &Bindings::new(), GpuArch::Sm80, 108, None);
        for c in &ampere.candidates()[1..] {
            tcc_codegen::ptx::validate_matmul_schedule(&problem, &c.schedule, GpuArch::Sm80).unwrap();
        }
    }

    #[test]
    fn an_f32_gpu_matmul_takes_the_pruned_knob_space() {
        let k = gemm(256, 256, 256, DType::F32);
        assert!(matmul_problem(&k, &Bindings::new()).is_none());
        let space = gpu_space(&k, &[k.schedule], &Bindings::new(), GpuArch::Sm80, 108, None);
        assert!(space.len() > 10, "{}", space.len());
        assert!(space.candidates()[1..].iter().all(|c| simt_admits(&c.schedule, GpuArch::Sm90a)));
        // Not a matmul: nothing to vary.
        let mut p = k.clone();
        p.class = KernelClass::Pointwise;
        assert_eq!(gpu_space(&p, &[p.schedule], &Bindings::new(), GpuArch::Sm80, 108, None).len(), 1);
    }

    #[test]
    fn llvm_cpu_space_varies_tiles_and_threads() {
        let k = matmul_kernel();
        let base = Schedule { tier: Tier::LlvmCpu, ..Schedule::default_for(Tier::LlvmCpu) };
        let space = llvm_cpu_space(&k, &[base], &Bindings::new(), 2);
        assert_eq!(space.candidates()[0].schedule, base);
        assert!(space.len() > LLVM_MICRO_TILES.len());
        assert!(space.candidates().iter().all(|c| c.schedule.tier == Tier::LlvmCpu && c.schedule.threads <= 2));
    }

    #[test]
    fn targets_round_trip_through_their_names() {
        for t in [Target::Cpu(CpuTier::Cranelift), Target::Cpu(CpuTier::Llvm), Target::Gpu(GpuArch::Sm90a)] {
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(serde_json::from_str::<Target>(&json).unwrap(), t);
        }
        assert!(serde_json::from_str::<Target>("\"sm_99\"").is_err());
    }
}
