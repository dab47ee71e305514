//! The TMA-store epilogue of persistent warpgroup GEMM blocks: each consumer warpgroup writes
//! its 64 rows of the tile as 64 x 64 subtiles into two alternating 8 KiB buffers of its own
//! staging area (128-byte swizzle: chunk c of row r at c ^ (r % 8), as the output map's boxes
//! read it), and one of its threads stores each subtile with `cp.async.bulk.tensor` (elements
//! outside the output are not written). The stores drain while the warpgroup goes on to its
//! next tile; a buffer is refilled once its previous store has read it.

use tcc_ir::DType;

use super::asm;
use super::config::WG_M;
use super::kernel::{FragLane, Tile, WgGemm, pair_outputs};
use crate::ptx::error::PtxError;
use crate::ptx::expr::Em;
use crate::ptx::math;
use crate::ptx::plan::Out;

/// Bytes of one buffer of a TMA-store staging area: a 64 x 64 subtile of 16-bit outputs.
pub(super) const SUBTILE_BYTES: u32 = 64 * 128;

/// Where a consumer warpgroup stages its outputs for TMA stores, and through which map.
pub(super) struct StoreStaging<'s> {
    /// The staging area's shared address (i32; 1024-byte aligned, two subtile buffers).
    pub(super) addr: String,
    /// The same as a byte offset from the start of the dynamic shared memory (i32).
    pub(super) off: String,
    /// The output's tensor map (generic address, i64).
    pub(super) map: &'s str,
    /// The dynamic shared memory (`@sym`).
    pub(super) smem: &'s str,
}

/// Stores a persistent block's tile by TMA: each consumer warpgroup (`cw`, an i32, computing the
/// tile's 64-row slice `slice`) writes its rows as 64 x 64 subtiles into two alternating buffers
/// of its staging area (128-byte swizzle: chunk c of row r at c ^ (r % 8), as the output map's
/// boxes read it), and one thread of the warpgroup stores each subtile with
/// `cp.async.bulk.tensor` (elements outside the output are not written). The stores drain while
/// the warpgroup goes on to its next tile; a buffer is refilled once its previous store has read it.
// Reason: the IR value names of the tile and thread, plus the product, its output and staging.
#[allow(clippy::too_many_arguments)]
pub(super) fn tma_store_epilogue(
    em: &mut Em,
    g: &WgGemm,
    outs: &[Out],
    tile: &Tile,
    (tid, cw, slice): (&str, &str, &str),
    acc: &[String],
    st: &StoreStaging,
) -> Result<(), PtxError> {
    let out_dtype = outs.first().map(|o| em.dtype(o.node)).unwrap_or(DType::F16);
    let sty = math::stype(out_dtype);
    let FragLane { wiw, gq, tq, t2 } = FragLane::new(em, tid);
    let ltid = em.f.v(format!("and i32 {tid}, 127"));
    let elected = em.f.v(format!("icmp eq i32 {ltid}, 0"));
    let bar = em.f.v(format!("add i32 {cw}, 1"));
    let w16 = em.f.v(format!("shl i32 {wiw}, 4"));
    let rl = em.f.v(format!("add i32 {w16}, {gq}"));
    let slice_row = em.f.v(format!("mul i32 {slice}, {WG_M}"));
    let row0 = em.f.v(format!("add i32 {}, {slice_row}", tile.row0));
    let grow = em.f.v(format!("add i32 {row0}, {rl}"));
    // This thread's bytes within a subtile buffer: row rl (+8) at 128 bytes, 4 bytes per lane
    // of the quad, chunk j ^ (row % 8) = j ^ gq.
    let rb = em.f.v(format!("shl i32 {rl}, 7"));
    let tb = em.f.v(format!("shl i32 {tq}, 2"));
    let thread_off = em.f.v(format!("add i32 {rb}, {tb}"));
    let bmulti = {
        let bi = em.widen(&tile.bidx);
        em.delinearize(&bi, g.p.batch_dims)
    };
    let batched = g.p.batch > 1;
    // A dual product's tile stores half its columns; its second product's accumulators of the
    // same columns lie half the tile's accumulators further.
    let subtiles = g.p.out_cols(g.c.bn) / 64;
    let second = g.p.second.map(|_| (g.c.bn / 4) as usize);
    let saved = em.save();
    for q in 0..subtiles {
        let buf = (q % 2) * SUBTILE_BYTES;
        // The buffer's previous store has read it (stores complete in order).
        let cont = em.f.if_begin(&elected);
        asm::bulk_wait_read(&mut em.f, u32::from(subtiles > 1));
        em.f.if_end(&cont);
        asm::named_barrier(&mut em.f, &bar, 128);
        let buf_off = em.f.v(format!("add i32 {}, {buf}", st.off));
        let base = em.f.v(format!("add i32 {buf_off}, {thread_off}"));
        for j in 0..8u32 {
            let chunk = em.f.v(format!("xor i32 {gq}, {j}"));
            let cb = em.f.v(format!("shl i32 {chunk}, 4"));
            let o = em.f.v(format!("add i32 {base}, {cb}"));
            for h in 0..2u32 {
                let row = em.f.v(format!("add i32 {grow}, {}", 8 * h));
                let col = em.f.v(format!("add i32 {}, {}", tile.col0, q * 64 + j * 8));
                let col = em.f.v(format!("add i32 {col}, {t2}"));
                let a = (4 * (q * 8 + j) + 2 * h) as usize;
                let vals = [acc[a].clone(), acc[a + 1].clone()];
                let vals2 = second.map(|o| [acc[a + o].clone(), acc[a + o + 1].clone()]);
                let per_elem = pair_outputs(em, g, outs, &bmulti, (&row, &col), &vals, vals2.as_ref())?;
                let mut v = "poison".to_string();
                for (e, (_, _, vs)) in per_elem.iter().enumerate() {
                    let x = vs.first().cloned().unwrap_or_default();
                    let s = math::to_storage(&mut em.f, em.caps, out_dtype, &x)?;
                    v = em.f.v(format!("insertelement <2 x {sty}> {v}, {sty} {s}, i32 {e}"));
                }
                let oh = em.f.v(format!("add i32 {o}, {}", 8 * 128 * h));
                let p = em.f.v(format!("getelementptr inbounds i8, ptr addrspace(3) {}, i32 {oh}", st.smem));
                em.f.op(format!("store <2 x {sty}> {v}, ptr addrspace(3) {p}, align 4"));
                em.restore(saved.clone());
            }
        }
        // The subtile is written (generic proxy) before the copy engine (async proxy) reads it.
        asm::fence_proxy_async(&mut em.f);
        asm::named_barrier(&mut em.f, &bar, 128);
        let cont = em.f.if_begin(&elected);
        let col = em.f.v(format!("add i32 {}, {}", tile.col0, q * 64));
        let mut coords = vec![col, row0.clone()];
        if batched {
            coords.push(tile.bidx.clone());
        }
        let src = em.f.v(format!("add i32 {}, {buf}", st.addr));
        asm::tma_store(&mut em.f, st.map, &coords, &src);
        asm::bulk_commit(&mut em.f);
        em.f.if_end(&cont);
    }
    Ok(())
}
