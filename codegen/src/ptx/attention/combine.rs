//! The split form's second entry: merges the key splits of every output element by their row
//! maxima (flash-decoding's combine). For element `(R, c)` (output row `R`, column `c`) with the
//! splits' maxima `m_s`, sums `l_s` and unnormalized outputs `o_s` ([`Split`]):
//! `M = max m_s` (read as 0 while it is `-inf`, as the kernel's running maximum), `w_s = e^(m_s -
//! M)`, `L = Σ w_s l_s`, `O = Σ w_s o_s / L`, rounded to the attention's dtype, then the epilogue
//! (casts, a residual) is evaluated and stored. A row whose every logit is `-inf` (every `m_s`
//! is) ends as NaN, as the one-kernel form and the written formula give. The row statistics
//! ([`tcc_ir::attention::Attention::statistics`], e.g. the log-sum-exp) are evaluated from the row
//! maximum `M` and sum `L` (NaN for such a row, as the formula's `Σ e^(-inf - -inf)`) by the thread
//! of column 0 and stored at row `R`.

use tcc_ir::{DType, ReduceOp};

use super::{Geometry, Split};
use crate::ptx::error::PtxError;
use crate::ptx::expr::{Em, Ix};
use crate::ptx::math;
use crate::ptx::module::ModuleText;
use crate::ptx::plan::{Out, Src};
use crate::ptx::stages::{StageCx, grid_ids};

/// Threads per block of the combine entry.
pub(crate) const THREADS: u32 = 256;

/// Emits the combine entry `name`; returns its work: one thread per output element.
pub(crate) fn emit(
    cx: &StageCx,
    module: &mut ModuleText,
    name: &str,
    geo: &Geometry,
    split: &Split,
) -> Result<u64, PtxError> {
    let a = &geo.ga.attention;
    let mut em = Em::new(cx.g, cx.plan, cx.caps);
    let ix = em.ix;
    let width = u64::from(geo.width);
    let count = split.rows * width;
    let (gid, stride) = grid_ids(&mut em);
    let saved = em.save();
    let lp = em.f.loop_begin(ix, &gid, &count.to_string(), &[]);
    let r = em.f.v(format!("udiv {ix} {}, {width}", lp.i));
    let c = em.f.v(format!("urem {ix} {}, {width}", lp.i));
    let wide = |em: &mut Em, v: &str| if ix == "i64" { v.to_string() } else { em.f.v(format!("zext i32 {v} to i64")) };
    let (r64, c64) = (wide(&mut em, &r), wide(&mut em, &c));
    let scratch =
        |em: &mut Em, bytes: &str| em.f.v(format!("getelementptr inbounds i8, ptr addrspace(1) %scratch, i64 {bytes}"));
    let load = |em: &mut Em, ptr: &str| em.f.v(format!("load float, ptr addrspace(1) {ptr}, align 4"));
    let mut parts = Vec::with_capacity(split.splits as usize);
    for s in 0..u64::from(split.splits) {
        let slot = em.f.v(format!("add i64 {r64}, {}", s * split.rows));
        let mb = em.f.v(format!("mul i64 {slot}, 8"));
        let mb = em.f.v(format!("add i64 {mb}, {}", split.ml));
        let mp = scratch(&mut em, &mb);
        let m = load(&mut em, &mp);
        let lp4 = em.f.v(format!("getelementptr inbounds i8, ptr addrspace(1) {mp}, i64 4"));
        let l = load(&mut em, &lp4);
        let e = em.f.v(format!("mul i64 {slot}, {width}"));
        let e = em.f.v(format!("add i64 {e}, {c64}"));
        let ob = em.f.v(format!("mul i64 {e}, 4"));
        let ob = em.f.v(format!("add i64 {ob}, {}", split.o));
        let op = scratch(&mut em, &ob);
        let o = load(&mut em, &op);
        parts.push((m, l, o));
    }
    let mut big = parts[0].0.clone();
    for (m, _, _) in &parts[1..] {
        big = math::reduce_step(&mut em.f, ReduceOp::Max, DType::F32, &big, m);
    }
    let ninf = math::fc(f32::NEG_INFINITY);
    let empty = em.f.v(format!("fcmp oeq float {big}, {ninf}"));
    let safe = em.f.v(format!("select i1 {empty}, float {}, float {big}", math::fc(0.0)));
    let log2e = math::fc(std::f32::consts::LOG2_E);
    let shift = em.f.v(format!("fmul float {safe}, {log2e}"));
    let shift = em.f.v(format!("fneg float {shift}"));
    let (mut sum, mut out) = (math::fc(0.0), math::fc(0.0));
    for (m, l, o) in &parts {
        let x = em.f.call("float", "llvm.fma.f32", &[("float", m), ("float", &log2e), ("float", &shift)]);
        let w = em.f.call("float", "llvm.nvvm.ex2.approx.f", &[("float", &x)]);
        sum = em.f.call("float", "llvm.fma.f32", &[("float", &w), ("float", l), ("float", &sum)]);
        out = em.f.call("float", "llvm.fma.f32", &[("float", &w), ("float", o), ("float", &out)]);
    }
    let sum = em.f.v(format!("select i1 {empty}, float {}, float {sum}", math::fc(f32::NAN)));
    let value = em.f.v(format!("fdiv float {out}, {sum}"));
    let node = a.normalized_output();
    let dtype = em.dtype(node);
    let value = math::round(&mut em.f, cx.caps, dtype, &value)?;
    em.env.insert(node, value);
    let stored = super::stored_value(a, cx.g)?;
    let out0 = Out { node: stored, dest: Src::Output(0) };
    let v = em.eval_out(&out0, &Ix::flat(lp.i.clone()))?;
    let out_dtype = em.dtype(out0.node);
    // Through a layout tail the element lands at its permuted place.
    let dest = match &a.layout {
        Some(layout) => {
            let dims = em.dims(node).to_vec();
            let multi = em.delinearize(&lp.i, &dims);
            em.linearize(&layout.permuted(&multi), &layout.permuted(&dims))
        }
        None => lp.i.clone(),
    };
    em.store(out0.dest, out_dtype, &dest, &v)?;
    em.env.remove(&node);
    if !a.statistics.is_empty() {
        let first = em.f.v(format!("icmp eq {ix} {c}, 0"));
        let inner = em.save();
        let cont = em.f.if_begin(&first);
        em.env.insert(a.row_max, big.clone());
        em.env.insert(a.row_sum, sum.clone());
        for (k, &stat) in a.statistics.iter().enumerate() {
            let o = Out { node: stat, dest: Src::Output(k + 1) };
            let v = em.eval_out(&o, &Ix::flat(r.clone()))?;
            let stat_dtype = em.dtype(stat);
            em.store(o.dest, stat_dtype, &r, &v)?;
        }
        em.env.remove(&a.row_max);
        em.env.remove(&a.row_sum);
        em.f.if_end(&cont);
        em.restore(inner);
    }
    em.f.loop_end(&lp, &stride, &[]);
    em.restore(saved);
    module.add_kernel(name, cx.params, em.f, THREADS);
    Ok(count)
}
