//! The tensor-core main loop: each block computes `bm x bn` output tiles (grid-stride over
//! swizzled tiles, batches and k splits); `cp.async` copies 16-byte chunks of A and B into an
//! `stages`-deep ring of XOR-swizzled shared-memory tiles (zero-filled outside the operands);
//! each warp loads its fragments with `ldmatrix` (`.trans` for a `[k, n]` B) and accumulates
//! `wm x wn` outputs in f32 with `mma.sync.m16n8k16`; then the epilogue writes the accumulators:
//! staged through shared memory (the ring, reused after a barrier) and stored as fused
//! expressions in 16-byte row vectors (see [`super::epilogue`]), or for a k split as f32 partial
//! sums straight from the fragments (pairs of 8 bytes).
//!
//! With a k split inside the block (`kw` warps, the block tile one warp tile: the skinny
//! products' default), every warp owns a ring of its own over every `kw`-th k-tile, synchronized
//! by `bar.warp.sync` only, so each keeps its copies in flight independently; at the end warps
//! 1.. write their accumulators to their rings and warp 0 adds them in warp order and stages the
//! sums, which every warp then stores (one launch, deterministic).

use tcc_ir::DType;

use super::super::expr::Em;
use super::super::math;
use super::super::plan::{Out, Src};
use super::config::{BLayout, MmaConfig};
use super::epilogue;
use super::{MemRef, Operand};
use crate::llvm_text::Loop;
use crate::ptx::error::PtxError;

/// One product to compute, as both tensor-core main loops (`mma.sync` and wgmma) read it:
/// sizes, operands in memory, the matmul node and its output's dims.
pub(crate) struct GemmProduct<'a> {
    /// Output rows.
    pub(crate) m: u64,
    /// Output columns.
    pub(crate) n: u64,
    /// Depth of the k loop (the real depth rounded up to 8; padding reads zeros).
    pub(crate) k: u64,
    /// Real depth (rows of a `[k, n]` B that exist).
    pub(crate) k_real: u64,
    /// Products.
    pub(crate) batch: u64,
    /// Input element type.
    pub(crate) dtype: DType,
    /// Operand A (`[m, k]`, k contiguous).
    pub(crate) a: Operand,
    /// Operand B.
    pub(crate) b: Operand,
    /// How B is stored.
    pub(crate) b_layout: BLayout,
    /// The matmul node.
    pub(crate) node: tcc_ir::NodeId,
    /// A dual product's second product ([`tcc_ir::DualProduct`]; the `mma.sync` and warpgroup
    /// loops run one): each `bn`-column block tile holds `bn / 2` columns of each product.
    pub(crate) second: Option<SecondProduct>,
    /// A B joined along its columns from several tensors (a joined product of sibling products):
    /// the `mma.sync` loop reads each 16-byte chunk from the part holding its row, the warpgroup
    /// loop's TMA variants each tile (inside one part) from that part's tensor map. Empty for
    /// one B (`b`); else `b` is the first part.
    pub(crate) joined: Vec<JoinedPart>,
    /// Batch dims of the output.
    pub(crate) batch_dims: &'a [u64],
    /// Output dims.
    pub(crate) out_dims: &'a [u64],
}

/// The second product of a dual product: the same A and sizes, its own B, stored as the first
/// product's B is (the same layout, pitch and batch stride).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SecondProduct {
    /// Its B.
    pub(crate) b: Operand,
    /// Its matmul node.
    pub(crate) node: tcc_ir::NodeId,
}

/// One part of a B joined along its columns: `[n, k]` rows in memory (a weight read as its
/// transpose), the product's columns `start..start + cols`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct JoinedPart {
    /// Its rows in memory.
    pub(crate) b: Operand,
    /// Its first column of the product.
    pub(crate) start: u64,
    /// Its columns.
    pub(crate) cols: u64,
}

impl GemmProduct<'_> {
    /// Output columns of one block tile of `bn` columns: half of them for a dual product.
    pub(crate) fn out_cols(&self, bn: u32) -> u32 {
        if self.second.is_some() { bn / 2 } else { bn }
    }
}

/// Everything the `mma.sync` main loop needs to know about one product.
pub(crate) struct Gemm<'a> {
    /// The tiling.
    pub(crate) c: MmaConfig,
    /// The product.
    pub(crate) p: GemmProduct<'a>,
}

/// Where the epilogue writes.
pub(crate) enum Epilogue<'a> {
    /// Fused expressions of the accumulator, stored to `outs`.
    Fused(&'a [Out]),
    /// f32 partial sums at this scratch byte offset, `[split][batch][m][n]`.
    Partial(u64),
}

/// The XOR applied to the 16-byte chunk index of row `row` (a register or constant) in a tile
/// whose rows hold `chunks` chunks, so that 8 consecutive rows hit 8 distinct bank groups.
pub(crate) fn swz(em: &mut Em, row: &str, chunks: u32) -> String {
    if chunks >= 8 {
        em.f.v(format!("and i32 {row}, 7"))
    } else {
        let shift = (8 / chunks).trailing_zeros();
        let s = em.f.v(format!("lshr i32 {row}, {shift}"));
        em.f.v(format!("and i32 {s}, {}", chunks - 1))
    }
}

/// An i32 value zero-extended to i64.
pub(crate) fn ext64(em: &mut Em, v: &str) -> String {
    em.f.v(format!("zext i32 {v} to i64"))
}

/// Pointer to a global operand at element offset `off` (i64).
fn gptr(em: &mut Em, base: &str, st: &str, off: &str) -> String {
    em.f.v(format!("getelementptr inbounds {st}, ptr addrspace(1) {base}, i64 {off}"))
}

/// The global base pointer of an operand.
pub(crate) fn base_ptr(em: &mut Em, r: MemRef) -> String {
    match r {
        MemRef::Param(i) => format!("%in{i}"),
        MemRef::Mat(Src::Output(k)) => format!("%out{k}"),
        MemRef::Mat(Src::Scratch(off)) => {
            em.f.v(format!("getelementptr inbounds i8, ptr addrspace(1) %scratch, i64 {off}"))
        }
    }
}

/// One thread's share of a tile copy: per chunk, its shared-memory byte offset within the tile,
/// its row and chunk index within the tile, and whether this thread has it at all.
pub(crate) struct CopyPlan {
    /// Per chunk: shared-memory byte offset, row, chunk index and the guard (`None`: always).
    pub(crate) chunks: Vec<(String, String, String, Option<String>)>,
}

/// Plans a copy of a tile of `rows` rows of `row_chunks` 16-byte chunks by `threads` threads.
pub(crate) fn copy_plan(em: &mut Em, tid: &str, rows: u32, row_chunks: u32, threads: u32) -> CopyPlan {
    let total = rows * row_chunks;
    let iters = total.div_ceil(threads);
    let mut chunks = Vec::new();
    for i in 0..iters {
        let q = em.f.v(format!("add i32 {tid}, {}", i * threads));
        let guard = if (i + 1) * threads > total { Some(em.f.v(format!("icmp ult i32 {q}, {total}"))) } else { None };
        let row = em.f.v(format!("udiv i32 {q}, {row_chunks}"));
        let ch = em.f.v(format!("urem i32 {q}, {row_chunks}"));
        let s = swz(em, &row, row_chunks);
        let phys = em.f.v(format!("xor i32 {ch}, {s}"));
        let rb = em.f.v(format!("mul i32 {row}, {}", row_chunks * 16));
        let pb = em.f.v(format!("shl i32 {phys}, 4"));
        let off = em.f.v(format!("add i32 {rb}, {pb}"));
        chunks.push((off, row, ch, guard));
    }
    CopyPlan { chunks }
}

/// The first row and column of the tile of linear index `tile_lin` (i32) among `tiles_m x
/// tiles_n` tiles of `bm x bn`, in swizzled order: `swizzle` tile rows form a group, and
/// consecutive blocks walk down M inside a band of columns (shared by both tensor-core main loops).
pub(crate) fn swizzled_tile(
    em: &mut Em,
    tile_lin: &str,
    (tiles_m, tiles_n): (u64, u64),
    swizzle: u32,
    (bm, bn): (u64, u64),
) -> (String, String) {
    let gsz = u64::from(swizzle).min(tiles_m);
    let group_tiles = gsz * tiles_n;
    let group = em.f.v(format!("udiv i32 {tile_lin}, {group_tiles}"));
    let first_m = em.f.v(format!("mul i32 {group}, {gsz}"));
    let left = em.f.v(format!("sub i32 {tiles_m}, {first_m}"));
    let small = em.f.v(format!("icmp ult i32 {left}, {gsz}"));
    let gh = em.f.v(format!("select i1 {small}, i32 {left}, i32 {gsz}"));
    let within = em.f.v(format!("urem i32 {tile_lin}, {group_tiles}"));
    let wm_ = em.f.v(format!("urem i32 {within}, {gh}"));
    let tm = em.f.v(format!("add i32 {first_m}, {wm_}"));
    let tn = em.f.v(format!("udiv i32 {within}, {gh}"));
    let row0 = em.f.v(format!("mul i32 {tm}, {bm}"));
    let col0 = em.f.v(format!("mul i32 {tn}, {bn}"));
    (row0, col0)
}

/// Issues one `cp.async` of 16 bytes (zero-filled when `ok` is false, from a valid address).
pub(crate) fn cp_async(em: &mut Em, smem: &str, soff: &str, base: &str, st: &str, goff: &str, ok: &str) {
    let sp = em.f.v(format!("getelementptr inbounds i8, ptr addrspace(3) {smem}, i32 {soff}"));
    let real = gptr(em, base, st, goff);
    let src = em.f.v(format!("select i1 {ok}, ptr addrspace(1) {real}, ptr addrspace(1) {base}"));
    let size = em.f.v(format!("select i1 {ok}, i32 16, i32 0"));
    em.f.call_void(
        "llvm.nvvm.cp.async.cg.shared.global.16.s",
        &[("ptr addrspace(3)", &sp), ("ptr addrspace(1)", &src), ("i32", &size)],
    );
}

/// Synchronizes the threads that share one `cp.async` ring: the block, or (with a k split
/// inside the block, where each ring belongs to one warp) the warp.
fn ring_sync(em: &mut Em, c: &MmaConfig) {
    if c.kw > 1 {
        em.f.call_void("llvm.nvvm.bar.warp.sync", &[("i32", "-1")]);
    } else {
        em.f.call_void("llvm.nvvm.barrier0", &[]);
    }
}

/// Emits the tensor-core kernel body into `em`; returns nothing (the caller adds the entry).
/// The steps, in order: [`MmaKernel::prologue`] (thread layout, copy plans, fragment
/// addresses), then per output tile of the grid-stride loop [`MmaKernel::tile_begin`],
/// [`MmaKernel::fill_ring`] (the pipeline's prologue), [`MmaKernel::main_loop`] (the k loop) and
/// [`MmaKernel::epilogue`].
pub(crate) fn emit(em: &mut Em, g: &Gemm, smem_sym: &str, epi: &Epilogue) -> Result<(), PtxError> {
    let k = MmaKernel::prologue(em, g, smem_sym)?;
    let saved = em.save();
    let tile = k.tile_begin(em);
    k.fill_ring(em, &tile);
    let acc = k.main_loop(em, &tile);
    k.epilogue(em, &tile, &acc, epi)?;
    em.f.loop_end(&tile.tl, &k.nctaid, &[]);
    em.restore(saved);
    Ok(())
}

/// What every step of the `mma.sync` kernel shares: the product and its tiling, and the
/// loop-invariant values [`MmaKernel::prologue`] computes once per thread.
struct MmaKernel<'g, 'a> {
    g: &'g Gemm<'a>,
    c: MmaConfig,
    /// The product's element type in LLVM IR.
    st: &'static str,
    /// The dynamic shared memory (`@name`).
    smem: String,
    tiles_m: u64,
    tiles_n: u64,
    tiles: u64,
    splits: u64,
    total: u64,
    k_tiles: u64,
    per_split: u64,
    a_tile_bytes: u64,
    stage_bytes: u64,
    kw: u64,
    tid: String,
    ctaid: String,
    nctaid: String,
    lane: String,
    warp: String,
    /// This ring's k group (with a k split inside the block, the warp; else 0).
    kgroup: String,
    /// Where this thread's ring starts (bytes).
    ring: String,
    /// The warp tile's first row and column within the block tile.
    wrow: String,
    wcol: String,
    a_base: String,
    b_base: String,
    /// A dual product's second B.
    b2_base: Option<String>,
    /// A joined B's further parts: each one's base and first column (the first part is `b_base`,
    /// from column 0).
    part_bases: Vec<(String, u64)>,
    a_copy: CopyPlan,
    b_copy: CopyPlan,
    /// Byte offsets within a stage of this lane's A fragments, per k16 step.
    a_frag_off: Vec<String>,
    /// The same for B, per k16 step and 16 columns.
    b_frag_off: Vec<Vec<String>>,
}

/// One output tile of the grid-stride loop: the loop, the tile's place, its k range and the
/// global sources of the chunks this thread copies.
struct MmaTile {
    tl: Loop,
    row0: String,
    col0: String,
    split: String,
    bidx: String,
    /// This ring's first k-tile and how many it runs.
    kt_first: String,
    my_tiles: String,
    a_src: Vec<(String, String, String)>,
    /// Per B chunk: offset, validity, k row or column, and the base pointer it is read from.
    b_src: Vec<(String, String, String, String)>,
}

impl<'g, 'a> MmaKernel<'g, 'a> {
    /// The kernel's prologue: thread, warp and ring ids, the operands' base pointers, the copy
    /// plans and the fragment addresses (all loop invariant).
    fn prologue(em: &mut Em, g: &'g Gemm<'a>, smem_sym: &str) -> Result<MmaKernel<'g, 'a>, PtxError> {
        let c = g.c;
        let threads = c.threads();
        let (bm, bn, bk) = (u64::from(c.bm), u64::from(c.bn), u64::from(c.bk));
        let tiles_m = g.p.m.div_ceil(bm);
        let tiles_n = g.p.n.div_ceil(u64::from(g.p.out_cols(c.bn)));
        let tiles = tiles_m * tiles_n;
        let splits = u64::from(c.split_k);
        let k_tiles = g.p.k.div_ceil(bk);
        if c.kw > 1 && c.group_warps() != 1 {
            return Err(PtxError::Unsupported {
                target: em.caps.name,
                what: "a k split inside a block whose tile is more than one warp tile".into(),
            });
        }

        let tid = em.f.call("i32", "llvm.nvvm.read.ptx.sreg.tid.x", &[]);
        let ctaid = em.f.call("i32", "llvm.nvvm.read.ptx.sreg.ctaid.x", &[]);
        let nctaid = em.f.call("i32", "llvm.nvvm.read.ptx.sreg.nctaid.x", &[]);
        let lane = em.f.v(format!("and i32 {tid}, 31"));
        let warp = em.f.v(format!("lshr i32 {tid}, 5"));
        // The threads sharing a ring: the block, or with a k split inside the block one warp, whose
        // ring starts at `ring` and which runs every `kw`-th k-tile from its `kgroup`-th on.
        let (kgroup, gtid, wig, ring) = if c.kw > 1 {
            let ring = em.f.v(format!("mul i32 {warp}, {}", c.ring_region_bytes()));
            (warp.clone(), lane.clone(), "0".to_string(), ring)
        } else {
            ("0".to_string(), tid.clone(), warp.clone(), "0".to_string())
        };
        let gthreads = c.group_threads();
        debug_assert_eq!(gthreads * c.kw, threads);
        let wn_count = c.bn / c.wn;
        let warp_m = em.f.v(format!("udiv i32 {wig}, {wn_count}"));
        let warp_n = em.f.v(format!("urem i32 {wig}, {wn_count}"));
        let a_base = base_ptr(em, g.p.a.mem);
        let b_base = base_ptr(em, g.p.b.mem);
        let b2_base = g.p.second.map(|s| base_ptr(em, s.b.mem));
        let part_bases: Vec<(String, u64)> =
            g.p.joined.iter().skip(1).map(|j| (base_ptr(em, j.b.mem), j.start)).collect();

        // Copy plans (per thread, loop invariant).
        let a_chunks = c.bk / 8;
        let a_copy = copy_plan(em, &gtid, c.bm, a_chunks, gthreads);
        let (b_rows, b_chunks) = match g.p.b_layout {
            BLayout::KN => (c.bk, c.bn / 8),
            BLayout::NK => (c.bn, c.bk / 8),
        };
        let b_copy = copy_plan(em, &gtid, b_rows, b_chunks, gthreads);

        // Fragment addresses (byte offsets within a stage), per k16 step.
        let l16 = em.f.v(format!("and i32 {lane}, 15"));
        let hi = em.f.v(format!("lshr i32 {lane}, 4"));
        let sa = swz(em, &l16, a_chunks);
        let wrow = em.f.v(format!("mul i32 {warp_m}, {}", c.wm));
        let arow = em.f.v(format!("add i32 {wrow}, {l16}"));
        let arow_b = em.f.v(format!("mul i32 {arow}, {}", bk * 2));
        let mut a_frag_off = Vec::new();
        for kk in 0..c.bk / 16 {
            let ch = em.f.v(format!("add i32 {hi}, {}", kk * 2));
            let phys = em.f.v(format!("xor i32 {ch}, {sa}"));
            let pb = em.f.v(format!("shl i32 {phys}, 4"));
            a_frag_off.push(em.f.v(format!("add i32 {arow_b}, {pb}")));
        }
        let wcol = em.f.v(format!("mul i32 {warp_n}, {}", c.wn));
        let mut b_frag_off = Vec::new();
        match g.p.b_layout {
            BLayout::KN => {
                // .trans: lanes supply k rows kk*16 + lane%16, chunk (wcol + nj*16)/8 + lane/16.
                let sb = swz(em, &l16, b_chunks);
                let wch = em.f.v(format!("lshr i32 {wcol}, 3"));
                let ch0 = em.f.v(format!("add i32 {wch}, {hi}"));
                for kk in 0..c.bk / 16 {
                    let krow = em.f.v(format!("add i32 {l16}, {}", kk * 16));
                    let rb = em.f.v(format!("mul i32 {krow}, {}", bn * 2));
                    let mut per_nj = Vec::new();
                    for nj in 0..c.wn / 16 {
                        let ch = em.f.v(format!("add i32 {ch0}, {}", nj * 2));
                        let phys = em.f.v(format!("xor i32 {ch}, {sb}"));
                        let pb = em.f.v(format!("shl i32 {phys}, 4"));
                        per_nj.push(em.f.v(format!("add i32 {rb}, {pb}")));
                    }
                    b_frag_off.push(per_nj);
                }
            }
            BLayout::NK => {
                // Lanes supply n rows (lane%8) + 8*(lane/16), chunk kk*2 + (lane/8)%2.
                let l8 = em.f.v(format!("and i32 {lane}, 7"));
                let h8 = em.f.v(format!("shl i32 {hi}, 3"));
                let nloc = em.f.v(format!("or i32 {l8}, {h8}"));
                let sb = swz(em, &nloc, b_chunks);
                let nrow = em.f.v(format!("add i32 {wcol}, {nloc}"));
                let kh = em.f.v(format!("lshr i32 {lane}, 3"));
                let kh = em.f.v(format!("and i32 {kh}, 1"));
                for kk in 0..c.bk / 16 {
                    let ch = em.f.v(format!("add i32 {kh}, {}", kk * 2));
                    let phys = em.f.v(format!("xor i32 {ch}, {sb}"));
                    let pb = em.f.v(format!("shl i32 {phys}, 4"));
                    let mut per_nj = Vec::new();
                    for nj in 0..c.wn / 16 {
                        let r = em.f.v(format!("add i32 {nrow}, {}", nj * 16));
                        let rb = em.f.v(format!("mul i32 {r}, {}", bk * 2));
                        per_nj.push(em.f.v(format!("add i32 {rb}, {pb}")));
                    }
                    b_frag_off.push(per_nj);
                }
            }
        }
        Ok(MmaKernel {
            g,
            c,
            st: math::stype(g.p.dtype),
            smem: format!("@{smem_sym}"),
            tiles_m,
            tiles_n,
            tiles,
            splits,
            total: tiles * splits * g.p.batch,
            k_tiles,
            per_split: k_tiles.div_ceil(splits),
            a_tile_bytes: bm * bk * 2,
            stage_bytes: (bm + bn) * bk * 2,
            kw: u64::from(c.kw),
            tid,
            ctaid,
            nctaid,
            lane,
            warp,
            kgroup,
            ring,
            wrow,
            wcol,
            a_base,
            b_base,
            b2_base,
            part_bases,
            a_copy,
            b_copy,
            a_frag_off,
            b_frag_off,
        })
    }

    /// Opens the grid-stride loop over (batch, split, tile) and computes the tile's place, its k
    /// range and the global sources of this thread's chunks.
    fn tile_begin(&self, em: &mut Em) -> MmaTile {
        let (c, g) = (self.c, self.g);
        let (bm, bn) = (u64::from(c.bm), u64::from(g.p.out_cols(c.bn)));
        let half = g.p.second.map(|_| c.bn / 2);
        let (tiles, splits, tiles_m, tiles_n) = (self.tiles, self.splits, self.tiles_m, self.tiles_n);
        let tl = em.f.loop_begin("i32", &self.ctaid, &self.total.to_string(), &[]);
        let t = tl.i.clone();
        let tile_lin = em.f.v(format!("urem i32 {t}, {tiles}"));
        let rest = em.f.v(format!("udiv i32 {t}, {tiles}"));
        let split = em.f.v(format!("urem i32 {rest}, {splits}"));
        let bidx = em.f.v(format!("udiv i32 {rest}, {splits}"));
        let (row0, col0) = swizzled_tile(em, &tile_lin, (tiles_m, tiles_n), c.swizzle, (bm, bn));
        let (k_tiles, per_split, kw, kgroup) = (self.k_tiles, self.per_split, self.kw, &self.kgroup);
        let kt0 = em.f.v(format!("mul i32 {split}, {per_split}"));
        let kt_end_raw = em.f.v(format!("add i32 {kt0}, {per_split}"));
        let over = em.f.v(format!("icmp ugt i32 {kt_end_raw}, {k_tiles}"));
        let kt_end = em.f.v(format!("select i1 {over}, i32 {k_tiles}, i32 {kt_end_raw}"));
        let empty = em.f.v(format!("icmp ugt i32 {kt0}, {kt_end}"));
        let kt0 = em.f.v(format!("select i1 {empty}, i32 {kt_end}, i32 {kt0}"));
        let ntiles = em.f.v(format!("sub i32 {kt_end}, {kt0}"));
        // This ring's share: k-tiles kt0 + kgroup + j * kw for j < my_tiles.
        let (kt_first, my_tiles) = if c.kw > 1 {
            let first = em.f.v(format!("add i32 {kt0}, {kgroup}"));
            let up = em.f.v(format!("add i32 {ntiles}, {}", kw - 1));
            let up = em.f.v(format!("sub i32 {up}, {kgroup}"));
            (first, em.f.v(format!("udiv i32 {up}, {kw}")))
        } else {
            (kt0.clone(), ntiles.clone())
        };
        let b64 = ext64(em, &bidx);

        // Per-tile global offsets and row validity of each chunk this thread copies.
        let a_bo = em.f.v(format!("mul i64 {b64}, {}", g.p.a.batch_stride));
        let mut a_src = Vec::new();
        for (_, row, ch, _) in &self.a_copy.chunks {
            let r = em.f.v(format!("add i32 {row0}, {row}"));
            let ok = em.f.v(format!("icmp ult i32 {r}, {}", g.p.m));
            let r64 = ext64(em, &r);
            let ro = em.f.v(format!("mul i64 {r64}, {}", g.p.a.ld));
            let ro = em.f.v(format!("add i64 {ro}, {a_bo}"));
            let c8 = em.f.v(format!("shl i32 {ch}, 3"));
            let c64 = ext64(em, &c8);
            let off = em.f.v(format!("add i64 {ro}, {c64}"));
            a_src.push((off, ok, c8));
        }
        let b_bo = em.f.v(format!("mul i64 {b64}, {}", g.p.b.batch_stride));
        let mut b_src = Vec::new();
        for (_, row, ch, _) in &self.b_copy.chunks {
            let c8 = em.f.v(format!("shl i32 {ch}, 3"));
            // A dual product's tile: the first half of its n positions from the first B, the
            // second half (the same output columns) from the second.
            let pick = |em: &mut Em, pos: &str| -> (String, String) {
                match (half, &self.b2_base) {
                    (Some(h), Some(b2)) => {
                        let hi = em.f.v(format!("icmp uge i32 {pos}, {h}"));
                        let back = em.f.v(format!("sub i32 {pos}, {h}"));
                        let local = em.f.v(format!("select i1 {hi}, i32 {back}, i32 {pos}"));
                        let base =
                            em.f.v(format!("select i1 {hi}, ptr addrspace(1) {b2}, ptr addrspace(1) {}", self.b_base));
                        (local, base)
                    }
                    _ => (pos.to_string(), self.b_base.clone()),
                }
            };
            match g.p.b_layout {
                BLayout::KN => {
                    // row = k within the tile, chunk = n; validity of n here, of k per k-tile.
                    let (c8n, base) = pick(em, &c8);
                    let col = em.f.v(format!("add i32 {col0}, {c8n}"));
                    let ok = em.f.v(format!("icmp ult i32 {col}, {}", g.p.n.div_ceil(8) * 8));
                    let r64 = ext64(em, row);
                    let ro = em.f.v(format!("mul i64 {r64}, {}", g.p.b.ld));
                    let col64 = ext64(em, &col);
                    let off = em.f.v(format!("add i64 {ro}, {col64}"));
                    let off = em.f.v(format!("add i64 {off}, {b_bo}"));
                    b_src.push((off, ok, row.clone(), base));
                }
                BLayout::NK => {
                    let (rown, mut base) = pick(em, row);
                    let r = em.f.v(format!("add i32 {col0}, {rown}"));
                    let ok = em.f.v(format!("icmp ult i32 {r}, {}", g.p.n));
                    // A joined B: the row of the part that holds column r (per chunk, so a tile
                    // may straddle two parts).
                    let mut local = r.clone();
                    for (part, start) in &self.part_bases {
                        let inside = em.f.v(format!("icmp uge i32 {r}, {start}"));
                        let own = em.f.v(format!("sub i32 {r}, {start}"));
                        local = em.f.v(format!("select i1 {inside}, i32 {own}, i32 {local}"));
                        base = em.f.v(format!("select i1 {inside}, ptr addrspace(1) {part}, ptr addrspace(1) {base}"));
                    }
                    let r64 = ext64(em, &local);
                    let ro = em.f.v(format!("mul i64 {r64}, {}", g.p.b.ld));
                    let ro = em.f.v(format!("add i64 {ro}, {b_bo}"));
                    let c64 = ext64(em, &c8);
                    let off = em.f.v(format!("add i64 {ro}, {c64}"));
                    b_src.push((off, ok, c8, base));
                }
            }
        }
        MmaTile { tl, row0, col0, split, bidx, kt_first, my_tiles, a_src, b_src }
    }

    /// Copies this ring's `j`-th k-tile of `tile` into stage `stage` (both i32) by `cp.async`.
    fn load_tile(&self, em: &mut Em, tile: &MmaTile, j: &str, stage: &str) {
        let (c, g, kw, kt_first) = (self.c, self.g, self.kw, &tile.kt_first);
        let (bk, stage_bytes, a_tile_bytes) = (u64::from(c.bk), self.stage_bytes, self.a_tile_bytes);
        let kt = if c.kw > 1 {
            let jk = em.f.v(format!("mul i32 {j}, {kw}"));
            em.f.v(format!("add i32 {kt_first}, {jk}"))
        } else {
            em.f.v(format!("add i32 {kt_first}, {j}"))
        };
        let sbase = em.f.v(format!("mul i32 {stage}, {stage_bytes}"));
        let sbase = if c.kw > 1 { em.f.v(format!("add i32 {}, {sbase}", self.ring)) } else { sbase };
        let k0 = em.f.v(format!("mul i32 {kt}, {bk}"));
        let k064 = ext64(em, &k0);
        for ((soff, _, _, guard), (off, ok, c8)) in self.a_copy.chunks.iter().zip(&tile.a_src) {
            let cont = guard.as_ref().map(|gd| em.f.if_begin(gd));
            let kc = em.f.v(format!("add i32 {k0}, {c8}"));
            let kok = em.f.v(format!("icmp ult i32 {kc}, {}", g.p.k));
            let ok2 = em.f.v(format!("and i1 {ok}, {kok}"));
            let so = em.f.v(format!("add i32 {sbase}, {soff}"));
            let go = em.f.v(format!("add i64 {off}, {k064}"));
            cp_async(em, &self.smem, &so, &self.a_base, self.st, &go, &ok2);
            if let Some(cont) = cont {
                em.f.if_end(&cont);
            }
        }
        let bsbase = em.f.v(format!("add i32 {sbase}, {a_tile_bytes}"));
        for ((soff, _, _, guard), (off, ok, x, base)) in self.b_copy.chunks.iter().zip(&tile.b_src) {
            let cont = guard.as_ref().map(|gd| em.f.if_begin(gd));
            let (go, ok2) = match g.p.b_layout {
                BLayout::KN => {
                    let kr = em.f.v(format!("add i32 {k0}, {x}"));
                    let kok = em.f.v(format!("icmp ult i32 {kr}, {}", g.p.k_real));
                    let ok2 = em.f.v(format!("and i1 {ok}, {kok}"));
                    let kofs = em.f.v(format!("mul i64 {k064}, {}", g.p.b.ld));
                    (em.f.v(format!("add i64 {off}, {kofs}")), ok2)
                }
                BLayout::NK => {
                    let kc = em.f.v(format!("add i32 {k0}, {x}"));
                    let kok = em.f.v(format!("icmp ult i32 {kc}, {}", g.p.k));
                    let ok2 = em.f.v(format!("and i1 {ok}, {kok}"));
                    (em.f.v(format!("add i64 {off}, {k064}")), ok2)
                }
            };
            let so = em.f.v(format!("add i32 {bsbase}, {soff}"));
            cp_async(em, &self.smem, &so, base, self.st, &go, &ok2);
            if let Some(cont) = cont {
                em.f.if_end(&cont);
            }
        }
    }

    /// The pipeline's prologue: k-tiles 0..S-1 into stages 0..S-1, then waits for the first.
    fn fill_ring(&self, em: &mut Em, tile: &MmaTile) {
        let c = self.c;
        for s in 0..c.stages - 1 {
            let p = em.f.v(format!("icmp ult i32 {s}, {}", tile.my_tiles));
            let cont = em.f.if_begin(&p);
            self.load_tile(em, tile, &s.to_string(), &s.to_string());
            em.f.if_end(&cont);
            em.f.call_void("llvm.nvvm.cp.async.commit.group", &[]);
        }
        em.f.call_void("llvm.nvvm.cp.async.wait.group", &[("i32", &(c.stages - 2).to_string())]);
        ring_sync(em, &c);
    }

    /// Fragments per k16 step: `mi_n` x4 loads of A, then `nj_n` (wn/16) x4 loads of B, 4
    /// registers each; and `ni_n` (wn/8) `mma.sync` columns.
    fn fragment_counts(&self) -> (usize, usize, usize) {
        let c = self.c;
        ((c.wm / 16) as usize, (c.wn / 8) as usize, (c.wn / 16) as usize)
    }

    /// One `ldmatrix.x4` (`.trans` when `trans`) at byte offset `off` of the shared memory.
    fn ldm(&self, em: &mut Em, off: &str, trans: bool) -> Vec<String> {
        ldmatrix_x4(em, &self.smem, off, trans)
    }

    /// The A and B fragments of k16 step `kk` of stage `stage`.
    fn frags(&self, em: &mut Em, stage: &str, kk: usize) -> Vec<String> {
        let (mi_n, _, nj_n) = self.fragment_counts();
        let (c, stage_bytes, bk) = (self.c, self.stage_bytes, u64::from(self.c.bk));
        let abase = em.f.v(format!("mul i32 {stage}, {stage_bytes}"));
        let abase = if c.kw > 1 { em.f.v(format!("add i32 {}, {abase}", self.ring)) } else { abase };
        let bbase = em.f.v(format!("add i32 {abase}, {}", self.a_tile_bytes));
        let mut out = Vec::with_capacity((mi_n + nj_n) * 4);
        for mi in 0..mi_n {
            let o = em.f.v(format!("add i32 {abase}, {}", self.a_frag_off[kk]));
            let o = em.f.v(format!("add i32 {o}, {}", mi as u64 * 16 * bk * 2));
            out.extend(self.ldm(em, &o, false));
        }
        for off in &self.b_frag_off[kk] {
            let o = em.f.v(format!("add i32 {bbase}, {off}"));
            out.extend(self.ldm(em, &o, self.g.p.b_layout == BLayout::KN));
        }
        out
    }

    /// The main loop over this ring's k-tiles: at k16 step 0 the copy of k-tile i+S-1 goes out
    /// (into the stage every warp finished reading before the last barrier); before the last step
    /// the next stage is waited for, so the next tile's first fragments load while the last
    /// step's mma run. Returns the accumulators after the loop, once every copy has landed.
    fn main_loop(&self, em: &mut Em, tile: &MmaTile) -> Vec<String> {
        let (c, g) = (self.c, self.g);
        let (mi_n, ni_n, nj_n) = self.fragment_counts();
        let kk_n = (c.bk / 16) as usize;
        let nfrag = (mi_n + nj_n) * 4;
        let first = self.frags(em, "0", 0);
        let mut accs: Vec<(String, String)> = (0..mi_n * ni_n * 4).map(|_| ("float".into(), math::fc(0.0))).collect();
        accs.extend(first.iter().map(|v| ("i32".to_string(), v.clone())));
        accs.push(("i32".into(), "0".into()));
        accs.push(("i32".into(), (c.stages - 1).to_string()));
        let kl = em.f.loop_begin("i32", "0", &tile.my_tiles, &accs);
        let nacc = mi_n * ni_n * 4;
        let rs = kl.accs[nacc + nfrag].clone();
        let ws = kl.accs[nacc + nfrag + 1].clone();
        let mut acc: Vec<String> = kl.accs[..nacc].to_vec();
        let mut cur: Vec<String> = kl.accs[nacc..nacc + nfrag].to_vec();
        let bump = |em: &mut Em, v: &str| -> String {
            let v1 = em.f.v(format!("add i32 {v}, 1"));
            let wrap = em.f.v(format!("icmp eq i32 {v1}, {}", c.stages));
            em.f.v(format!("select i1 {wrap}, i32 0, i32 {v1}"))
        };
        let rs_next = bump(em, &rs);
        let ws_next = bump(em, &ws);
        for kk in 0..kk_n {
            if kk == 0 {
                let j = em.f.v(format!("add i32 {}, {}", kl.i, c.stages - 1));
                let p = em.f.v(format!("icmp ult i32 {j}, {}", tile.my_tiles));
                let cont = em.f.if_begin(&p);
                self.load_tile(em, tile, &j, &ws);
                em.f.if_end(&cont);
                em.f.call_void("llvm.nvvm.cp.async.commit.group", &[]);
            }
            let next = if kk + 1 == kk_n {
                em.f.call_void("llvm.nvvm.cp.async.wait.group", &[("i32", &(c.stages - 2).to_string())]);
                ring_sync(em, &c);
                self.frags(em, &rs_next, 0)
            } else {
                self.frags(em, &rs, kk + 1)
            };
            let bf: Vec<[String; 2]> =
                (0..ni_n).map(|ni| [cur[mi_n * 4 + ni * 2].clone(), cur[mi_n * 4 + ni * 2 + 1].clone()]).collect();
            for mi in 0..mi_n {
                let a = cur[mi * 4..mi * 4 + 4].to_vec();
                for (ni, b) in bf.iter().enumerate() {
                    let base = (mi * ni_n + ni) * 4;
                    let out = mma(em, g.p.dtype, &a, b, &acc[base..base + 4]);
                    acc[base..base + 4].clone_from_slice(&out);
                }
            }
            cur = next;
        }
        let mut next = acc;
        next.extend(cur);
        next.push(rs_next);
        next.push(ws_next);
        em.f.loop_end(&kl, "1", &next);
        em.f.call_void("llvm.nvvm.cp.async.wait.group", &[("i32", "0")]);
        kl.accs[..nacc].to_vec()
    }

    /// The epilogue of one tile: with a k split inside the block the warps' accumulators are
    /// summed first; then the fused outputs are staged through shared memory and stored (see
    /// [`epilogue::staged`]), or f32 partial sums are written for a `matmul-reduce` entry.
    fn epilogue(&self, em: &mut Em, tile: &MmaTile, acc: &[String], epi: &Epilogue) -> Result<(), PtxError> {
        let (c, g) = (self.c, self.g);
        let (mi_n, ni_n, _) = self.fragment_counts();
        let smem = &self.smem;
        let (row0, col0) = (&tile.row0, &tile.col0);
        let before_sum = em.save();
        let (acc, only_warp0) = if c.kw > 1 {
            let (acc, cont) = sum_warps(em, &c, smem, &self.warp, &self.lane, &self.ring, acc);
            (acc, Some(cont))
        } else {
            // Every warp is done reading the ring (the staged tile reuses it).
            em.f.call_void("llvm.nvvm.barrier0", &[]);
            (acc.to_vec(), None)
        };
        let frag = epilogue::mma_fragment(em, &self.lane, (&self.wrow, &self.wcol), (mi_n, ni_n), &acc);

        match epi {
            Epilogue::Partial(off) => {
                let tile_saved = em.save();
                let r = em.f.v(format!("add i32 {row0}, {}", frag.row));
                let cl = em.f.v(format!("add i32 {col0}, {}", frag.col));
                for (dr, dc, vals) in &frag.pairs {
                    let row = em.f.v(format!("add i32 {r}, {dr}"));
                    let col = em.f.v(format!("add i32 {cl}, {dc}"));
                    partial_store(em, &g.p, *off, &tile.split, &tile.bidx, &row, &col, vals);
                    em.restore(tile_saved.clone());
                }
                if let Some(cont) = only_warp0 {
                    em.f.if_end(&cont);
                    em.restore(before_sum);
                    // Every warp waits until warp 0 has read the sums out of the rings the next tile refills.
                    em.f.call_void("llvm.nvvm.barrier0", &[]);
                }
            }
            Epilogue::Fused(outs) => {
                // Staged through shared memory at offset 0: the block's ring (with a k split inside
                // the block, warp 0's, which it no longer reads; see `MmaConfig::ring_region_bytes`).
                let st = epilogue::Staging { smem, base: 0, rows: c.bm, cols: c.bn, dtype: em.dtype(g.p.node) };
                let at = epilogue::TileAt { row0, col0, bidx: &tile.bidx };
                let barrier = |em: &mut Em| em.f.call_void("llvm.nvvm.barrier0", &[]);
                let threads = (self.tid.as_str(), c.threads());
                match only_warp0 {
                    None => epilogue::staged(em, &st, &g.p.output(), outs, &at, &frag, threads, barrier)?,
                    Some(cont) => {
                        // Warp 0 holds the sums; every warp takes part in the stores.
                        epilogue::write_fragment(em, &st, &frag)?;
                        em.f.if_end(&cont);
                        em.restore(before_sum);
                        barrier(em);
                        epilogue::store_tile(em, &st, &g.p.output(), outs, &at, threads)?;
                    }
                }
                // Every thread has read the staged tile before the next tile refills the ring.
                barrier(em);
            }
        }
        Ok(())
    }
}

/// The k split inside a block: warps 1.. write their accumulators `acc` into their own rings
/// (`[quad][lane]` vectors of four, conflict-free), then warp 0 adds them to its own in warp
/// order. Opens an `if` that only warp 0 enters (its share of the epilogue follows inside it; the
/// caller closes it with the returned label) and returns the sums there.
// Reason: the IR value names the sum needs (config, shared symbol, warp, lane, ring, accumulators).
#[allow(clippy::too_many_arguments)]
fn sum_warps(
    em: &mut Em,
    c: &MmaConfig,
    smem: &str,
    warp: &str,
    lane: &str,
    ring: &str,
    acc: &[String],
) -> (Vec<String>, String) {
    let lane16 = em.f.v(format!("shl i32 {lane}, 4"));
    let slot = |em: &mut Em, base: &str, q: usize| -> String {
        let o = em.f.v(format!("add i32 {base}, {}", q * 32 * 16));
        let o = em.f.v(format!("add i32 {o}, {lane16}"));
        em.f.v(format!("getelementptr inbounds i8, ptr addrspace(3) {smem}, i32 {o}"))
    };
    // The warp's own copies (and ldmatrix reads) of its ring are done before it is overwritten.
    em.f.call_void("llvm.nvvm.bar.warp.sync", &[("i32", "-1")]);
    let is0 = em.f.v(format!("icmp eq i32 {warp}, 0"));
    let not0 = em.f.v(format!("xor i1 {is0}, true"));
    let cont = em.f.if_begin(&not0);
    for (q, four) in acc.chunks(4).enumerate() {
        let mut v = "poison".to_string();
        for (e, x) in four.iter().enumerate() {
            v = em.f.v(format!("insertelement <4 x float> {v}, float {x}, i32 {e}"));
        }
        let p = slot(em, ring, q);
        em.f.op(format!("store <4 x float> {v}, ptr addrspace(3) {p}, align 16"));
    }
    em.f.if_end(&cont);
    em.f.call_void("llvm.nvvm.barrier0", &[]);
    let cont = em.f.if_begin(&is0);
    let mut sum = acc.to_vec();
    for w in 1..c.kw {
        let base = (w * c.ring_region_bytes()).to_string();
        for q in 0..acc.len() / 4 {
            let p = slot(em, &base, q);
            let v = em.f.v(format!("load <4 x float>, ptr addrspace(3) {p}, align 16"));
            for e in 0..4 {
                let x = em.f.v(format!("extractelement <4 x float> {v}, i32 {e}"));
                sum[q * 4 + e] = em.f.v(format!("fadd float {}, {x}", sum[q * 4 + e]));
            }
        }
    }
    (sum, cont)
}

/// One `ldmatrix.x4` (`.trans` when `trans`) at byte offset `off` (i32) of the shared array `smem`
/// (`@symbol`): four registers of two 16-bit elements each.
pub(crate) fn ldmatrix_x4(em: &mut Em, smem: &str, off: &str, trans: bool) -> Vec<String> {
    let p = em.f.v(format!("getelementptr inbounds i8, ptr addrspace(3) {smem}, i32 {off}"));
    let name = if trans {
        "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.trans.b16.p3"
    } else {
        "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16.p3"
    };
    let r = em.f.call("{i32, i32, i32, i32}", name, &[("ptr addrspace(3)", &p)]);
    (0..4).map(|i| em.f.v(format!("extractvalue {{i32, i32, i32, i32}} {r}, {i}"))).collect::<Vec<_>>()
}

/// `mma.sync.m16n8k16` with f32 accumulators `c`; returns the four results.
pub(crate) fn mma(em: &mut Em, dtype: DType, a: &[String], b: &[String; 2], c: &[String]) -> Vec<String> {
    let ret = "{float, float, float, float}";
    let r = if dtype == DType::BF16 {
        let args: Vec<(&str, &str)> = a
            .iter()
            .chain(b.iter())
            .map(|v| ("i32", v.as_str()))
            .chain(c.iter().map(|v| ("float", v.as_str())))
            .collect();
        em.f.call(ret, "llvm.nvvm.mma.m16n8k16.row.col.bf16", &args)
    } else {
        let h: Vec<String> =
            a.iter().chain(b.iter()).map(|v| em.f.v(format!("bitcast i32 {v} to <2 x half>"))).collect();
        let args: Vec<(&str, &str)> =
            h.iter().map(|v| ("<2 x half>", v.as_str())).chain(c.iter().map(|v| ("float", v.as_str()))).collect();
        em.f.call(ret, "llvm.nvvm.mma.m16n8k16.row.col.f32.f32", &args)
    };
    (0..4).map(|i| em.f.v(format!("extractvalue {ret} {r}, {i}"))).collect()
}

/// Stores two adjacent f32 partial sums (row, col) and (row, col+1) of split `split`.
// Reason: the IR value names of one store site (split, batch, row, col, values); a struct would be rebuilt per store.
#[allow(clippy::too_many_arguments)]
pub(crate) fn partial_store(
    em: &mut Em,
    product: &GemmProduct,
    off: u64,
    split: &str,
    bidx: &str,
    row: &str,
    col: &str,
    vals: &[String; 2],
) {
    let per = product.batch * product.m * product.n;
    let s64 = ext64(em, split);
    let b64 = ext64(em, bidx);
    let r64 = ext64(em, row);
    let c64 = ext64(em, col);
    let a = em.f.v(format!("mul i64 {s64}, {per}"));
    let b = em.f.v(format!("mul i64 {b64}, {}", product.m * product.n));
    let r = em.f.v(format!("mul i64 {r64}, {}", product.n));
    let f = em.f.v(format!("add i64 {a}, {b}"));
    let f = em.f.v(format!("add i64 {f}, {r}"));
    let f = em.f.v(format!("add i64 {f}, {c64}"));
    let base = em.f.v(format!("getelementptr inbounds i8, ptr addrspace(1) %scratch, i64 {off}"));
    let p = em.f.v(format!("getelementptr inbounds float, ptr addrspace(1) {base}, i64 {f}"));
    let rok = em.f.v(format!("icmp ult i32 {row}, {}", product.m));
    if product.n.is_multiple_of(2) {
        let cok = em.f.v(format!("icmp ult i32 {col}, {}", product.n));
        let ok = em.f.v(format!("and i1 {rok}, {cok}"));
        let v = em.f.v(format!("insertelement <2 x float> poison, float {}, i32 0", vals[0]));
        let v = em.f.v(format!("insertelement <2 x float> {v}, float {}, i32 1", vals[1]));
        let cont = em.f.if_begin(&ok);
        em.f.op(format!("store <2 x float> {v}, ptr addrspace(1) {p}, align 8"));
        em.f.if_end(&cont);
    } else {
        for (e, v) in vals.iter().enumerate() {
            let ce = em.f.v(format!("add i32 {col}, {e}"));
            let cok = em.f.v(format!("icmp ult i32 {ce}, {}", product.n));
            let ok = em.f.v(format!("and i1 {rok}, {cok}"));
            let pe = em.f.v(format!("getelementptr inbounds float, ptr addrspace(1) {p}, i64 {e}"));
            let cont = em.f.if_begin(&ok);
            em.f.op(format!("store float {v}, ptr addrspace(1) {pe}, align 4"));
            em.f.if_end(&cont);
        }
    }
}
