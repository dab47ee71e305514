//! The staged epilogue of a tensor-core block tile: the threads holding accumulators write them,
//! rounded to the matmul's dtype, into a padded tile in shared memory; after a barrier the
//! block's threads read it back as row-contiguous 16-byte vectors, evaluate the fused outputs per
//! element (bias, activation, residual, scale, cast, several outputs: [`Em::eval_out`]) and store
//! them with 16-byte coalesced stores (narrower where `n` is not a multiple of 8), masked at the
//! output's edges.
//!
//! Kernel-independent: a caller describes a thread's accumulators as a [`Fragment`] (pairs at
//! constant offsets from the thread's origin in the block tile; [`mma_fragment`] builds it from
//! `mma.sync`'s C fragments, which wgmma shares per 16-row slice), where the tile lies
//! ([`TileAt`]), the output it computes ([`Output`]) and the shared memory to use ([`Staging`]), then calls
//! [`staged`] (or [`write_fragment`], its own barrier, and [`store_tile`], when only some threads
//! hold accumulators).
//!
//! Rows of the staged tile are padded by 16 bytes: a warp's fragment writes (8 rows x 4 pairs)
//! then hit 32 distinct banks, and 8 threads reading one row's consecutive 16-byte chunks hit
//! distinct bank groups.

use tcc_ir::DType;

use crate::ptx::error::PtxError;
use crate::ptx::expr::{Em, Ix};
use crate::ptx::math;
use crate::ptx::plan::Out;

use super::kernel::GemmProduct;

/// The value a tiled kernel computes, as the epilogue stores it: a `[.., m, n]` node whose
/// elements are the staged accumulators (the fused outputs are evaluated from it).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Output<'a> {
    /// Rows.
    pub(crate) m: u64,
    /// Columns.
    pub(crate) n: u64,
    /// The node the accumulators are the value of.
    pub(crate) node: tcc_ir::NodeId,
    /// A dual product's second product: the staged tile's right half holds its values for the
    /// columns whose first product's values are in the left half (the tile stores `cols / 2`
    /// output columns, from both halves).
    pub(crate) second: Option<tcc_ir::NodeId>,
    /// Its batch dims.
    pub(crate) batch_dims: &'a [u64],
    /// Its dims.
    pub(crate) out_dims: &'a [u64],
    /// Where its elements are stored when not at their own flat position: an attention's layout
    /// tail (it keeps the last axis last, so a row's consecutive elements stay consecutive).
    pub(crate) layout: Option<&'a tcc_ir::attention::OutputLayout>,
}

impl Output<'_> {
    /// Through [`Output::layout`], the flat position (index type) where the element `multi`
    /// (over `out_dims`) is stored; `None` without a layout (it is stored at its own).
    fn permuted_at(&self, em: &mut Em, multi: &[String]) -> Option<String> {
        let l = self.layout?;
        Some(em.linearize(&l.permuted(multi), &l.permuted(self.out_dims)))
    }
}

impl GemmProduct<'_> {
    /// The product as the epilogue stores it.
    pub(crate) fn output(&self) -> Output<'_> {
        Output {
            m: self.m,
            n: self.n,
            node: self.node,
            second: self.second.map(|s| s.node),
            batch_dims: self.batch_dims,
            out_dims: self.out_dims,
            layout: None,
        }
    }
}

/// A block tile staged in shared memory.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Staging<'a> {
    /// The shared array (`@symbol`).
    pub(crate) smem: &'a str,
    /// Byte offset of the staged tile in it (a multiple of 16).
    pub(crate) base: u32,
    /// Tile rows.
    pub(crate) rows: u32,
    /// Tile columns (a multiple of 16 bytes of `dtype`).
    pub(crate) cols: u32,
    /// The staged values' dtype (the matmul's).
    pub(crate) dtype: DType,
}

impl Staging<'_> {
    /// Elements per 16-byte vector.
    fn width(&self) -> u32 {
        16 / self.dtype.size_bytes().max(1) as u32
    }

    /// Bytes between consecutive rows (16 bytes of padding).
    fn pitch(&self) -> u32 {
        (self.cols + self.width()) * self.dtype.size_bytes() as u32
    }
}

/// Bytes of shared memory a `rows x cols` tile of `dtype` takes when staged.
pub(crate) fn staging_bytes(rows: u32, cols: u32, dtype: DType) -> u32 {
    Staging { smem: "", base: 0, rows, cols, dtype }.pitch() * rows
}

/// Where a block tile lies in the output: its first row and column and its batch (i32 values).
pub(crate) struct TileAt<'a> {
    /// First output row of the tile.
    pub(crate) row0: &'a str,
    /// First output column of the tile.
    pub(crate) col0: &'a str,
    /// Linear batch index.
    pub(crate) bidx: &'a str,
}

/// One thread's accumulators: pairs at (`row` + dr, `col` + dc) and (`row` + dr, `col` + dc + 1)
/// of the block tile, for per-pair constant offsets (dr, dc) (dc even) from the thread's origin
/// (`row`, `col`: i32 values).
#[derive(Debug, Clone)]
pub(crate) struct Fragment {
    /// The thread's first row in the block tile.
    pub(crate) row: String,
    /// The thread's first column in the block tile (even).
    pub(crate) col: String,
    /// (dr, dc, the two f32 accumulators).
    pub(crate) pairs: Vec<(u32, u32, [String; 2])>,
}

/// The accumulators of a warp's `mma.sync.m16n8k16` C fragments: `acc[(mi * ni_n + ni) * 4 + c]`
/// holds the c-th value of the 16x8 tile (mi, ni) of a warp tile starting at (`row0`, `col0`) of
/// the block tile; lane `l` holds rows `l / 4` and `l / 4 + 8`, columns `2 (l % 4)` and
/// `2 (l % 4) + 1` of each.
pub(crate) fn mma_fragment(
    em: &mut Em,
    lane: &str,
    (row0, col0): (&str, &str),
    (mi_n, ni_n): (usize, usize),
    acc: &[String],
) -> Fragment {
    let gq = em.f.v(format!("lshr i32 {lane}, 2"));
    let tq = em.f.v(format!("and i32 {lane}, 3"));
    let t2 = em.f.v(format!("shl i32 {tq}, 1"));
    let row = em.f.v(format!("add i32 {row0}, {gq}"));
    let col = em.f.v(format!("add i32 {col0}, {t2}"));
    let mut pairs = Vec::with_capacity(mi_n * ni_n * 2);
    for mi in 0..mi_n {
        for ni in 0..ni_n {
            for h in 0..2usize {
                let base = (mi * ni_n + ni) * 4 + 2 * h;
                let (dr, dc) = ((mi * 16 + h * 8) as u32, (ni * 8) as u32);
                pairs.push((dr, dc, [acc[base].clone(), acc[base + 1].clone()]));
            }
        }
    }
    Fragment { row, col, pairs }
}

/// Writes a thread's accumulators, each rounded to the staged dtype, into the staged tile: one
/// shared-memory address, each pair at a constant offset from it.
pub(crate) fn write_fragment(em: &mut Em, st: &Staging, fr: &Fragment) -> Result<(), PtxError> {
    let sty = math::stype(st.dtype);
    let es = st.dtype.size_bytes() as u32;
    let rb = em.f.v(format!("mul i32 {}, {}", fr.row, st.pitch()));
    let cb = em.f.v(format!("mul i32 {}, {es}", fr.col));
    let o = em.f.v(format!("add i32 {rb}, {cb}"));
    let o = em.f.v(format!("add i32 {o}, {}", st.base));
    let base = em.f.v(format!("getelementptr inbounds i8, ptr addrspace(3) {}, i32 {o}", st.smem));
    for (dr, dc, vals) in &fr.pairs {
        let mut v = "poison".to_string();
        for (e, x) in vals.iter().enumerate() {
            let s = math::to_storage(&mut em.f, em.caps, st.dtype, x)?;
            v = em.f.v(format!("insertelement <2 x {sty}> {v}, {sty} {s}, i32 {e}"));
        }
        let off = dr * st.pitch() + dc * es;
        let ptr = em.f.v(format!("getelementptr inbounds i8, ptr addrspace(3) {base}, i32 {off}"));
        em.f.op(format!("store <2 x {sty}> {v}, ptr addrspace(3) {ptr}, align {}", 2 * es));
    }
    Ok(())
}

/// Clamps an i32 index to `[0, last]` (`last` unsigned).
fn clamp(em: &mut Em, v: &str, last: u64) -> String {
    let over = em.f.v(format!("icmp ugt i32 {v}, {last}"));
    em.f.v(format!("select i1 {over}, i32 {last}, i32 {v}"))
}

/// Reads the staged tile back and stores the fused outputs `outs` at the tile's place `at` of
/// product `p`. Every one of `threads` threads (this one is `tid`, an i32 value) takes 16-byte
/// chunks `tid, tid + threads, ...` of the tile in row-major order; each chunk's elements are
/// stored in vectors of the widest power of two (at most 16 bytes of the staged dtype) that
/// divides `n`, each inside the output or skipped. The caller synchronizes before (the tile is
/// written) and after (before the shared memory is reused).
pub(crate) fn store_tile(
    em: &mut Em,
    st: &Staging,
    p: &Output,
    outs: &[Out],
    at: &TileAt,
    (tid, threads): (&str, u32),
) -> Result<(), PtxError> {
    let width = st.width();
    // A dual product's tile stores half its staged columns.
    let out_cols = if p.second.is_some() { st.cols / 2 } else { st.cols };
    let total = st.rows * (out_cols / width);
    // Store vectors: the widest power of two dividing n, at most a chunk.
    let w = (1..=width).rev().find(|&w| w.is_power_of_two() && p.n.is_multiple_of(u64::from(w))).unwrap_or(1);
    let bmulti = {
        let bi = em.widen(at.bidx);
        em.delinearize(&bi, p.batch_dims)
    };
    // Chunks per loop iteration: up to 4, evaluated before any of their (guarded) stores, so
    // that the elements' independent chains (e.g. gelu's ex2 and rcp) overlap.
    let per_thread = total / threads.max(1);
    let unroll = [4u32, 2].into_iter().find(|&u| total.is_multiple_of(u * threads) && per_thread >= u).unwrap_or(1);
    // The thread index through an opaque copy, so LLVM cannot hoist the chunks' addresses (they
    // depend on it only) above the caller's main loop, where they would be live beside its
    // accumulators.
    let tid = em.f.v(format!("call i32 asm sideeffect \"mov.u32 $0, $1;\", \"=r,r\"(i32 {tid})"));
    let saved = em.save();
    let lp = em.f.loop_begin("i32", &tid, &total.to_string(), &[]);
    let mut stores = Vec::new();
    for u in 0..unroll {
        let q = if u == 0 { lp.i.clone() } else { em.f.v(format!("add i32 {}, {}", lp.i, u * threads)) };
        stores.extend(eval_chunk(em, st, p, outs, at, &bmulti, &q, w)?);
        // Chunks share no elements; an outside chunk's clamped elements must not be reused.
        em.restore(saved.clone());
    }
    for (ok, base, vals) in stores {
        let cont = em.f.if_begin(&ok);
        for (o, vs) in outs.iter().zip(&vals) {
            let dt = em.dtype(o.node);
            em.store_vec(o.dest, dt, &base, vs)?;
        }
        em.f.if_end(&cont);
    }
    em.f.loop_end(&lp, &(threads * unroll).to_string(), &[]);
    em.restore(saved);
    Ok(())
}

/// What one store of a chunk writes: whether it lies inside the output, its flat position, and
/// per output its `w` values.
type ChunkStore = (String, String, Vec<Vec<String>>);

/// Evaluates the fused outputs at the elements of chunk `q` (a 16-byte vector of the staged
/// tile, row-major) in stores of `w` elements; emits no stores.
// Reason: the staged tile, the product, its outputs, the tile's place and batch index, the chunk and the store width.
#[allow(clippy::too_many_arguments)]
fn eval_chunk(
    em: &mut Em,
    st: &Staging,
    p: &Output,
    outs: &[Out],
    at: &TileAt,
    bmulti: &[String],
    q: &str,
    w: u32,
) -> Result<Vec<ChunkStore>, PtxError> {
    let width = st.width();
    let sty = math::stype(st.dtype);
    let ix = em.ix;
    let half = p.second.map(|_| st.cols / 2);
    let cpr = half.unwrap_or(st.cols) / width;
    let r = em.f.v(format!("udiv i32 {q}, {cpr}"));
    let ch = em.f.v(format!("urem i32 {q}, {cpr}"));
    let rb = em.f.v(format!("mul i32 {r}, {}", st.pitch()));
    let cb = em.f.v(format!("shl i32 {ch}, 4"));
    let so = em.f.v(format!("add i32 {rb}, {cb}"));
    let so = em.f.v(format!("add i32 {so}, {}", st.base));
    let sp = em.f.v(format!("getelementptr inbounds i8, ptr addrspace(3) {}, i32 {so}", st.smem));
    let vt = format!("<{width} x {sty}>");
    let staged = em.f.v(format!("load {vt}, ptr addrspace(3) {sp}, align 16"));
    // The second product's values of the same columns, `half` columns to the right.
    let staged2 = match half {
        Some(h) => {
            let off = h * st.dtype.size_bytes() as u32;
            let sp2 = em.f.v(format!("getelementptr inbounds i8, ptr addrspace(3) {sp}, i32 {off}"));
            Some(em.f.v(format!("load {vt}, ptr addrspace(3) {sp2}, align 16")))
        }
        None => None,
    };
    let row = em.f.v(format!("add i32 {}, {r}", at.row0));
    let cw = em.f.v(format!("mul i32 {ch}, {width}"));
    let col = em.f.v(format!("add i32 {}, {cw}", at.col0));
    let rok = em.f.v(format!("icmp ult i32 {row}, {}", p.m));
    let rc = clamp(em, &row, p.m - 1);
    let rc = em.widen(&rc);
    let mut out = Vec::new();
    for j in 0..width / w {
        // Sub-vector j: columns col + j*w ..; inside the output entirely or not at all (w | n).
        let cj = if j == 0 { col.clone() } else { em.f.v(format!("add i32 {col}, {}", j * w)) };
        let cok = em.f.v(format!("icmp ult i32 {cj}, {}", p.n));
        let ok = em.f.v(format!("and i1 {rok}, {cok}"));
        // Outside: evaluated at the last in-range vector (never stored), so every load is valid;
        // a chunk's in-range vectors come first, so none reuses such a value.
        let cc = clamp(em, &cj, p.n - u64::from(w));
        let cc = em.widen(&cc);
        let mut multi = bmulti.to_vec();
        multi.push(rc.clone());
        multi.push(cc.clone());
        let base = em.linearize(&multi, p.out_dims);
        let dest = p.permuted_at(em, &multi).unwrap_or_else(|| base.clone());
        let mut vals: Vec<Vec<String>> = vec![Vec::new(); outs.len()];
        for e in 0..w {
            let x = em.f.v(format!("extractelement {vt} {staged}, i32 {}", j * w + e));
            let value = math::from_storage(&mut em.f, em.caps, st.dtype, &x)?;
            let (flat, ce) = if e == 0 {
                (base.clone(), cc.clone())
            } else {
                (em.f.v(format!("add {ix} {base}, {e}")), em.f.v(format!("add {ix} {cc}, {e}")))
            };
            let mut me = bmulti.to_vec();
            me.push(rc.clone());
            me.push(ce);
            let at_e = Ix { flat, multi: Some(me), vec: (w > 1).then(|| (base.clone(), e, w)) };
            em.env.insert(p.node, value);
            if let (Some(second), Some(staged2)) = (p.second, &staged2) {
                let x = em.f.v(format!("extractelement {vt} {staged2}, i32 {}", j * w + e));
                let value = math::from_storage(&mut em.f, em.caps, st.dtype, &x)?;
                em.env.insert(second, value);
            }
            for (k, o) in outs.iter().enumerate() {
                let v = em.eval_out(o, &at_e)?;
                vals[k].push(v);
            }
            em.env.remove(&p.node);
            if let Some(second) = p.second {
                em.env.remove(&second);
            }
        }
        out.push((ok, dest, vals));
    }
    Ok(out)
}

/// The epilogue without staging: every thread evaluates the fused outputs `outs` at its own
/// `fragment`'s pairs (each accumulator rounded to `dtype`, the value's type, as staging would)
/// and stores them pair by pair (one 2-element vector where `n` is even, else element by element),
/// each inside the output or skipped. Touches no shared memory, so it needs no barrier.
pub(crate) fn direct(
    em: &mut Em,
    p: &Output,
    outs: &[Out],
    at: &TileAt,
    fragment: &Fragment,
    dtype: DType,
) -> Result<(), PtxError> {
    let bmulti = {
        let bi = em.widen(at.bidx);
        em.delinearize(&bi, p.batch_dims)
    };
    let row0 = em.f.v(format!("add i32 {}, {}", at.row0, fragment.row));
    let col0 = em.f.v(format!("add i32 {}, {}", at.col0, fragment.col));
    let pairs = p.n.is_multiple_of(2);
    let saved = em.save();
    for (dr, dc, vals) in &fragment.pairs {
        let row = em.f.v(format!("add i32 {row0}, {dr}"));
        let col = em.f.v(format!("add i32 {col0}, {dc}"));
        let rok = em.f.v(format!("icmp ult i32 {row}, {}", p.m));
        let rc = clamp(em, &row, p.m - 1);
        let rc = em.widen(&rc);
        // Per element: inside, flat index (clamped inside), the outputs' values there.
        let mut per_elem = Vec::with_capacity(2);
        for (e, acc) in vals.iter().enumerate() {
            let ce = if e == 0 { col.clone() } else { em.f.v(format!("add i32 {col}, {e}")) };
            let cok = em.f.v(format!("icmp ult i32 {ce}, {}", p.n));
            let ok = em.f.v(format!("and i1 {rok}, {cok}"));
            let cc = clamp(em, &ce, p.n - 1);
            let cc = em.widen(&cc);
            let mut multi = bmulti.to_vec();
            multi.push(rc.clone());
            multi.push(cc);
            let flat = em.linearize(&multi, p.out_dims);
            let dest = p.permuted_at(em, &multi).unwrap_or_else(|| flat.clone());
            let value = math::round(&mut em.f, em.caps, dtype, acc)?;
            em.env.insert(p.node, value);
            let at_e = Ix { flat, multi: Some(multi), vec: None };
            let mut outs_at = Vec::with_capacity(outs.len());
            for o in outs {
                outs_at.push(em.eval_out(o, &at_e)?);
            }
            em.env.remove(&p.node);
            per_elem.push((ok, dest, outs_at));
        }
        store_pair(em, outs, &per_elem, pairs)?;
        em.restore(saved.clone());
    }
    Ok(())
}

/// One pair of elements' outputs, per element (inside the output, flat index, the value of
/// every output there), stored: as one 2-element vector per output where `pairs` (the first
/// column is even and so is n: both elements are inside or neither), else element by element,
/// each only inside the output.
pub(crate) fn store_pair(
    em: &mut Em,
    outs: &[Out],
    per_elem: &[(String, String, Vec<String>)],
    pairs: bool,
) -> Result<(), PtxError> {
    if pairs {
        let cont = em.f.if_begin(&per_elem[0].0);
        for (k, o) in outs.iter().enumerate() {
            let dt = em.dtype(o.node);
            em.store_vec(o.dest, dt, &per_elem[0].1, &[per_elem[0].2[k].clone(), per_elem[1].2[k].clone()])?;
        }
        em.f.if_end(&cont);
    } else {
        for (ok, flat, vs) in per_elem {
            let cont = em.f.if_begin(ok);
            for (o, v) in outs.iter().zip(vs) {
                let dt = em.dtype(o.node);
                em.store(o.dest, dt, flat, v)?;
            }
            em.f.if_end(&cont);
        }
    }
    Ok(())
}

/// The whole staged epilogue: every thread writes its `fragment`, `sync` (a barrier of the
/// `threads` threads), then [`store_tile`]. The caller synchronizes again before the shared
/// memory is reused.
// Reason: the staged tile, the product, its outputs, the tile's place, the fragment, the threads and their barrier.
#[allow(clippy::too_many_arguments)]
pub(crate) fn staged(
    em: &mut Em,
    st: &Staging,
    p: &Output,
    outs: &[Out],
    at: &TileAt,
    fragment: &Fragment,
    threads: (&str, u32),
    sync: impl Fn(&mut Em),
) -> Result<(), PtxError> {
    write_fragment(em, st, fragment)?;
    sync(em);
    store_tile(em, st, p, outs, at, threads)
}
