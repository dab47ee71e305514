//! The warpgroup main loop. Each block computes `bm x bn` output tiles (grid-stride over
//! swizzled tiles and batches). Copies fill a ring of `stages` shared-memory stages in the
//! layouts wgmma's descriptors read with 128-byte swizzle (zero-filled outside the operands): A
//! and an `[n, k]` B K-major (128-byte rows of 64 k, chunk `c` of row `r` at `c ^ (r % 8)`), a
//! `[k, n]` B MN-major (blocks of 64 columns, 128-byte rows of 64 n per k). The copies are TMA
//! boxes (`cp.async.bulk.tensor`, which writes exactly these layouts from 1024-byte aligned
//! stages; one thread arms a stage's full mbarrier with its bytes and issues them) or 16-byte
//! `cp.async`s by every copying thread. Each consumer warpgroup multiplies its 64 rows by the
//! whole B tile with `wgmma.mma_async.m64n{bn}k16`, keeping one k-tile of wgmmas in flight.
//!
//! Without a producer, copies run `stages - 1` k-tiles ahead and a barrier per k-tile, after the
//! wgmma wait, frees the previous k-tile's stage (with cp.async a second one orders the landed
//! copies; with TMA every thread waits on the stage's full barrier). Such blocks are persistent
//! when the epilogue only stores, or stores by TMA: the ring runs on from one tile into the
//! next, so the next tile's first copies are in flight during this tile's epilogue (with
//! arithmetic in a pair-by-pair epilogue, ptxas 12.9 serializes the wgmmas of that loop nest,
//! C7514, so those keep a block per tile). With a producer warpgroup (`setmaxnreg` moves
//! registers to the consumers when there are two), it copies and signals `full[s]`; consumers
//! wait on it and free a stage through `empty[s]` once its wgmmas have completed. Such blocks
//! are persistent (one per SM): the producer copies the next tile while the consumers store. In
//! the ping-pong variant the two consumers take alternate 64-row tiles from the same ring, so
//! one stores its tile while the other multiplies.
//!
//! A joined B (a joined product of sibling products: several weights side by side along the
//! columns, each block tile inside one) is read by the TMA variants, each tile's box from the
//! map of the part holding its columns.
//!
//! A dual product (see `super::super::mma`) runs the TMA variants (with a producer only where
//! its tiles are stored by TMA): each k-tile of B is two boxes
//! of `bn / 2` rows, from each B's tensor map, and a thread's accumulators of an output column
//! hold both products' values there (the second's `bn / 4` accumulators after the first's), so
//! the epilogue combines them in registers. Its blocks are persistent and store by TMA where
//! the tile can be (one 16-bit output, `bn / 2` a multiple of 64); else a block takes one tile
//! and stages it, both halves read by the epilogue.
//!
//! The accumulators' layout per warp is that of `mma.sync`'s C fragment. Persistent TMA blocks
//! store their tiles by TMA through small staged subtiles ([`super::store`]); blocks of one tile
//! without a producer stage the tile through shared memory (the ring, free after the main loop)
//! and store it in 16-byte row vectors ([`epilogue::staged`]); the other persistent blocks
//! evaluate the fused outputs straight from the accumulators with 4-byte stores per pair.

use tcc_ir::DType;

use super::asm;
use super::config::{BK, WG_M, WgConfig};
use super::store::{SUBTILE_BYTES, StoreStaging, tma_store_epilogue};
use crate::llvm_text::Loop;
use crate::ptx::error::PtxError;
use crate::ptx::expr::{Em, Ix};
use crate::ptx::math;
use crate::ptx::mma::kernel::GemmProduct;
use crate::ptx::mma::kernel::{base_ptr, cp_async, ext64, partial_store, swizzled_tile};
use crate::ptx::mma::{BLayout, MemRef, Operand, epilogue};
use crate::ptx::plan::{Out, Src};
use crate::ptx::{TensorMapSpec, TmaBuffer};

/// Everything the main loop needs to know about one product.
pub(crate) struct WgGemm<'a> {
    /// The tiling.
    pub(crate) c: WgConfig,
    /// The product.
    pub(crate) p: GemmProduct<'a>,
    /// Blocks are persistent (one per SM, walking several tiles; the launch must agree): always
    /// with a producer; without one, the ring then runs on from each tile into the next.
    pub(crate) persistent: bool,
    /// Persistent TMA blocks store the tile by TMA through staged subtiles (one 16-bit output,
    /// rows 16-byte aligned; its map after the operands', [`WgGemm::tmap_c`]); else pair by pair.
    pub(crate) tma_store: bool,
    /// With k splits (`c.splits > 1`): the scratch byte offset where each block writes its f32
    /// partial sums, `[split][batch][m][n]`, for the matmul's reduce entry (no epilogue here).
    pub(crate) partial: Option<u64>,
}

/// Tensor-map parameter of A (`%tmap0`) and of B (`%tmap1`) in TMA variants.
pub(crate) const TMAP_A: usize = 0;
/// See [`TMAP_A`].
pub(crate) const TMAP_B: usize = 1;
/// Tensor-map parameter of a dual product's second B (`%tmap2`).
pub(crate) const TMAP_B2: usize = 2;

impl WgGemm<'_> {
    /// Tensor-map parameter of the output when the tile is stored by TMA: after the operands'
    /// (`%tmap2`, or after a dual product's second B or a joined B's further parts).
    pub(crate) fn tmap_c(&self) -> usize {
        if self.p.second.is_some() { TMAP_B2 + 1 } else { TMAP_B + self.p.joined.len().max(1) }
    }
}
/// Registers per thread of a cp.async producer warpgroup, and of the two consumers beside it
/// (128 x 72 + 256 x 216 = 64,512 of the SM's 65,536).
pub(crate) const PRODUCER_REGS: u32 = 72;
/// See [`PRODUCER_REGS`].
pub(crate) const CONSUMER_REGS: u32 = 216;
/// The same with a TMA producer, which only counts and issues (128 x 40 + 256 x 232 = 64,512).
const PRODUCER_REGS_TMA: u32 = 40;
/// See [`PRODUCER_REGS_TMA`].
const CONSUMER_REGS_TMA: u32 = 232;

/// Bytes of one 64-column block of an MN-major B tile (64 k rows of 128 bytes).
const KN_BLOCK: u32 = BK * 128;
/// 128-byte swizzle, LBO 16 bytes (unused for K-major), SBO 1024 bytes: the descriptor bits
/// above the start address.
const DESC_K_MAJOR: u64 = (1 << 62) | (64 << 32) | (1 << 16);
/// The same for an MN-major B: LBO is the distance between 64-column blocks.
const DESC_MN_MAJOR: u64 = (1 << 62) | (64 << 32) | ((KN_BLOCK as u64 >> 4) << 16);

/// One 16-byte chunk a copying thread moves per k-tile.
struct Chunk {
    /// Byte offset within the operand's tile in shared memory.
    soff: String,
    /// Row within the tile (A: m, `[n, k]` B: n, `[k, n]` B: k), as a constant offset from the
    /// thread's first row.
    row_step: u32,
}

/// The per-thread part of a tile copy: the thread's first row and its chunk within the row.
struct CopyPlan {
    row: String,
    chunk: String,
    chunks: Vec<Chunk>,
}

/// Plans the copy of a tile of `rows` rows of `row_chunks` 16-byte chunks by `threads` threads
/// (thread `ct`): a K-major tile (`row_chunks` = 8) or an MN-major one (`row_chunks` = bn / 8,
/// in blocks of 8 chunks). `threads` is a multiple of `row_chunks`.
fn copy_plan(em: &mut Em, ct: &str, rows: u32, row_chunks: u32, threads: u32) -> CopyPlan {
    let row = em.f.v(format!("udiv i32 {ct}, {row_chunks}"));
    let chunk = em.f.v(format!("urem i32 {ct}, {row_chunks}"));
    let block = em.f.v(format!("lshr i32 {chunk}, 3"));
    let cc = em.f.v(format!("and i32 {chunk}, 7"));
    let bb = em.f.v(format!("mul i32 {block}, {KN_BLOCK}"));
    let step = threads / row_chunks;
    let mut chunks = Vec::new();
    for i in 0..(rows * row_chunks) / threads {
        let r = em.f.v(format!("add i32 {row}, {}", i * step));
        let s = em.f.v(format!("and i32 {r}, 7"));
        let phys = em.f.v(format!("xor i32 {cc}, {s}"));
        let pb = em.f.v(format!("shl i32 {phys}, 4"));
        let rb = em.f.v(format!("shl i32 {r}, 7"));
        let o = em.f.v(format!("add i32 {rb}, {pb}"));
        let soff = em.f.v(format!("add i32 {o}, {bb}"));
        chunks.push(Chunk { soff, row_step: i * step });
    }
    CopyPlan { row, chunk, chunks }
}

/// Per tile: one global element offset (without k) and validity per chunk of a copy plan, and
/// the tile's first k-tile (its split's).
struct TileSrc {
    offs: Vec<(String, String)>,
    kt0: String,
}

/// Geometry of the tile being computed.
pub(super) struct Tile {
    /// First row (i32).
    pub(super) row0: String,
    /// First column (i32).
    pub(super) col0: String,
    /// Batch index (i32).
    pub(super) bidx: String,
    /// The k split (i32; "0" without splits).
    pub(super) split: String,
    /// The split's first k-tile (i32; "0" without splits): the tile's k-tiles are `kt0 + j`.
    pub(super) kt0: String,
}

/// The tensor maps a TMA variant of `g` takes (A at [`TMAP_A`], B at [`TMAP_B`]), matching the
/// boxes `emit` copies; empty for `cp.async` variants.
pub(crate) fn tensor_maps(g: &WgGemm, outs: &[Out], out_dtype: DType) -> Vec<TensorMapSpec> {
    if !g.c.tma {
        return Vec::new();
    }
    let elem = g.p.dtype.size_bytes() as u64;
    let spec = |op: &Operand, inner: u64, outer: u64, box_outer: u32| {
        let buffer = match op.mem {
            MemRef::Param(i) => TmaBuffer::Input(i),
            MemRef::Mat(Src::Output(k)) => TmaBuffer::Output(k),
            MemRef::Mat(Src::Scratch(off)) => TmaBuffer::Scratch(off),
        };
        let mut dims = vec![inner, outer];
        let mut strides = vec![op.ld * elem];
        let mut box_dims = vec![BK, box_outer];
        if op.batch_stride != 0 && g.p.batch > 1 {
            dims.push(g.p.batch);
            strides.push(op.batch_stride * elem);
            box_dims.push(1);
        }
        TensorMapSpec { buffer, dtype: g.p.dtype, dims, strides, box_dims }
    };
    let a = spec(&g.p.a, g.p.k_real, g.p.m, g.c.bm());
    // A dual product's B tile is two boxes of bn / 2 rows, one from each B (`[n, k]` only).
    let b_rows = g.p.out_cols(g.c.bn);
    let b = match g.p.b_layout {
        BLayout::NK => spec(&g.p.b, g.p.k_real, g.p.n, b_rows),
        BLayout::KN => spec(&g.p.b, g.p.n, g.p.k_real, BK),
    };
    let mut maps = vec![a, b];
    if let Some(second) = &g.p.second {
        maps.push(spec(&second.b, g.p.k_real, g.p.n, b_rows));
    }
    // A joined B: one map per part (`[n, k]`, its own columns), the first at TMAP_B.
    if let [first, rest @ ..] = g.p.joined.as_slice() {
        maps[TMAP_B] = spec(&first.b, g.p.k_real, first.cols, b_rows);
        maps.extend(rest.iter().map(|j| spec(&j.b, g.p.k_real, j.cols, b_rows)));
    }
    if g.tma_store
        && let Some(out) = outs.first()
    {
        // The output, dense [batch, m, n], in boxes of 64 x 64.
        let mem = MemRef::Mat(out.dest);
        let dtype = out_dtype;
        let op = Operand { mem, ld: g.p.n, batch_stride: g.p.m * g.p.n };
        maps.push(TensorMapSpec { dtype, ..spec(&op, g.p.n, g.p.m, WG_M) });
    }
    maps
}

/// Emits the warpgroup GEMM body into `em` (the caller adds the entry with `c.threads()`).
/// [`WgKernel::prologue`] computes what every variant shares (thread roles, the aligned ring,
/// barriers, tensor maps, copy plans, wgmma descriptors); then one of four variants runs the
/// tile loop, each a main loop (k loop) and an epilogue per tile: every thread multiplying with
/// TMA copies ([`WgKernel::tma_ring`]), or with cp.async copies in persistent blocks
/// ([`WgKernel::cp_async_persistent`]) or a block per tile ([`WgKernel::cp_async_per_tile`]),
/// or a producer warpgroup beside consumers ([`WgKernel::producer_consumer`]).
pub(crate) fn emit(em: &mut Em, g: &WgGemm, smem_sym: &str, outs: &[Out]) -> Result<(), PtxError> {
    let k = WgKernel::prologue(em, g, smem_sym, outs);
    let saved = em.save();
    if !g.c.producer && g.c.tma {
        k.tma_ring(em)?;
    } else if !g.c.producer && g.persistent {
        k.cp_async_persistent(em)?;
    } else if !g.c.producer {
        k.cp_async_per_tile(em)?;
    } else {
        k.producer_consumer(em)?;
    }
    em.restore(saved);
    Ok(())
}

/// What every step of the warpgroup kernel shares: the product, its tiling and outputs, and the
/// values [`WgKernel::prologue`] computes once per thread.
struct WgKernel<'g, 'a> {
    g: &'g WgGemm<'a>,
    outs: &'g [Out],
    c: WgConfig,
    bm: u32,
    bn: u32,
    s_n: u32,
    /// The product's element type in LLVM IR.
    st: &'static str,
    /// The dynamic shared memory (`@name`).
    smem: String,
    stage_bytes: u32,
    a_bytes: u32,
    tiles_m: u64,
    tiles_n: u64,
    tiles: u64,
    /// k splits across blocks (1 = none).
    splits: u64,
    /// Work items: tiles x batch entries x splits.
    total: u64,
    /// k-tiles per work item (per split).
    k_tiles: u64,
    /// `k_tiles` as an IR constant.
    ntiles: String,
    tid: String,
    ctaid: String,
    nctaid: String,
    /// This thread's warpgroup.
    wg: String,
    /// The ring's first 1024-byte aligned address, and its offset from the shared memory's start.
    al: String,
    pad: String,
    a_base: String,
    b_base: String,
    /// Bytes of the ring (the TMA store staging follows it).
    staging: u32,
    /// The first mbarrier: full[s] at bar0 + 8s, empty[s] at bar0 + 8(S + s).
    bar0: String,
    /// TMA: the generic addresses of the A and B tensor maps.
    maps: Option<(String, String)>,
    /// The output's tensor map when tiles are stored by TMA.
    map_c: Option<String>,
    /// TMA: the generic address of a dual product's second B's tensor map.
    map_b2: Option<String>,
    /// TMA: a joined B's further parts: each one's tensor map and first column (the first part
    /// is B's map, from column 0).
    map_parts: Vec<(String, u64)>,
    /// This thread's index among the copying threads.
    ct: String,
    a_copy: CopyPlan,
    b_copy: CopyPlan,
    a_batched: bool,
    b_batched: bool,
    /// Descriptors of this warpgroup's A rows and of B at stage 0, k16 step 0, and B's step per k16.
    da0: String,
    db0: String,
    b_kk: u64,
    trans_b: bool,
    /// Accumulators per thread.
    nacc: usize,
    /// The accumulators' initial values (never read: the first wgmmas overwrite them).
    zeros: Vec<(String, String)>,
}

impl<'g, 'a> WgKernel<'g, 'a> {
    /// The kernel's prologue: thread ids and roles, the ring's alignment, the mbarriers
    /// (initialized by thread 0), the tensor maps' addresses, the copy plans and the wgmma
    /// descriptors.
    fn prologue(em: &mut Em, g: &'g WgGemm<'a>, smem_sym: &str, outs: &'g [Out]) -> WgKernel<'g, 'a> {
        let c = g.c;
        let (bm, bn, s_n) = (c.bm(), c.bn, c.stages);
        let smem = format!("@{smem_sym}");
        let stage_bytes = c.stage_bytes();
        let a_bytes = bm * BK * 2;
        let tiles_m = g.p.m.div_ceil(u64::from(bm));
        let tiles_n = g.p.n.div_ceil(u64::from(g.p.out_cols(bn)));
        let tiles = tiles_m * tiles_n;
        let splits = u64::from(c.splits.max(1));
        let k_tiles = tcc_ir::WgmmaSchedule::split_k_tiles(g.p.k, c.splits);

        let tid = em.f.call("i32", "llvm.nvvm.read.ptx.sreg.tid.x", &[]);
        let ctaid = em.f.call("i32", "llvm.nvvm.read.ptx.sreg.ctaid.x", &[]);
        let nctaid = em.f.call("i32", "llvm.nvvm.read.ptx.sreg.nctaid.x", &[]);
        let wg = em.f.v(format!("lshr i32 {tid}, 7"));
        // The stages start at the first 1024-byte boundary of the dynamic shared memory.
        let s64 = em.f.v(format!("ptrtoint ptr addrspace(3) {smem} to i64"));
        let s0 = em.f.v(format!("trunc i64 {s64} to i32"));
        let s1 = em.f.v(format!("add i32 {s0}, 1023"));
        let al = em.f.v(format!("and i32 {s1}, -1024"));
        let pad = em.f.v(format!("sub i32 {al}, {s0}"));
        let a_base = base_ptr(em, g.p.a.mem);
        let b_base = base_ptr(em, g.p.b.mem);

        // Barriers (producer or TMA variants): full[s] at bar0 + 8s, empty[s] at bar0 + 8(S + s).
        let staging = s_n * stage_bytes;
        let bar0 = em.f.v(format!("add i32 {al}, {}", staging + c.store_staging_bytes()));
        // TMA: the generic addresses of the A and B tensor maps (`grid_constant` parameters).
        let maps = if c.tma {
            let ma = em.f.v(format!("ptrtoint ptr %tmap{} to i64", TMAP_A));
            let mb = em.f.v(format!("ptrtoint ptr %tmap{} to i64", TMAP_B));
            Some((ma, mb))
        } else {
            None
        };
        let map_c = g.tma_store.then(|| em.f.v(format!("ptrtoint ptr %tmap{} to i64", g.tmap_c())));
        let map_b2 = (c.tma && g.p.second.is_some()).then(|| em.f.v(format!("ptrtoint ptr %tmap{} to i64", TMAP_B2)));
        let map_parts: Vec<(String, u64)> = if c.tma {
            let parts = g.p.joined.iter().enumerate().skip(1);
            parts.map(|(i, j)| (em.f.v(format!("ptrtoint ptr %tmap{} to i64", TMAP_B + i)), j.start)).collect()
        } else {
            Vec::new()
        };
        if c.producer || c.tma {
            let first = em.f.v(format!("icmp eq i32 {tid}, 0"));
            let cont = em.f.if_begin(&first);
            for s in 0..s_n {
                let full = em.f.v(format!("add i32 {bar0}, {}", 8 * s));
                // TMA: the issuing thread's expect_tx is the one arrival (the bytes complete it).
                asm::mbar_init(&mut em.f, &full, if c.tma { 1 } else { 128 });
                let empty = em.f.v(format!("add i32 {bar0}, {}", 8 * (s_n + s)));
                asm::mbar_init(&mut em.f, &empty, if c.pingpong { 128 } else { 128 * c.consumers });
            }
            if c.pingpong {
                // order[w]: the other consumer has issued its last tile's k-tiles.
                for w in 0..2 {
                    let order = em.f.v(format!("add i32 {bar0}, {}", 8 * (2 * s_n + w)));
                    asm::mbar_init(&mut em.f, &order, 128);
                }
            }
            asm::mbar_init_fence(&mut em.f);
            em.f.if_end(&cont);
            em.f.call_void("llvm.nvvm.barrier0", &[]);
        }

        // Who copies: every thread, or the producer warpgroup (the last one).
        let (ct, copy_threads) = if c.producer {
            (em.f.v(format!("sub i32 {tid}, {}", 128 * c.consumers)), 128)
        } else {
            (tid.clone(), c.threads())
        };
        let a_copy = copy_plan(em, &ct, bm, 8, copy_threads);
        let b_copy = match g.p.b_layout {
            BLayout::NK => copy_plan(em, &ct, bn, 8, copy_threads),
            BLayout::KN => copy_plan(em, &ct, BK, bn / 8, copy_threads),
        };

        // Descriptors of this warpgroup's A rows and of B at stage 0, k16 step 0.
        let cons_wg = if c.pingpong {
            "0".to_string()
        } else if c.producer {
            let last = em.f.v(format!("icmp ult i32 {wg}, {}", c.consumers));
            em.f.v(format!("select i1 {last}, i32 {wg}, i32 0"))
        } else {
            wg.clone()
        };
        let wa = em.f.v(format!("mul i32 {cons_wg}, {}", WG_M * 128));
        let aa = em.f.v(format!("add i32 {al}, {wa}"));
        let da0 = descriptor(em, &aa, DESC_K_MAJOR);
        let ba = em.f.v(format!("add i32 {al}, {a_bytes}"));
        let (db0, b_kk, trans_b) = match g.p.b_layout {
            BLayout::NK => (descriptor(em, &ba, DESC_K_MAJOR), 32u64 >> 4, false),
            BLayout::KN => (descriptor(em, &ba, DESC_MN_MAJOR), (16u64 * 128) >> 4, true),
        };
        let nacc = (bn / 2) as usize;
        // The first k-tile's wgmmas overwrite the accumulators (scale-d = 0): they start undefined,
        // so no instruction writes them before the first wgmma.
        let zeros: Vec<(String, String)> = (0..nacc).map(|_| ("float".to_string(), math::fc(0.0))).collect();
        WgKernel {
            g,
            outs,
            c,
            bm,
            bn,
            s_n,
            st: math::stype(g.p.dtype),
            smem,
            stage_bytes,
            a_bytes,
            tiles_m,
            tiles_n,
            tiles,
            splits,
            total: tiles * g.p.batch * splits,
            k_tiles,
            ntiles: k_tiles.to_string(),
            tid,
            ctaid,
            nctaid,
            wg,
            al,
            pad,
            a_base,
            b_base,
            staging,
            bar0,
            maps,
            map_c,
            map_b2,
            map_parts,
            ct,
            a_copy,
            b_copy,
            a_batched: g.p.a.batch_stride != 0 && g.p.batch > 1,
            b_batched: g.p.b.batch_stride != 0 && g.p.batch > 1,
            da0,
            db0,
            b_kk,
            trans_b,
            nacc,
            zeros,
        }
    }

    /// The full barrier of ring stage `stage` (i32).
    fn full_bar(&self, em: &mut Em, stage: &str) -> String {
        let o = em.f.v(format!("mul i32 {stage}, 8"));
        em.f.v(format!("add i32 {}, {o}", self.bar0))
    }

    /// The empty barrier of ring stage `stage` (i32).
    fn empty_bar(&self, em: &mut Em, stage: &str) -> String {
        let o = em.f.v(format!("mul i32 {stage}, 8"));
        let o = em.f.v(format!("add i32 {o}, {}", 8 * self.s_n));
        em.f.v(format!("add i32 {}, {o}", self.bar0))
    }

    /// The staging area of consumer warpgroup `cw` for TMA stores: its address and its offset from
    /// the shared memory's start.
    fn store_staging(&self, em: &mut Em, cw: &str) -> Option<(String, String)> {
        self.map_c.as_ref()?;
        let o = em.f.v(format!("mul i32 {cw}, {}", 2 * SUBTILE_BYTES));
        let o = em.f.v(format!("add i32 {o}, {}", self.staging));
        let addr = em.f.v(format!("add i32 {}, {o}", self.al));
        let off = em.f.v(format!("add i32 {}, {o}", self.pad));
        Some((addr, off))
    }

    /// The tile (and batch) of linear index `t` (an i32), in swizzled order.
    fn tile_at(&self, em: &mut Em, t: &str) -> Tile {
        let (tiles, tiles_m, tiles_n, bm) = (self.tiles, self.tiles_m, self.tiles_n, self.bm);
        let bn = self.g.p.out_cols(self.bn);
        let tile_lin = em.f.v(format!("urem i32 {t}, {tiles}"));
        let rest = em.f.v(format!("udiv i32 {t}, {tiles}"));
        // With k splits the work item runs over (tile, split, batch), the tile fastest.
        let (split, bidx, kt0) = if self.splits > 1 {
            let split = em.f.v(format!("urem i32 {rest}, {}", self.splits));
            let bidx = em.f.v(format!("udiv i32 {rest}, {}", self.splits));
            let kt0 = em.f.v(format!("mul i32 {split}, {}", self.k_tiles));
            (split, bidx, kt0)
        } else {
            ("0".to_string(), rest, "0".to_string())
        };
        let dims = (u64::from(bm), u64::from(bn));
        let (row0, col0) = swizzled_tile(em, &tile_lin, (tiles_m, tiles_n), self.c.swizzle, dims);
        Tile { row0, col0, bidx, split, kt0 }
    }

    /// Opens the loop over the block's tiles from `start` with the loop-carried `iters`.
    fn tile_loop(&self, em: &mut Em, start: &str, iters: &[(String, String)]) -> (Loop, Tile) {
        let tl = em.f.loop_begin("i32", start, &self.total.to_string(), iters);
        let tile = self.tile_at(em, &tl.i);
        (tl, tile)
    }

    /// Per-tile sources of the chunks this thread copies (cp.async).
    fn tile_src(&self, em: &mut Em, tile: &Tile) -> (TileSrc, TileSrc) {
        let (g, a_copy, b_copy) = (self.g, &self.a_copy, &self.b_copy);
        let b64 = ext64(em, &tile.bidx);
        let a_bo = em.f.v(format!("mul i64 {b64}, {}", g.p.a.batch_stride));
        let r = em.f.v(format!("add i32 {}, {}", tile.row0, a_copy.row));
        let r64 = ext64(em, &r);
        let ro = em.f.v(format!("mul i64 {r64}, {}", g.p.a.ld));
        let c8 = em.f.v(format!("shl i32 {}, 3", a_copy.chunk));
        let c64 = ext64(em, &c8);
        let o = em.f.v(format!("add i64 {ro}, {c64}"));
        let o = em.f.v(format!("add i64 {o}, {a_bo}"));
        let mut a = Vec::new();
        for ch in &a_copy.chunks {
            let off = em.f.v(format!("add i64 {o}, {}", u64::from(ch.row_step) * g.p.a.ld));
            let rr = em.f.v(format!("add i32 {r}, {}", ch.row_step));
            let ok = em.f.v(format!("icmp ult i32 {rr}, {}", g.p.m));
            a.push((off, ok));
        }
        let b_bo = em.f.v(format!("mul i64 {b64}, {}", g.p.b.batch_stride));
        let c8 = em.f.v(format!("shl i32 {}, 3", b_copy.chunk));
        let mut b = Vec::new();
        match g.p.b_layout {
            BLayout::NK => {
                let r = em.f.v(format!("add i32 {}, {}", tile.col0, b_copy.row));
                let r64 = ext64(em, &r);
                let ro = em.f.v(format!("mul i64 {r64}, {}", g.p.b.ld));
                let c64 = ext64(em, &c8);
                let o = em.f.v(format!("add i64 {ro}, {c64}"));
                let o = em.f.v(format!("add i64 {o}, {b_bo}"));
                for ch in &b_copy.chunks {
                    let off = em.f.v(format!("add i64 {o}, {}", u64::from(ch.row_step) * g.p.b.ld));
                    let rr = em.f.v(format!("add i32 {r}, {}", ch.row_step));
                    let ok = em.f.v(format!("icmp ult i32 {rr}, {}", g.p.n));
                    b.push((off, ok));
                }
            }
            BLayout::KN => {
                // Rows are k (checked per k-tile); the chunk's columns are checked here.
                let col = em.f.v(format!("add i32 {}, {c8}", tile.col0));
                let ok = em.f.v(format!("icmp ult i32 {col}, {}", g.p.n.div_ceil(8) * 8));
                let r64 = ext64(em, &b_copy.row);
                let ro = em.f.v(format!("mul i64 {r64}, {}", g.p.b.ld));
                let col64 = ext64(em, &col);
                let o = em.f.v(format!("add i64 {ro}, {col64}"));
                let o = em.f.v(format!("add i64 {o}, {b_bo}"));
                for ch in &b_copy.chunks {
                    let off = em.f.v(format!("add i64 {o}, {}", u64::from(ch.row_step) * g.p.b.ld));
                    b.push((off, ok.clone()));
                }
            }
        }
        (TileSrc { offs: a, kt0: tile.kt0.clone() }, TileSrc { offs: b, kt0: tile.kt0.clone() })
    }

    /// Copies k-tile `kt` into stage `stage` (both i32 registers or constants) by cp.async.
    fn load_tile(&self, em: &mut Em, srcs: &(TileSrc, TileSrc), kt: &str, stage: &str) {
        let (g, a_copy, b_copy) = (self.g, &self.a_copy, &self.b_copy);
        let (smem, st) = (&self.smem, self.st);
        let sb = em.f.v(format!("mul i32 {stage}, {}", self.stage_bytes));
        let sb = em.f.v(format!("add i32 {sb}, {}", self.pad));
        let kt = k_tile(em, &srcs.0.kt0, kt);
        let k0 = em.f.v(format!("shl i32 {kt}, 6"));
        let k064 = ext64(em, &k0);
        let ac = em.f.v(format!("shl i32 {}, 3", a_copy.chunk));
        let kc = em.f.v(format!("add i32 {k0}, {ac}"));
        let kok = em.f.v(format!("icmp ult i32 {kc}, {}", g.p.k));
        for (ch, (off, ok)) in a_copy.chunks.iter().zip(&srcs.0.offs) {
            let ok2 = em.f.v(format!("and i1 {ok}, {kok}"));
            let so = em.f.v(format!("add i32 {sb}, {}", ch.soff));
            let go = em.f.v(format!("add i64 {off}, {k064}"));
            cp_async(em, smem, &so, &self.a_base, st, &go, &ok2);
        }
        let bsb = em.f.v(format!("add i32 {sb}, {}", self.a_bytes));
        match g.p.b_layout {
            BLayout::NK => {
                let bc = em.f.v(format!("shl i32 {}, 3", b_copy.chunk));
                let kc = em.f.v(format!("add i32 {k0}, {bc}"));
                let kok = em.f.v(format!("icmp ult i32 {kc}, {}", g.p.k));
                for (ch, (off, ok)) in b_copy.chunks.iter().zip(&srcs.1.offs) {
                    let ok2 = em.f.v(format!("and i1 {ok}, {kok}"));
                    let so = em.f.v(format!("add i32 {bsb}, {}", ch.soff));
                    let go = em.f.v(format!("add i64 {off}, {k064}"));
                    cp_async(em, smem, &so, &self.b_base, st, &go, &ok2);
                }
            }
            BLayout::KN => {
                let kofs = em.f.v(format!("mul i64 {k064}, {}", g.p.b.ld));
                let kr = em.f.v(format!("add i32 {k0}, {}", b_copy.row));
                for (ch, (off, ok)) in b_copy.chunks.iter().zip(&srcs.1.offs) {
                    let krow = em.f.v(format!("add i32 {kr}, {}", ch.row_step));
                    let kok = em.f.v(format!("icmp ult i32 {krow}, {}", g.p.k_real));
                    let ok2 = em.f.v(format!("and i1 {ok}, {kok}"));
                    let so = em.f.v(format!("add i32 {bsb}, {}", ch.soff));
                    let go = em.f.v(format!("add i64 {off}, {kofs}"));
                    cp_async(em, smem, &so, &self.b_base, st, &go, &ok2);
                }
            }
        }
    }

    /// TMA: one thread arms full[stage] with the stage's bytes and copies k-tile `kt` of `tile`
    /// into `stage` (both i32): A as one box of bm rows, B as one box of bn rows (`[n, k]`) or
    /// bn / 64 boxes of 64 k rows (`[k, n]`); the boxes land in the swizzled layouts above.
    fn tma_tile(&self, em: &mut Em, tile: &Tile, kt: &str, stage: &str) {
        let Some((ma, mb)) = &self.maps else { return };
        let stage_bytes = self.stage_bytes;
        let sb = em.f.v(format!("mul i32 {stage}, {stage_bytes}"));
        let sb = em.f.v(format!("add i32 {}, {sb}", self.al));
        let full = self.full_bar(em, stage);
        asm::mbar_arrive_expect_tx(&mut em.f, &full, stage_bytes);
        let kt = k_tile(em, &tile.kt0, kt);
        let k0 = em.f.v(format!("shl i32 {kt}, 6"));
        let mut ca = vec![k0.clone(), tile.row0.clone()];
        if self.a_batched {
            ca.push(tile.bidx.clone());
        }
        asm::tma_load(&mut em.f, &sb, ma, &ca, &full);
        let bsb = em.f.v(format!("add i32 {sb}, {}", self.a_bytes));
        match self.g.p.b_layout {
            BLayout::NK => {
                // A joined B: the part holding the tile's columns, at its own column.
                let (mut map, mut col) = (mb.clone(), tile.col0.clone());
                for (part, start) in &self.map_parts {
                    let inside = em.f.v(format!("icmp uge i32 {}, {start}", tile.col0));
                    let own = em.f.v(format!("sub i32 {}, {start}", tile.col0));
                    map = em.f.v(format!("select i1 {inside}, i64 {part}, i64 {map}"));
                    col = em.f.v(format!("select i1 {inside}, i32 {own}, i32 {col}"));
                }
                let mut cb = vec![k0, col];
                if self.b_batched {
                    cb.push(tile.bidx.clone());
                }
                asm::tma_load(&mut em.f, &bsb, &map, &cb, &full);
                // A dual product: the second B's rows of the same output columns below them.
                if let Some(mb2) = &self.map_b2 {
                    let dst = em.f.v(format!("add i32 {bsb}, {}", self.bn / 2 * 128));
                    asm::tma_load(&mut em.f, &dst, mb2, &cb, &full);
                }
            }
            BLayout::KN => {
                for j in 0..self.bn / 64 {
                    let col = em.f.v(format!("add i32 {}, {}", tile.col0, 64 * j));
                    let dst = em.f.v(format!("add i32 {bsb}, {}", j * KN_BLOCK));
                    let mut cb = vec![col, k0.clone()];
                    if self.b_batched {
                        cb.push(tile.bidx.clone());
                    }
                    asm::tma_load(&mut em.f, &dst, mb, &cb, &full);
                }
            }
        }
    }

    /// The ring slot and phase parity of the block's `it`-th k-tile (i32).
    fn slot(&self, em: &mut Em, it: &str) -> (String, String) {
        let stage = em.f.v(format!("urem i32 {it}, {}", self.s_n));
        let round = em.f.v(format!("udiv i32 {it}, {}", self.s_n));
        let par = em.f.v(format!("and i32 {round}, 1"));
        (stage, par)
    }

    /// One k-tile of wgmmas on stage `stage`; `first` (i1) overwrites the accumulators.
    fn mma_tile(&self, em: &mut Em, acc: &[String], stage: &str, first: &str) -> Vec<String> {
        let so = em.f.v(format!("mul i32 {stage}, {}", self.stage_bytes >> 4));
        let so64 = ext64(em, &so);
        let da = em.f.v(format!("add i64 {}, {so64}", self.da0));
        let db = em.f.v(format!("add i64 {}, {so64}", self.db0));
        let notfirst = em.f.v(format!("xor i1 {first}, true"));
        let scale0 = em.f.v(format!("zext i1 {notfirst} to i32"));
        asm::fence(&mut em.f);
        let mut acc = acc.to_vec();
        for kk in 0..u64::from(BK / 16) {
            let dak = em.f.v(format!("add i64 {da}, {}", kk * 2));
            let dbk = em.f.v(format!("add i64 {db}, {}", kk * self.b_kk));
            let scale = if kk == 0 { scale0.clone() } else { "1".to_string() };
            acc = asm::mma(&mut em.f, self.g.p.dtype, self.bn, &acc, &dak, &dbk, &scale, self.trans_b);
        }
        asm::commit(&mut em.f);
        acc
    }

    /// The next ring position after `v` (i32).
    fn bump(&self, em: &mut Em, v: &str) -> String {
        let v1 = em.f.v(format!("add i32 {v}, 1"));
        let wrap = em.f.v(format!("icmp eq i32 {v1}, {}", self.s_n));
        em.f.v(format!("select i1 {wrap}, i32 0, i32 {v1}"))
    }

    /// The every-thread cp.async main loop of one tile from ring positions `ring` (read and write
    /// stages, i32): wait for k-tile i, multiply it, and once every warpgroup's wgmmas of the
    /// previous k-tile are done copy k-tile i + S - 1 into that stage, or, with `next` (the next
    /// tile's index and whether it exists), that tile's first k-tiles once this tile's run out.
    /// Returns the ring positions after the loop and the accumulators.
    fn cp_async_k_loop(
        &self,
        em: &mut Em,
        srcs: &(TileSrc, TileSrc),
        ring: [String; 2],
        next: Option<(&str, &str)>,
    ) -> (Vec<String>, Vec<String>) {
        let (nacc, ntiles) = (self.nacc, &self.ntiles);
        let dist = self.c.prefetch();
        let mut carried = self.zeros.clone();
        carried.extend(ring.map(|r| ("i32".to_string(), r)));
        let kl = em.f.loop_begin("i32", "0", ntiles, &carried);
        let rs = kl.accs[nacc].clone();
        let ws = kl.accs[nacc + 1].clone();
        em.f.call_void("llvm.nvvm.cp.async.wait.group", &[("i32", &(dist - 1).to_string())]);
        asm::fence_proxy_async(&mut em.f);
        em.f.call_void("llvm.nvvm.barrier0", &[]);
        let first = em.f.v(format!("icmp eq i32 {}, 0", kl.i));
        let mut after = self.mma_tile(em, &kl.accs[..nacc], &rs, &first);
        asm::wait(&mut em.f, 1);
        // Every warpgroup's wgmmas of the previous k-tile are done: its stage takes k-tile j.
        em.f.call_void("llvm.nvvm.barrier0", &[]);
        let j = em.f.v(format!("add i32 {}, {dist}", kl.i));
        let p = em.f.v(format!("icmp ult i32 {j}, {ntiles}"));
        let cont = em.f.if_begin(&p);
        self.load_tile(em, srcs, &j, &ws);
        em.f.if_end(&cont);
        if let Some((nt, has_next)) = next {
            let np = em.f.v(format!("xor i1 {p}, true"));
            let np = em.f.v(format!("and i1 {np}, {has_next}"));
            let cont = em.f.if_begin(&np);
            let tn = self.tile_at(em, nt);
            let srcs_n = self.tile_src(em, &tn);
            let jn = em.f.v(format!("sub i32 {j}, {ntiles}"));
            self.load_tile(em, &srcs_n, &jn, &ws);
            em.f.if_end(&cont);
        }
        em.f.call_void("llvm.nvvm.cp.async.commit.group", &[]);
        after.push(self.bump(em, &rs));
        after.push(self.bump(em, &ws));
        em.f.loop_end(&kl, "1", &after);
        let acc = asm::wait_acc(&mut em.f, 0, &kl.accs[..nacc]);
        (kl.accs[nacc..].to_vec(), acc)
    }

    /// Every warpgroup multiplies; thread 0 issues the TMA copies S-1 k-tiles ahead, into the
    /// stage every warpgroup has finished reading (a barrier per k-tile, after the wgmma wait).
    /// The ring runs on across the block's tiles (`it` counts its k-tiles); persistent blocks
    /// load their next tile's first k-tiles while this tile's last ones are multiplied.
    fn tma_ring(&self, em: &mut Em) -> Result<(), PtxError> {
        let (g, outs, smem) = (self.g, self.outs, &self.smem);
        let (tid, ctaid, nctaid, wg, ntiles) = (&self.tid, &self.ctaid, &self.nctaid, &self.wg, &self.ntiles);
        let (k_tiles, total) = (self.k_tiles, self.total);
        let dist = self.c.prefetch();
        let lead = em.f.v(format!("icmp eq i32 {tid}, 0"));
        let (tl, tile) = self.tile_loop(em, ctaid, &[("i32".into(), "0".into())]);
        let it0 = tl.accs[0].clone();
        // The ring's prologue: the first tile's first k-tiles (for later tiles, the previous
        // tile's main loop copied them).
        let first_tile = em.f.v(format!("icmp eq i32 {}, {ctaid}", tl.i));
        let prologue = if g.persistent { em.f.v(format!("and i1 {lead}, {first_tile}")) } else { lead.clone() };
        let cont = em.f.if_begin(&prologue);
        if let (true, Some((ma, mb))) = (g.persistent, &self.maps) {
            for m in [Some(ma), Some(mb), self.map_b2.as_ref()]
                .into_iter()
                .flatten()
                .chain(self.map_parts.iter().map(|p| &p.0))
            {
                asm::prefetch_tensormap(&mut em.f, m);
            }
        }
        for s in 0..dist {
            if u64::from(s) < k_tiles {
                let it = em.f.v(format!("add i32 {it0}, {s}"));
                let (stage, _) = self.slot(em, &it);
                self.tma_tile(em, &tile, &s.to_string(), &stage);
            }
        }
        em.f.if_end(&cont);
        // The main loop.
        let nt = em.f.v(format!("add i32 {}, {nctaid}", tl.i));
        let has_next = em.f.v(format!("icmp ult i32 {nt}, {total}"));
        let kl = em.f.loop_begin("i32", "0", ntiles, &self.zeros);
        let it = em.f.v(format!("add i32 {it0}, {}", kl.i));
        let (stage, par) = self.slot(em, &it);
        let full = self.full_bar(em, &stage);
        asm::mbar_wait(&mut em.f, &full, &par);
        let first = em.f.v(format!("icmp eq i32 {}, 0", kl.i));
        let next = self.mma_tile(em, &kl.accs, &stage, &first);
        asm::wait(&mut em.f, 1);
        // Every warpgroup's wgmmas of the previous k-tile are done: its stage takes k-tile j.
        em.f.call_void("llvm.nvvm.barrier0", &[]);
        let j = em.f.v(format!("add i32 {}, {dist}", kl.i));
        let itj = em.f.v(format!("add i32 {it}, {dist}"));
        let (ws, _) = self.slot(em, &itj);
        let p = em.f.v(format!("icmp ult i32 {j}, {ntiles}"));
        let lp = em.f.v(format!("and i1 {lead}, {p}"));
        let cont = em.f.if_begin(&lp);
        self.tma_tile(em, &tile, &j, &ws);
        em.f.if_end(&cont);
        if g.persistent {
            let np = em.f.v(format!("xor i1 {p}, true"));
            let np = em.f.v(format!("and i1 {np}, {has_next}"));
            let np = em.f.v(format!("and i1 {np}, {lead}"));
            let cont = em.f.if_begin(&np);
            let tn = self.tile_at(em, &nt);
            let jn = em.f.v(format!("sub i32 {j}, {ntiles}"));
            self.tma_tile(em, &tn, &jn, &ws);
            em.f.if_end(&cont);
        }
        em.f.loop_end(&kl, "1", &next);
        let acc = asm::wait_acc(&mut em.f, 0, &kl.accs);
        // The epilogue.
        if let Some(off) = g.partial {
            partial_epilogue(em, g, off, &tile, tid, wg, &acc)?;
            if !g.persistent {
                // Every warpgroup is done reading the ring before the next tile's copies.
                em.f.call_void("llvm.nvvm.barrier0", &[]);
            }
        } else if let (Some((addr, off)), Some(map)) = (self.store_staging(em, wg), &self.map_c) {
            let st = StoreStaging { addr, off, map, smem };
            tma_store_epilogue(em, g, outs, &tile, (tid, wg, wg), &acc, &st)?;
        } else if g.persistent {
            epilogue(em, g, outs, &tile, tid, wg, &acc)?;
        } else {
            // Every warpgroup is done reading the ring: the staged tile reuses it.
            em.f.call_void("llvm.nvvm.barrier0", &[]);
            staged_epilogue(em, g, outs, &tile, tid, wg, &acc, smem)?;
            // Every thread has read the staged tile (through the generic proxy) before the next
            // tile's TMA copies (the async proxy) refill the ring.
            asm::fence_proxy_async(&mut em.f);
            em.f.call_void("llvm.nvvm.barrier0", &[]);
        }
        let it_next = em.f.v(format!("add i32 {it0}, {ntiles}"));
        em.f.loop_end(&tl, nctaid, &[it_next]);
        if self.map_c.is_some() {
            // Nothing may exit while its stores still read shared memory.
            asm::bulk_wait_all(&mut em.f);
        }
        Ok(())
    }

    /// Every thread copies, S-1 k-tiles ahead: a stage is refilled once every warpgroup has
    /// waited for the wgmmas that read it (a second barrier per k-tile, after the wait).
    /// Persistent blocks with one ring for all their tiles: the last k-tiles of a tile load the
    /// first k-tiles of the block's next tile, so its copies are in flight while this tile's
    /// epilogue runs.
    fn cp_async_persistent(&self, em: &mut Em) -> Result<(), PtxError> {
        let (g, outs) = (self.g, self.outs);
        let (tid, ctaid, nctaid, wg, total) = (&self.tid, &self.ctaid, &self.nctaid, &self.wg, self.total);
        let dist = self.c.prefetch();
        // The ring's prologue: the block's first tile's first k-tiles.
        let has = em.f.v(format!("icmp ult i32 {ctaid}, {total}"));
        let cont = em.f.if_begin(&has);
        let t0 = self.tile_at(em, ctaid);
        let srcs0 = self.tile_src(em, &t0);
        for s in 0..dist {
            self.load_tile(em, &srcs0, &s.to_string(), &s.to_string());
        }
        em.f.if_end(&cont);
        for _ in 0..dist {
            em.f.call_void("llvm.nvvm.cp.async.commit.group", &[]);
        }
        let ring = [("i32".to_string(), "0".to_string()), ("i32".to_string(), dist.to_string())];
        let (tl, tile) = self.tile_loop(em, ctaid, &ring);
        let srcs = self.tile_src(em, &tile);
        let nt = em.f.v(format!("add i32 {}, {nctaid}", tl.i));
        let has_next = em.f.v(format!("icmp ult i32 {nt}, {total}"));
        let ring = [tl.accs[0].clone(), tl.accs[1].clone()];
        let (ring, acc) = self.cp_async_k_loop(em, &srcs, ring, Some((&nt, &has_next)));
        match g.partial {
            Some(off) => partial_epilogue(em, g, off, &tile, tid, wg, &acc)?,
            None => epilogue(em, g, outs, &tile, tid, wg, &acc)?,
        }
        em.f.loop_end(&tl, nctaid, &ring);
        em.f.call_void("llvm.nvvm.cp.async.wait.group", &[("i32", "0")]);
        Ok(())
    }

    /// Fewer k-tiles than the prefetch distance, or arithmetic in the epilogue: every thread
    /// copies by cp.async, with a prologue per tile, and the tile is staged through the ring.
    fn cp_async_per_tile(&self, em: &mut Em) -> Result<(), PtxError> {
        let (g, outs, smem) = (self.g, self.outs, &self.smem);
        let (tid, ctaid, nctaid, wg) = (&self.tid, &self.ctaid, &self.nctaid, &self.wg);
        let dist = self.c.prefetch();
        let (tl, tile) = self.tile_loop(em, ctaid, &[]);
        let srcs = self.tile_src(em, &tile);
        for s in 0..dist {
            if u64::from(s) < self.k_tiles {
                self.load_tile(em, &srcs, &s.to_string(), &s.to_string());
            }
            em.f.call_void("llvm.nvvm.cp.async.commit.group", &[]);
        }
        let (_, acc) = self.cp_async_k_loop(em, &srcs, ["0".into(), dist.to_string()], None);
        em.f.call_void("llvm.nvvm.cp.async.wait.group", &[("i32", "0")]);
        // Every warpgroup is done reading the ring: the staged tile reuses it.
        em.f.call_void("llvm.nvvm.barrier0", &[]);
        match g.partial {
            Some(off) => partial_epilogue(em, g, off, &tile, tid, wg, &acc)?,
            None => {
                staged_epilogue(em, g, outs, &tile, tid, wg, &acc, smem)?;
                // Every thread has read the staged tile before the next tile refills the ring.
                em.f.call_void("llvm.nvvm.barrier0", &[]);
            }
        }
        em.f.loop_end(&tl, nctaid, &[]);
        Ok(())
    }

    /// Producer / consumer: the last warpgroup copies ([`WgKernel::producer`]), the others
    /// multiply and store ([`WgKernel::consumers`]); the ring position runs on across tiles (`it`
    /// counts k-tiles).
    fn producer_consumer(&self, em: &mut Em) -> Result<(), PtxError> {
        let is_producer = em.f.v(format!("icmp uge i32 {}, {}", self.wg, self.c.consumers));
        let cons = em.f.label("consumer");
        let prod = em.f.label("producer");
        let done = em.f.label("done");
        em.f.op(format!("br i1 {is_producer}, label %{prod}, label %{cons}"));
        em.f.start_block(&prod);
        self.producer(em, &done);
        em.f.start_block(&cons);
        self.consumers(em)?;
        em.f.br(&done);
        em.f.start_block(&done);
        Ok(())
    }

    /// The producer warpgroup: per k-tile, waits until its stage is empty, then fills it (by
    /// cp.async, arriving on the full barrier when the copies land, or by one thread's TMA);
    /// branches to `done`.
    fn producer(&self, em: &mut Em, done: &str) {
        let c = self.c;
        let (ctaid, nctaid, ntiles) = (&self.ctaid, &self.nctaid, &self.ntiles);
        if c.consumers == 2 {
            asm::setmaxnreg(&mut em.f, false, if c.tma { PRODUCER_REGS_TMA } else { PRODUCER_REGS });
        }
        if let Some((ma, mb)) = &self.maps {
            // One thread issues every copy; the rest of the producer warpgroup is done.
            let issuer = em.f.label("issuer");
            let lead = em.f.v(format!("icmp eq i32 {}, 0", self.ct));
            em.f.op(format!("br i1 {lead}, label %{issuer}, label %{done}"));
            em.f.start_block(&issuer);
            for m in [Some(ma), Some(mb), self.map_b2.as_ref()]
                .into_iter()
                .flatten()
                .chain(self.map_parts.iter().map(|p| &p.0))
            {
                asm::prefetch_tensormap(&mut em.f, m);
            }
        }
        let (tl, tile) = self.tile_loop(em, ctaid, &[("i32".into(), "0".into())]);
        let srcs = if c.tma { None } else { Some(self.tile_src(em, &tile)) };
        let it0 = tl.accs[0].clone();
        let kl = em.f.loop_begin("i32", "0", ntiles, &[]);
        let it = em.f.v(format!("add i32 {it0}, {}", kl.i));
        let (stage, par) = self.slot(em, &it);
        let par = em.f.v(format!("xor i32 {par}, 1"));
        let empty = self.empty_bar(em, &stage);
        asm::mbar_wait(&mut em.f, &empty, &par);
        match &srcs {
            Some(srcs) => {
                self.load_tile(em, srcs, &kl.i, &stage);
                let full = self.full_bar(em, &stage);
                asm::mbar_arrive_cp_async(&mut em.f, &full);
            }
            None => self.tma_tile(em, &tile, &kl.i, &stage),
        }
        em.f.loop_end(&kl, "1", &[]);
        let it_next = em.f.v(format!("add i32 {it0}, {ntiles}"));
        em.f.loop_end(&tl, nctaid, &[it_next]);
        // Nothing may exit while its copies are in flight (the consumers wait for every TMA
        // copy on the full barriers).
        if !c.tma {
            em.f.call_void("llvm.nvvm.cp.async.wait.all", &[]);
        }
        em.f.br(done);
    }

    /// The consumer warpgroups: per tile, the main loop (wait for a full stage, multiply, free the
    /// previous stage) and the epilogue; in the ping-pong variant the two consumers take
    /// alternate tiles.
    fn consumers(&self, em: &mut Em) -> Result<(), PtxError> {
        let (c, g, outs, smem) = (self.c, self.g, self.outs, &self.smem);
        let (tid, ctaid, nctaid, wg, ntiles) = (&self.tid, &self.ctaid, &self.nctaid, &self.wg, &self.ntiles);
        let (s_n, k_tiles, bar0) = (self.s_n, self.k_tiles, &self.bar0);
        if c.consumers == 2 {
            asm::setmaxnreg(&mut em.f, true, if c.tma { CONSUMER_REGS_TMA } else { CONSUMER_REGS });
        }
        // Ping-pong: consumer `wg` takes the block's tiles wg, wg + 2, ...
        let (start, step, it_first, it_step) = if c.pingpong {
            let off = em.f.v(format!("mul i32 {wg}, {nctaid}"));
            let start = em.f.v(format!("add i32 {ctaid}, {off}"));
            let step = em.f.v(format!("shl i32 {nctaid}, 1"));
            (start, step, em.f.v(format!("mul i32 {wg}, {ntiles}")), 2 * k_tiles)
        } else {
            (ctaid.clone(), nctaid.clone(), "0".to_string(), k_tiles)
        };
        let (tl, tile) = self.tile_loop(em, &start, &[("i32".into(), it_first), ("i32".into(), "0".into())]);
        let it0 = tl.accs[0].clone();
        let own = tl.accs[1].clone();
        // Ping-pong: the consumers' main loops alternate (each waits until the other has issued
        // the previous tile), so the full barriers are only ever waited on one phase ahead.
        if c.pingpong {
            let first = em.f.v(format!("or i32 {wg}, {own}"));
            let wait = em.f.v(format!("icmp ne i32 {first}, 0"));
            let cont = em.f.if_begin(&wait);
            let p = em.f.v(format!("add i32 {own}, 1"));
            let p = em.f.v(format!("sub i32 {p}, {wg}"));
            let parity = em.f.v(format!("and i32 {p}, 1"));
            let o = em.f.v(format!("mul i32 {wg}, 8"));
            let o = em.f.v(format!("add i32 {o}, {}", 16 * s_n));
            let order = em.f.v(format!("add i32 {bar0}, {o}"));
            asm::mbar_wait(&mut em.f, &order, &parity);
            em.f.if_end(&cont);
        }
        // The main loop.
        let kl = em.f.loop_begin("i32", "0", ntiles, &self.zeros);
        let it = em.f.v(format!("add i32 {it0}, {}", kl.i));
        let (stage, par) = self.slot(em, &it);
        let full = self.full_bar(em, &stage);
        asm::mbar_wait(&mut em.f, &full, &par);
        if !c.tma {
            // cp.async wrote the stage through the generic proxy; wgmma reads it through the async one.
            asm::fence_proxy_async(&mut em.f);
        }
        let first = em.f.v(format!("icmp eq i32 {}, 0", kl.i));
        let next = self.mma_tile(em, &kl.accs, &stage, &first);
        asm::wait(&mut em.f, 1);
        // The previous k-tile's wgmmas are done: free its stage.
        let notfirst = em.f.v(format!("icmp ne i32 {}, 0", kl.i));
        let cont = em.f.if_begin(&notfirst);
        let prev = em.f.v(format!("add i32 {stage}, {}", s_n - 1));
        let prev = em.f.v(format!("urem i32 {prev}, {s_n}"));
        let pe = self.empty_bar(em, &prev);
        asm::mbar_arrive(&mut em.f, &pe);
        em.f.if_end(&cont);
        em.f.loop_end(&kl, "1", &next);
        if c.pingpong {
            let other = em.f.v(format!("xor i32 {wg}, 1"));
            let o = em.f.v(format!("mul i32 {other}, 8"));
            let o = em.f.v(format!("add i32 {o}, {}", 16 * s_n));
            let order = em.f.v(format!("add i32 {bar0}, {o}"));
            asm::mbar_arrive(&mut em.f, &order);
        }
        let acc = asm::wait_acc(&mut em.f, 0, &kl.accs);
        let last = em.f.v(format!("add i32 {it0}, {}", k_tiles - 1));
        let ls = em.f.v(format!("urem i32 {last}, {s_n}"));
        let le = self.empty_bar(em, &ls);
        asm::mbar_arrive(&mut em.f, &le);
        // The epilogue.
        let rows_wg = if c.pingpong { "0".to_string() } else { wg.clone() };
        if let Some(off) = g.partial {
            partial_epilogue(em, g, off, &tile, tid, &rows_wg, &acc)?;
        } else if let (Some((addr, off)), Some(map)) = (self.store_staging(em, wg), &self.map_c) {
            let st = StoreStaging { addr, off, map, smem };
            tma_store_epilogue(em, g, outs, &tile, (tid, wg, &rows_wg), &acc, &st)?;
        } else {
            epilogue(em, g, outs, &tile, tid, &rows_wg, &acc)?;
        }
        let it_next = em.f.v(format!("add i32 {it0}, {it_step}"));
        let own_next = em.f.v(format!("add i32 {own}, 1"));
        em.f.loop_end(&tl, &step, &[it_next, own_next]);
        if self.map_c.is_some() {
            asm::bulk_wait_all(&mut em.f);
        }
        Ok(())
    }
}

/// A wgmma shared-memory descriptor of the address `addr` (i32) with the layout `bits`: the
/// address's low 18 bits, in 16-byte units, in bits 0-13 (a shared-window address has no more;
/// the mask keeps the other fields intact wherever the address comes from, e.g. the emulator).
pub(crate) fn descriptor(em: &mut Em, addr: &str, bits: u64) -> String {
    let low = em.f.v(format!("and i32 {addr}, {}", (1u32 << 18) - 1));
    let a4 = em.f.v(format!("lshr i32 {low}, 4"));
    let a64 = ext64(em, &a4);
    em.f.v(format!("or i64 {a64}, {bits}"))
}

/// The k-tile `kt` of a work item whose split starts at k-tile `kt0` (i32 values; no
/// instruction without splits).
fn k_tile(em: &mut Em, kt0: &str, kt: &str) -> String {
    if kt0 == "0" { kt.to_string() } else { em.f.v(format!("add i32 {kt0}, {kt}")) }
}

/// The output row and column of thread `tid`'s first accumulator pair in warpgroup `wg`'s rows
/// of `tile` (i32 values; `mma.sync`'s C layout per warp of 16 rows).
fn fragment_origin(em: &mut Em, tile: &Tile, tid: &str, wg: &str) -> (String, String) {
    let FragLane { wiw, gq, t2, .. } = FragLane::new(em, tid);
    let wr = em.f.v(format!("mul i32 {wg}, {WG_M}"));
    let w16 = em.f.v(format!("shl i32 {wiw}, 4"));
    let r = em.f.v(format!("add i32 {}, {wr}", tile.row0));
    let r = em.f.v(format!("add i32 {r}, {w16}"));
    let r_base = em.f.v(format!("add i32 {r}, {gq}"));
    let c_base = em.f.v(format!("add i32 {}, {t2}", tile.col0));
    (r_base, c_base)
}

/// Writes a work item's accumulators as f32 partial sums of its split at scratch byte `off`
/// (`[split][batch][m][n]`, what the matmul's reduce entry adds up): per warp 16 rows
/// (`mma.sync`'s C layout per 8 columns), in pairs, only inside the product.
fn partial_epilogue(
    em: &mut Em,
    g: &WgGemm,
    off: u64,
    tile: &Tile,
    tid: &str,
    wg: &str,
    acc: &[String],
) -> Result<(), PtxError> {
    let origin = fragment_origin(em, tile, tid, wg);
    each_pair(em, &origin, g.c.bn, |em, row, col, a| {
        let vals = [acc[a].clone(), acc[a + 1].clone()];
        partial_store(em, &g.p, off, &tile.split, &tile.bidx, row, col, &vals);
        Ok(())
    })
}

/// Calls `f(em, row, col, a)` for each accumulator pair of a thread in the first `cols` columns
/// of its warp's fragments: `(row, col)` the pair's place (i32 values, `origin` plus the pair's
/// 8-row half and 8-column group), `a` the index of its first accumulator. The emitter's value
/// cache is restored after each pair.
fn each_pair(
    em: &mut Em,
    (r_base, c_base): &(String, String),
    cols: u32,
    mut f: impl FnMut(&mut Em, &str, &str, usize) -> Result<(), PtxError>,
) -> Result<(), PtxError> {
    let saved = em.save();
    for j in 0..(cols / 8) as usize {
        for h in 0..2usize {
            let row = em.f.v(format!("add i32 {r_base}, {}", h * 8));
            let col = em.f.v(format!("add i32 {c_base}, {}", j * 8));
            f(em, &row, &col, 4 * j + 2 * h)?;
            em.restore(saved.clone());
        }
    }
    Ok(())
}

/// Stores a block tile through shared memory (see [`epilogue::staged`]): every thread writes its
/// accumulators (per warp 16 rows, `mma.sync`'s C layout per 8 columns) into a staged tile at the
/// start of the dynamic shared memory, then the block stores it in 16-byte row vectors. Every
/// thread holds accumulators (no producer); the caller synchronizes before (the ring is no
/// longer read) and after (before it is refilled).
// Reason: the IR value names of the tile, thread and shared memory, plus the product and its outputs.
#[allow(clippy::too_many_arguments)]
fn staged_epilogue(
    em: &mut Em,
    g: &WgGemm,
    outs: &[Out],
    tile: &Tile,
    tid: &str,
    wg: &str,
    acc: &[String],
    smem: &str,
) -> Result<(), PtxError> {
    let c = g.c;
    let lane = em.f.v(format!("and i32 {tid}, 31"));
    let warp = em.f.v(format!("lshr i32 {tid}, 5"));
    let wiw = em.f.v(format!("and i32 {warp}, 3"));
    let wr = em.f.v(format!("mul i32 {wg}, {WG_M}"));
    let w16 = em.f.v(format!("shl i32 {wiw}, 4"));
    let row0 = em.f.v(format!("add i32 {wr}, {w16}"));
    let frag = epilogue::mma_fragment(em, &lane, (&row0, "0"), (1, (c.bn / 8) as usize), acc);
    let st = epilogue::Staging { smem, base: 0, rows: c.bm(), cols: c.bn, dtype: em.dtype(g.p.node) };
    let at = epilogue::TileAt { row0: &tile.row0, col0: &tile.col0, bidx: &tile.bidx };
    let barrier = |em: &mut Em| em.f.call_void("llvm.nvvm.barrier0", &[]);
    epilogue::staged(em, &st, &g.p.output(), outs, &at, &frag, (tid, c.threads()), barrier)
}

/// Stores a tile's accumulators: per warp 16 rows (`mma.sync`'s C layout per 8 columns).
// Reason: the IR value names of the tile and thread, plus the product and its outputs.
#[allow(clippy::too_many_arguments)]
fn epilogue(
    em: &mut Em,
    g: &WgGemm,
    outs: &[Out],
    tile: &Tile,
    tid: &str,
    wg: &str,
    acc: &[String],
) -> Result<(), PtxError> {
    let origin = fragment_origin(em, tile, tid, wg);
    let bmulti = {
        let bi = em.widen(&tile.bidx);
        em.delinearize(&bi, g.p.batch_dims)
    };
    // A dual product's second product: the same columns, half the tile's accumulators further.
    let second = g.p.second.map(|_| (g.c.bn / 4) as usize);
    each_pair(em, &origin, g.p.out_cols(g.c.bn), |em, row, col, a| {
        let vals = [acc[a].clone(), acc[a + 1].clone()];
        let vals2 = second.map(|o| [acc[a + o].clone(), acc[a + o + 1].clone()]);
        store_pair(em, g, outs, &bmulti, (row, col), &vals, vals2.as_ref())
    })
}

/// A thread's place in its warp's C fragments (`mma.sync`'s layout per 16 x 8 tile; i32
/// values): `wiw`, its warp within the warpgroup; `gq`, its row within each 8-row half; `tq`
/// and `t2 = 2 tq`, its column pair.
pub(super) struct FragLane {
    /// Warp within the warpgroup.
    pub(super) wiw: String,
    /// Row within an 8-row half of a fragment.
    pub(super) gq: String,
    /// Lane within the quad.
    pub(super) tq: String,
    /// First column of the lane's pair.
    pub(super) t2: String,
}

impl FragLane {
    /// The place of thread `tid` (i32).
    pub(super) fn new(em: &mut Em, tid: &str) -> FragLane {
        let lane = em.f.v(format!("and i32 {tid}, 31"));
        let warp = em.f.v(format!("lshr i32 {tid}, 5"));
        let wiw = em.f.v(format!("and i32 {warp}, 3"));
        let gq = em.f.v(format!("lshr i32 {lane}, 2"));
        let tq = em.f.v(format!("and i32 {lane}, 3"));
        let t2 = em.f.v(format!("shl i32 {tq}, 1"));
        FragLane { wiw, gq, tq, t2 }
    }
}

/// Clamps an i32 index to `size - 1` and converts it to the index type.
fn clamp_ix(em: &mut Em, v: &str, size: u64) -> String {
    let last = size.saturating_sub(1);
    let over = em.f.v(format!("icmp ugt i32 {v}, {last}"));
    let c = em.f.v(format!("select i1 {over}, i32 {last}, i32 {v}"));
    em.widen(&c)
}

/// The fused epilogue of two adjacent accumulators (row, col) and (row, col+1): rounds each to
/// the matmul's dtype, evaluates every output at it and stores what lies inside the output
/// ([`epilogue::store_pair`]).
fn store_pair(
    em: &mut Em,
    g: &WgGemm,
    outs: &[Out],
    bmulti: &[String],
    at: (&str, &str),
    vals: &[String; 2],
    second: Option<&[String; 2]>,
) -> Result<(), PtxError> {
    let per_elem = pair_outputs(em, g, outs, bmulti, at, vals, second)?;
    epilogue::store_pair(em, outs, &per_elem, g.p.n.is_multiple_of(2))
}

/// Per element of the pair of accumulators at (row, col) and (row, col+1): whether it lies inside
/// the output, its flat index (clamped inside), and the value of every output there. A dual
/// product's `second` holds its second product's accumulators at the same elements.
pub(super) fn pair_outputs(
    em: &mut Em,
    g: &WgGemm,
    outs: &[Out],
    bmulti: &[String],
    (row, col): (&str, &str),
    vals: &[String; 2],
    second: Option<&[String; 2]>,
) -> Result<Vec<(String, String, Vec<String>)>, PtxError> {
    let out_dtype = em.dtype(g.p.node);
    let rc = clamp_ix(em, row, g.p.m);
    let rok = em.f.v(format!("icmp ult i32 {row}, {}", g.p.m));
    let mut per_elem: Vec<(String, String, Vec<String>)> = Vec::new();
    for (e, acc) in vals.iter().enumerate() {
        let ce = if e == 0 { col.to_string() } else { em.f.v(format!("add i32 {col}, {e}")) };
        let cok = em.f.v(format!("icmp ult i32 {ce}, {}", g.p.n));
        let ok = em.f.v(format!("and i1 {rok}, {cok}"));
        let cc = clamp_ix(em, &ce, g.p.n);
        let mut multi = bmulti.to_vec();
        multi.push(rc.clone());
        multi.push(cc);
        let flat = em.linearize(&multi, g.p.out_dims);
        let value = math::round(&mut em.f, em.caps, out_dtype, acc)?;
        em.env.insert(g.p.node, value);
        let both = g.p.second.zip(second);
        if let Some((sp, accs)) = both {
            let value = math::round(&mut em.f, em.caps, out_dtype, &accs[e])?;
            em.env.insert(sp.node, value);
        }
        let at = Ix { flat: flat.clone(), multi: Some(multi), vec: None };
        let mut vs = Vec::new();
        for o in outs {
            vs.push(em.eval_out(o, &at)?);
        }
        em.env.remove(&g.p.node);
        if let Some((sp, _)) = both {
            em.env.remove(&sp.node);
        }
        per_elem.push((ok, flat, vs));
    }
    Ok(per_elem)
}
