//! Epilogue warps. In persistent blocks with a TMA producer warpgroup and two consumer
//! warpgroups sharing each tile, a fused epilogue with arithmetic (bias, activation) would keep
//! the tensor cores idle while the consumers evaluate it. Instead the consumers hand every tile
//! but the block's last to the producer warpgroup's warps 1-3 and go on with the next tile's
//! main loop at once:
//!
//! - a consumer waits on `empty` (the staging area is free), writes its accumulators, rounded
//!   to the matmul's dtype, into its 64-row slice of a whole-tile staging area (64 x 64
//!   subtiles, 128-byte swizzle: the layout the output map's boxes read) and arrives on `full`;
//! - the epilogue warps wait on `full`, evaluate the fused outputs in place, 16 bytes per thread
//!   and step, store every subtile by TMA and, once the stores have read the area, arrive on
//!   `empty`.
//!
//! The block's last tile would overlap nothing, so its consumers evaluate it themselves into the
//! same area ([`super::store::tma_store_epilogue`]).

use tcc_ir::DType;

use super::asm;
use super::config::WG_M;
use super::kernel::{Tile, WgGemm, pair_outputs_of_rounded};
use super::store::{SUBTILE_BYTES, StoreStaging, SubtilePlace, pair_offset};
use crate::ptx::error::PtxError;
use crate::ptx::expr::Em;
use crate::ptx::math;
use crate::ptx::plan::Out;

/// Threads of the epilogue warps (the producer warpgroup's warps 1-3).
pub(super) const EPILOGUE_THREADS: u32 = 96;
/// Named barrier of the epilogue warps (the consumers use 1 and 2).
const EPILOGUE_BARRIER: &str = "3";
/// Threads per 128-byte subtile row: each takes one 16-byte chunk.
const CHUNKS_PER_ROW: u32 = 8;
/// Row passes whose chunks an epilogue thread loads before it evaluates them (more spill at
/// 56 registers).
const LOAD_GROUP: u32 = 3;

/// The two mbarriers of the hand-over (shared addresses, i32).
pub(super) struct Handover {
    /// The consumers have written a tile (128 arrivals per consumer warpgroup).
    pub(super) full: String,
    /// The epilogue warps' stores have read the staging area (one arrival).
    pub(super) empty: String,
}

/// A consumer warpgroup's hand-over of its 64 rows of the tile: writes its accumulators,
/// rounded to the matmul's dtype, into its slice `st` of the staging area, each 64-column
/// subtile in its own buffer. The caller waits on `empty` before and arrives on `full` after.
pub(super) fn hand_over(em: &mut Em, g: &WgGemm, tid: &str, acc: &[String], st: &StoreStaging) -> Result<(), PtxError> {
    let dtype = em.dtype(g.p.node);
    let sty = math::stype(dtype);
    let place = SubtilePlace::new(em, tid);
    for q in 0..g.c.bn / 64 {
        let buf_off = em.f.v(format!("add i32 {}, {}", st.off, q * SUBTILE_BYTES));
        for j in 0..8u32 {
            for h in 0..2u32 {
                let a = (4 * (q * 8 + j) + 2 * h) as usize;
                let mut v = "poison".to_string();
                for e in 0..2 {
                    let s = math::to_storage(&mut em.f, em.caps, dtype, &acc[a + e])?;
                    v = em.f.v(format!("insertelement <2 x {sty}> {v}, {sty} {s}, i32 {e}"));
                }
                let p = pair_offset(em, st.smem, &place, &buf_off, (j, h));
                em.f.op(format!("store <2 x {sty}> {v}, ptr addrspace(3) {p}, align 4"));
            }
        }
    }
    Ok(())
}

/// The epilogue warps' work on one handed-over tile (`st`: the whole staging area, slice 0 first):
/// epilogue thread `etid` (i32, of [`EPILOGUE_THREADS`]) takes chunk `etid % 8` of every 12th
/// row of each subtile, loads its 8 products, evaluates the outputs there and writes them back
/// in place. After a barrier of the epilogue warps, thread 0 stores every subtile by TMA, waits
/// until the stores have read the area and arrives on `bars.empty`.
pub(super) fn finish_tile(
    em: &mut Em,
    g: &WgGemm,
    outs: &[Out],
    tile: &Tile,
    etid: &str,
    st: &StoreStaging,
    bars: &Handover,
) -> Result<(), PtxError> {
    let dtype = em.dtype(g.p.node);
    let sty = math::stype(dtype);
    let out_dtype = outs.first().map(|o| em.dtype(o.node)).unwrap_or(DType::F16);
    let out_sty = math::stype(out_dtype);
    let per_slice = g.c.bn / 64;
    let subtiles = g.c.consumers * per_slice;
    let row_step = EPILOGUE_THREADS / CHUNKS_PER_ROW;
    let chunk = em.f.v(format!("and i32 {etid}, {}", CHUNKS_PER_ROW - 1));
    let first_row = em.f.v(format!("udiv i32 {etid}, {CHUNKS_PER_ROW}"));
    let bmulti = {
        let bi = em.widen(&tile.bidx);
        em.delinearize(&bi, g.p.batch_dims)
    };
    let sl = em.f.loop_begin("i32", "0", &subtiles.to_string(), &[]);
    let slice = em.f.v(format!("udiv i32 {}, {per_slice}", sl.i));
    let q = em.f.v(format!("urem i32 {}, {per_slice}", sl.i));
    let sub = em.f.v(format!("mul i32 {}, {SUBTILE_BYTES}", sl.i));
    let sub_off = em.f.v(format!("add i32 {}, {sub}", st.off));
    let slice_row = em.f.v(format!("mul i32 {slice}, {WG_M}"));
    let row0 = em.f.v(format!("add i32 {}, {slice_row}", tile.row0));
    let q64 = em.f.v(format!("shl i32 {q}, 6"));
    let c8 = em.f.v(format!("shl i32 {chunk}, 3"));
    let col = em.f.v(format!("add i32 {}, {q64}", tile.col0));
    let col = em.f.v(format!("add i32 {col}, {c8}"));
    // The chunks of LOAD_GROUP passes are loaded first (rows past the subtile read its last
    // row and store nothing), so that the loads overlap the arithmetic.
    let passes = WG_M.div_ceil(row_step);
    for group in 0..passes.div_ceil(LOAD_GROUP) {
        let mut chunks = Vec::new();
        for pass in group * LOAD_GROUP..((group + 1) * LOAD_GROUP).min(passes) {
            let r = em.f.v(format!("add i32 {first_row}, {}", pass * row_step));
            let inside = ((pass + 1) * row_step > WG_M).then(|| em.f.v(format!("icmp ult i32 {r}, {WG_M}")));
            let rl = match &inside {
                Some(ok) => em.f.v(format!("select i1 {ok}, i32 {r}, i32 {}", WG_M - 1)),
                None => r.clone(),
            };
            let r7 = em.f.v(format!("and i32 {rl}, 7"));
            let phys = em.f.v(format!("xor i32 {chunk}, {r7}"));
            let pb = em.f.v(format!("shl i32 {phys}, 4"));
            let rb = em.f.v(format!("shl i32 {rl}, 7"));
            let o = em.f.v(format!("add i32 {sub_off}, {rb}"));
            let o = em.f.v(format!("add i32 {o}, {pb}"));
            let ptr = em.f.v(format!("getelementptr inbounds i8, ptr addrspace(3) {}, i32 {o}", st.smem));
            let raw = em.f.v(format!("load <8 x {sty}>, ptr addrspace(3) {ptr}, align 16"));
            let row = em.f.v(format!("add i32 {row0}, {rl}"));
            chunks.push((inside, ptr, raw, row));
        }
        let saved = em.save();
        for (inside, ptr, raw, row) in chunks {
            let mut out = "poison".to_string();
            for pair in 0..4u32 {
                let mut vals: [String; 2] = Default::default();
                for (e, v) in vals.iter_mut().enumerate() {
                    let x = em.f.v(format!("extractelement <8 x {sty}> {raw}, i32 {}", 2 * pair + e as u32));
                    *v = math::from_storage(&mut em.f, em.caps, dtype, &x)?;
                }
                let cp = em.f.v(format!("add i32 {col}, {}", 2 * pair));
                let per_elem = pair_outputs_of_rounded(em, g, outs, &bmulti, (&row, &cp), &vals)?;
                for (e, (_, _, vs)) in per_elem.iter().enumerate() {
                    let x = vs.first().cloned().unwrap_or_default();
                    let s = math::to_storage(&mut em.f, em.caps, out_dtype, &x)?;
                    let lane = 2 * pair + e as u32;
                    out = em.f.v(format!("insertelement <8 x {out_sty}> {out}, {out_sty} {s}, i32 {lane}"));
                }
            }
            let cont = inside.map(|ok| em.f.if_begin(&ok));
            em.f.op(format!("store <8 x {out_sty}> {out}, ptr addrspace(3) {ptr}, align 16"));
            if let Some(cont) = cont {
                em.f.if_end(&cont);
            }
            em.restore(saved.clone());
        }
    }
    em.f.loop_end(&sl, "1", &[]);
    // The tile is written (generic proxy) before the copy engine (async proxy) reads it.
    asm::fence_proxy_async(&mut em.f);
    asm::named_barrier(&mut em.f, EPILOGUE_BARRIER, EPILOGUE_THREADS);
    let first = em.f.v(format!("icmp eq i32 {etid}, 0"));
    let cont = em.f.if_begin(&first);
    for s in 0..subtiles {
        let col = em.f.v(format!("add i32 {}, {}", tile.col0, (s % per_slice) * 64));
        let row = em.f.v(format!("add i32 {}, {}", tile.row0, (s / per_slice) * WG_M));
        let mut coords = vec![col, row];
        if g.p.batch > 1 {
            coords.push(tile.bidx.clone());
        }
        let src = em.f.v(format!("add i32 {}, {}", st.addr, s * SUBTILE_BYTES));
        asm::tma_store(&mut em.f, st.map, &coords, &src);
    }
    asm::bulk_commit(&mut em.f);
    asm::bulk_wait_read(&mut em.f, 0);
    asm::mbar_arrive(&mut em.f, &bars.empty);
    em.f.if_end(&cont);
    Ok(())
}
