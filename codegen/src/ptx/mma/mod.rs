//! Tensor-core matmul (`mma.sync.m16n8k16`, f16/bf16 in, f32 accumulation) for the matmul stage.
//!
//! ```text
//!  operands ──(direct: a parameter or materialized value, rows 16-byte aligned)──┐
//!           ──(anything else: pack entry → zero-padded [k, n] / [m, k] scratch)──┤
//!                                                                               ▼
//!  main loop (kernel.rs): cp.async ring → ldmatrix → mma.sync, swizzled tiles and blocks
//!        ──split_k = 1──▶ fused epilogue (bias, activation, residual, scale, cast) and stores
//!        ──split_k > 1──▶ f32 partials in scratch ──reduce entry──▶ fused epilogue
//! ```
//!
//! The knobs come from the kernel's [`tcc_ir::Schedule`] (see [`config`]); a schedule this
//! lowering cannot run is replaced by [`default_matmul_schedule`] (the optimizer's default
//! schedules are chosen for every backend; the autotuner draws from [`matmul_schedule_space`]).
//! On a target with wgmma (sm_90a), a valid wgmma schedule (see `super::wgmma`) sends the main
//! loop to the warpgroup kernel instead, after the same operand packing.
//!
//! A dual product ([`tcc_ir::DualProduct`], `silu(x @ g) * (x @ u)`) is one such kernel over
//! both products: its block tiles of `bn` columns hold `bn / 2` output columns of the first
//! product, then the same columns of the second (B's rows or chunks come from either B; both Bs
//! are read in place when stored alike, else both packed), and the staged epilogue evaluates
//! the fused outputs from both halves of the tile, so neither product goes through memory. It
//! runs the schedules [`tcc_ir::dual::runs_schedule`] accepts (warpgroup ones over `[n, k]` Bs
//! only, each k-tile of B two TMA boxes), any other as its `mma.sync` default without k splits.

mod config;
pub(crate) mod epilogue;
pub(crate) mod kernel;

pub use config::{BLayout, MatmulProblem, default_matmul_schedule, matmul_schedule_space, validate_matmul_schedule};

use tcc_ir::{DType, NodeId, Op};

use super::LaunchConfig;
use super::arch::Feature;
use super::error::PtxError;
use super::expr::{Em, Ix};
use super::math;
use super::module::ModuleText;
use super::plan::{Out, Src, numel};
use super::stages::{StageCx, grid_ids, launch};
use config::MmaConfig;
use kernel::{Epilogue, Gemm, GemmProduct, JoinedPart, SecondProduct};

use super::wgmma;
use super::wgmma::config::WgConfig;
use super::wgmma::is_wgmma_schedule;
use super::wgmma::kernel::WgGemm;

/// Scratch regions of this lowering start at multiples of this many bytes.
const ALIGN: u64 = 256;
/// Threads per block of the pack and reduce entries.
const AUX_THREADS: u32 = 256;

/// Where an operand's elements are read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemRef {
    /// Kernel parameter `i`.
    Param(usize),
    /// A materialized value (an output or scratch).
    Mat(Src),
}

/// An operand in memory: row pitch and batch stride in elements (0: shared by every batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Operand {
    /// Where it is.
    pub(crate) mem: MemRef,
    /// Elements between consecutive rows.
    pub(crate) ld: u64,
    /// Elements between consecutive batches.
    pub(crate) batch_stride: u64,
}

/// One entry of a lowered matmul stage.
pub(crate) struct Entry {
    /// Entry name suffix (appended to the stage's name).
    pub(crate) suffix: &'static str,
    /// Lowering name.
    pub(crate) lowering: &'static str,
    /// Its launch.
    pub(crate) launch: LaunchConfig,
    /// Tensor maps it takes after the scratch pointer.
    pub(crate) tensor_maps: Vec<crate::ptx::TensorMapSpec>,
}

/// A lowered matmul stage: its entries in launch order and the scratch bytes it needs from
/// `scratch_base` on.
pub(crate) struct Lowered {
    /// Entries in launch order.
    pub(crate) entries: Vec<Entry>,
    /// End of the scratch it uses (bytes from the start of scratch).
    pub(crate) scratch_end: u64,
}

/// Where a value node lives in memory as a row-major tensor, if it does.
fn memory_of(cx: &StageCx, n: NodeId) -> Option<MemRef> {
    if let Some(&src) = cx.plan.loc.get(&n) {
        return Some(MemRef::Mat(src));
    }
    match cx.g.nodes[n.index()].op {
        Op::Input { index } => Some(MemRef::Param(index)),
        _ => None,
    }
}

/// The batch stride of an operand with dims `dims` under output batch dims `out_batch`: the
/// operand's own when its batch dims equal the output's, 0 when it has none (or all are 1).
fn batch_stride(dims: &[u64], out_batch: &[u64]) -> Option<u64> {
    let own = &dims[..dims.len() - 2];
    let rc = dims[dims.len() - 2] * dims[dims.len() - 1];
    if own.iter().all(|&d| d == 1) {
        Some(0)
    } else if own == out_batch {
        Some(rc)
    } else {
        None
    }
}

/// The matmul problem of node `node` (None when tensor cores cannot run it).
pub(crate) fn problem_of(cx: &StageCx, node: NodeId) -> Option<MatmulProblem> {
    let Op::MatMul(a, b) = cx.g.nodes[node.index()].op else { return None };
    let dtype = cx.g.nodes[a.index()].ty.dtype;
    if !matches!(dtype, DType::F16 | DType::BF16) || cx.g.nodes[b.index()].ty.dtype != dtype {
        return None;
    }
    let od = &cx.plan.dims[node.index()];
    let ad = &cx.plan.dims[a.index()];
    let rank = od.len();
    if rank < 2 || ad.len() < 2 {
        return None;
    }
    let b_layout = if transposed_source(cx, b).is_some() { BLayout::NK } else { BLayout::KN };
    Some(MatmulProblem {
        m: od[rank - 2],
        n: od[rank - 1],
        k: ad[ad.len() - 1],
        batch: numel(&od[..rank - 2]),
        dtype,
        b_layout,
    })
}

/// `Some(x)` when `b` is `x` with its last two axes swapped and `x` is in memory.
fn transposed_source(cx: &StageCx, b: NodeId) -> Option<NodeId> {
    if cx.plan.loc.contains_key(&b) {
        return None;
    }
    let Op::Permute { input, perm } = &cx.g.nodes[b.index()].op else { return None };
    let r = perm.len();
    let swaps = r >= 2
        && perm[r - 2] == r - 1
        && perm[r - 1] == r - 2
        && perm[..r - 2].iter().enumerate().all(|(i, &p)| i == p);
    (swaps && memory_of(cx, *input).is_some()).then_some(*input)
}

/// The parts of `b` when it joins, along its columns, weights read as their transposes (`[n, k]`
/// rows in memory, `k` a multiple of 8, unbatched), at least two: `concat([w_1.t(), .., w_n.t()],
/// -1)`, a joined product's B (the optimizer's `join-sibling-products`).
fn joined_parts(cx: &StageCx, b: NodeId, k: u64) -> Option<Vec<JoinedPart>> {
    let Op::Concat { inputs, axis } = &cx.g.nodes[b.index()].op else { return None };
    if *axis != 1 || inputs.len() < 2 || cx.plan.dims[b.index()].len() != 2 || !k.is_multiple_of(8) {
        return None;
    }
    let mut parts = Vec::with_capacity(inputs.len());
    let mut start = 0;
    for &input in inputs {
        let src = transposed_source(cx, input)?;
        let dims = &cx.plan.dims[src.index()];
        let [cols, depth] = dims[..] else { return None };
        if depth != k || cols == 0 {
            return None;
        }
        parts.push(JoinedPart { b: Operand { mem: memory_of(cx, src)?, ld: k, batch_stride: 0 }, start, cols });
        start += cols;
    }
    Some(parts)
}

/// Whether the dual product `products` ([`tcc_ir::DualProduct`]) runs as one tensor-core kernel
/// here: a target with `mma.sync` and `cp.async`, both products of one non-empty problem.
pub(crate) fn runs_dual(cx: &StageCx, products: [NodeId; 2]) -> bool {
    let (Some(p0), Some(p1)) = (problem_of(cx, products[0]), problem_of(cx, products[1])) else { return false };
    let same = (p0.m, p0.n, p0.k, p0.batch, p0.dtype) == (p1.m, p1.n, p1.k, p1.batch, p1.dtype);
    let empty = p0.m == 0 || p0.n == 0 || p0.k == 0 || p0.batch == 0;
    same && !empty && cx.caps.has(Feature::MmaM16N8K16) && cx.caps.has(Feature::CpAsync)
}

/// The schedule a dual product runs: the kernel's when the dual kernel runs it
/// ([`tcc_ir::dual::runs_schedule`]) and it fits `problem` (the product of both products'
/// columns side by side), else the default `mma.sync` schedule of that product without its k
/// splits, else 64x64 blocks of four 32x32 warp tiles.
fn dual_schedule(cx: &StageCx, problem: &MatmulProblem) -> MmaConfig {
    let fits = |s: &tcc_ir::Schedule| -> Option<MmaConfig> {
        tcc_ir::dual::runs_schedule(s).then(|| config::config(problem, s, cx.caps).ok()).flatten()
    };
    if let Some(c) = fits(cx.schedule) {
        return c;
    }
    let d = default_matmul_schedule(problem, arch_of(cx));
    let warps = (d.tile_m / d.micro_m.max(1)) * (d.tile_n / d.micro_n.max(1));
    let unsplit = tcc_ir::Schedule { split_k: 1, warps, ..d };
    fits(&unsplit).unwrap_or(MmaConfig {
        bm: 64,
        bn: 64,
        bk: 32,
        wm: 32,
        wn: 32,
        stages: 3,
        split_k: 1,
        swizzle: 1,
        kw: 1,
    })
}

/// Lowers matmul `node` to tensor cores when it can (f16/bf16 operands on a target with
/// `mma.sync` and `cp.async`); `Ok(None)` leaves it to the SIMT matmul. With `second`, `node`
/// and `second` are a dual product that [`runs_dual`] accepts: one `mma.sync` kernel computes
/// both (each block tile holds half its columns of each) and its epilogue reads both.
pub(crate) fn lower(
    cx: &StageCx,
    module: &mut ModuleText,
    name: &str,
    node: NodeId,
    second: Option<NodeId>,
    outs: &[Out],
    scratch_base: u64,
) -> Result<Option<Lowered>, PtxError> {
    let Some(mut problem) = problem_of(cx, node) else { return Ok(None) };
    let empty = problem.m == 0 || problem.n == 0 || problem.k == 0 || problem.batch == 0;
    if empty || !cx.caps.has(Feature::MmaM16N8K16) || !cx.caps.has(Feature::CpAsync) {
        return Ok(None);
    }
    if let Some(s) = second
        && !runs_dual(cx, [node, s])
    {
        return Err(PtxError::InvalidGraph {
            kernel: cx.g.name.clone(),
            reason: "a dual product the tensor-core kernel cannot run was planned as one".into(),
        });
    }
    let Op::MatMul(a, b) = cx.g.nodes[node.index()].op else { return Ok(None) };
    let od = cx.plan.dims[node.index()].clone();
    let rank = od.len();
    let batch_dims = od[..rank - 2].to_vec();
    let (m, n, k) = (problem.m, problem.n, problem.k);
    let kr = k.div_ceil(8) * 8;
    let nr = n.div_ceil(8) * 8;
    let mut scratch = scratch_base.div_ceil(ALIGN) * ALIGN;
    let mut entries = Vec::new();
    let elem = problem.dtype.size_bytes() as u64;

    // A: direct when it is in memory, its rows are 16-byte aligned and its batch maps.
    let ad = cx.plan.dims[a.index()].clone();
    let a_direct = memory_of(cx, a)
        .filter(|_| k.is_multiple_of(8))
        .and_then(|mem| batch_stride(&ad, &batch_dims).map(|bs| Operand { mem, ld: k, batch_stride: bs }));
    let mut packs: Vec<(&'static str, NodeId, u64, u64, u64, u64, bool)> = Vec::new();
    let a_op = match a_direct {
        Some(op) => op,
        None => {
            let shared = ad[..ad.len() - 2].iter().all(|&d| d == 1);
            let nb = if shared { 1 } else { problem.batch };
            let off = scratch;
            scratch = (off + nb * m * kr * elem).div_ceil(ALIGN) * ALIGN;
            packs.push(("_pack_a", a, off, m, k, kr, shared));
            Operand { mem: MemRef::Mat(Src::Scratch(off)), ld: kr, batch_stride: if shared { 0 } else { m * kr } }
        }
    };
    // B: [k, n] or [n, k] in memory, else packed as [k, n]. A dual product's two Bs are both
    // read in place only when they are stored alike (the kernel reads them with one pitch).
    let b_direct = |b: NodeId| -> Option<(MemRef, u64, u64, BLayout)> {
        let bd = &cx.plan.dims[b.index()];
        match transposed_source(cx, b) {
            Some(src) => memory_of(cx, src).filter(|_| k.is_multiple_of(8)).and_then(|mem| {
                batch_stride(&cx.plan.dims[src.index()], &batch_dims).map(|bs| (mem, k, bs, BLayout::NK))
            }),
            None => memory_of(cx, b)
                .filter(|_| n.is_multiple_of(8))
                .and_then(|mem| batch_stride(bd, &batch_dims).map(|bs| (mem, n, bs, BLayout::KN))),
        }
    };
    // A B joined along its columns from weights read as their transposes: each part read in
    // place by the `mma.sync` kernel (chunk by chunk) or by the warpgroup kernel's TMA boxes
    // where its tiles never straddle two parts; a warpgroup schedule copying by cp.async packs
    // the joined B (below).
    let joined = joined_parts(cx, b, k).filter(|parts| {
        let p = MatmulProblem { b_layout: BLayout::NK, ..problem };
        let warpgroup = cx.caps.has(Feature::Wgmma) && is_wgmma_schedule(cx.schedule);
        let in_place = match wgmma::config::config(&p, cx.schedule, cx.caps) {
            Ok(wc) if warpgroup => wc.tma && parts.iter().all(|j| j.cols.is_multiple_of(u64::from(wc.bn))),
            _ => true,
        };
        second.is_none() && in_place
    });
    if joined.is_some() {
        problem.b_layout = BLayout::NK;
    }
    let second_b = match second.map(|s| &cx.g.nodes[s.index()].op) {
        Some(Op::MatMul(_, b2)) => Some(*b2),
        _ => None,
    };
    let mut directs = vec![b_direct(b)];
    directs.extend(second_b.map(b_direct));
    let alike = directs.iter().all(|d| {
        d.is_some() && d.map(|(_, ld, bs, layout)| (ld, bs, layout)) == directs[0].map(|(_, ld, bs, l)| (ld, bs, l))
    });
    // Packed Bs share the batch stride: one per batch unless every B is one for all batches.
    let one_for_all = |operand: &NodeId| {
        let bd = &cx.plan.dims[operand.index()];
        bd[..bd.len() - 2].iter().all(|&d| d == 1)
    };
    let shared = std::iter::once(b).chain(second_b).all(|o| one_for_all(&o));
    let mut b_ops = Vec::new();
    if let Some(parts) = &joined {
        b_ops.push(parts[0].b);
    }
    for (i, operand) in std::iter::once(b).chain(second_b).enumerate().filter(|_| joined.is_none()) {
        let op = match directs[i].filter(|_| alike) {
            Some((mem, ld, bs, _)) => Operand { mem, ld, batch_stride: bs },
            None => {
                problem.b_layout = BLayout::KN;
                let nb = if shared { 1 } else { problem.batch };
                let off = scratch;
                scratch = (off + nb * k * nr * elem).div_ceil(ALIGN) * ALIGN;
                packs.push((if i == 0 { "_pack_b" } else { "_pack_b2" }, operand, off, k, n, nr, shared));
                Operand { mem: MemRef::Mat(Src::Scratch(off)), ld: nr, batch_stride: if shared { 0 } else { k * nr } }
            }
        };
        b_ops.push(op);
    }
    // Read in place only when alike, else packed alike: one batch stride for both.
    if let [b0, b1] = b_ops[..]
        && b0.batch_stride != b1.batch_stride
    {
        return Err(PtxError::InvalidGraph {
            kernel: cx.g.name.clone(),
            reason: "a dual product's Bs have different batch strides".into(),
        });
    }
    let b_op = b_ops[0];
    let second = match (second, b_ops.get(1)) {
        (Some(node), Some(&b)) => Some(SecondProduct { b, node }),
        _ => None,
    };
    if let Some(d) = directs[0].filter(|_| alike && joined.is_none()) {
        problem.b_layout = d.3;
    }

    let c = match second {
        // The kernel's tiles hold both products' columns: one product of twice the columns.
        Some(_) => dual_schedule(cx, &MatmulProblem { n: 2 * n, ..problem }),
        None => match config::config(&problem, cx.schedule, cx.caps) {
            Ok(c) => c,
            Err(_) => config::config(&problem, &default_matmul_schedule(&problem, arch_of(cx)), cx.caps)?,
        },
    };
    // sm_90a with a wgmma schedule: the warpgroup kernel (after the same operand packing). A
    // dual product's only with TMA copies of `[n, k]` Bs ([`tcc_ir::dual::runs_schedule`]),
    // sized as one product of both products' columns.
    let wgmma_config = if cx.caps.has(Feature::Wgmma) && is_wgmma_schedule(cx.schedule) {
        match second {
            None => wgmma::config::config(&problem, cx.schedule, cx.caps).ok(),
            Some(_) if problem.b_layout == BLayout::NK && tcc_ir::dual::runs_schedule(cx.schedule) => {
                wgmma::config::config(&MatmulProblem { n: 2 * n, ..problem }, cx.schedule, cx.caps)
                    .ok()
                    .filter(|wc| wc.tma)
            }
            Some(_) => None,
        }
    } else {
        None
    };
    let ix_limit: u64 = if cx.plan.index64 { u64::MAX } else { 1 << 31 };
    for &(suffix, operand, off, rows, cols, pitch, shared) in &packs {
        let nb = if shared { 1 } else { problem.batch };
        if (off + nb * rows * pitch * elem) / elem >= ix_limit {
            return Err(PtxError::TooLarge {
                kernel: cx.g.name.clone(),
                what: "a packed matmul operand needs 64-bit indexing".into(),
            });
        }
        let entry = format!("{name}{suffix}");
        let launch = pack(cx, module, &entry, operand, &batch_dims, off, rows, cols, pitch, nb)?;
        entries.push(Entry { suffix, lowering: "matmul-pack", launch, tensor_maps: Vec::new() });
    }

    let product = GemmProduct {
        m,
        n,
        k: kr,
        k_real: k,
        batch: problem.batch,
        dtype: problem.dtype,
        a: a_op,
        b: b_op,
        b_layout: problem.b_layout,
        node,
        second,
        joined: joined.unwrap_or_default(),
        batch_dims: &batch_dims,
        out_dims: &od,
    };
    if let Some(wc) = wgmma_config {
        return lower_wgmma(cx, module, name, wc, product, outs, entries, scratch).map(Some);
    }

    let partial = partial_sums(&mut scratch, c.split_k, problem.batch * m * n);
    let g = Gemm { c, p: product };
    let entry = format!("{name}_mma");
    let smem_sym = format!("{entry}_smem");
    module.add_extern_shared(&smem_sym);
    let mut em = Em::new(cx.g, cx.plan, cx.caps);
    let epi = match partial {
        Some(off) => Epilogue::Partial(off),
        None => Epilogue::Fused(outs),
    };
    kernel::emit(&mut em, &g, &smem_sym, &epi)?;
    module.add_kernel(&entry, cx.params, em.f, c.threads());
    let tiles = m.div_ceil(u64::from(c.bm)) * n.div_ceil(u64::from(g.p.out_cols(c.bn)));
    let launch = mma_launch(cx, &c, tiles * problem.batch);
    entries.push(Entry { suffix: "_mma", lowering: "matmul-mma", launch, tensor_maps: Vec::new() });
    if let Some(off) = partial {
        entries.push(reduce(cx, module, name, node, outs, off, c.split_k, problem.batch * m * n)?);
    }
    Ok(Some(Lowered { entries, scratch_end: scratch }))
}

/// The warpgroup main loop of a matmul whose operands are ready (`entries`: its packs so far).
// Reason: the lowering's state at the branch point, from its one caller.
#[allow(clippy::too_many_arguments)]
fn lower_wgmma(
    cx: &StageCx,
    module: &mut ModuleText,
    name: &str,
    mut wc: WgConfig,
    product: GemmProduct,
    outs: &[Out],
    mut entries: Vec<Entry>,
    scratch_end: u64,
) -> Result<Lowered, PtxError> {
    // TMA variants can store the tile by TMA: one 16-bit output with 16-byte rows.
    let out_dtype = outs.first().map(|o| cx.g.nodes[o.node.index()].ty.dtype).unwrap_or(DType::F32);
    // A dual product's tile stores half its columns, in whole 64-column subtiles.
    let storable = wc.tma
        && product.out_cols(wc.bn).is_multiple_of(64)
        && outs.len() == 1
        && matches!(out_dtype, DType::F16 | DType::BF16)
        && product.n.is_multiple_of(8)
        && product.m <= u64::from(u32::MAX)
        && product.n <= u64::from(u32::MAX);
    // Without a producer, blocks are persistent when every tile has at least as many k-tiles
    // as the copies run ahead, and the epilogue only stores or stores by TMA: with arithmetic
    // after the product (bias, activation) and pair-by-pair stores, ptxas 12.9 serializes the
    // wgmmas of that loop nest (C7514).
    let plain = cx.g.nodes.iter().all(|n| {
        !matches!(n.op, Op::Unary(..) | Op::Binary(..) | Op::Compare(..) | Op::Select { .. } | Op::Reduce { .. })
    });
    // A dual product's blocks are persistent only when they store by TMA (the pair-by-pair
    // epilogue always has arithmetic); else they take one tile each and stage it (its epilogue
    // reads both halves).
    let dual_ok = product.second.is_none() || storable;
    // A producer's consumers would evaluate a dual product's epilogue pair by pair: where the
    // tile cannot be stored by TMA, the same tile runs without the producer (staged per tile).
    if !dual_ok && wc.producer {
        wc = WgConfig { consumers: wc.bm() / wgmma::config::WG_M, producer: false, pingpong: false, ..wc };
    }
    // k splits: the blocks write f32 partial sums (no arithmetic, no TMA store) and a reduce
    // entry adds them up and runs the fused epilogue.
    let splits = u64::from(wc.splits.max(1));
    let mut scratch_end = scratch_end;
    let count = product.batch * product.m * product.n;
    let partial = partial_sums(&mut scratch_end, wc.splits, count);
    let plain = plain || partial.is_some();
    let k_tiles = tcc_ir::WgmmaSchedule::split_k_tiles(product.k, wc.splits);
    let persistent = wc.producer || ((plain || storable) && dual_ok && k_tiles >= u64::from(wc.prefetch()));
    let tma_store = storable && persistent && partial.is_none();
    let node = product.node;
    let g = WgGemm { c: wc, p: product, persistent, tma_store, partial };
    let entry = format!("{name}_mma");
    let smem_sym = format!("{entry}_smem");
    module.add_extern_shared(&smem_sym);
    let mut em = Em::new(cx.g, cx.plan, cx.caps);
    wgmma::kernel::emit(&mut em, &g, &smem_sym, outs)?;
    let tensor_maps = wgmma::kernel::tensor_maps(&g, outs, out_dtype);
    let mut params = cx.params.to_vec();
    let grid_constants: Vec<usize> = (0..tensor_maps.len()).map(|j| params.len() + j).collect();
    params.extend((0..tensor_maps.len()).map(crate::ptx::tma::param));
    module.add_kernel_with_grid_constants(&entry, &params, em.f, wc.threads(), &grid_constants);
    let tiles =
        g.p.m.div_ceil(u64::from(wc.bm())) * g.p.n.div_ceil(u64::from(g.p.out_cols(wc.bn))) * g.p.batch * splits;
    let launch = LaunchConfig {
        block_threads: wc.threads(),
        max_blocks: tiles.max(1),
        // Persistent blocks (one per SM) copy their next tile while they store this one;
        // otherwise every tile gets its own block.
        blocks_per_sm: if persistent { 1 } else { cx.caps.max_blocks_per_sm },
        shared_bytes: 0,
        dynamic_shared_bytes: wc.shared_bytes(),
    };
    entries.push(Entry { suffix: "_mma", lowering: "matmul-wgmma", launch, tensor_maps });
    if let Some(off) = partial {
        entries.push(reduce(cx, module, name, node, outs, off, wc.splits, count)?);
    }
    Ok(Lowered { entries, scratch_end })
}

fn arch_of(cx: &StageCx) -> super::GpuArch {
    super::GpuArch::ALL.into_iter().find(|a| a.name() == cx.caps.name).unwrap_or(super::GpuArch::Sm80)
}

fn mma_launch(cx: &StageCx, c: &MmaConfig, tiles: u64) -> LaunchConfig {
    LaunchConfig {
        block_threads: c.threads(),
        max_blocks: (tiles * u64::from(c.split_k)).max(1),
        // Every tile gets its own block (the hardware schedules them in waves).
        blocks_per_sm: cx.caps.max_blocks_per_sm,
        shared_bytes: 0,
        dynamic_shared_bytes: c.shared_bytes(),
    }
}

/// Pack entry: writes operand `node` (any fused expression) as a zero-padded row-major
/// `[nb, rows, pitch]` tensor of its dtype at scratch byte `off`; element (r, c) of batch `b`
/// is the operand's element at the output batch `b`, row r, column c.
// Reason: the pack's geometry (offset, rows, cols, pitch, batches) is plain scalars from its one caller.
#[allow(clippy::too_many_arguments)]
fn pack(
    cx: &StageCx,
    module: &mut ModuleText,
    name: &str,
    node: NodeId,
    out_batch: &[u64],
    off: u64,
    rows: u64,
    cols: u64,
    pitch: u64,
    nb: u64,
) -> Result<LaunchConfig, PtxError> {
    let mut em = Em::new(cx.g, cx.plan, cx.caps);
    let ix = em.ix;
    let dims = em.dims(node).to_vec();
    let dtype = em.dtype(node);
    let rank = dims.len();
    let chunks_per_row = pitch / 8;
    let total = nb * rows * chunks_per_row;
    let (gid, stride) = grid_ids(&mut em);
    let saved = em.save();
    let lp = em.f.loop_begin(ix, &gid, &total.to_string(), &[]);
    let ch = em.f.v(format!("urem {ix} {}, {chunks_per_row}", lp.i));
    let rest = em.f.v(format!("udiv {ix} {}, {chunks_per_row}", lp.i));
    let r = em.f.v(format!("urem {ix} {rest}, {rows}"));
    let bi = em.f.v(format!("udiv {ix} {rest}, {rows}"));
    let bmulti = em.delinearize(&bi, if nb == 1 { &[] } else { out_batch });
    let offset = out_batch.len().saturating_sub(rank - 2);
    let mut vals = Vec::new();
    for j in 0..8u64 {
        let c0 = em.f.v(format!("mul nuw {ix} {ch}, 8"));
        let cj = em.f.v(format!("add nuw {ix} {c0}, {j}"));
        let ok = em.f.v(format!("icmp ult {ix} {cj}, {cols}"));
        let over = em.f.v(format!("icmp ugt {ix} {cj}, {}", cols - 1));
        let cc = em.f.v(format!("select i1 {over}, {ix} {}, {ix} {cj}", cols - 1));
        let mut multi: Vec<String> = (0..rank - 2)
            .map(|i| {
                if dims[i] == 1 || nb == 1 {
                    "0".to_string()
                } else {
                    bmulti.get(offset + i).cloned().unwrap_or_default()
                }
            })
            .collect();
        // Operand dims are [.., rows, cols] for A and [.., k, n] for B: (r, c) maps directly.
        multi.push(r.clone());
        multi.push(cc);
        let flat = em.linearize(&multi, &dims);
        let v = em.eval(node, &Ix { flat, multi: Some(multi), vec: None })?;
        vals.push(em.f.v(format!("select i1 {ok}, float {v}, float {}", math::fc(0.0))));
    }
    let base = em.f.v(format!("mul nuw {ix} {}, 8", lp.i));
    em.store_vec(Src::Scratch(off), dtype, &base, &vals)?;
    em.f.loop_end(&lp, &stride, &[]);
    em.restore(saved);
    module.add_kernel(name, cx.params, em.f, AUX_THREADS);
    Ok(launch(cx.caps, AUX_THREADS, total.div_ceil(u64::from(AUX_THREADS)), 0))
}

/// The scratch of the f32 partial sums of `splits` k splits of `count` output elements: their byte
/// offset, from `*scratch` (which moves past them); `None` without splits.
fn partial_sums(scratch: &mut u64, splits: u32, count: u64) -> Option<u64> {
    (splits > 1).then(|| {
        let off = *scratch;
        *scratch = (off + u64::from(splits) * count * 4).div_ceil(ALIGN) * ALIGN;
        off
    })
}

/// The reduce entry (`{stage}_reduce`) of a k split, for the `mma.sync` and the warpgroup loops:
/// sums the f32 partials of each output element in split order, rounds to the matmul's dtype and
/// evaluates and stores the fused epilogue.
// Reason: stage context, module, stage name and the split's scratch layout, from its two callers.
#[allow(clippy::too_many_arguments)]
fn reduce(
    cx: &StageCx,
    module: &mut ModuleText,
    stage: &str,
    node: NodeId,
    outs: &[Out],
    off: u64,
    splits: u32,
    count: u64,
) -> Result<Entry, PtxError> {
    let mut em = Em::new(cx.g, cx.plan, cx.caps);
    let ix = em.ix;
    let (gid, stride) = grid_ids(&mut em);
    let base = em.f.v(format!("getelementptr inbounds i8, ptr addrspace(1) %scratch, i64 {off}"));
    let saved = em.save();
    let lp = em.f.loop_begin(ix, &gid, &count.to_string(), &[]);
    let i64v = if ix == "i64" { lp.i.clone() } else { em.f.v(format!("zext i32 {} to i64", lp.i)) };
    let mut sum = math::fc(0.0);
    for s in 0..u64::from(splits) {
        let o = em.f.v(format!("add i64 {i64v}, {}", s * count));
        let p = em.f.v(format!("getelementptr inbounds float, ptr addrspace(1) {base}, i64 {o}"));
        let v = em.f.v(format!("load float, ptr addrspace(1) {p}, align 4"));
        sum = if s == 0 { v } else { em.f.v(format!("fadd float {sum}, {v}")) };
    }
    let out_dtype = em.dtype(node);
    let value = math::round(&mut em.f, cx.caps, out_dtype, &sum)?;
    em.env.insert(node, value);
    let at = Ix::flat(lp.i.clone());
    for o in outs {
        let v = em.eval_out(o, &at)?;
        let dt = em.dtype(o.node);
        em.store(o.dest, dt, &lp.i, &v)?;
    }
    em.env.remove(&node);
    em.f.loop_end(&lp, &stride, &[]);
    em.restore(saved);
    module.add_kernel(&format!("{stage}_reduce"), cx.params, em.f, AUX_THREADS);
    let launch = launch(cx.caps, AUX_THREADS, count.div_ceil(u64::from(AUX_THREADS)), 0);
    Ok(Entry { suffix: "_reduce", lowering: "matmul-reduce", launch, tensor_maps: Vec::new() })
}
