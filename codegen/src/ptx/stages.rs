//! Kernel entries for the elementwise stage (vectorized grid-stride loop), the generic reduction
//! (a thread per output element) and the tiled SIMT matmul with a fused prologue and epilogue; the
//! rows stage is in `rows.rs`.
//!
//! Every entry is a grid-stride loop over its work items, so any grid size is correct; the launch
//! configuration only says how many blocks are useful.

use tcc_ir::{NodeId, Op, Schedule};

use super::LaunchConfig;
use super::arch::GpuCaps;
use super::error::PtxError;
use super::expr::{Em, Ix};
use super::math;
use super::module::ModuleText;
use super::plan::{Out, Plan, Src, numel};

/// Threads per block of elementwise and generic-reduction stages.
const ELEMENTWISE_THREADS: u32 = 256;

/// What every stage emitter needs.
pub(crate) struct StageCx<'a> {
    /// The kernel graph.
    pub(crate) g: &'a tcc_ir::Graph,
    /// Its plan.
    pub(crate) plan: &'a Plan,
    /// The target.
    pub(crate) caps: &'a GpuCaps,
    /// The kernel's schedule.
    pub(crate) schedule: &'a Schedule,
    /// The parameter list of every entry.
    pub(crate) params: &'a [String],
}

fn blocks_per_sm(caps: &GpuCaps, threads: u32) -> u32 {
    (caps.max_threads_per_sm / threads.max(1)).clamp(1, caps.max_blocks_per_sm)
}

/// The launch of an entry of `threads` per block with `work_blocks` blocks of useful work.
pub(crate) fn launch(caps: &GpuCaps, threads: u32, work_blocks: u64, shared: u32) -> LaunchConfig {
    LaunchConfig {
        block_threads: threads,
        max_blocks: work_blocks.max(1),
        blocks_per_sm: blocks_per_sm(caps, threads),
        shared_bytes: shared,
        dynamic_shared_bytes: 0,
    }
}

/// The widest vector (at most 16 bytes, at most 8 lanes) for elements of `size` bytes whose count
/// `len` it divides.
pub(crate) fn vector_width(size: usize, len: u64) -> u32 {
    let mut w = widest_vector(size);
    while w > 1 && !len.is_multiple_of(u64::from(w)) {
        w /= 2;
    }
    w
}

/// `ctaid.x * ntid.x + tid.x` and `nctaid.x * ntid.x`: a grid-stride loop's first index and step.
pub(super) fn grid_ids(em: &mut Em) -> (String, String) {
    let tid = em.sreg("tid.x");
    let ctaid = em.sreg("ctaid.x");
    let ntid = em.sreg("ntid.x");
    let nctaid = em.sreg("nctaid.x");
    let ix = em.ix;
    let base = em.f.v(format!("mul nuw {ix} {ctaid}, {ntid}"));
    let gid = em.f.v(format!("add nuw {ix} {base}, {tid}"));
    let stride = em.f.v(format!("mul nuw {ix} {nctaid}, {ntid}"));
    (gid, stride)
}

/// The widest vector (at most 16 bytes, at most 8 lanes) for elements of `size` bytes.
fn widest_vector(size: usize) -> u32 {
    (16 / size.max(1)).clamp(1, 8) as u32
}

/// At most this many output values (outputs times lanes) are live per step of an elementwise
/// kernel: each lane's value of each output is held until the vector stores, and a kernel with
/// many outputs would spill at full width.
const MAX_LIVE_LANES: usize = 64;

/// Elementwise stage: `outs` share `shape`; each thread computes `width` consecutive elements
/// per step with vector loads and stores, then a scalar loop does the tail. The width does not
/// depend on the element count: an f16 kernel of odd length moves 16 bytes per access like an
/// even one, and only its last few elements go one by one.
pub(crate) fn elementwise(
    cx: &StageCx,
    module: &mut ModuleText,
    name: &str,
    shape: &[u64],
    outs: &[Out],
) -> Result<LaunchConfig, PtxError> {
    let mut em = Em::new(cx.g, cx.plan, cx.caps);
    let n = numel(shape);
    let min_size = outs.iter().map(|o| em.dtype(o.node).size_bytes()).min().unwrap_or(4);
    let mut w = widest_vector(min_size);
    while w > 1 && outs.len() * w as usize > MAX_LIVE_LANES {
        w /= 2;
    }
    let nvec = n / u64::from(w);
    let (gid, stride) = grid_ids(&mut em);
    let ix = em.ix;
    let saved = em.save();
    if nvec > 0 {
        let lp = em.f.loop_begin(ix, &gid, &nvec.to_string(), &[]);
        let base = em.mad(&lp.i, u64::from(w), "0");
        let mut vals: Vec<Vec<String>> = vec![Vec::new(); outs.len()];
        for lane in 0..w {
            let flat = if lane == 0 { base.clone() } else { em.f.v(format!("add nuw {ix} {base}, {lane}")) };
            let at = Ix { flat, multi: None, vec: Some((base.clone(), lane, w)) };
            for (k, o) in outs.iter().enumerate() {
                let v = em.eval_out(o, &at)?;
                vals[k].push(v);
            }
        }
        for (k, o) in outs.iter().enumerate() {
            let dt = em.dtype(o.node);
            em.store_vec(o.dest, dt, &base, &vals[k])?;
        }
        em.f.loop_end(&lp, &stride, &[]);
        em.restore(saved.clone());
    }
    if nvec * u64::from(w) < n {
        let start = em.f.v(format!("add nuw {ix} {gid}, {}", nvec * u64::from(w)));
        let lp = em.f.loop_begin(ix, &start, &n.to_string(), &[]);
        let at = Ix::flat(lp.i.clone());
        for o in outs {
            let v = em.eval_out(o, &at)?;
            let dt = em.dtype(o.node);
            em.store(o.dest, dt, &lp.i, &v)?;
        }
        em.f.loop_end(&lp, &stride, &[]);
        em.restore(saved);
    }
    module.add_kernel(name, cx.params, em.f, ELEMENTWISE_THREADS);
    let work = nvec.max(n - nvec * u64::from(w)).div_ceil(u64::from(ELEMENTWISE_THREADS));
    Ok(launch(cx.caps, ELEMENTWISE_THREADS, work, 0))
}

/// Generic reduction over any axes: one thread per output element loops over the reduced ones.
pub(crate) fn reduce(
    cx: &StageCx,
    module: &mut ModuleText,
    name: &str,
    node: NodeId,
    dest: Src,
) -> Result<LaunchConfig, PtxError> {
    let mut em = Em::new(cx.g, cx.plan, cx.caps);
    let ix = em.ix;
    let Op::Reduce { op, input, axes, keepdim } = &cx.g.nodes[node.index()].op else {
        return Err(PtxError::InvalidGraph { kernel: cx.g.name.clone(), reason: format!("{node} is not a reduction") });
    };
    let (op, input) = (*op, *input);
    let out_dims = em.dims(node).to_vec();
    let in_dims = em.dims(input).to_vec();
    let red_dims: Vec<u64> = axes.iter().filter_map(|&a| in_dims.get(a).copied()).collect();
    let count = numel(&red_dims);
    let in_dtype = em.dtype(input);
    let out_n = numel(&out_dims);
    let (gid, stride) = grid_ids(&mut em);
    let saved = em.save();
    let lp = em.f.loop_begin(ix, &gid, &out_n.to_string(), &[]);
    let om = em.delinearize(&lp.i, &out_dims);
    // Kept axes of the input, in order, take the output's indices.
    let kept: Vec<String> = if *keepdim {
        om.iter().enumerate().filter(|(a, _)| !axes.contains(a)).map(|(_, v)| v.clone()).collect()
    } else {
        om.clone()
    };
    let ct = math::ctype(in_dtype);
    let inner_saved = em.save();
    let rl = em.f.loop_begin(ix, "0", &count.to_string(), &[(ct.to_string(), math::reduce_init(op, in_dtype))]);
    let rm = em.delinearize(&rl.i, &red_dims);
    let mut im = Vec::with_capacity(in_dims.len());
    let (mut k, mut r) = (kept.iter(), rm.iter());
    for a in 0..in_dims.len() {
        let v = if axes.contains(&a) { r.next() } else { k.next() };
        im.push(v.cloned().unwrap_or_else(|| "0".into()));
    }
    let flat = em.linearize(&im, &in_dims);
    let x = em.eval(input, &Ix { flat, multi: Some(im), vec: None })?;
    let acc = math::reduce_step(&mut em.f, op, in_dtype, &rl.accs[0], &x);
    em.f.loop_end(&rl, "1", &[acc]);
    em.restore(inner_saved);
    let out_dtype = em.dtype(node);
    let v = math::reduce_finish(&mut em.f, cx.caps, op, out_dtype, &rl.accs[0], count)?;
    em.store(dest, out_dtype, &lp.i, &v)?;
    em.f.loop_end(&lp, &stride, &[]);
    em.restore(saved);
    module.add_kernel(name, cx.params, em.f, ELEMENTWISE_THREADS);
    Ok(launch(cx.caps, ELEMENTWISE_THREADS, out_n.div_ceil(u64::from(ELEMENTWISE_THREADS)), 0))
}

/// Tile sizes of the SIMT matmul.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tiles {
    bm: u64,
    bn: u64,
    bk: u64,
    tm: u64,
    tn: u64,
}

impl Tiles {
    fn threads(self) -> u64 {
        (self.bm / self.tm) * (self.bn / self.tn)
    }

    /// The schedule's tiles if this kernel can run them, else 128x64x8 with 8x4 per thread (the
    /// fastest of those measured for f32 at 4096 on an H100).
    fn from_schedule(s: &Schedule, caps: &GpuCaps) -> Tiles {
        let t = tcc_ir::SimtTiles::effective(s, caps);
        let [bm, bn, bk] = t.block.map(u64::from);
        let [tm, tn] = t.thread.map(u64::from);
        Tiles { bm, bn, bk, tm, tn }
    }
}

/// True when the tiled SIMT matmul (operands other than f16/bf16) runs schedule `s` as it is on
/// `arch` ([`tcc_ir::SimtTiles::fit`]); otherwise it runs [`tcc_ir::SimtTiles::FALLBACK`].
pub fn simt_schedule_runs(s: &Schedule, arch: super::GpuArch) -> bool {
    tcc_ir::SimtTiles::of(s).fit(&arch.caps())
}

/// Tiled SIMT matmul: each block computes `bm x bn` output tiles (grid-stride over batch and
/// tiles), staging `bk`-deep slices of both operands (computed by their fused prologues) in
/// shared memory; each thread accumulates `tm x tn` outputs in f32 registers, then evaluates the
/// fused epilogue for each and stores every output.
pub(crate) fn matmul(
    cx: &StageCx,
    module: &mut ModuleText,
    name: &str,
    node: NodeId,
    outs: &[Out],
) -> Result<LaunchConfig, PtxError> {
    let mut em = Em::new(cx.g, cx.plan, cx.caps);
    let ix = em.ix;
    let Op::MatMul(a, b) = cx.g.nodes[node.index()].op else {
        return Err(PtxError::InvalidGraph { kernel: cx.g.name.clone(), reason: format!("{node} is not a matmul") });
    };
    let t = Tiles::from_schedule(cx.schedule, cx.caps);
    let threads = t.threads();
    let od = em.dims(node).to_vec();
    let (ad, bd) = (em.dims(a).to_vec(), em.dims(b).to_vec());
    let rank = od.len();
    let (m, n) = (od[rank - 2], od[rank - 1]);
    let kdim = ad[ad.len() - 1];
    let batch_dims = od[..rank - 2].to_vec();
    let batches = numel(&batch_dims);
    let (tiles_m, tiles_n) = (m.div_ceil(t.bm), n.div_ceil(t.bn));
    let per_batch = tiles_m * tiles_n;
    let total = batches * per_batch;
    let (sa, sb) = (format!("{name}_a"), format!("{name}_b"));
    // A is staged transposed, each k row padded by 4 floats: the threads storing one row's
    // consecutive k land in distinct banks, and rows stay 16-byte aligned for vector reads.
    let a_pitch = if t.bm.is_multiple_of(4) { t.bm + 4 } else { t.bm };
    module.add_shared(&sa, "float", t.bk * a_pitch);
    module.add_shared(&sb, "float", t.bk * t.bn);

    let tid32 = em.f.call("i32", "llvm.nvvm.read.ptx.sreg.tid.x", &[]);
    let tid = em.widen(&tid32);
    let ctaid = em.sreg("ctaid.x");
    let nctaid = em.sreg("nctaid.x");
    let tx = em.f.v(format!("urem {ix} {tid}, {}", t.bn / t.tn));
    let ty = em.f.v(format!("udiv {ix} {tid}, {}", t.bn / t.tn));
    let arow = em.mad(&ty, t.tm, "0");
    let bcol = em.mad(&tx, t.tn, "0");
    let saved = em.save();
    let tl = em.f.loop_begin(ix, &ctaid, &total.to_string(), &[]);
    let bidx = em.f.v(format!("udiv {ix} {}, {per_batch}", tl.i));
    let rem = em.f.v(format!("urem {ix} {}, {per_batch}", tl.i));
    let bi = em.f.v(format!("udiv {ix} {rem}, {tiles_n}"));
    let bj = em.f.v(format!("urem {ix} {rem}, {tiles_n}"));
    let row0 = em.mad(&bi, t.bm, "0");
    let col0 = em.mad(&bj, t.bn, "0");
    let bm_multi = em.delinearize(&bidx, &batch_dims);
    let tile_saved = em.save();

    // Software pipeline: the operands of k-tile k0 + bk are loaded into registers while k-tile
    // k0 is multiplied out of shared memory (the loads of the last step read zeros past k).
    let nacc = (t.tm * t.tn) as usize;
    let (na, nb) = ((t.bm * t.bk) / threads, (t.bk * t.bn) / threads);
    let load_tile = |em: &mut Em, k0: &str| -> Result<Vec<String>, PtxError> {
        let mut vals = Vec::with_capacity((na + nb) as usize);
        for q in 0..na {
            let e = em.f.v(format!("add nuw {ix} {tid}, {}", q * threads));
            let i = em.f.v(format!("udiv {ix} {e}, {}", t.bk));
            let kk = em.f.v(format!("urem {ix} {e}, {}", t.bk));
            let gi = em.f.v(format!("add nuw {ix} {row0}, {i}"));
            let gk = em.f.v(format!("add nuw {ix} {k0}, {kk}"));
            vals.push(operand_at(em, a, &ad, &batch_dims, &bm_multi, &gi, m, &gk, kdim)?);
        }
        for q in 0..nb {
            let e = em.f.v(format!("add nuw {ix} {tid}, {}", q * threads));
            let kk = em.f.v(format!("udiv {ix} {e}, {}", t.bn));
            let j = em.f.v(format!("urem {ix} {e}, {}", t.bn));
            let gk = em.f.v(format!("add nuw {ix} {k0}, {kk}"));
            let gj = em.f.v(format!("add nuw {ix} {col0}, {j}"));
            vals.push(operand_at(em, b, &bd, &batch_dims, &bm_multi, &gk, kdim, &gj, n)?);
        }
        Ok(vals)
    };
    let first = load_tile(&mut em, "0")?;
    let mut accs: Vec<(String, String)> = (0..nacc).map(|_| ("float".to_string(), math::fc(0.0))).collect();
    accs.extend(first.iter().map(|v| ("float".to_string(), v.clone())));
    let kl = em.f.loop_begin(ix, "0", &kdim.to_string(), &accs);
    // Stage A[row0.., k0..] as sa[kk][i] and B[k0.., col0..] as sb[kk][j].
    for q in 0..na {
        let e = em.f.v(format!("add nuw {ix} {tid}, {}", q * threads));
        let i = em.f.v(format!("udiv {ix} {e}, {}", t.bk));
        let kk = em.f.v(format!("urem {ix} {e}, {}", t.bk));
        let slot = em.mad(&kk, a_pitch, &i);
        let p = em.f.v(format!("getelementptr inbounds float, ptr addrspace(3) @{sa}, {ix} {slot}"));
        em.f.op(format!("store float {}, ptr addrspace(3) {p}, align 4", kl.accs[nacc + q as usize]));
    }
    for q in 0..nb {
        let e = em.f.v(format!("add nuw {ix} {tid}, {}", q * threads));
        let kk = em.f.v(format!("udiv {ix} {e}, {}", t.bn));
        let j = em.f.v(format!("urem {ix} {e}, {}", t.bn));
        let slot = em.mad(&kk, t.bn, &j);
        let p = em.f.v(format!("getelementptr inbounds float, ptr addrspace(3) @{sb}, {ix} {slot}"));
        em.f.op(format!("store float {}, ptr addrspace(3) {p}, align 4", kl.accs[nacc + (na + q) as usize]));
    }
    em.f.call_void("llvm.nvvm.barrier0", &[]);
    let k_next = em.f.v(format!("add nuw {ix} {}, {}", kl.i, t.bk));
    let next_vals = load_tile(&mut em, &k_next)?;
    // `count` consecutive floats from `base + first` of a shared array: four at a time when
    // `vec` says the offsets are multiples of 4 (16-byte aligned), else one at a time.
    let smem_loads = |em: &mut Em, arr: &str, base: &str, first: u64, count: u64, vec: bool| -> Vec<String> {
        let step = if vec && count.is_multiple_of(4) { 4 } else { 1 };
        let mut out = Vec::new();
        for at in (0..count).step_by(step as usize) {
            let slot = em.f.v(format!("add nuw {ix} {base}, {}", first + at));
            let p = em.f.v(format!("getelementptr inbounds float, ptr addrspace(3) @{arr}, {ix} {slot}"));
            if step == 4 {
                let v = em.f.v(format!("load <4 x float>, ptr addrspace(3) {p}, align 16"));
                out.extend((0..4).map(|l| em.f.v(format!("extractelement <4 x float> {v}, i32 {l}"))));
            } else {
                out.push(em.f.v(format!("load float, ptr addrspace(3) {p}, align 4")));
            }
        }
        out
    };
    let (vec_a, vec_b) =
        (t.bm.is_multiple_of(4) && t.tm.is_multiple_of(4), t.bn.is_multiple_of(4) && t.tn.is_multiple_of(4));
    let mut acc: Vec<String> = kl.accs[..nacc].to_vec();
    for kk in 0..t.bk {
        let av = smem_loads(&mut em, &sa, &arow, kk * a_pitch, t.tm, vec_a);
        let bv = smem_loads(&mut em, &sb, &bcol, kk * t.bn, t.tn, vec_b);
        for (mi, a_val) in av.iter().enumerate() {
            for (ni, b_val) in bv.iter().enumerate() {
                let k = mi * bv.len() + ni;
                acc[k] = em.f.call("float", "llvm.fma.f32", &[("float", a_val), ("float", b_val), ("float", &acc[k])]);
            }
        }
    }
    em.f.call_void("llvm.nvvm.barrier0", &[]);
    acc.extend(next_vals);
    em.f.loop_end(&kl, &t.bk.to_string(), &acc);
    em.restore(tile_saved.clone());

    // Epilogue.
    let out_dtype = em.dtype(node);
    for mi in 0..t.tm {
        for ni in 0..t.tn {
            let k = (mi * t.tn + ni) as usize;
            let i0 = em.f.v(format!("add nuw {ix} {row0}, {}", mi));
            let i = em.f.v(format!("add nuw {ix} {i0}, {arow}"));
            let j0 = em.f.v(format!("add nuw {ix} {col0}, {}", ni));
            let j = em.f.v(format!("add nuw {ix} {j0}, {bcol}"));
            let iok = em.f.v(format!("icmp ult {ix} {i}, {m}"));
            let jok = em.f.v(format!("icmp ult {ix} {j}, {n}"));
            let ok = em.f.v(format!("and i1 {iok}, {jok}"));
            let ic = clamp(&mut em, &i, m);
            let jc = clamp(&mut em, &j, n);
            let mut multi = bm_multi.clone();
            multi.push(ic);
            multi.push(jc);
            let flat = em.linearize(&multi, &od);
            let value = math::round(&mut em.f, cx.caps, out_dtype, &kl.accs[k])?;
            em.env.insert(node, value);
            let at = Ix { flat: flat.clone(), multi: Some(multi), vec: None };
            let mut vals = Vec::new();
            for o in outs {
                vals.push(em.eval_out(o, &at)?);
            }
            let cont = em.f.if_begin(&ok);
            for (o, v) in outs.iter().zip(&vals) {
                let dt = em.dtype(o.node);
                em.store(o.dest, dt, &flat, v)?;
            }
            em.f.if_end(&cont);
            em.env.remove(&node);
            em.restore(tile_saved.clone());
        }
    }
    em.f.loop_end(&tl, &nctaid, &[]);
    em.restore(saved);
    module.add_kernel(name, cx.params, em.f, threads as u32);
    Ok(launch(cx.caps, threads as u32, total, ((a_pitch + t.bn) * t.bk * 4) as u32))
}

fn clamp(em: &mut Em, v: &str, size: u64) -> String {
    let last = size.saturating_sub(1);
    let ix = em.ix;
    let over = em.f.v(format!("icmp ugt {ix} {v}, {last}"));
    em.f.v(format!("select i1 {over}, {ix} {last}, {ix} {v}"))
}

/// Element `(row, col)` of a matmul operand (its last two axes) in the batch given by the output's
/// batch indices, as f32; 0 outside the operand.
// Reason: an operand's dims plus the IR names and bounds of one (batch, row, col) site, each a plain value.
#[allow(clippy::too_many_arguments)]
fn operand_at(
    em: &mut Em,
    node: NodeId,
    dims: &[u64],
    out_batch: &[u64],
    batch_multi: &[String],
    row: &str,
    rows: u64,
    col: &str,
    cols: u64,
) -> Result<String, PtxError> {
    let ix = em.ix;
    let rank = dims.len();
    let offset = out_batch.len().saturating_sub(rank - 2);
    let mut multi: Vec<String> =
        (0..rank - 2).map(|i| if dims[i] == 1 { "0".to_string() } else { batch_multi[offset + i].clone() }).collect();
    let r_ok = em.f.v(format!("icmp ult {ix} {row}, {rows}"));
    let c_ok = em.f.v(format!("icmp ult {ix} {col}, {cols}"));
    let ok = em.f.v(format!("and i1 {r_ok}, {c_ok}"));
    multi.push(clamp(em, row, rows));
    multi.push(clamp(em, col, cols));
    let flat = em.linearize(&multi, dims);
    let v = em.eval(node, &Ix { flat, multi: Some(multi), vec: None })?;
    Ok(em.f.v(format!("select i1 {ok}, float {v}, float {}", math::fc(0.0))))
}
