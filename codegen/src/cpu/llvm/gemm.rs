//! The register-blocked matmul micro-kernel: an `mr x nr` f32 tile held in `mr * nr / lanes`
//! vector registers (`<16 x float>` zmm with AVX-512), fed per step by `nr / lanes` vector loads of
//! the packed B panel and `mr` broadcasts of the packed A panel, with fused multiply-adds; the
//! depth loop is unrolled four times and prefetches the B panel a few steps ahead. Full tiles
//! store with plain vector stores, edge tiles with masked ones.

use super::emit::{Emitter, iota};
use crate::error::CodegenError;
use crate::llvm_text::{Elem, IPred, Ty, V};
use crate::loops::MicroKernel;

/// Depth steps per iteration of the main depth loop.
const UNROLL: u32 = 4;

/// How many depth steps ahead the main loop prefetches the B panel.
const PREFETCH_STEPS: u32 = 8;

/// The vector width used for a tile `nr` columns wide: the host's lanes if they divide `nr`,
/// else the largest power of two (at least 4) that does.
pub fn tile_lanes(host_lanes: u32, nr: u32) -> u32 {
    let mut lanes = host_lanes.max(4);
    while lanes > 4 && !nr.is_multiple_of(lanes) {
        lanes /= 2;
    }
    lanes
}

/// Emits the tile `mk`.
pub(super) fn micro_kernel(e: &mut Emitter<'_>, mk: &MicroKernel) -> Result<(), CodegenError> {
    let lanes = tile_lanes(e.host.lanes, mk.nr);
    if mk.mr == 0 || mk.nr == 0 || !mk.nr.is_multiple_of(lanes) {
        return Err(e.bad(format!("bad register tile {}x{}", mk.mr, mk.nr)));
    }
    let (mr, nv) = (mk.mr, mk.nr / lanes);
    let vty = Ty::new(Elem::F32, lanes);
    // Alignment of the accumulators' stack slots.
    let va = 4 * lanes;
    let a_base = e.address(mk.a, &mk.a_at)?;
    let b_base = e.address(mk.b, &mk.b_at)?;
    let depth = e.extent(&mk.depth);
    let f = &mut e.f;
    f.declare("declare void @llvm.prefetch.p0(ptr, i32, i32, i32)".to_string());
    let zero = f.fc(lanes, 0.0);
    let accs: Vec<V> = (0..mr * nv)
        .map(|_| {
            let slot = f.alloca(vty);
            f.store(&zero, &slot, va);
            slot
        })
        .collect();
    let ptr = Ty::scalar(Elem::Ptr);
    let i64t = Ty::scalar(Elem::I64);
    let (pa, pb, left) = (f.alloca(ptr), f.alloca(ptr), f.alloca(i64t));
    f.store(&a_base, &pa, 8);
    f.store(&b_base, &pb, 8);
    f.store(&depth, &left, 8);
    for unroll in [UNROLL, 1] {
        let (header, block, exit) = (f.label(), f.label(), f.label());
        f.br(&header);
        f.start(&header);
        let l = f.load(i64t, &left, 8);
        let go = f.icmp(IPred::Sge, &l, &f.i64c(i64::from(unroll)));
        f.cond_br(&go, &block, &exit);
        f.start(&block);
        let a_ptr = f.load(ptr, &pa, 8);
        let b_ptr = f.load(ptr, &pb, 8);
        for step in 0..unroll {
            // The B panel streams from L2 (kc x nr floats outgrow L1): its lines are fetched
            // PREFETCH_STEPS steps ahead.
            if unroll > 1 {
                for line in 0..(mk.nr * 4).div_ceil(64) {
                    let at = f.i64c(i64::from((step + PREFETCH_STEPS) * mk.nr + line * 16));
                    let p = f.gep(Elem::F32, &b_ptr, &at);
                    f.line(&format!("call void @llvm.prefetch.p0({p}, i32 0, i32 3, i32 1)"));
                }
            }
            let bv: Vec<V> = (0..nv)
                .map(|v| {
                    let at = f.i64c(i64::from(step * mk.nr + v * lanes));
                    let p = f.gep(Elem::F32, &b_ptr, &at);
                    f.load(vty, &p, 4)
                })
                .collect();
            for i in 0..mr {
                let at = f.i64c(i64::from(step * mr + i));
                let p = f.gep(Elem::F32, &a_ptr, &at);
                let a = f.load(Ty::scalar(Elem::F32), &p, 4);
                let a = f.splat(&a, lanes);
                for (v, b) in bv.iter().enumerate() {
                    let slot = &accs[(i * nv) as usize + v];
                    let acc = f.load(vty, slot, va);
                    let r = f.mul_add(&a, b, &acc);
                    f.store(&r, slot, va);
                }
            }
        }
        let a_next = f.gep(Elem::F32, &a_ptr, &f.i64c(i64::from(mr * unroll)));
        let b_next = f.gep(Elem::F32, &b_ptr, &f.i64c(i64::from(mk.nr * unroll)));
        f.store(&a_next, &pa, 8);
        f.store(&b_next, &pb, 8);
        let l = f.load(i64t, &left, 8);
        let l = f.sub(&l, &f.i64c(i64::from(unroll)));
        f.store(&l, &left, 8);
        f.br(&header);
        f.start(&exit);
    }

    // Store: C = acc where `first` is 0, C += acc elsewhere.
    let c_index = mk.c_row.scale(mk.ldc).add(&mk.c_col);
    let c_base = e.address(mk.c, &c_index)?;
    let first = e.index_value(&mk.first);
    let rows = e.extent(&mk.rows);
    let cols = e.extent(&mk.cols);
    let f = &mut e.f;
    let is_first = f.icmp(IPred::Eq, &first, &f.i64c(0));
    let full_rows = f.icmp(IPred::Eq, &rows, &f.i64c(i64::from(mr)));
    let full_cols = f.icmp(IPred::Eq, &cols, &f.i64c(i64::from(mk.nr)));
    let full = f.and(&full_rows, &full_cols);
    let (full_block, edge_block, done) = (f.label(), f.label(), f.label());
    f.cond_br(&full, &full_block, &edge_block);

    // Full tile: plain vector stores (no read of C on the first k-block).
    f.start(&full_block);
    let (overwrite, accumulate) = (f.label(), f.label());
    f.cond_br(&is_first, &overwrite, &accumulate);
    for add in [false, true] {
        f.start(if add { &accumulate } else { &overwrite });
        for i in 0..mr {
            for v in 0..nv {
                let at = f.i64c(i64::from(i) * mk.ldc + i64::from(v * lanes));
                let p = f.gep(Elem::F32, &c_base, &at);
                let acc = f.load(vty, &accs[(i * nv + v) as usize], va);
                let new = if add {
                    let old = f.load(vty, &p, 4);
                    f.fadd(&old, &acc)
                } else {
                    acc
                };
                f.store(&new, &p, 4);
            }
        }
        f.br(&done);
    }

    // Edge tile: rows below `rows`, lanes below `cols` (masked loads and stores).
    f.start(&edge_block);
    let cols32 = f.conv("trunc", &cols, Ty::scalar(Elem::I32));
    let cols32 = f.splat(&cols32, lanes);
    let first_lanes = f.splat(&is_first, lanes);
    let masks: Vec<V> = (0..nv).map(|v| f.icmp(IPred::Slt, &iota(lanes, v * lanes), &cols32)).collect();
    let store_name = format!("llvm.masked.store.{}.p0", vty.suffix());
    f.declare(format!("declare void @{store_name}({vty}, ptr, i32, {})", Ty::new(Elem::I1, lanes)));
    for i in 0..mr {
        let (row, next) = (f.label(), f.label());
        let ok = f.icmp(IPred::Slt, &f.i64c(i64::from(i)), &rows);
        f.cond_br(&ok, &row, &done);
        f.start(&row);
        for (v, mask) in masks.iter().enumerate() {
            let at = f.i64c(i64::from(i) * mk.ldc + i64::from(v as u32 * lanes));
            let p = f.gep(Elem::F32, &c_base, &at);
            let acc = f.load(vty, &accs[(i * nv) as usize + v], va);
            let old = f.call(
                vty,
                &format!("llvm.masked.load.{}.p0", vty.suffix()),
                &[&p, &f.ic(Elem::I32, 1, 4), mask, &zero],
            );
            let base = f.select(&first_lanes, &zero, &old);
            let new = f.fadd(&base, &acc);
            f.line(&format!("call void @{store_name}({new}, {p}, i32 4, {mask})"));
        }
        f.br(&next);
        f.start(&next);
    }
    f.br(&done);
    f.start(&done);
    Ok(())
}
