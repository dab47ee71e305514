//! The attention kernel's body, as named steps: [`AttnKernel::prologue`] (thread layout, copy
//! plans, fragment addresses), then per tile of the grid-stride loop over (query block, batch
//! entry) [`AttnKernel::tile_begin`] (operand rows, live key blocks, positions),
//! [`AttnKernel::load_queries`] and [`AttnKernel::fill_ring`] (the pipeline's prologue),
//! [`AttnKernel::key_loop`] (per key block: scores, score function, online softmax, `O += P V`;
//! on warpgroup MMAs [`AttnKernel::key_loop_overlapped`]) and [`AttnKernel::finish`] (`O / l`
//! and the staged epilogue).
//!
//! With a producer warpgroup ([`AttnKernel::specialized`]) the last four warps copy every key and
//! value block of the block's tiles into the ring ([`AttnKernel::producer`]) and the consumer
//! warpgroups compute ([`AttnKernel::consumers`]). Stage `s` has two mbarriers: `full[s]` (the
//! producer's 128 `cp.async` arrivals: the block has landed) and `empty[s]` (every consumer
//! thread's arrival once its warpgroup MMAs have read the block). Both sides count the blocks
//! they have passed since the kernel began, so block number `i` is in stage `i % stages` with
//! phase parity `(i / stages) % 2`, across tiles. The consumers synchronize among themselves
//! with a named barrier (before a tile's epilogue: both are done with its queries) and store the
//! output straight from their accumulators ([`epilogue::direct`]), so nothing is staged over the
//! ring: there is no block-wide barrier after the start, and the producer copies the next tile's
//! first blocks while the consumers store this one.
//! In the ping-pong variant each consumer warpgroup issues a key block's products only on its
//! turn (`bar.sync` of its turn barrier, which the other's `bar.arrive` completes once it has
//! issued its own), so the two alternate on the tensor cores: warpgroup 1 starts by handing
//! warpgroup 0 the first turn, and warpgroup 0 takes the last hand-over after its last tile.

use tcc_ir::schedule::{WGMMA_ALIGN, WGMMA_M};
use tcc_ir::{DType, NodeId};

use super::blocks::{block_is_full, key_range, query_span};
use super::kv_maps::BOX_COLS;
use super::operands::{Orientation, Rows, rows};
use super::softmax::{pack, quad_sum, round_pair, update};
use super::{Geometry, Split};
use crate::llvm_text::Loop;
use crate::ptx::error::PtxError;
use crate::ptx::expr::{Em, Ix};
use crate::ptx::math;
use crate::ptx::mma::epilogue::{self, Output, Staging, TileAt};
use crate::ptx::mma::kernel::{cp_async as cp_async_at, ext64, ldmatrix_x4, mma};
use crate::ptx::plan::{Out, Src};
use crate::ptx::wgmma::asm;
use crate::ptx::wgmma::kernel::{CONSUMER_REGS, PRODUCER_REGS, descriptor};

/// Threads of the producer warpgroup.
const PRODUCER_THREADS: u32 = 128;

/// The consumers' named barrier (0 is the block-wide one).
const CONSUMER_BARRIER: &str = "1";

/// Ping-pong: the named barrier of consumer warpgroup 0's turn; warpgroup 1's is the next.
const TURN_BARRIER: u32 = 2;

/// Emits the kernel body into `em` (`smem`: the dynamic shared array, `@symbol`).
pub(crate) fn emit(em: &mut Em, geo: &Geometry, smem: &str) -> Result<(), PtxError> {
    let k = AttnKernel::prologue(em, geo, smem);
    if geo.sched.producer {
        return k.specialized(em);
    }
    let saved = em.save();
    let total = geo.tiles();
    let tl = em.f.loop_begin("i32", &k.ctaid, &total.to_string(), &[]);
    let tile = k.tile_begin(em, &tl)?;
    k.load_queries(em, &tile);
    k.fill_ring(em, &tile);
    let state = match &k.wg {
        Some(wg) => k.key_loop_overlapped(em, &tile, wg, None)?,
        None => {
            let queries = k.queries_in_registers(em);
            k.key_loop(em, &tile, queries.as_deref())?
        }
    };
    match geo.split {
        Some(split) => k.write_partials(em, &tile, &state, &split),
        None => {
            k.finish(em, &tile, &state)?;
            // Every thread has read the staged tile before the next tile's copies overwrite it.
            em.f.call_void("llvm.nvvm.barrier0", &[]);
        }
    }
    em.f.loop_end(&tl, &k.nctaid, &[]);
    em.restore(saved);
    Ok(())
}

/// One thread's share of copying a tile of `rows` rows of `chunks` 16-byte chunks:
/// `rows / (threads / chunks)` passes over rows `r0 + pass * step`, always the chunk `c0`
/// (threads is a multiple of `chunks`), guarded when the last pass is partial. Rows are `pitch`
/// bytes apart in shared memory and the thread's first chunk is `at` bytes into the tile.
struct CopyShare {
    rows: u32,
    step: u32,
    passes: u32,
    pitch: u32,
    /// The thread's first row and its chunk (i32).
    r0: String,
    c0: String,
    /// The byte offset of chunk `c0` of row `r0` in the tile (i32).
    at: String,
}

impl CopyShare {
    /// Padded rows of `pitch` bytes (the `mma.sync` products' layout).
    fn new(em: &mut Em, tid: &str, rows: u32, chunks: u32, pitch: u32, threads: u32) -> CopyShare {
        let step = threads / chunks;
        let r0 = em.f.v(format!("udiv i32 {tid}, {chunks}"));
        let c0 = em.f.v(format!("urem i32 {tid}, {chunks}"));
        let rb = em.f.v(format!("mul i32 {r0}, {pitch}"));
        let cb = em.f.v(format!("shl i32 {c0}, 4"));
        let at = em.f.v(format!("add i32 {rb}, {cb}"));
        CopyShare { rows, step, passes: rows.div_ceil(step), pitch, r0, c0, at }
    }

    /// The warpgroup MMAs' layout: 64-column blocks of `rows` 128-byte rows, chunk `c` of row `r`
    /// stored at chunk `c ^ (r % 8)` (the 128-byte swizzle). The step is a multiple of 8 rows
    /// (checked by the caller's geometry), so every pass swizzles as the first.
    fn swizzled(em: &mut Em, tid: &str, rows: u32, chunks: u32, threads: u32) -> CopyShare {
        let step = threads / chunks;
        let r0 = em.f.v(format!("udiv i32 {tid}, {chunks}"));
        let c0 = em.f.v(format!("urem i32 {tid}, {chunks}"));
        let block = em.f.v(format!("lshr i32 {c0}, 3"));
        let bb = em.f.v(format!("mul i32 {block}, {}", rows * 128));
        let c8 = em.f.v(format!("and i32 {c0}, 7"));
        let r8 = em.f.v(format!("and i32 {r0}, 7"));
        let phys = em.f.v(format!("xor i32 {c8}, {r8}"));
        let pb = em.f.v(format!("shl i32 {phys}, 4"));
        let rb = em.f.v(format!("shl i32 {r0}, 7"));
        let at = em.f.v(format!("add i32 {rb}, {pb}"));
        let at = em.f.v(format!("add i32 {at}, {bb}"));
        CopyShare { rows, step, passes: rows.div_ceil(step), pitch: 128, r0, c0, at }
    }
}

/// An i32 value LLVM cannot see through (an inline `mov`), so that the constant offsets added to
/// it stay in the instructions' immediates instead of becoming loop-invariant registers.
fn opaque(em: &mut Em, v: &str) -> String {
    em.f.v(format!("call i32 asm sideeffect \"mov.u32 $0, $1;\", \"=r,r\"(i32 {v})"))
}

/// What every step shares: the geometry and the loop-invariant values of one thread.
struct AttnKernel<'g> {
    geo: &'g Geometry,
    smem: String,
    st: &'static str,
    tid: String,
    ctaid: String,
    nctaid: String,
    lane: String,
    /// This warp's first query row in the block.
    wrow: String,
    /// The lane's row (`lane / 4`) and column pair (`2 (lane % 4)`) in an accumulator tile.
    g4: String,
    t2: String,
    q_copy: CopyShare,
    k_copy: CopyShare,
    v_copy: CopyShare,
    /// This lane's `ldmatrix` byte offsets in the query, key and value tiles (k16 step, 16-row
    /// tile and 16-column group 0); the others are constant bytes further.
    q_lane: String,
    k_lane: String,
    v_lane: String,
    /// The tiles' offset from the dynamic shared memory's start: "0", or with warpgroup MMAs the
    /// padding to its first 1024-byte boundary (i32).
    base: String,
    /// With warpgroup MMAs: the descriptors of this warpgroup's query rows and of the ring's first
    /// key and value tiles (k16 step 0, stage 0).
    wg: Option<WgDescriptors>,
    /// With a producer warpgroup: the shared address of the tiles (i32; `base` bytes into the
    /// dynamic shared memory), where its TMA copies land and after whose ring the barriers lie.
    tiles_at: Option<String>,
}

/// The warpgroup MMAs' shared-memory descriptors (i64), at k16 step 0 and ring stage 0.
struct WgDescriptors {
    q: String,
    k: String,
    v: String,
}

/// One tile: its place, the operands' rows, the key blocks it visits and its rows' positions.
struct AttnTile {
    q0: String,
    /// The linear batch entry of the tile's first head (i32).
    bidx: String,
    /// The key split (i32; "0" outside the split form).
    split: String,
    /// Elements between the query rows of consecutive heads of a packed group (i64).
    head_stride: Option<String>,
    q: Rows,
    k: Rows,
    v: Rows,
    lo: String,
    hi: String,
    /// The block's query rows, first and last (i64, clamped to S - 1).
    qspan: (String, String),
    /// Per 16-row tile and half: this lane's row position clamped to `S - 1`, in the index type.
    rows: Vec<[String; 2]>,
    /// Per 16-row tile and half: the batch multi-index of this lane's row (its head's when
    /// heads are packed).
    row_batch: Vec<[Vec<String>; 2]>,
}

/// One online-softmax step: the probabilities, and per row the new maximum, this lane's sum and
/// the factor that rescales the old output.
struct SoftmaxStep {
    p: Vec<String>,
    m: Vec<String>,
    l: Vec<String>,
    alpha: Vec<String>,
}

/// The running state after the key loop: the output accumulators, the rows' maxima and this
/// lane's row sums.
struct State {
    o: Vec<String>,
    m: Vec<String>,
    l: Vec<String>,
}

impl<'g> AttnKernel<'g> {
    /// The thread's ids, copy shares and `ldmatrix` lane offsets (all loop invariant).
    fn prologue(em: &mut Em, geo: &'g Geometry, smem: &str) -> AttnKernel<'g> {
        let threads = geo.consumer_threads();
        let tid = em.f.call("i32", "llvm.nvvm.read.ptx.sreg.tid.x", &[]);
        let ctaid = em.f.call("i32", "llvm.nvvm.read.ptx.sreg.ctaid.x", &[]);
        let nctaid = em.f.call("i32", "llvm.nvvm.read.ptx.sreg.nctaid.x", &[]);
        let lane = em.f.v(format!("and i32 {tid}, 31"));
        let warp = em.f.v(format!("lshr i32 {tid}, 5"));
        let wrow = em.f.v(format!("mul i32 {warp}, {}", geo.sched.rows_per_warp()));
        let g4 = em.f.v(format!("lshr i32 {lane}, 2"));
        let t4 = em.f.v(format!("and i32 {lane}, 3"));
        let t2 = em.f.v(format!("shl i32 {t4}, 1"));
        let (qc, vc) = (geo.depth / 8, geo.width / 8);
        let (qp, vp) = (geo.qk_pitch(), geo.v_pitch());
        let (q_copy, k_copy, v_copy) = if geo.sched.producer {
            // The producer's threads copy the key and value blocks.
            let ptid = em.f.v(format!("sub i32 {tid}, {threads}"));
            (
                CopyShare::swizzled(em, &tid, geo.br, qc, threads),
                CopyShare::swizzled(em, &ptid, geo.bc, qc, PRODUCER_THREADS),
                CopyShare::swizzled(em, &ptid, geo.bc, vc, PRODUCER_THREADS),
            )
        } else if geo.wgmma() {
            (
                CopyShare::swizzled(em, &tid, geo.br, qc, threads),
                CopyShare::swizzled(em, &tid, geo.bc, qc, threads),
                CopyShare::swizzled(em, &tid, geo.bc, vc, threads),
            )
        } else {
            (
                CopyShare::new(em, &tid, geo.br, qc, qp, threads),
                CopyShare::new(em, &tid, geo.bc, qc, qp, threads),
                CopyShare::new(em, &tid, geo.bc, vc, vp, threads),
            )
        };
        let (base, wg) = if geo.wgmma() { warpgroup_descriptors(em, geo, smem, &tid) } else { ("0".to_string(), None) };
        let tiles_at = geo.sched.producer.then(|| {
            let s64 = em.f.v(format!("ptrtoint ptr addrspace(3) {smem} to i64"));
            let s0 = em.f.v(format!("trunc i64 {s64} to i32"));
            em.f.v(format!("add i32 {s0}, {base}"))
        });
        let l16 = em.f.v(format!("and i32 {lane}, 15"));
        let hi = em.f.v(format!("lshr i32 {lane}, 4"));
        let hi16 = em.f.v(format!("shl i32 {hi}, 4"));
        let lane_at = |em: &mut Em, row: &str, pitch: u32, chunk: &str| {
            let rb = em.f.v(format!("mul i32 {row}, {pitch}"));
            em.f.v(format!("add i32 {rb}, {chunk}"))
        };
        // A (queries): rows wrow + lane % 16, chunk 2 kk + lane / 16.
        let qrow = em.f.v(format!("add i32 {wrow}, {l16}"));
        let q_lane = lane_at(em, &qrow, qp, &hi16);
        // B of the scores (keys, [key, head]): key rows (lane % 8) + 8 (lane / 16), chunk
        // 2 kk + (lane / 8) % 2.
        let l8 = em.f.v(format!("and i32 {lane}, 7"));
        let h8 = em.f.v(format!("shl i32 {hi}, 3"));
        let nloc = em.f.v(format!("or i32 {l8}, {h8}"));
        let kh = em.f.v(format!("and i32 {lane}, 8"));
        let kh16 = em.f.v(format!("shl i32 {kh}, 1"));
        let k_lane = lane_at(em, &nloc, qp, &kh16);
        // B of the output (values, [key, head], .trans): key rows lane % 16, chunk 2 nj + lane / 16.
        let v_lane = lane_at(em, &l16, vp, &hi16);
        AttnKernel {
            geo,
            smem: smem.to_string(),
            st: math::stype(geo.dtype),
            tid,
            ctaid,
            nctaid,
            lane,
            wrow,
            g4,
            t2,
            q_copy,
            k_copy,
            v_copy,
            q_lane,
            k_lane,
            v_lane,
            base,
            wg,
            tiles_at,
        }
    }

    /// The tile `tl.i` = ((batch group, query block), key split), query blocks in reverse (the
    /// longest rows of a causal mask first). With packed heads a row `p` of the tile's query
    /// block is query `p / G` of head `p % G` of the group.
    fn tile_begin(&self, em: &mut Em, tl: &Loop) -> Result<AttnTile, PtxError> {
        let geo = self.geo;
        let ga = &geo.ga;
        let nqb = geo.q_blocks();
        let splits = geo.splits();
        let (rest, split) = if splits > 1 {
            (em.f.v(format!("udiv i32 {}, {splits}", tl.i)), em.f.v(format!("urem i32 {}, {splits}", tl.i)))
        } else {
            (tl.i.clone(), "0".to_string())
        };
        let qb_raw = em.f.v(format!("urem i32 {rest}, {nqb}"));
        let gidx = em.f.v(format!("udiv i32 {rest}, {nqb}"));
        let bidx = em.f.v(format!("mul i32 {gidx}, {}", geo.group));
        let qb = em.f.v(format!("sub i32 {}, {qb_raw}", nqb - 1));
        let q0 = em.f.v(format!("mul i32 {qb}, {}", geo.br));
        let b = em.widen(&bidx);
        let batch = em.delinearize(&b, &geo.batch_dims);
        let q = rows(em, ga.queries, Orientation::Rows, &batch)?;
        let k = rows(em, ga.keys, Orientation::Columns, &batch)?;
        let v = rows(em, ga.values, Orientation::Rows, &batch)?;
        let head_stride = if geo.group > 1 {
            let next = em.f.v(format!("add i32 {bidx}, 1"));
            let nb = em.widen(&next);
            let nbatch = em.delinearize(&nb, &geo.batch_dims);
            let q1 = rows(em, ga.queries, Orientation::Rows, &nbatch)?;
            Some(em.f.v(format!("sub i64 {}, {}", q1.base, q.base)))
        } else {
            None
        };
        let (lo, hi) = key_range(em, geo, &q0);
        let (lo, hi) = if splits > 1 { split_range(em, splits, &split, (&lo, &hi)) } else { (lo, hi) };
        let qspan = query_span(em, geo, &q0);
        let base = em.f.v(format!("add i32 {q0}, {}", self.wrow));
        let base = em.f.v(format!("add i32 {base}, {}", self.g4));
        let mut positions = Vec::with_capacity(geo.mt);
        let mut row_batch = Vec::with_capacity(geo.mt);
        for mi in 0..geo.mt as u32 {
            let mut at = |h: u32| {
                let p = em.f.v(format!("add i32 {base}, {}", mi * 16 + h * 8));
                let pc = clamp(em, &p, geo.packed_rows() - 1);
                if geo.group == 1 {
                    return (em.widen(&pc), batch.clone());
                }
                let i = em.f.v(format!("udiv i32 {pc}, {}", geo.group));
                let hg = em.f.v(format!("urem i32 {pc}, {}", geo.group));
                let rb = em.f.v(format!("add i32 {bidx}, {hg}"));
                let rb = em.widen(&rb);
                (em.widen(&i), em.delinearize(&rb, &geo.batch_dims))
            };
            let (p0, b0) = at(0);
            let (p1, b1) = at(1);
            positions.push([p0, p1]);
            row_batch.push([b0, b1]);
        }
        Ok(AttnTile { q0, bidx, split, head_stride, q, k, v, lo, hi, qspan, rows: positions, row_batch })
    }

    /// Copies the rows `first..` of an operand (real below `len`) into the shared tile at byte
    /// `sbase` + `sbase_dyn` (an i32 value) by this thread's share `plan`.
    // Reason: one copy's source, destination and extent, from its two callers.
    #[allow(clippy::too_many_arguments)]
    fn copy(&self, em: &mut Em, plan: &CopyShare, src: &Rows, first: &str, len: u64, sbase: u32, sbase_dyn: &str) {
        let row = em.f.v(format!("add i32 {first}, {}", plan.r0));
        let r64 = em.f.v(format!("zext i32 {row} to i64"));
        let ro = em.f.v(format!("mul i64 {r64}, {}", src.ld));
        let c8 = em.f.v(format!("shl i32 {}, 3", plan.c0));
        let c64 = em.f.v(format!("zext i32 {c8} to i64"));
        let g0 = em.f.v(format!("add i64 {}, {ro}", src.base));
        let g0 = em.f.v(format!("add i64 {g0}, {c64}"));
        // With many passes (blocks of one or two warps), opaque: LLVM then keeps one address per
        // copy rather than an induction variable per pass across the key loop (255 registers and
        // spills for 16 x 64 blocks of one warp at d128 on sm_80).
        let g0 = if plan.passes > 8 {
            em.f.v(format!("call i64 asm sideeffect \"mov.b64 $0, $1;\", \"=l,l\"(i64 {g0})"))
        } else {
            g0
        };
        let gstep = em.f.v(format!("mul i64 {}, {}", src.ld, plan.step));
        let s0 = em.f.v(format!("add i32 {}, {sbase_dyn}", plan.at));
        let s0 = opaque(em, &s0);
        let mut go = g0;
        for pass in 0..plan.passes {
            let local = em.f.v(format!("add i32 {}, {}", plan.r0, pass * plan.step));
            let guard = (!plan.rows.is_multiple_of(plan.step)).then(|| {
                let inside = em.f.v(format!("icmp ult i32 {local}, {}", plan.rows));
                em.f.if_begin(&inside)
            });
            let pos = em.f.v(format!("add i32 {row}, {}", pass * plan.step));
            let ok = em.f.v(format!("icmp ult i32 {pos}, {len}"));
            let so = em.f.v(format!("add i32 {s0}, {}", sbase + pass * plan.step * plan.pitch));
            cp_async_at(em, &self.smem, &so, &src.ptr, self.st, &go, &ok);
            if let Some(cont) = guard {
                em.f.if_end(&cont);
            }
            if pass + 1 < plan.passes {
                go = em.f.v(format!("add i64 {go}, {gstep}"));
            }
        }
    }

    /// The query block into shared memory (offset 0), as its own `cp.async` group.
    fn load_queries(&self, em: &mut Em, tile: &AttnTile) {
        match &tile.head_stride {
            Some(hs) => self.copy_packed_queries(em, tile, hs),
            None => self.copy(em, &self.q_copy, &tile.q, &tile.q0, self.geo.s_len, 0, &self.base),
        }
        em.f.call_void("llvm.nvvm.cp.async.commit.group", &[]);
    }

    /// The packed query block: row `p` is query `p / G` of head `p % G`, `hs` (i64) elements
    /// after the group's first head per head.
    fn copy_packed_queries(&self, em: &mut Em, tile: &AttnTile, hs: &str) {
        let geo = self.geo;
        let plan = &self.q_copy;
        let c8 = em.f.v(format!("shl i32 {}, 3", plan.c0));
        let c64 = em.f.v(format!("zext i32 {c8} to i64"));
        let s0 = em.f.v(format!("add i32 {}, {}", plan.at, self.base));
        let s0 = opaque(em, &s0);
        for pass in 0..plan.passes {
            let local = em.f.v(format!("add i32 {}, {}", plan.r0, pass * plan.step));
            let guard = (!plan.rows.is_multiple_of(plan.step)).then(|| {
                let inside = em.f.v(format!("icmp ult i32 {local}, {}", plan.rows));
                em.f.if_begin(&inside)
            });
            let p = em.f.v(format!("add i32 {}, {local}", tile.q0));
            let ok = em.f.v(format!("icmp ult i32 {p}, {}", geo.packed_rows()));
            let pc = clamp(em, &p, geo.packed_rows() - 1);
            let i = em.f.v(format!("udiv i32 {pc}, {}", geo.group));
            let hg = em.f.v(format!("urem i32 {pc}, {}", geo.group));
            let i64v = em.f.v(format!("zext i32 {i} to i64"));
            let h64 = em.f.v(format!("zext i32 {hg} to i64"));
            let ro = em.f.v(format!("mul i64 {i64v}, {}", tile.q.ld));
            let ho = em.f.v(format!("mul i64 {h64}, {hs}"));
            let go = em.f.v(format!("add i64 {}, {ro}", tile.q.base));
            let go = em.f.v(format!("add i64 {go}, {ho}"));
            let go = em.f.v(format!("add i64 {go}, {c64}"));
            let so = em.f.v(format!("add i32 {s0}, {}", pass * plan.step * plan.pitch));
            cp_async_at(em, &self.smem, &so, &tile.q.ptr, self.st, &go, &ok);
            if let Some(cont) = guard {
                em.f.if_end(&cont);
            }
        }
    }

    /// Key block `kb` (i32) with its values into stage `stage` (i32) of the ring.
    fn load_block(&self, em: &mut Em, tile: &AttnTile, kb: &str, stage: &str) {
        let geo = self.geo;
        let first = em.f.v(format!("mul i32 {kb}, {}", geo.bc));
        let sb = em.f.v(format!("mul i32 {stage}, {}", geo.stage_bytes()));
        let sb = em.f.v(format!("add i32 {sb}, {}", self.base));
        self.copy(em, &self.k_copy, &tile.k, &first, geo.t_len, geo.q_bytes(), &sb);
        self.copy(em, &self.v_copy, &tile.v, &first, geo.t_len, geo.q_bytes() + geo.k_bytes(), &sb);
    }

    /// Key blocks the ring runs ahead of the one computed: `stages - 1`, on warpgroup MMAs
    /// `stages - 2` (a block's values outlive its keys by one block).
    fn ahead(&self) -> u32 {
        if self.geo.wgmma() { self.geo.sched.stages - 2 } else { self.geo.sched.stages - 1 }
    }

    /// The pipeline's prologue: the key blocks the ring runs ahead ([`Self::ahead`]) from `lo`
    /// into the first stages, one `cp.async` group each (empty past `hi`).
    fn fill_ring(&self, em: &mut Em, tile: &AttnTile) {
        for s in 0..self.ahead() {
            let kb = em.f.v(format!("add i32 {}, {s}", tile.lo));
            let p = em.f.v(format!("icmp ult i32 {kb}, {}", tile.hi));
            let cont = em.f.if_begin(&p);
            self.load_block(em, tile, &kb, &s.to_string());
            em.f.if_end(&cont);
            em.f.call_void("llvm.nvvm.cp.async.commit.group", &[]);
        }
    }

    /// The top of key block `kb` (i32): it has landed (on warpgroup MMAs, visible to them), and
    /// after a barrier every warp is done with the stage the next copy overwrites, so block
    /// `kb + ahead` goes into stage `ws` (i32), as one `cp.async` group (empty past `hi`).
    fn refill(&self, em: &mut Em, tile: &AttnTile, kb: &str, ws: &str) {
        let ahead = self.ahead();
        em.f.call_void("llvm.nvvm.cp.async.wait.group", &[("i32", &(ahead - 1).to_string())]);
        if self.wg.is_some() {
            asm::fence_proxy_async(&mut em.f);
        }
        em.f.call_void("llvm.nvvm.barrier0", &[]);
        let next = em.f.v(format!("add i32 {kb}, {ahead}"));
        let p = em.f.v(format!("icmp ult i32 {next}, {}", tile.hi));
        let cont = em.f.if_begin(&p);
        self.load_block(em, tile, &next, ws);
        em.f.if_end(&cont);
        em.f.call_void("llvm.nvvm.cp.async.commit.group", &[]);
    }

    /// The ring stage after `v` (i32).
    fn bump(&self, em: &mut Em, v: &str) -> String {
        let v1 = em.f.v(format!("add i32 {v}, 1"));
        let wrap = em.f.v(format!("icmp eq i32 {v1}, {}", self.geo.sched.stages));
        em.f.v(format!("select i1 {wrap}, i32 0, i32 {v1}"))
    }

    /// After the key loop: every copy has landed and every warp is done reading the ring (the
    /// next tile's copies and the staged output reuse it).
    fn drain(&self, em: &mut Em) {
        em.f.call_void("llvm.nvvm.cp.async.wait.group", &[("i32", "0")]);
        em.f.call_void("llvm.nvvm.barrier0", &[]);
    }

    /// The query fragments `[mi]` of k16 step `kk`, read from shared memory at `q_at` (this
    /// lane's offset, opaque).
    fn query_fragments(&self, em: &mut Em, q_at: &str, kk: u32) -> Vec<Vec<String>> {
        (0..self.geo.mt)
            .map(|mi| {
                let off = em.f.v(format!("add i32 {q_at}, {}", mi as u32 * 16 * self.geo.qk_pitch() + kk * 32));
                ldmatrix_x4(em, &self.smem, &off, false)
            })
            .collect()
    }

    /// With [`tcc_ir::schedule::GpuAttentionSchedule::queries_in_registers`], the query
    /// fragments of every k16 step, loaded once (after the query block has landed).
    fn queries_in_registers(&self, em: &mut Em) -> Option<Vec<Vec<Vec<String>>>> {
        let geo = self.geo;
        if !geo.sched.queries_in_registers(geo.depth) {
            return None;
        }
        let pending = (geo.sched.stages - 1).to_string();
        em.f.call_void("llvm.nvvm.cp.async.wait.group", &[("i32", &pending)]);
        em.f.call_void("llvm.nvvm.barrier0", &[]);
        let q_at = opaque(em, &self.q_lane);
        Some((0..geo.depth / 16).map(|kk| self.query_fragments(em, &q_at, kk)).collect())
    }

    /// The loop over the tile's key blocks; returns the output accumulators and lane sums.
    fn key_loop(&self, em: &mut Em, tile: &AttnTile, queries: Option<&[Vec<Vec<String>>]>) -> Result<State, PtxError> {
        let geo = self.geo;
        let mt = geo.mt;
        let on = (geo.width / 8) as usize;
        let n_o = mt * on * 4;
        let mut accs: Vec<(String, String)> = (0..n_o).map(|_| ("float".into(), math::fc(0.0))).collect();
        accs.extend((0..2 * mt).map(|_| ("float".to_string(), math::fc(f32::NEG_INFINITY))));
        accs.extend((0..2 * mt).map(|_| ("float".to_string(), math::fc(0.0))));
        accs.push(("i32".into(), "0".into()));
        accs.push(("i32".into(), self.ahead().to_string()));
        let kl = em.f.loop_begin("i32", &tile.lo, &tile.hi, &accs);
        let saved = em.save();
        let kb = kl.i.clone();
        let o: Vec<String> = kl.accs[..n_o].to_vec();
        let m_old = kl.accs[n_o..n_o + 2 * mt].to_vec();
        let l_old = kl.accs[n_o + 2 * mt..n_o + 4 * mt].to_vec();
        let (rs, ws) = (kl.accs[n_o + 4 * mt].clone(), kl.accs[n_o + 4 * mt + 1].clone());

        self.refill(em, tile, &kb, &ws);

        // S = Q Kᵀ.
        let s = self.scores_mma_sync(em, &rs, queries);

        // The logits, then the online softmax per row.
        let x = self.logits(em, tile, &kb, &s)?;
        let step = self.softmax(em, &x, &m_old, &l_old);
        let o = self.rescale(em, &o, &step.alpha);
        let (p, m_new, l_new) = (step.p, step.m, step.l);

        // O += P V, P packed from the accumulators (tiles 2 kk2 and 2 kk2 + 1 are the A fragment).
        let o = self.output_mma_sync(em, &rs, &p, o)?;

        let rs_next = self.bump(em, &rs);
        let ws_next = self.bump(em, &ws);
        let mut next = o;
        next.extend(m_new);
        next.extend(l_new);
        next.push(rs_next);
        next.push(ws_next);
        em.restore(saved);
        em.f.loop_end(&kl, "1", &next);
        self.drain(em);
        Ok(State {
            o: kl.accs[..n_o].to_vec(),
            m: kl.accs[n_o..n_o + 2 * mt].to_vec(),
            l: kl.accs[n_o + 2 * mt..n_o + 4 * mt].to_vec(),
        })
    }

    /// S = Q Kᵀ of the key block in ring stage `rs` (i32) on `mma.sync`: per k16 step the
    /// query fragments (kept, or read by `ldmatrix`) times the key fragments (`ldmatrix`).
    fn scores_mma_sync(&self, em: &mut Em, rs: &str, queries: Option<&[Vec<Vec<String>>]>) -> Vec<String> {
        let geo = self.geo;
        let (mt, kn) = (geo.mt, (geo.bc / 8) as usize);
        let sbase = em.f.v(format!("mul i32 {rs}, {}", geo.stage_bytes()));
        let kst = em.f.v(format!("add i32 {sbase}, {}", geo.q_bytes()));
        let k_at = em.f.v(format!("add i32 {kst}, {}", self.k_lane));
        let k_at = opaque(em, &k_at);
        let q_at = if queries.is_none() { opaque(em, &self.q_lane) } else { String::new() };
        let mut s: Vec<String> = (0..mt * kn * 4).map(|_| math::fc(0.0)).collect();
        for kk in 0..geo.depth / 16 {
            let qa = match queries {
                Some(q) => q[kk as usize].clone(),
                None => self.query_fragments(em, &q_at, kk),
            };
            for nj in 0..geo.bc / 16 {
                let off = em.f.v(format!("add i32 {k_at}, {}", nj * 16 * geo.qk_pitch() + kk * 32));
                let b = ldmatrix_x4(em, &self.smem, &off, false);
                for (mi, a) in qa.iter().enumerate() {
                    for half in 0..2usize {
                        let at = (mi * kn + 2 * nj as usize + half) * 4;
                        let pair = [b[2 * half].clone(), b[2 * half + 1].clone()];
                        let out = mma(em, geo.dtype, a, &pair, &s[at..at + 4]);
                        s[at..at + 4].clone_from_slice(&out);
                    }
                }
            }
        }
        s
    }

    /// `O += P V` of the key block in ring stage `rs` (i32) on `mma.sync`: P packed from the
    /// probabilities (score tiles `2 kk2` and `2 kk2 + 1` are the A fragment), V by
    /// `ldmatrix.trans`.
    fn output_mma_sync(
        &self,
        em: &mut Em,
        rs: &str,
        p: &[String],
        mut o: Vec<String>,
    ) -> Result<Vec<String>, PtxError> {
        let geo = self.geo;
        let (mt, kn, on) = (geo.mt, (geo.bc / 8) as usize, (geo.width / 8) as usize);
        let sbase = em.f.v(format!("mul i32 {rs}, {}", geo.stage_bytes()));
        let vst = em.f.v(format!("add i32 {sbase}, {}", geo.q_bytes() + geo.k_bytes()));
        let v_at = em.f.v(format!("add i32 {vst}, {}", self.v_lane));
        let v_at = opaque(em, &v_at);
        for kk2 in 0..geo.bc / 16 {
            let mut pa = Vec::with_capacity(mt);
            for mi in 0..mt {
                let t0 = (mi * kn + 2 * kk2 as usize) * 4;
                pa.push(a_fragment(em, geo.dtype, p, t0)?);
            }
            for nj in 0..geo.width / 16 {
                let off = em.f.v(format!("add i32 {v_at}, {}", kk2 * 16 * geo.v_pitch() + nj * 32));
                let b = ldmatrix_x4(em, &self.smem, &off, true);
                for (mi, a) in pa.iter().enumerate() {
                    for half in 0..2usize {
                        let at = (mi * on + 2 * nj as usize + half) * 4;
                        let pair = [b[2 * half].clone(), b[2 * half + 1].clone()];
                        let out = mma(em, geo.dtype, a, &pair, &o[at..at + 4]);
                        o[at..at + 4].clone_from_slice(&out);
                    }
                }
            }
        }
        Ok(o)
    }

    /// Issues S = Q Kᵀ of the key block in ring stage `rs` (i32) as one wgmma group: `depth / 16`
    /// wgmmas of this warpgroup's 64 query rows by the block's keys, both from shared memory. The
    /// accumulators (to be waited for) are laid out per warp as `mma.sync`'s (one 16-row tile).
    fn issue_scores(&self, em: &mut Em, wg: &WgDescriptors, rs: &str) -> Vec<String> {
        let geo = self.geo;
        let so = em.f.v(format!("mul i32 {rs}, {}", geo.stage_bytes() >> 4));
        let so = ext64(em, &so);
        let kd = em.f.v(format!("add i64 {}, {so}", wg.k));
        let mut s: Vec<String> = (0..geo.bc / 2).map(|_| math::fc(0.0)).collect();
        for kk in 0..geo.depth / 16 {
            let (block, col) = (u64::from(kk / 4), u64::from(kk % 4) * 32);
            let qd = em.f.v(format!("add i64 {}, {}", wg.q, (block * u64::from(geo.br) * 128 + col) >> 4));
            let kdk = em.f.v(format!("add i64 {kd}, {}", (block * u64::from(geo.bc) * 128 + col) >> 4));
            let scale = if kk == 0 { "0" } else { "1" };
            s = asm::mma(&mut em.f, geo.dtype, geo.bc, &s, &qd, &kdk, scale, false);
        }
        asm::commit(&mut em.f);
        s
    }

    /// Issues `O += P V` as one wgmma group: P from registers (`words`: per k16 step of the keys
    /// the four packed words of `mma.sync`'s A fragment; a warpgroup's A is its warps' fragments),
    /// V of ring stage `vs` (i32) from shared memory, MN-major. The accumulators are to be waited
    /// for.
    fn issue_output(&self, em: &mut Em, wg: &WgDescriptors, vs: &str, words: &[String], o: &[String]) -> Vec<String> {
        let geo = self.geo;
        let so = em.f.v(format!("mul i32 {vs}, {}", geo.stage_bytes() >> 4));
        let so = ext64(em, &so);
        let vd = em.f.v(format!("add i64 {}, {so}", wg.v));
        let mut o = o.to_vec();
        for (kk2, a) in words.chunks(4).enumerate() {
            let vdk = em.f.v(format!("add i64 {vd}, {}", (kk2 as u64 * 16 * 128) >> 4));
            o = asm::mma_rs(&mut em.f, geo.dtype, geo.width, &o, a, &vdk, "1", true);
        }
        asm::commit(&mut em.f);
        o
    }

    /// The online softmax step of key block's logits `x` for every row of this thread: the
    /// probabilities in the logits' order, and per row the new maximum, this lane's sum and the
    /// factor that rescales the old output.
    fn softmax(&self, em: &mut Em, x: &[String], m_old: &[String], l_old: &[String]) -> SoftmaxStep {
        let geo = self.geo;
        let kn = (geo.bc / 8) as usize;
        let mut step = SoftmaxStep { p: x.to_vec(), m: Vec::new(), l: Vec::new(), alpha: Vec::new() };
        for mi in 0..geo.mt {
            for h in 0..2usize {
                let idx: Vec<usize> =
                    (0..kn).flat_map(|ni| [(mi * kn + ni) * 4 + 2 * h, (mi * kn + ni) * 4 + 2 * h + 1]).collect();
                let row: Vec<String> = idx.iter().map(|&i| x[i].clone()).collect();
                let u = update(em, &row, &m_old[2 * mi + h], &l_old[2 * mi + h]);
                for (&i, v) in idx.iter().zip(&u.p) {
                    step.p[i] = v.clone();
                }
                step.m.push(u.m);
                step.l.push(u.l);
                step.alpha.push(u.alpha);
            }
        }
        step
    }

    /// The output accumulators `o` times their rows' factors `alpha` (two rows per 16-row tile).
    fn rescale(&self, em: &mut Em, o: &[String], alpha: &[String]) -> Vec<String> {
        let on = (self.geo.width / 8) as usize;
        let mut o = o.to_vec();
        for (r, a) in alpha.iter().enumerate() {
            let (mi, h) = (r / 2, r % 2);
            for n in 0..on {
                for e in 0..2 {
                    let at = (mi * on + n) * 4 + 2 * h + e;
                    o[at] = em.f.v(format!("fmul float {}, {a}", o[at]));
                }
            }
        }
        o
    }

    /// The probabilities packed as the A words of `O += P V` (per k16 step of the keys, four).
    fn pack_probabilities(&self, em: &mut Em, p: &[String]) -> Result<Vec<String>, PtxError> {
        let mut words = Vec::new();
        for kk2 in 0..(self.geo.bc / 16) as usize {
            words.extend(a_fragment(em, self.geo.dtype, p, 8 * kk2)?);
        }
        Ok(words)
    }

    /// The key loop on warpgroup MMAs, with the softmax of one block overlapping the output
    /// product of the previous one (FlashAttention-3's intra-warpgroup overlap). Iteration `j`
    /// waits for key block `j` (the ring runs `stages - 2` blocks ahead: block `j - 1`'s values
    /// are still read), issues `S_j = Q K_jᵀ` and then `O += P_{j-1} V_{j-1}`, waits for the
    /// scores only, runs the softmax of block `j`, then waits for the product and rescales `O`.
    /// The first iteration's product multiplies zero probabilities with its own block's values
    /// (real, finite data: nothing changes); after the loop the last block's product runs, kept
    /// only when there was a block (an empty tile's output stays 0).
    ///
    /// With a producer (`it0`: the blocks passed before this tile, i32) it waits on block `j`'s
    /// `full` barrier instead of copying, and frees block `j - 1`'s stage once its product has
    /// completed (the last block's after the loop).
    fn key_loop_overlapped(
        &self,
        em: &mut Em,
        tile: &AttnTile,
        wg: &WgDescriptors,
        it0: Option<&str>,
    ) -> Result<State, PtxError> {
        let geo = self.geo;
        let n_o = (geo.width / 2) as usize;
        let n_p = (geo.bc / 4) as usize;
        let mut accs: Vec<(String, String)> = (0..n_o).map(|_| ("float".into(), math::fc(0.0))).collect();
        accs.extend((0..2).map(|_| ("float".to_string(), math::fc(f32::NEG_INFINITY))));
        accs.extend((0..2).map(|_| ("float".to_string(), math::fc(0.0))));
        accs.extend((0..n_p).map(|_| ("i32".to_string(), "0".to_string())));
        // Ring stages: of block j (read), of block j - 1's values, of the next copy.
        let first_stage = match it0 {
            Some(it0) => em.f.v(format!("urem i32 {it0}, {}", geo.sched.stages)),
            None => "0".to_string(),
        };
        accs.push(("i32".into(), first_stage.clone()));
        accs.push(("i32".into(), first_stage));
        accs.push(("i32".into(), self.ahead().to_string()));
        let kl = em.f.loop_begin("i32", &tile.lo, &tile.hi, &accs);
        let saved = em.save();
        let kb = kl.i.clone();
        let o = kl.accs[..n_o].to_vec();
        let m_old = kl.accs[n_o..n_o + 2].to_vec();
        let l_old = kl.accs[n_o + 2..n_o + 4].to_vec();
        let words = kl.accs[n_o + 4..n_o + 4 + n_p].to_vec();
        let at = n_o + 4 + n_p;
        let (rs, vs, ws) = (kl.accs[at].clone(), kl.accs[at + 1].clone(), kl.accs[at + 2].clone());

        match it0 {
            // The stage the next copy overwrites is block kb - 2's.
            None => self.refill(em, tile, &kb, &ws),
            Some(it0) => {
                let it = em.f.v(format!("sub i32 {kb}, {}", tile.lo));
                let it = em.f.v(format!("add i32 {it0}, {it}"));
                let parity = self.parity(em, &it);
                let full = self.bar(em, &rs, 0);
                asm::mbar_wait(&mut em.f, &full, &parity);
                // cp.async wrote the stage through the generic proxy; wgmma reads it through the async one.
                asm::fence_proxy_async(&mut em.f);
            }
        }

        let turns = geo.sched.pingpong.then(|| self.turns(em));
        if let Some((own, _)) = &turns {
            asm::named_barrier(&mut em.f, own, geo.consumer_threads());
        }
        asm::fence(&mut em.f);
        let s = self.issue_scores(em, wg, &rs);
        let o = self.issue_output(em, wg, &vs, &words, &o);
        if let Some((_, other)) = &turns {
            asm::named_barrier_arrive(&mut em.f, other, geo.consumer_threads());
        }
        let s = asm::wait_acc(&mut em.f, 1, &s);
        let x = self.logits(em, tile, &kb, &s)?;
        let step = self.softmax(em, &x, &m_old, &l_old);
        let o = asm::wait_acc(&mut em.f, 0, &o);
        if it0.is_some() {
            // Block kb - 1's values are read: its stage is free.
            let later = em.f.v(format!("icmp ne i32 {kb}, {}", tile.lo));
            let cont = em.f.if_begin(&later);
            let empty = self.bar(em, &vs, geo.sched.stages);
            asm::mbar_arrive(&mut em.f, &empty);
            em.f.if_end(&cont);
        }
        let o = self.rescale(em, &o, &step.alpha);
        let words = self.pack_probabilities(em, &step.p)?;

        let rs_next = self.bump(em, &rs);
        let ws_next = self.bump(em, &ws);
        let mut next = o;
        next.extend(step.m);
        next.extend(step.l);
        next.extend(words);
        next.extend([rs_next, rs, ws_next]);
        em.restore(saved);
        em.f.loop_end(&kl, "1", &next);

        // The last block's product (kept when the tile had a block).
        let o = kl.accs[..n_o].to_vec();
        let words = kl.accs[n_o + 4..n_o + 4 + n_p].to_vec();
        asm::fence(&mut em.f);
        let last = self.issue_output(em, wg, &kl.accs[at + 1], &words, &o);
        let last = asm::wait_acc(&mut em.f, 0, &last);
        let any = em.f.v(format!("icmp ult i32 {}, {}", tile.lo, tile.hi));
        let o = last.iter().zip(&o).map(|(a, b)| em.f.v(format!("select i1 {any}, float {a}, float {b}"))).collect();
        if it0.is_some() {
            let cont = em.f.if_begin(&any);
            let empty = self.bar(em, &kl.accs[at + 1], geo.sched.stages);
            asm::mbar_arrive(&mut em.f, &empty);
            em.f.if_end(&cont);
        } else {
            self.drain(em);
        }
        Ok(State { o, m: kl.accs[n_o..n_o + 2].to_vec(), l: kl.accs[n_o + 2..n_o + 4].to_vec() })
    }

    /// The logits `f(S)` (f32) of key block `kb` at every score accumulator: the scores rounded to
    /// the product's dtype, then the graph's score function. In a block where the mask holds
    /// everywhere ([`block_is_full`]: most blocks of a causal or windowed mask), the logits
    /// before the mask ([`tcc_ir::attention::Mask::unmasked`]) without any comparison.
    fn logits(&self, em: &mut Em, tile: &AttnTile, kb: &str, s: &[String]) -> Result<Vec<String>, PtxError> {
        let geo = self.geo;
        let a = &geo.ga.attention;
        let scores = self.rounded_scores(em, s)?;
        let ragged = !geo.t_len.is_multiple_of(u64::from(geo.bc));
        let Some(inner) = a.mask.as_ref().and_then(|m| m.unmasked(em.g, a)) else {
            return self.eval_logits(em, tile, kb, &scores, a.logits, ragged);
        };
        let full = block_is_full(em, geo, (&tile.qspan.0, &tile.qspan.1), kb);
        let (yes, no, join) = (em.f.label("full"), em.f.label("masked"), em.f.label("logits"));
        em.f.cond_br(&full, &yes, &no);
        let saved = em.save();
        em.f.start_block(&yes);
        let unmasked = self.eval_logits(em, tile, kb, &scores, inner, false)?;
        em.restore(saved.clone());
        let from_yes = em.f.current_block();
        em.f.br(&join);
        em.f.start_block(&no);
        let masked = self.eval_logits(em, tile, kb, &scores, a.logits, ragged)?;
        em.restore(saved);
        let from_no = em.f.current_block();
        em.f.br(&join);
        em.f.start_block(&join);
        Ok(unmasked
            .iter()
            .zip(&masked)
            .map(|(u, m)| em.f.v(format!("phi float [ {u}, %{from_yes} ], [ {m}, %{from_no} ]")))
            .collect())
    }

    /// The score accumulators rounded to the scores' dtype (pairs of neighbours at once).
    fn rounded_scores(&self, em: &mut Em, s: &[String]) -> Result<Vec<String>, PtxError> {
        let dtype = em.dtype(self.geo.ga.attention.scores);
        if !matches!(dtype, DType::F16 | DType::BF16) {
            return s.iter().map(|v| math::round(&mut em.f, em.caps, dtype, v)).collect();
        }
        let mut out = Vec::with_capacity(s.len());
        for pair in s.chunks(2) {
            let [lo, hi] = round_pair(em, dtype, &pair[0], &pair[1])?;
            out.extend([lo, hi]);
        }
        Ok(out)
    }

    /// Node `node` (the logits, or the logits before the mask) at every score accumulator, the
    /// scores being `scores`, evaluated at the element's positions (clamped into the domain), as
    /// f32; with `ragged`, `-inf` at keys past T.
    fn eval_logits(
        &self,
        em: &mut Em,
        tile: &AttnTile,
        kb: &str,
        scores: &[String],
        node: NodeId,
        ragged: bool,
    ) -> Result<Vec<String>, PtxError> {
        let geo = self.geo;
        let a = &geo.ga.attention;
        let kn = (geo.bc / 8) as usize;
        let domain = em.dims(a.scores).to_vec();
        let j0 = em.f.v(format!("mul i32 {kb}, {}", geo.bc));
        let j0 = em.f.v(format!("add i32 {j0}, {}", self.t2));
        let mut out = Vec::with_capacity(scores.len());
        for mi in 0..geo.mt {
            for ni in 0..kn {
                for c in 0..4usize {
                    let ic = &tile.rows[mi][c / 2];
                    let j = em.f.v(format!("add i32 {j0}, {}", ni * 8 + c % 2));
                    let jc = if ragged { clamp(em, &j, geo.t_len - 1) } else { j.clone() };
                    let jc = em.widen(&jc);
                    let mut multi = tile.row_batch[mi][c / 2].clone();
                    multi.extend([ic.clone(), jc]);
                    let flat = em.linearize(&multi, &domain);
                    em.env.insert(a.scores, scores[(mi * kn + ni) * 4 + c].clone());
                    let x = em.eval(node, &Ix { flat, multi: Some(multi), vec: None });
                    em.env.remove(&a.scores);
                    let mut x = x?;
                    if ragged {
                        let inside = em.f.v(format!("icmp ult i32 {j}, {}", geo.t_len));
                        x = em.f.v(format!("select i1 {inside}, float {x}, float {}", math::fc(f32::NEG_INFINITY)));
                    }
                    out.push(x);
                }
            }
        }
        Ok(out)
    }

    /// `O / l` per row, then the graph's epilogue on it through the staged tile, or with a
    /// producer straight from the accumulators (rows past S are not stored).
    fn finish(&self, em: &mut Em, tile: &AttnTile, state: &State) -> Result<(), PtxError> {
        let geo = self.geo;
        let a = &geo.ga.attention;
        let on = (geo.width / 8) as usize;
        let mut o = state.o.clone();
        for mi in 0..geo.mt {
            for h in 0..2usize {
                let l = quad_sum(em, &state.l[2 * mi + h]);
                for n in 0..on {
                    for e in 0..2 {
                        let at = (mi * on + n) * 4 + 2 * h + e;
                        o[at] = em.f.v(format!("fdiv float {}, {l}", o[at]));
                    }
                }
            }
        }
        let node: NodeId = a.normalized_output();
        let frag = epilogue::mma_fragment(em, &self.lane, (&self.wrow, "0"), (geo.mt, on), &o);
        let st = Staging { smem: &self.smem, base: 0, rows: geo.br, cols: geo.width, dtype: em.dtype(node) };
        let out_dims = em.dims(node).to_vec();
        let output = Output {
            m: geo.s_len,
            n: u64::from(geo.width),
            node,
            second: None,
            batch_dims: &geo.batch_dims,
            out_dims: &out_dims,
            layout: a.layout.as_ref(),
        };
        let stored = super::stored_value(a, em.g)?;
        let outs = [Out { node: stored, dest: Src::Output(0) }];
        let at = TileAt { row0: &tile.q0, col0: "0", bidx: &tile.bidx };
        if geo.sched.producer {
            return epilogue::direct(em, &output, &outs, &at, &frag, em.dtype(node));
        }
        let barrier = |em: &mut Em| em.f.call_void("llvm.nvvm.barrier0", &[]);
        epilogue::staged(em, &st, &output, &outs, &at, &frag, (&self.tid, geo.threads()), barrier)
    }

    /// A barrier among the threads that compute: the block-wide one, or with a producer the
    /// consumers' named barrier.
    fn sync_consumers(&self, em: &mut Em) {
        if self.geo.sched.producer {
            asm::named_barrier(&mut em.f, CONSUMER_BARRIER, self.geo.consumer_threads());
        } else {
            em.f.call_void("llvm.nvvm.barrier0", &[]);
        }
    }

    /// The shared address (i32) of barrier `first + stage` (`first`: 0 for `full`, `stages` for
    /// `empty`) of ring stage `stage` (i32): `full[0]` right after the ring, each 8 bytes.
    fn bar(&self, em: &mut Em, stage: &str, first: u32) -> String {
        let geo = self.geo;
        let tiles = self.tiles_at.as_deref().unwrap_or("0");
        let s = em.f.v(format!("add i32 {stage}, {first}"));
        let off = em.f.v(format!("shl i32 {s}, 3"));
        let off = em.f.v(format!("add i32 {off}, {}", geo.q_bytes() + geo.sched.stages * geo.stage_bytes()));
        em.f.v(format!("add i32 {tiles}, {off}"))
    }

    /// The phase parity (i32) of block number `it` (i32) in the ring: `(it / stages) % 2`.
    fn parity(&self, em: &mut Em, it: &str) -> String {
        let round = em.f.v(format!("udiv i32 {it}, {}", self.geo.sched.stages));
        em.f.v(format!("and i32 {round}, 1"))
    }

    /// The warp-specialized kernel: thread 0 initialises the ring's barriers, then the producer
    /// warpgroup (the last) runs [`Self::producer`] and the others [`Self::consumers`].
    fn specialized(&self, em: &mut Em) -> Result<(), PtxError> {
        let geo = self.geo;
        let s_n = geo.sched.stages;
        let first = em.f.v(format!("icmp eq i32 {}, 0", self.tid));
        let cont = em.f.if_begin(&first);
        // TMA: the issuing thread's expect_tx is the one arrival (the bytes complete the phase).
        let full_count = if geo.kv_tma.is_some() { 1 } else { PRODUCER_THREADS };
        for s in 0..s_n {
            let full = self.bar(em, &s.to_string(), 0);
            asm::mbar_init(&mut em.f, &full, full_count);
            let empty = self.bar(em, &s.to_string(), s_n);
            asm::mbar_init(&mut em.f, &empty, geo.consumer_threads());
        }
        asm::mbar_init_fence(&mut em.f);
        em.f.if_end(&cont);
        em.f.call_void("llvm.nvvm.barrier0", &[]);
        let (prod, cons, done) = (em.f.label("producer"), em.f.label("consumers"), em.f.label("done"));
        let is_producer = em.f.v(format!("icmp uge i32 {}, {}", self.tid, geo.consumer_threads()));
        em.f.cond_br(&is_producer, &prod, &cons);
        let saved = em.save();
        em.f.start_block(&prod);
        self.producer(em)?;
        em.f.br(&done);
        em.restore(saved);
        let saved = em.save();
        em.f.start_block(&cons);
        self.consumers(em)?;
        em.f.br(&done);
        em.restore(saved);
        em.f.start_block(&done);
        Ok(())
    }

    /// Ping-pong: the named barriers (i32) of this warpgroup's turn and of the other's.
    fn turns(&self, em: &mut Em) -> (String, String) {
        let wgi = em.f.v(format!("lshr i32 {}, 7", self.tid));
        let own = em.f.v(format!("add i32 {wgi}, {TURN_BARRIER}"));
        let other = em.f.v(format!("sub i32 {}, {wgi}", TURN_BARRIER + 1));
        (own, other)
    }

    /// Ping-pong: warpgroup `wg` (0 or 1) hands warpgroup 0 a turn, by arriving (`wg` 1: the
    /// first turn) or taking it (`wg` 0: the last hand-over, left after its last tile).
    fn hand_over(&self, em: &mut Em, wg: u32) {
        if !self.geo.sched.pingpong {
            return;
        }
        let wgi = em.f.v(format!("lshr i32 {}, 7", self.tid));
        let mine = em.f.v(format!("icmp eq i32 {wgi}, {wg}"));
        let cont = em.f.if_begin(&mine);
        let id = TURN_BARRIER.to_string();
        if wg == 1 {
            asm::named_barrier_arrive(&mut em.f, &id, self.geo.consumer_threads());
        } else {
            asm::named_barrier(&mut em.f, &id, self.geo.consumer_threads());
        }
        em.f.if_end(&cont);
    }

    /// Two consumer warpgroups beside the producer share the SM's registers unevenly.
    fn moves_registers(&self) -> bool {
        self.geo.consumer_threads() == 2 * PRODUCER_THREADS
    }

    /// The producer warpgroup: per tile, per live key block, waits until the block's stage is
    /// free, copies the keys and values into it and has the copies arrive on its `full` barrier.
    fn producer(&self, em: &mut Em) -> Result<(), PtxError> {
        let s_n = self.geo.sched.stages;
        if self.moves_registers() {
            asm::setmaxnreg(&mut em.f, false, PRODUCER_REGS);
        }
        // TMA: the producer's first thread issues every copy.
        let issuer = self.geo.kv_tma.as_ref().map(|_| {
            let lead = em.f.v(format!("icmp eq i32 {}, {}", self.tid, self.geo.consumer_threads()));
            let maps: Vec<String> = (0..2).map(|j| em.f.v(format!("ptrtoint ptr %tmap{j} to i64"))).collect();
            let cont = em.f.if_begin(&lead);
            for m in &maps {
                asm::prefetch_tensormap(&mut em.f, m);
            }
            em.f.if_end(&cont);
            (lead, maps)
        });
        let tl = em.f.loop_begin("i32", &self.ctaid, &self.geo.tiles().to_string(), &[("i32".into(), "0".into())]);
        let saved = em.save();
        let tile = self.tile_begin(em, &tl)?;
        let it0 = tl.accs[0].clone();
        let lead = issuer.as_ref().map(|(lead, _)| em.f.if_begin(lead));
        let kl = em.f.loop_begin("i32", &tile.lo, &tile.hi, &[]);
        let it = em.f.v(format!("sub i32 {}, {}", kl.i, tile.lo));
        let it = em.f.v(format!("add i32 {it0}, {it}"));
        let stage = em.f.v(format!("urem i32 {it}, {s_n}"));
        // A stage's first use waits on the phase before its first (complete from the start).
        let parity = self.parity(em, &it);
        let parity = em.f.v(format!("xor i32 {parity}, 1"));
        let empty = self.bar(em, &stage, s_n);
        asm::mbar_wait(&mut em.f, &empty, &parity);
        let full = self.bar(em, &stage, 0);
        match &issuer {
            Some((_, maps)) => self.tma_block(em, &tile, &kl.i, &stage, (&full, maps)),
            None => {
                self.load_block(em, &tile, &kl.i, &stage);
                asm::mbar_arrive_cp_async(&mut em.f, &full);
            }
        }
        em.f.loop_end(&kl, "1", &[]);
        if let Some(cont) = lead {
            em.f.if_end(&cont);
        }
        let it_next = self.blocks_after(em, &tile, &it0);
        em.restore(saved);
        em.f.loop_end(&tl, &self.nctaid, &[it_next]);
        // Nothing exits while its copies are in flight.
        em.f.call_void("llvm.nvvm.cp.async.wait.group", &[("i32", "0")]);
        Ok(())
    }

    /// TMA: key block `kb` (i32) and its values into ring stage `stage` (i32), their bytes
    /// expected on `full` (its shared address, i32), one box per 64 head columns of each from
    /// the tensor maps `maps` (generic addresses, i64) at the tile's slab of each operand.
    fn tma_block(&self, em: &mut Em, tile: &AttnTile, kb: &str, stage: &str, (full, maps): (&str, &[String])) {
        let geo = self.geo;
        let Some(kv) = &geo.kv_tma else { return };
        asm::mbar_arrive_expect_tx(&mut em.f, full, geo.stage_bytes());
        let at = self.tiles_at.as_deref().unwrap_or("0");
        let sb = em.f.v(format!("mul i32 {stage}, {}", geo.stage_bytes()));
        let sb = em.f.v(format!("add i32 {at}, {sb}"));
        let row = em.f.v(format!("mul i32 {kb}, {}", geo.bc));
        let operands = [(&tile.k, geo.q_bytes(), geo.depth), (&tile.v, geo.q_bytes() + geo.k_bytes(), geo.width)];
        for (j, ((rows, offset, head), map)) in operands.into_iter().zip(kv).enumerate() {
            let slab = em.f.v(format!("udiv i64 {}, {}", rows.base, map.slab_stride));
            let slab = em.f.v(format!("trunc i64 {slab} to i32"));
            for c in 0..head / BOX_COLS {
                let dst = em.f.v(format!("add i32 {sb}, {}", offset + c * geo.bc * 128));
                let coords = [(c * BOX_COLS).to_string(), row.clone(), slab.clone()];
                asm::tma_load(&mut em.f, &dst, &maps[j], &coords, full);
            }
        }
    }

    /// The blocks passed after tile `tile` (i32): `it0` and its live key blocks.
    fn blocks_after(&self, em: &mut Em, tile: &AttnTile, it0: &str) -> String {
        let any = em.f.v(format!("icmp ult i32 {}, {}", tile.lo, tile.hi));
        let n = em.f.v(format!("sub i32 {}, {}", tile.hi, tile.lo));
        let n = em.f.v(format!("select i1 {any}, i32 {n}, i32 0"));
        em.f.v(format!("add i32 {it0}, {n}"))
    }

    /// The consumer warpgroups: per tile, the query block (copied by themselves), the key loop
    /// on the producer's ring, a barrier among them, and the epilogue from the accumulators.
    fn consumers(&self, em: &mut Em) -> Result<(), PtxError> {
        let geo = self.geo;
        let wg = self.wg.as_ref().ok_or_else(|| PtxError::InvalidGraph {
            kernel: em.g.name.clone(),
            reason: "a producer warpgroup needs a warpgroup schedule".into(),
        })?;
        if self.moves_registers() {
            asm::setmaxnreg(&mut em.f, true, CONSUMER_REGS);
        }
        self.hand_over(em, 1);
        let tl = em.f.loop_begin("i32", &self.ctaid, &geo.tiles().to_string(), &[("i32".into(), "0".into())]);
        let saved = em.save();
        let tile = self.tile_begin(em, &tl)?;
        let it0 = tl.accs[0].clone();
        self.load_queries(em, &tile);
        em.f.call_void("llvm.nvvm.cp.async.wait.group", &[("i32", "0")]);
        asm::fence_proxy_async(&mut em.f);
        self.sync_consumers(em);
        let state = self.key_loop_overlapped(em, &tile, wg, Some(&it0))?;
        // Both warpgroups' products have read the queries before the next tile's overwrite them.
        self.sync_consumers(em);
        match geo.split {
            Some(split) => self.write_partials(em, &tile, &state, &split),
            None => self.finish(em, &tile, &state)?,
        }
        let it_next = self.blocks_after(em, &tile, &it0);
        em.restore(saved);
        em.f.loop_end(&tl, &self.nctaid, &[it_next]);
        self.hand_over(em, 0);
        Ok(())
    }
}

impl AttnKernel<'_> {
    /// The split form's end of a tile: each of this lane's rows inside the queries writes its
    /// unnormalized output pairs, and the quad's first lane its running maximum and sum, as f32
    /// to the split's slot of the scratch buffer ([`Split`]).
    fn write_partials(&self, em: &mut Em, tile: &AttnTile, state: &State, split: &Split) {
        let geo = self.geo;
        let on = (geo.width / 8) as usize;
        let sp = em.f.v(format!("zext i32 {} to i64", tile.split));
        let slot0 = em.f.v(format!("mul i64 {sp}, {}", split.rows));
        let t4 = em.f.v(format!("and i32 {}, 3", self.lane));
        let first = em.f.v(format!("icmp eq i32 {t4}, 0"));
        let t2 = em.f.v(format!("zext i32 {} to i64", self.t2));
        let base = em.f.v(format!("add i32 {}, {}", tile.q0, self.wrow));
        let base = em.f.v(format!("add i32 {base}, {}", self.g4));
        for mi in 0..geo.mt {
            for h in 0..2usize {
                let l = quad_sum(em, &state.l[2 * mi + h]);
                let m = &state.m[2 * mi + h];
                let p = em.f.v(format!("add i32 {base}, {}", mi * 16 + h * 8));
                let inside = em.f.v(format!("icmp ult i32 {p}, {}", geo.packed_rows()));
                let cont = em.f.if_begin(&inside);
                let (i, hg) = if geo.group > 1 {
                    (em.f.v(format!("udiv i32 {p}, {}", geo.group)), em.f.v(format!("urem i32 {p}, {}", geo.group)))
                } else {
                    (p.clone(), "0".to_string())
                };
                let b = em.f.v(format!("add i32 {}, {hg}", tile.bidx));
                let b64 = em.f.v(format!("zext i32 {b} to i64"));
                let i64v = em.f.v(format!("zext i32 {i} to i64"));
                let r = em.f.v(format!("mul i64 {b64}, {}", geo.s_len));
                let r = em.f.v(format!("add i64 {r}, {i64v}"));
                let slot = em.f.v(format!("add i64 {slot0}, {r}"));
                let e0 = em.f.v(format!("mul i64 {slot}, {}", geo.width));
                let e0 = em.f.v(format!("add i64 {e0}, {t2}"));
                let ob = em.f.v(format!("mul i64 {e0}, 4"));
                let ob = em.f.v(format!("add i64 {ob}, {}", split.o));
                let optr = em.f.v(format!("getelementptr inbounds i8, ptr addrspace(1) %scratch, i64 {ob}"));
                for n in 0..on {
                    let at = (mi * on + n) * 4 + 2 * h;
                    let v = em.f.v(format!("insertelement <2 x float> poison, float {}, i32 0", state.o[at]));
                    let v = em.f.v(format!("insertelement <2 x float> {v}, float {}, i32 1", state.o[at + 1]));
                    let ptr = em.f.v(format!("getelementptr inbounds i8, ptr addrspace(1) {optr}, i64 {}", n * 32));
                    em.f.op(format!("store <2 x float> {v}, ptr addrspace(1) {ptr}, align 8"));
                }
                let lead = em.f.if_begin(&first);
                let mb = em.f.v(format!("mul i64 {slot}, 8"));
                let mb = em.f.v(format!("add i64 {mb}, {}", split.ml));
                let mptr = em.f.v(format!("getelementptr inbounds i8, ptr addrspace(1) %scratch, i64 {mb}"));
                let v = em.f.v(format!("insertelement <2 x float> poison, float {m}, i32 0"));
                let v = em.f.v(format!("insertelement <2 x float> {v}, float {l}, i32 1"));
                em.f.op(format!("store <2 x float> {v}, ptr addrspace(1) {mptr}, align 8"));
                em.f.if_end(&lead);
                em.f.if_end(&cont);
            }
        }
    }
}

/// The key blocks of split `split` (i32) of `splits`: a contiguous share of `lo..hi` (i32),
/// `ceil((hi - lo) / splits)` blocks each (the last ones shorter or empty).
fn split_range(em: &mut Em, splits: u32, split: &str, (lo, hi): (&str, &str)) -> (String, String) {
    let len = em.f.v(format!("sub i32 {hi}, {lo}"));
    let neg = em.f.v(format!("icmp slt i32 {len}, 0"));
    let len = em.f.v(format!("select i1 {neg}, i32 0, i32 {len}"));
    let per = em.f.v(format!("add i32 {len}, {}", splits - 1));
    let per = em.f.v(format!("udiv i32 {per}, {splits}"));
    let off = em.f.v(format!("mul i32 {split}, {per}"));
    let a = em.f.v(format!("add i32 {lo}, {off}"));
    let b = em.f.v(format!("add i32 {a}, {per}"));
    let over = em.f.v(format!("icmp sgt i32 {b}, {hi}"));
    let b = em.f.v(format!("select i1 {over}, i32 {hi}, i32 {b}"));
    (a, b)
}

/// `v` (i32) clamped to at most `last`.
fn clamp(em: &mut Em, v: &str, last: u64) -> String {
    let over = em.f.v(format!("icmp ugt i32 {v}, {last}"));
    em.f.v(format!("select i1 {over}, i32 {last}, i32 {v}"))
}

/// The `mma.sync` A fragment (four packed words) of the probabilities' 16 x 16 tile whose first
/// 8-column accumulator tile starts at `t0`: tiles `t0` and `t0 + 4` hold its two column halves.
fn a_fragment(em: &mut Em, dtype: DType, p: &[String], t0: usize) -> Result<Vec<String>, PtxError> {
    let t1 = t0 + 4;
    let mut a = Vec::with_capacity(4);
    for (lo, hi) in [(t0, t0 + 1), (t0 + 2, t0 + 3), (t1, t1 + 1), (t1 + 2, t1 + 3)] {
        a.push(pack(em, dtype, &p[lo], &p[hi])?);
    }
    Ok(a)
}

/// The tiles' offset from the dynamic shared memory's start (the padding to its first 1024-byte
/// boundary, where the swizzled tiles start) and the warpgroup MMAs' descriptors: this thread's
/// warpgroup's 64 query rows, the first stage's key tile (both K-major) and value tile (MN-major,
/// its 64-column blocks `Bc` rows apart).
fn warpgroup_descriptors(em: &mut Em, geo: &Geometry, smem: &str, tid: &str) -> (String, Option<WgDescriptors>) {
    let s64 = em.f.v(format!("ptrtoint ptr addrspace(3) {smem} to i64"));
    let s0 = em.f.v(format!("trunc i64 {s64} to i32"));
    let s1 = em.f.v(format!("add i32 {s0}, {}", WGMMA_ALIGN - 1));
    let al = em.f.v(format!("and i32 {s1}, -{WGMMA_ALIGN}"));
    let pad = em.f.v(format!("sub i32 {al}, {s0}"));
    let wgi = em.f.v(format!("lshr i32 {tid}, 7"));
    let rows = em.f.v(format!("mul i32 {wgi}, {}", WGMMA_M * 128));
    let qa = em.f.v(format!("add i32 {al}, {rows}"));
    let k_major = asm::swizzle_128b(16, 1024);
    let q = descriptor(em, &qa, k_major);
    let ka = em.f.v(format!("add i32 {al}, {}", geo.q_bytes()));
    let k = descriptor(em, &ka, k_major);
    let va = em.f.v(format!("add i32 {ka}, {}", geo.k_bytes()));
    let v = descriptor(em, &va, asm::swizzle_128b(geo.bc * 128, 1024));
    (pad, Some(WgDescriptors { q, k, v }))
}
