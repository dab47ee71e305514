//! The rows stage: reductions over the trailing axes of rows, one warp per row (short rows) or
//! one block per row, then the row's part of every output, in one kernel entry.
//!
//! When the row fits (at most 32 elements per thread, up to 1024 threads) and some output is
//! written per element of the row, the row is held in registers ([`resident`]): each lane loads
//! its vectors once, every reduction is computed from registers in dependency order exactly as
//! the interpreter defines it (two passes over registers, not memory), and the outputs reuse the
//! same registers; memory is read once and written once.
//!
//! Otherwise each reduction is a streaming pass over the row: every lane walks its strided, vectorized chunks,
//! accumulating in registers, then lanes combine with butterfly warp shuffles and, across the
//! warps of a block, through shared memory (in a fixed order, so results are deterministic).
//! Two patterns share one pass:
//! - softmax's `max(x)` and `sum(exp(x - max(x)))`: the online softmax (running maximum and a
//!   sum rescaled when the maximum grows);
//! - layernorm's `mean(x)` and `mean((x - mean(x))^2)`: Welford/Chan (count, mean, M2), with the
//!   interpreter's rounding of the mean added back exactly (`var = M2/n + (mean - rounded)^2`).

use tcc_ir::{BinaryOp, DType, Graph, NodeId, Op, ReduceOp, UnaryOp};

use super::LaunchConfig;
use super::arch::{CapsExt, Feature};
use super::error::PtxError;
use super::expr::{Em, Ix};
use super::math::{self, fc};
use super::module::ModuleText;
use super::plan::{Out, numel};
use super::stages::{StageCx, launch, vector_width};

/// One pass over each row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// One reduction `r = op(x)`.
    One { r: NodeId, op: ReduceOp, x: NodeId },
    /// `max = max(x)` and `sum = sum(exp(x - max))`.
    Softmax { max: NodeId, sum: NodeId, x: NodeId },
    /// `mean = mean(x)` and `var = mean((x - mean) * (x - mean))`.
    Welford { mean: NodeId, var: NodeId, x: NodeId },
}

/// Follows broadcasts and reshapes back to the value they rearrange.
fn strip(g: &Graph, mut n: NodeId) -> NodeId {
    while let Op::Broadcast(a) | Op::Reshape(a) = g.nodes[n.index()].op {
        n = a;
    }
    n
}

fn reduce_of(g: &Graph, n: NodeId) -> Option<(ReduceOp, NodeId, &[usize])> {
    match &g.nodes[n.index()].op {
        Op::Reduce { op, input, axes, .. } => Some((*op, *input, axes)),
        _ => None,
    }
}

/// `x - r` (with `r` broadcast or reshaped) where `r` is `first`: returns `x`.
fn minus_first(g: &Graph, d: NodeId, first: NodeId) -> Option<NodeId> {
    match g.nodes[d.index()].op {
        Op::Binary(BinaryOp::Sub, x, b) if strip(g, b) == first => Some(x),
        _ => None,
    }
}

/// Whether `second` completes a two-reduction pattern started by `first`.
fn pair(g: &Graph, first: NodeId, second: NodeId) -> Option<Pass> {
    let (op1, x, axes1) = reduce_of(g, first)?;
    let (op2, in2, axes2) = reduce_of(g, second)?;
    if axes1 != axes2 || !g.nodes[x.index()].ty.dtype.is_float() {
        return None;
    }
    match (op1, op2, &g.nodes[in2.index()].op) {
        (ReduceOp::Max, ReduceOp::Sum, Op::Unary(UnaryOp::Exp, d)) if minus_first(g, *d, first) == Some(x) => {
            Some(Pass::Softmax { max: first, sum: second, x })
        }
        (ReduceOp::Mean, ReduceOp::Mean, Op::Binary(BinaryOp::Mul, d1, d2))
            if d1 == d2 && minus_first(g, *d1, first) == Some(x) =>
        {
            Some(Pass::Welford { mean: first, var: second, x })
        }
        _ => None,
    }
}

/// The passes computing `reduces` (in dependency order), pairing the patterns above.
fn passes(g: &Graph, reduces: &[NodeId]) -> Result<Vec<Pass>, PtxError> {
    let mut used = vec![false; reduces.len()];
    let mut out = Vec::new();
    for i in 0..reduces.len() {
        if used[i] {
            continue;
        }
        let found = (i + 1..reduces.len())
            .find_map(|j| (!used[j]).then(|| pair(g, reduces[i], reduces[j]).map(|p| (j, p))).flatten());
        match found {
            Some((j, p)) => {
                used[j] = true;
                out.push(p);
            }
            None => {
                let r = reduces[i];
                let (op, x, _) = reduce_of(g, r).ok_or_else(|| PtxError::InvalidGraph {
                    kernel: g.name.clone(),
                    reason: format!("{r} planned as a reduction (a tcc bug)"),
                })?;
                out.push(Pass::One { r, op, x });
            }
        }
    }
    Ok(out)
}

/// What every pass needs: the row, the lane within it and how lanes are grouped.
struct RowCx<'s> {
    row: String,
    lane: String,
    warp: String,
    per_row: u32,
    warps: u32,
    smem: &'s str,
    /// Floats in the shared-memory array `smem`.
    slots: u32,
    prefix: usize,
}

/// Accumulates one chunk: `(em, lane values, accumulators) -> next accumulators`.
type ChunkBody<'b> = &'b mut dyn FnMut(&mut Em, &[String], &[String]) -> Result<Vec<String>, PtxError>;

/// Loops over the chunks of one row of `x` (shape rows x `len`): calls `body` with the values
/// of a chunk's lanes and the loop-carried accumulators; returns the final accumulators.
fn row_loop(
    em: &mut Em,
    rc: &RowCx,
    x: NodeId,
    init: &[(String, String)],
    body: ChunkBody<'_>,
) -> Result<Vec<String>, PtxError> {
    let ix = em.ix;
    let len = numel(&em.dims(x)[rc.prefix..]);
    let w = vector_width(em.dtype(x).size_bytes(), len);
    let chunks = len / u64::from(w);
    let saved = em.save();
    let lp = em.f.loop_begin(ix, &rc.lane, &chunks.to_string(), init);
    let row_base = em.mad(&rc.row, len, "0");
    let off = em.mad(&lp.i, u64::from(w), "0");
    let base = em.f.v(format!("add nuw {ix} {row_base}, {off}"));
    let mut xs = Vec::new();
    for l in 0..w {
        let flat = if l == 0 { base.clone() } else { em.f.v(format!("add nuw {ix} {base}, {l}")) };
        xs.push(em.eval(x, &Ix { flat, multi: None, vec: Some((base.clone(), l, w)) })?);
    }
    let next = body(em, &xs, &lp.accs)?;
    em.f.loop_end(&lp, &rc.per_row.to_string(), &next);
    em.restore(saved);
    Ok(lp.accs)
}

type Merge<'a> = &'a dyn Fn(&mut Em, &[String], &[String]) -> Vec<String>;

/// Combines per-lane accumulators (`tys` their register types) across the lanes of a row.
fn combine(em: &mut Em, rc: &RowCx, tys: &[&str], vals: Vec<String>, merge: Merge) -> Result<Vec<String>, PtxError> {
    combine_in(em, rc, tys, vals, merge, 0, true)
}

/// [`combine`] through the shared-memory slots from `region` on; `trailing` adds the barrier
/// that lets the next combine reuse those slots (not needed when the next one uses others).
fn combine_in(
    em: &mut Em,
    rc: &RowCx,
    tys: &[&str],
    vals: Vec<String>,
    merge: Merge,
    region: u32,
    trailing: bool,
) -> Result<Vec<String>, PtxError> {
    em.caps.require(Feature::WarpShuffle, "row reductions")?;
    let mut vals = vals;
    for off in [16, 8, 4, 2, 1] {
        let others: Vec<String> = vals
            .iter()
            .zip(tys)
            .map(|(v, ty)| {
                let suffix = if *ty == "i32" { "i32" } else { "f32" };
                em.f.call(
                    ty,
                    &format!("llvm.nvvm.shfl.sync.bfly.{suffix}"),
                    &[("i32", "-1"), (ty, v), ("i32", &off.to_string()), ("i32", "31")],
                )
            })
            .collect();
        vals = merge(em, &vals, &others);
    }
    if rc.per_row <= 32 {
        return Ok(vals);
    }
    // Across warps: slot [k * warps + warp] holds component k of a warp's result.
    let warps = rc.warps;
    let slots = rc.slots;
    let slot = |em: &mut Em, k: usize, w: &str| {
        let i = em.f.v(format!("add i32 {w}, {}", region + k as u32 * warps));
        em.f.v(format!("getelementptr inbounds [{slots} x float], ptr addrspace(3) @{}, i32 0, i32 {i}", rc.smem))
    };
    for (k, (v, ty)) in vals.iter().zip(tys).enumerate() {
        let p = slot(em, k, &rc.warp);
        em.f.op(format!("store {ty} {v}, ptr addrspace(3) {p}, align 4"));
    }
    em.f.call_void("llvm.nvvm.barrier0", &[]);
    let mut acc: Option<Vec<String>> = None;
    for w in 0..warps {
        let mut part = Vec::new();
        for (k, ty) in tys.iter().enumerate() {
            let p = slot(em, k, &w.to_string());
            part.push(em.f.v(format!("load {ty}, ptr addrspace(3) {p}, align 4")));
        }
        acc = Some(match acc {
            None => part,
            Some(a) => merge(em, &a, &part),
        });
    }
    if trailing {
        em.f.call_void("llvm.nvvm.barrier0", &[]);
    }
    acc.ok_or_else(|| PtxError::InvalidGraph { kernel: em.g.name.clone(), reason: "a block of no warps".into() })
}

fn sel(em: &mut Em, c: &str, a: &str, b: &str) -> String {
    em.f.v(format!("select i1 {c}, float {a}, float {b}"))
}

/// `e^d`, or `nan_value` where `d` is NaN (`-inf - -inf`, `inf - inf`).
fn exp_or(em: &mut Em, d: &str, nan_value: &str) -> String {
    let e = math::exp(&mut em.f, d);
    let uno = em.f.v(format!("fcmp uno float {d}, {d}"));
    sel(em, &uno, nan_value, &e)
}

fn max_nan(em: &mut Em, a: &str, b: &str) -> String {
    math::reduce_step(&mut em.f, ReduceOp::Max, DType::F32, a, b)
}

/// Merges online-softmax states `(m, s)`.
fn softmax_merge(em: &mut Em, a: &[String], b: &[String]) -> Vec<String> {
    let m = max_nan(em, &a[0], &b[0]);
    let da = em.f.v(format!("fsub float {}, {m}", a[0]));
    let db = em.f.v(format!("fsub float {}, {m}", b[0]));
    let fa = exp_or(em, &da, &fc(1.0));
    let fb = exp_or(em, &db, &fc(1.0));
    let sa = em.f.v(format!("fmul float {}, {fa}", a[1]));
    let s = em.f.call("float", "llvm.fma.f32", &[("float", &b[1]), ("float", &fb), ("float", &sa)]);
    vec![m, s]
}

/// Merges Welford states `(n, mean, m2)` (Chan et al.).
fn welford_merge(em: &mut Em, a: &[String], b: &[String]) -> Vec<String> {
    let n = em.f.v(format!("fadd float {}, {}", a[0], b[0]));
    let delta = em.f.v(format!("fsub float {}, {}", b[1], a[1]));
    let frac0 = em.f.v(format!("fdiv float {}, {n}", b[0]));
    let empty = em.f.v(format!("fcmp oeq float {n}, {}", fc(0.0)));
    let frac = sel(em, &empty, &fc(0.0), &frac0);
    let mean = em.f.call("float", "llvm.fma.f32", &[("float", &delta), ("float", &frac), ("float", &a[1])]);
    let na_frac = em.f.v(format!("fmul float {}, {frac}", a[0]));
    let d2 = em.f.v(format!("fmul float {delta}, {delta}"));
    let corr = em.f.v(format!("fmul float {d2}, {na_frac}"));
    let m2ab = em.f.v(format!("fadd float {}, {}", a[2], b[2]));
    let m2 = em.f.v(format!("fadd float {m2ab}, {corr}"));
    vec![n, mean, m2]
}

fn single(em: &mut Em, rc: &RowCx, r: NodeId, op: ReduceOp, x: NodeId) -> Result<(), PtxError> {
    let dtype = em.dtype(x);
    let ct = math::ctype(dtype);
    let init = [(ct.to_string(), math::reduce_init(op, dtype))];
    let accs = row_loop(em, rc, x, &init, &mut |em, xs, accs| {
        let mut acc = accs[0].clone();
        for v in xs {
            acc = math::reduce_step(&mut em.f, op, dtype, &acc, v);
        }
        Ok(vec![acc])
    })?;
    let merge =
        move |em: &mut Em, a: &[String], b: &[String]| vec![math::reduce_step(&mut em.f, op, dtype, &a[0], &b[0])];
    let total = combine(em, rc, &[ct], accs, &merge)?;
    let len = numel(&em.dims(x)[rc.prefix..]);
    let out_dtype = em.dtype(r);
    let v = math::reduce_finish(&mut em.f, em.caps, op, out_dtype, &total[0], len)?;
    em.env.insert(r, v);
    Ok(())
}

fn softmax(em: &mut Em, rc: &RowCx, max: NodeId, sum: NodeId, x: NodeId) -> Result<(), PtxError> {
    let init = [("float".to_string(), fc(f32::NEG_INFINITY)), ("float".to_string(), fc(0.0))];
    let accs = row_loop(em, rc, x, &init, &mut |em, xs, accs| {
        let mut mc = accs[0].clone();
        for v in xs {
            mc = max_nan(em, &mc, v);
        }
        let d_old = em.f.v(format!("fsub float {}, {mc}", accs[0]));
        let scale = exp_or(em, &d_old, &fc(1.0));
        let mut s = em.f.v(format!("fmul float {}, {scale}", accs[1]));
        for v in xs {
            let d = em.f.v(format!("fsub float {v}, {mc}"));
            let t = exp_or(em, &d, &fc(0.0));
            s = em.f.v(format!("fadd float {s}, {t}"));
        }
        Ok(vec![mc, s])
    })?;
    let total = combine(em, rc, &["float", "float"], accs, &softmax_merge)?;
    // A row whose maximum is infinite or NaN sums to NaN in the interpreter (inf - inf).
    let am = em.f.call("float", "llvm.fabs.f32", &[("float", &total[0])]);
    let finite = em.f.v(format!("fcmp olt float {am}, {}", fc(f32::INFINITY)));
    let s = sel(em, &finite, &total[1], &fc(f32::NAN));
    let (dm, ds) = (em.dtype(max), em.dtype(sum));
    let mv = math::round(&mut em.f, em.caps, dm, &total[0])?;
    let sv = math::round(&mut em.f, em.caps, ds, &s)?;
    em.env.insert(max, mv);
    em.env.insert(sum, sv);
    Ok(())
}

fn welford(em: &mut Em, rc: &RowCx, mean: NodeId, var: NodeId, x: NodeId) -> Result<(), PtxError> {
    let z = ("float".to_string(), fc(0.0));
    let init = [z.clone(), z.clone(), z];
    let accs = row_loop(em, rc, x, &init, &mut |em, xs, accs| {
        let w = fc(xs.len() as f32);
        let mut sum = xs[0].clone();
        for v in &xs[1..] {
            sum = em.f.v(format!("fadd float {sum}, {v}"));
        }
        let mb = em.f.v(format!("fdiv float {sum}, {w}"));
        let mut m2b = fc(0.0);
        for v in xs {
            let d = em.f.v(format!("fsub float {v}, {mb}"));
            m2b = em.f.call("float", "llvm.fma.f32", &[("float", &d), ("float", &d), ("float", &m2b)]);
        }
        Ok(welford_merge(em, accs, &[w, mb, m2b]))
    })?;
    let total = combine(em, rc, &["float", "float", "float"], accs, &welford_merge)?;
    let len = numel(&em.dims(x)[rc.prefix..]);
    let (dm, dv) = (em.dtype(mean), em.dtype(var));
    let mv = math::round(&mut em.f, em.caps, dm, &total[1])?;
    // The interpreter subtracts the rounded mean: sum (x - m')^2 = M2 + n (m - m')^2.
    let dmean = em.f.v(format!("fsub float {}, {mv}", total[1]));
    let var0 = em.f.v(format!("fdiv float {}, {}", total[2], fc(len as f32)));
    let v = em.f.call("float", "llvm.fma.f32", &[("float", &dmean), ("float", &dmean), ("float", &var0)]);
    let vv = math::round(&mut em.f, em.caps, dv, &v)?;
    em.env.insert(mean, mv);
    em.env.insert(var, vv);
    Ok(())
}

/// Stores the part of output `o` that belongs to the row (a loop over its vector chunks).
fn store_row(em: &mut Em, rc: &RowCx, rows: u64, o: &Out) -> Result<(), PtxError> {
    let ix = em.ix;
    let dtype = em.dtype(o.node);
    let per = numel(em.dims(o.node)).checked_div(rows).unwrap_or(0);
    let w = vector_width(dtype.size_bytes(), per);
    let chunks = per / u64::from(w);
    let s = em.save();
    let lp = em.f.loop_begin(ix, &rc.lane, &chunks.to_string(), &[]);
    let row_base = em.mad(&rc.row, per, "0");
    let off = em.mad(&lp.i, u64::from(w), "0");
    let base = em.f.v(format!("add nuw {ix} {row_base}, {off}"));
    let mut vals = Vec::new();
    for l in 0..w {
        let flat = if l == 0 { base.clone() } else { em.f.v(format!("add nuw {ix} {base}, {l}")) };
        let at = Ix { flat, multi: None, vec: Some((base.clone(), l, w)) };
        vals.push(em.eval_out(o, &at)?);
    }
    em.store_vec(o.dest, dtype, &base, &vals)?;
    em.f.loop_end(&lp, &rc.per_row.to_string(), &[]);
    em.restore(s);
    Ok(())
}

/// Emits the rows stage (see the module docs).
pub(crate) fn rows(
    cx: &StageCx,
    module: &mut ModuleText,
    name: &str,
    prefix: usize,
    row_dims: &[u64],
    reduces: &[NodeId],
    outs: &[Out],
) -> Result<LaunchConfig, PtxError> {
    let mut em = Em::new(cx.g, cx.plan, cx.caps);
    let ix = em.ix;
    let rows = numel(row_dims);
    if let Some(geo) = resident_geometry(&em, prefix, rows, reduces, outs) {
        return resident(cx, module, name, prefix, row_dims, reduces, outs, geo);
    }
    let plan_passes = passes(cx.g, reduces)?;
    let longest = plan_passes
        .iter()
        .map(|p| match *p {
            Pass::One { x, .. } | Pass::Softmax { x, .. } | Pass::Welford { x, .. } => numel(&em.dims(x)[prefix..]),
        })
        .max()
        .unwrap_or(1);
    // Short rows: a warp per row, 4 warps per block; long rows: a block of 256 per row.
    let (threads, per_row): (u32, u32) = if longest <= 1024 { (128, 32) } else { (256, 256) };
    let rows_per_block = threads / per_row;
    let warps = threads / 32;
    let smem = format!("{name}_partials");
    if per_row > 32 {
        module.add_shared(&smem, "float", u64::from(3 * warps));
    }

    let tid = em.f.call("i32", "llvm.nvvm.read.ptx.sreg.tid.x", &[]);
    let ctaid = em.sreg("ctaid.x");
    let nctaid = em.sreg("nctaid.x");
    let row_in_block = em.f.v(format!("udiv i32 {tid}, {per_row}"));
    let row_in_block = em.widen(&row_in_block);
    let lane32 = em.f.v(format!("urem i32 {tid}, {per_row}"));
    let lane = em.widen(&lane32);
    let warp = em.f.v(format!("udiv i32 {tid}, 32"));
    let first = em.f.v(format!("mul nuw {ix} {ctaid}, {rows_per_block}"));
    let step = em.f.v(format!("mul nuw {ix} {nctaid}, {rows_per_block}"));
    let saved = em.save();
    let rl = em.f.loop_begin(ix, &first, &rows.to_string(), &[]);
    let row = em.f.v(format!("add nuw {ix} {}, {row_in_block}", rl.i));
    let valid = em.f.v(format!("icmp ult {ix} {row}, {rows}"));
    let cont = em.f.if_begin(&valid);
    let row_saved = em.save();
    let rc =
        RowCx { row: row.clone(), lane: lane.clone(), warp, per_row, warps, smem: &smem, slots: 3 * warps, prefix };

    for p in &plan_passes {
        match *p {
            Pass::One { r, op, x } => single(&mut em, &rc, r, op, x)?,
            Pass::Softmax { max, sum, x } => softmax(&mut em, &rc, max, sum, x)?,
            Pass::Welford { mean, var, x } => welford(&mut em, &rc, mean, var, x)?,
        }
    }

    for o in outs {
        store_row(&mut em, &rc, rows, o)?;
    }
    em.env.clear();
    em.restore(row_saved);
    em.f.if_end(&cont);
    em.f.loop_end(&rl, &step, &[]);
    em.restore(saved);
    module.add_kernel(name, cx.params, em.f, threads);
    let shared = if per_row > 32 { 3 * warps * 4 } else { 0 };
    Ok(launch(cx.caps, threads, rows.div_ceil(u64::from(rows_per_block)), shared))
}

/// Elements per thread, at most, of a row held in registers. On the H100, 32 beat 16 and 8
/// (softmax f16 8192: 0.095, 0.101, 0.182 ms; layernorm f16 4096: 0.096 ms for 32 and 16).
const RESIDENT_MAX_ELEMS: u64 = 32;
/// Threads per block when a warp holds a row.
const RESIDENT_WARP_BLOCK: u32 = 128;

/// How a row is held in registers: each of `per_row` lanes holds `cpl` vectors of `w` elements,
/// vector `k` of lane `t` being the row's vector `k * per_row + t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Resident {
    len: u64,
    w: u32,
    chunks: u64,
    per_row: u32,
    cpl: u64,
}

impl Resident {
    /// The geometry for rows of `len` elements (narrowest element `size` bytes), or `None` when
    /// a row does not fit in the registers of a block.
    fn choose(len: u64, size: usize) -> Option<Resident> {
        let w = vector_width(size, len);
        let chunks = len / u64::from(w);
        let elems = |p: u32| chunks.div_ceil(u64::from(p)) * u64::from(w);
        let per_row = [32, 64, 128, 256, 512, 1024].into_iter().find(|&p| elems(p) <= RESIDENT_MAX_ELEMS)?;
        Some(Resident { len, w, chunks, per_row, cpl: chunks.div_ceil(u64::from(per_row)) })
    }
}

/// Where one element of the row held by a lane is.
#[derive(Debug, Clone)]
struct Slot {
    /// Flat position in a `rows x len` value.
    flat: String,
    /// Position within the row.
    j: String,
    /// The vector it belongs to (flat position of its first element) and its lane in it.
    base: String,
    lane: u32,
    /// `Some(valid)` when the vector may lie past the row's end (then it repeats the last one).
    valid: Option<String>,
}

impl Slot {
    /// The index of this element in node `n` (of dims `dims`, rows first).
    fn ix(&self, dims: &[u64], prefix: usize, row_multi: &[String], w: u32) -> Ix {
        let multi = (dims.len() == prefix + 1).then(|| {
            let mut m = row_multi.to_vec();
            m.push(self.j.clone());
            m
        });
        Ix { flat: self.flat.clone(), multi, vec: Some((self.base.clone(), self.lane, w)) }
    }
}

/// Whether the rows stage can hold its rows in registers: every reduction reads rows of one
/// length, some output is written per element of such a row (else one streaming pass reads
/// the row once anyway), and a row fits in the registers of a block.
fn resident_geometry(em: &Em, prefix: usize, rows: u64, reduces: &[NodeId], outs: &[Out]) -> Option<Resident> {
    let mut len = None;
    let mut size = 16;
    for &r in reduces {
        let (_, x, _) = reduce_of(em.g, r)?;
        let l = numel(&em.dims(x)[prefix..]);
        if *len.get_or_insert(l) != l {
            return None;
        }
        size = size.min(em.dtype(x).size_bytes());
    }
    let len = len?;
    let mut any = false;
    for o in outs {
        if numel(em.dims(o.node)).checked_div(rows) == Some(len) {
            any = true;
            size = size.min(em.dtype(o.node).size_bytes());
        }
    }
    if !any || len == 0 {
        return None;
    }
    Resident::choose(len, size)
}

/// Reduces a thread's values pairwise (a balanced tree: short dependency chains).
fn tree(em: &mut Em, op: ReduceOp, dtype: DType, mut vals: Vec<String>) -> String {
    while vals.len() > 1 {
        let mut next = Vec::with_capacity(vals.len().div_ceil(2));
        for pair in vals.chunks(2) {
            next.push(match pair {
                [a, b] => math::reduce_step(&mut em.f, op, dtype, a, b),
                [a] => a.clone(),
                _ => continue,
            });
        }
        vals = next;
    }
    vals.pop().unwrap_or_else(|| math::reduce_init(op, dtype))
}

/// The rows stage with each row held in registers: the row's vectors are loaded once, every
/// reduction is computed from registers in dependency order (each exactly as the interpreter
/// does, over values it already computed: `max` then `sum(exp(x - max))`, `mean` then
/// `mean((x - mean)^2)`), and outputs of the row's length are computed from the same registers.
// Reason: the same inputs as `rows` (stage context, module, name, row layout, reductions, outputs) plus the geometry.
#[allow(clippy::too_many_arguments)]
fn resident(
    cx: &StageCx,
    module: &mut ModuleText,
    name: &str,
    prefix: usize,
    row_dims: &[u64],
    reduces: &[NodeId],
    outs: &[Out],
    geo: Resident,
) -> Result<LaunchConfig, PtxError> {
    let mut em = Em::new(cx.g, cx.plan, cx.caps);
    let ix = em.ix;
    let rows = numel(row_dims);
    let per_row = geo.per_row;
    // A block holds several rows only when a warp holds a row (a block-wide combine needs
    // every thread of the block on the same row).
    let threads = if per_row <= 32 { RESIDENT_WARP_BLOCK } else { per_row };
    let rows_per_block = threads / per_row;
    let warps = threads / 32;
    let nred = reduces.len() as u32;
    let smem = format!("{name}_partials");
    let slots = nred.max(1) * warps;
    if per_row > 32 {
        module.add_shared(&smem, "float", u64::from(slots));
    }

    let tid = em.f.call("i32", "llvm.nvvm.read.ptx.sreg.tid.x", &[]);
    let ctaid = em.sreg("ctaid.x");
    let nctaid = em.sreg("nctaid.x");
    let row_in_block = em.f.v(format!("udiv i32 {tid}, {per_row}"));
    let row_in_block = em.widen(&row_in_block);
    let lane32 = em.f.v(format!("urem i32 {tid}, {per_row}"));
    let lane = em.widen(&lane32);
    let warp = em.f.v(format!("udiv i32 {tid}, 32"));
    let first = em.f.v(format!("mul nuw {ix} {ctaid}, {rows_per_block}"));
    let step = em.f.v(format!("mul nuw {ix} {nctaid}, {rows_per_block}"));
    // The lane's vectors within a row: positions and validity do not depend on the row.
    let w = u64::from(geo.w);
    let mut starts = Vec::new();
    for k in 0..geo.cpl {
        let c = em.mad(&lane, 1, &(k * u64::from(per_row)).to_string());
        let (c, valid) = if (k + 1) * u64::from(per_row) > geo.chunks {
            let valid = em.f.v(format!("icmp ult {ix} {c}, {}", geo.chunks));
            let last = geo.chunks - 1;
            (em.f.v(format!("select i1 {valid}, {ix} {c}, {ix} {last}")), Some(valid))
        } else {
            (c, None)
        };
        starts.push((em.mad(&c, w, "0"), valid));
    }
    let saved = em.save();
    let rl = em.f.loop_begin(ix, &first, &rows.to_string(), &[]);
    let row = em.f.v(format!("add nuw {ix} {}, {row_in_block}", rl.i));
    let valid_row = em.f.v(format!("icmp ult {ix} {row}, {rows}"));
    let cont = em.f.if_begin(&valid_row);
    let row_saved = em.save();
    let row_multi = em.delinearize(&row, row_dims);
    let row_base = em.mad(&row, geo.len, "0");
    let mut slots_of_row = Vec::new();
    for (j0, valid) in &starts {
        let base = em.f.v(format!("add nuw {ix} {row_base}, {j0}"));
        for l in 0..geo.w {
            let (flat, j) = if l == 0 {
                (base.clone(), j0.clone())
            } else {
                (em.f.v(format!("add nuw {ix} {base}, {l}")), em.f.v(format!("add nuw {ix} {j0}, {l}")))
            };
            slots_of_row.push(Slot { flat, j, base: base.clone(), lane: l, valid: valid.clone() });
        }
    }
    let rc = RowCx { row: row.clone(), lane: lane.clone(), warp, per_row, warps, smem: &smem, slots, prefix };

    for (i, &r) in reduces.iter().enumerate() {
        let (op, x, _) = reduce_of(cx.g, r).ok_or_else(|| PtxError::InvalidGraph {
            kernel: cx.g.name.clone(),
            reason: format!("{r} planned as a reduction (a tcc bug)"),
        })?;
        let dtype = em.dtype(x);
        let ct = math::ctype(dtype);
        let dims = em.dims(x);
        let mut vals = Vec::with_capacity(slots_of_row.len());
        for s in &slots_of_row {
            let v = em.eval(x, &s.ix(dims, prefix, &row_multi, geo.w))?;
            vals.push(match &s.valid {
                Some(c) => em.f.v(format!("select i1 {c}, {ct} {v}, {ct} {}", math::reduce_init(op, dtype))),
                None => v,
            });
        }
        let acc = tree(&mut em, op, dtype, vals);
        let merge =
            move |em: &mut Em, a: &[String], b: &[String]| vec![math::reduce_step(&mut em.f, op, dtype, &a[0], &b[0])];
        let region = i as u32 * warps;
        let total = combine_in(&mut em, &rc, &[ct], vec![acc], &merge, region, nred == 1)?;
        let out_dtype = em.dtype(r);
        let v = math::reduce_finish(&mut em.f, cx.caps, op, out_dtype, &total[0], geo.len)?;
        em.env.insert(r, v);
    }

    for o in outs {
        if numel(em.dims(o.node)).checked_div(rows) != Some(geo.len) {
            store_row(&mut em, &rc, rows, o)?;
            continue;
        }
        let dtype = em.dtype(o.node);
        let dims = em.dims(o.node);
        for chunk in slots_of_row.chunks(geo.w as usize) {
            let mut vals = Vec::with_capacity(chunk.len());
            for s in chunk {
                vals.push(em.eval_out(o, &s.ix(dims, prefix, &row_multi, geo.w))?);
            }
            let Some(first) = chunk.first() else { continue };
            match &first.valid {
                Some(c) => {
                    let done = em.f.if_begin(c);
                    em.store_vec(o.dest, dtype, &first.base, &vals)?;
                    em.f.if_end(&done);
                }
                None => em.store_vec(o.dest, dtype, &first.base, &vals)?,
            }
        }
    }
    em.env.clear();
    em.restore(row_saved);
    em.f.if_end(&cont);
    em.f.loop_end(&rl, &step, &[]);
    em.restore(saved);
    module.add_kernel(name, cx.params, em.f, threads);
    let shared = if per_row > 32 { slots * 4 } else { 0 };
    let mut l = launch(cx.caps, threads, rows.div_ceil(u64::from(rows_per_block)), shared);
    // How many blocks fit on an SM depends on the registers ptxas gives the entry: launch a
    // block per row (up to the most blocks an SM can take) and let the hardware schedule them
    // (on the H100 4% faster than a grid of the blocks that fit by threads alone).
    l.blocks_per_sm = cx.caps.max_blocks_per_sm;
    Ok(l)
}
