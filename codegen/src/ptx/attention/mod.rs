//! The GPU attention kernel: `softmax(f(q kᵀ)) v` ([`tcc_ir::attention::GpuAttention`]) in one
//! entry with the FlashAttention-2 structure on `mma.sync` tensor cores (sm_80 and sm_90a alike),
//! or with a warpgroup schedule (`wgmma`, sm_90a) its products as warpgroup MMAs: the query and
//! key tiles K-major and the value tile MN-major in 128-byte swizzled layouts (the same `cp.async`
//! ring, aligned to 1024 bytes), `S = Q Kᵀ` from shared memory, `O += P V` with P from registers,
//! and the softmax of one key block overlapping the previous block's output product
//! (`AttnKernel::key_loop_overlapped`).
//!
//! ```text
//!  grid-stride over (query block, batch entry)        one block: `warps` warps x 16 or 32 query rows
//!    Q block ──cp.async──▶ shared (rows padded) ──ldmatrix──▶ A fragments (per block, or kept)
//!    key blocks lo..hi (the mask's live ones) through a `stages`-deep cp.async ring of K and V:
//!      S = Q Kᵀ           mma.sync m16n8k16, K by ldmatrix
//!      x = f(S)           the graph's score function per accumulator, positions known (expr.rs)
//!      online softmax     row max by quad shuffles, p = 2^(x·log2e − m·log2e), α rescales O and l
//!      O += P V           P packed from the accumulators (they are the A fragment), V by ldmatrix.trans
//!    O / l ──staged epilogue (cast, residual: mma/epilogue.rs)──▶ output, rows past S dropped
//! ```
//!
//! Semantics are the CPU kernel's (`loops/lower/attention.rs`) and the interpreter's: the scores
//! are rounded to the product's dtype before `f`; keys past T weigh nothing; the running maximum
//! is read as 0 while it is `-inf`, so a row whose every logit is `-inf` ends as `0 / 0` (NaN, as
//! the written formula gives) and one whose logits are all a finite fill as the average of V. Key
//! blocks the mask excludes everywhere are skipped only with a `-inf` fill
//! ([`tcc_ir::attention::Mask::skips_blocks`]). K and V are read through the graph's views
//! (grouped-query heads: the K/V head of each query head, never copied).
//!
//! The schedule ([`GpuAttentionSchedule`]) is decoded once by `GpuAttentionSchedule::effective`:
//! one that does not fit the head dimensions runs as the default.
//!
//! **Split form (flash-decoding).** With key splits (the schedule's, or chosen from the shape and
//! the SM count by [`GpuAttentionSchedule::splits_for`]), when decoding (at most
//! [`DECODE_ROWS`] query rows per group of heads, even in one split: packing the heads is what
//! saves re-reading K and V) or with row statistics to return (the row log-sum-exp,
//! [`tcc_ir::attention::Attention::statistics`]), the kernel is two entries:
//! `attention-split` packs the query heads of one K/V group ([`GpuAttention::group`]) as the rows
//! of one block (row `p` = query `p / G` of head `p % G`, so each key block is read once per group)
//! and gives each of `splits` blocks per query block a contiguous share of the live key blocks; it
//! writes its unnormalized output and its rows' running maximum and sum as f32 to the scratch
//! buffer ([`Split`]). `attention-combine` ([`combine`]) merges the splits of each output element
//! by their maxima, divides, evaluates the epilogue and stores the statistics.

mod blocks;
mod combine;
mod kernel;
mod kv_maps;
mod operands;
mod softmax;

use tcc_ir::DType;
use tcc_ir::attention::GpuAttention;
use tcc_ir::schedule::{AttentionDevice, DECODE_ROWS, GpuAttentionSchedule};

use super::error::PtxError;
use super::expr::Em;
use super::module::ModuleText;
use super::stages;
use super::stages::StageCx;
use super::{LaunchConfig, TensorMapSpec};

/// The sizes of one attention kernel: its schedule, head dimensions, lengths and shared memory.
pub(crate) struct Geometry {
    /// The attention and its operands.
    pub(crate) ga: GpuAttention,
    /// The schedule it runs.
    pub(crate) sched: GpuAttentionSchedule,
    /// Queries per block (`Br`).
    pub(crate) br: u32,
    /// Keys per block (`Bc`).
    pub(crate) bc: u32,
    /// 16-row tiles of one warp.
    pub(crate) mt: usize,
    /// The query/key head dimension.
    pub(crate) depth: u32,
    /// The value head dimension.
    pub(crate) width: u32,
    /// Queries (S).
    pub(crate) s_len: u64,
    /// Keys (T).
    pub(crate) t_len: u64,
    /// The batch axes of the scores (every operand's batch broadcasts to them).
    pub(crate) batch_dims: Vec<u64>,
    /// The operands' element type (f16 or bf16).
    pub(crate) dtype: DType,
    /// Query heads packed as the rows of one block (1 outside the split form).
    pub(crate) group: u32,
    /// The split form's key splits and scratch, if it runs.
    pub(crate) split: Option<Split>,
    /// With a TMA producer: the key and value tensor maps (`%tmap0`, `%tmap1`); `None` copies by
    /// `cp.async`.
    pub(crate) kv_tma: Option<[kv_maps::KvMap; 2]>,
}

/// The split form's partial results in the scratch buffer: for split `s` and output row
/// `R = (batch entry) * S + query`, the f32 output row at `o + ((s * rows + R) * width) * 4` and
/// its running maximum and sum at `ml + (s * rows + R) * 8` (bytes).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Split {
    /// Key splits.
    pub(crate) splits: u32,
    /// Output rows (batch entries times queries).
    pub(crate) rows: u64,
    /// Byte offset of the partial outputs.
    pub(crate) o: u64,
    /// Byte offset of the row maxima and sums.
    pub(crate) ml: u64,
}

impl Geometry {
    /// Threads per block.
    pub(crate) fn threads(&self) -> u32 {
        32 * self.sched.warps
    }

    /// Threads that compute (all but a producer warpgroup).
    pub(crate) fn consumer_threads(&self) -> u32 {
        32 * self.sched.consumer_warps()
    }

    /// The products run as warpgroup MMAs (the schedule's `wgmma`).
    pub(crate) fn wgmma(&self) -> bool {
        self.sched.wgmma
    }

    /// Bytes of a query or key row's share of its tile in shared memory: with `mma.sync` the row
    /// and 16 bytes of padding, so that the 8 rows an `ldmatrix` phase reads start in distinct
    /// bank groups; with warpgroup MMAs the row (the tile in 64-column blocks of 128-byte
    /// swizzled rows).
    pub(crate) fn qk_pitch(&self) -> u32 {
        if self.wgmma() { self.depth * 2 } else { self.depth * 2 + 16 }
    }

    /// The same for a value row.
    pub(crate) fn v_pitch(&self) -> u32 {
        if self.wgmma() { self.width * 2 } else { self.width * 2 + 16 }
    }

    /// Bytes of the query block in shared memory (at offset 0).
    pub(crate) fn q_bytes(&self) -> u32 {
        self.br * self.qk_pitch()
    }

    /// Bytes of one key block.
    pub(crate) fn k_bytes(&self) -> u32 {
        self.bc * self.qk_pitch()
    }

    /// Bytes of one stage of the ring: a key block, then its value block.
    pub(crate) fn stage_bytes(&self) -> u32 {
        self.k_bytes() + self.bc * self.v_pitch()
    }

    /// Rows of one tile's queries: the queries times the packed heads.
    pub(crate) fn packed_rows(&self) -> u64 {
        self.s_len * u64::from(self.group)
    }

    /// Query blocks (of packed rows).
    pub(crate) fn q_blocks(&self) -> u64 {
        self.packed_rows().div_ceil(u64::from(self.br))
    }

    /// Key splits (1 outside the split form).
    pub(crate) fn splits(&self) -> u32 {
        self.split.map_or(1, |s| s.splits)
    }

    /// Tiles of the grid: query blocks times batch groups times key splits.
    pub(crate) fn tiles(&self) -> u64 {
        self.q_blocks() * (self.batch() / u64::from(self.group)) * u64::from(self.splits())
    }

    /// Key blocks.
    pub(crate) fn k_blocks(&self) -> u64 {
        self.t_len.div_ceil(u64::from(self.bc))
    }

    /// Batch entries.
    pub(crate) fn batch(&self) -> u64 {
        self.batch_dims.iter().product()
    }
}

/// One entry of the attention kernel: its name's suffix, lowering and launch.
pub(crate) struct Entry {
    /// Appended to the stage's entry name.
    pub(crate) suffix: &'static str,
    /// The lowering's name (`attention`, `attention-split`, `attention-combine`).
    pub(crate) lowering: &'static str,
    /// How to launch it.
    pub(crate) launch: LaunchConfig,
    /// The tensor maps it takes after the scratch pointer.
    pub(crate) tensor_maps: Vec<TensorMapSpec>,
}

/// The node the attention stores as its first output ([`Attention::stored_value`]), or an error
/// naming kernel `g` when it has none.
///
/// [`Attention::stored_value`]: tcc_ir::attention::Attention::stored_value
fn stored_value(a: &tcc_ir::attention::Attention, g: &tcc_ir::Graph) -> Result<tcc_ir::NodeId, PtxError> {
    a.stored_value(g)
        .ok_or_else(|| PtxError::InvalidGraph { kernel: g.name.clone(), reason: "the attention has no output".into() })
}

/// Scratch offsets are aligned to this many bytes.
const ALIGN: u64 = 256;

/// Lowers the kernel's graph (its attention) to entries named `name` + suffix, with scratch from
/// byte `scratch` on; returns them in launch order and the scratch's end.
pub(crate) fn lower(
    cx: &StageCx,
    module: &mut ModuleText,
    name: &str,
    scratch: u64,
) -> Result<(Vec<Entry>, u64), PtxError> {
    let invalid = |reason: &str| PtxError::InvalidGraph { kernel: cx.g.name.clone(), reason: reason.to_string() };
    let ga = GpuAttention::find(cx.g).ok_or_else(|| invalid("not an attention the GPU kernel runs"))?;
    let sched = GpuAttentionSchedule::effective(cx.schedule, &ga.shape(), AttentionDevice::of(cx.caps));
    let domain = cx.plan.dims[ga.attention.scores.index()].clone();
    let r = domain.len();
    if r < 2 {
        return Err(invalid("attention scores of rank below 2"));
    }
    let dtype = cx.g.nodes[ga.queries.index()].ty.dtype;
    let mut geo = Geometry {
        sched,
        br: sched.block[0],
        bc: sched.block[1],
        mt: (sched.rows_per_warp() / 16) as usize,
        depth: ga.depth,
        width: ga.width,
        s_len: domain[r - 2],
        t_len: domain[r - 1],
        batch_dims: domain[..r - 2].to_vec(),
        dtype,
        group: ga.group.max(1),
        split: None,
        kv_tma: None,
        ga,
    };
    if !geo.batch().is_multiple_of(u64::from(geo.group)) {
        geo.group = 1;
    }
    if geo.s_len >= 1 << 30 || geo.t_len >= 1 << 31 || geo.packed_rows() >= 1 << 31 || geo.tiles() >= 1 << 31 {
        return Err(PtxError::TooLarge { kernel: cx.g.name.clone(), what: "attention lengths of 2^31 or more".into() });
    }
    let slots = u64::from(cx.caps.typical_sm_count) * u64::from(sched.resident_blocks(geo.depth, geo.width, cx.caps));
    let splits = sched.splits_for(geo.tiles(), geo.k_blocks(), slots);
    let decoding = (1..=DECODE_ROWS).contains(&geo.ga.rows);
    if splits > 1 || decoding || !geo.ga.attention.statistics.is_empty() {
        let rows = geo.batch() * geo.s_len;
        let o = scratch.div_ceil(ALIGN) * ALIGN;
        let ml = (o + u64::from(splits) * rows * u64::from(geo.width) * 4).div_ceil(ALIGN) * ALIGN;
        geo.split = Some(Split { splits, rows, o, ml });
    } else {
        geo.group = 1;
    }
    if sched.tma {
        let map = |n, orientation, head| {
            let extents = (u64::from(head), geo.t_len);
            kv_maps::kv_map(cx.g, &cx.plan.dims, n, orientation, &geo.batch_dims, extents, geo.bc, dtype)
        };
        let keys = map(geo.ga.keys, operands::Orientation::Columns, geo.depth);
        let values = map(geo.ga.values, operands::Orientation::Rows, geo.width);
        geo.kv_tma = keys.zip(values).map(|(k, v)| [k, v]);
    }
    let smem_sym = format!("{name}_smem");
    module.add_extern_shared(&smem_sym);
    let mut em = Em::new(cx.g, cx.plan, cx.caps);
    if geo.s_len > 0 && geo.batch() > 0 {
        kernel::emit(&mut em, &geo, &format!("@{smem_sym}"))?;
    }
    let tensor_maps: Vec<TensorMapSpec> = geo.kv_tma.iter().flatten().map(|m| m.spec.clone()).collect();
    let mut params = cx.params.to_vec();
    let grid_constants: Vec<usize> = (0..tensor_maps.len()).map(|j| params.len() + j).collect();
    params.extend((0..tensor_maps.len()).map(super::tma::param));
    module.add_kernel_with_grid_constants(name, &params, em.f, geo.threads(), &grid_constants);
    let launch = LaunchConfig {
        block_threads: geo.threads(),
        max_blocks: geo.tiles().max(1),
        // Every tile gets its own block and the hardware runs them in waves; with a producer
        // warpgroup the blocks are persistent (one per SM: it copies the next tile's first key
        // blocks while the consumers store this one).
        blocks_per_sm: if sched.producer { 1 } else { cx.caps.max_blocks_per_sm },
        shared_bytes: 0,
        dynamic_shared_bytes: sched.shared_bytes(geo.depth, geo.width),
    };
    let Some(split) = geo.split else {
        return Ok((vec![Entry { suffix: "", lowering: "attention", launch, tensor_maps }], scratch));
    };
    let end = (split.ml + u64::from(split.splits) * split.rows * 8).div_ceil(ALIGN) * ALIGN;
    let combine_name = format!("{name}_combine");
    let threads = combine::THREADS;
    let work = combine::emit(cx, module, &combine_name, &geo, &split)?;
    let combine_launch = stages::launch(cx.caps, threads, work.div_ceil(u64::from(threads)), 0);
    Ok((
        vec![
            Entry { suffix: "", lowering: "attention-split", launch, tensor_maps },
            Entry {
                suffix: "_combine",
                lowering: "attention-combine",
                launch: combine_launch,
                tensor_maps: Vec::new(),
            },
        ],
        end,
    ))
}
