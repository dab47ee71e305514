//! Which key blocks a block of queries visits: all of them, or with a mask that lets blocks be
//! skipped ([`tcc_ir::attention::Mask::skips_blocks`]: a `-inf` fill) only those where every
//! comparison of the mask may hold somewhere ([`Atom::may_hold`], evaluated at run time on the
//! block's corners). Each comparison is affine in the key position, so the blocks where it may
//! hold are an interval, and so is their intersection: `lo..hi`.

use tcc_ir::CompareOp;
use tcc_ir::attention::Atom;

use super::Geometry;
use crate::ptx::expr::Em;

/// The key blocks `lo..hi` (i32 values; empty when `lo >= hi`) the query block of rows `q0..`
/// (an i32 value) visits.
pub(crate) fn key_range(em: &mut Em, geo: &Geometry, q0: &str) -> (String, String) {
    let nkb = geo.k_blocks();
    let atoms: Vec<Atom> = match &geo.ga.attention.mask {
        Some(m) if m.skips_blocks() => m.atoms.clone(),
        _ => return ("0".to_string(), nkb.to_string()),
    };
    let (qa, qb) = query_span(em, geo, q0);
    let acc = [("i32".to_string(), nkb.to_string()), ("i32".to_string(), "0".to_string())];
    let lp = em.f.loop_begin("i32", "0", &nkb.to_string(), &acc);
    let kb = lp.i.clone();
    let (k0, k1) = key_span(em, geo, &kb);
    let mut live = "true".to_string();
    for atom in &atoms {
        let holds = may_hold(em, atom, (&qa, &qb), (&k0, &k1));
        live = em.f.v(format!("and i1 {live}, {holds}"));
    }
    let (first, last) = (&lp.accs[0], &lp.accs[1]);
    let below = em.f.v(format!("icmp ult i32 {kb}, {first}"));
    let take = em.f.v(format!("and i1 {live}, {below}"));
    let first_next = em.f.v(format!("select i1 {take}, i32 {kb}, i32 {first}"));
    let end = em.f.v(format!("add i32 {kb}, 1"));
    let last_next = em.f.v(format!("select i1 {live}, i32 {end}, i32 {last}"));
    em.f.loop_end(&lp, "1", &[first_next, last_next]);
    (lp.accs[0].clone(), lp.accs[1].clone())
}

/// Whether no logit of key block `kb` (i32) is masked for the queries `qa..=qb` (i64 values,
/// from [`query_span`]): every comparison of the mask holds everywhere in it, and the block lies
/// inside the keys (an i1 value).
pub(crate) fn block_is_full(em: &mut Em, geo: &Geometry, (qa, qb): (&str, &str), kb: &str) -> String {
    let (k0, k1) = key_span(em, geo, kb);
    let last = em.f.v(format!("add i64 {k0}, {}", geo.bc - 1));
    let mut full = em.f.v(format!("icmp slt i64 {last}, {}", geo.t_len));
    for atom in geo.ga.attention.mask.iter().flat_map(|m| &m.atoms) {
        let side = |em: &mut Em, high: bool| affine_side(em, atom, (qa, qb), (&k0, &k1), high);
        let holds = match atom.op {
            CompareOp::Ge | CompareOp::Gt => {
                let lo = side(em, false);
                let op = if atom.op == CompareOp::Ge { "sge" } else { "sgt" };
                em.f.v(format!("icmp {op} i64 {lo}, 0"))
            }
            CompareOp::Le | CompareOp::Lt => {
                let hi = side(em, true);
                let op = if atom.op == CompareOp::Le { "sle" } else { "slt" };
                em.f.v(format!("icmp {op} i64 {hi}, 0"))
            }
            // Equalities and inequalities: never known to hold on a whole block here.
            CompareOp::Eq | CompareOp::Ne => "false".to_string(),
        };
        full = em.f.v(format!("and i1 {full}, {holds}"));
    }
    full
}

/// The queries `q0..=q1` of the block starting at row `q0` (i32), the last clamped to S - 1, as
/// i64 values (with packed heads, the queries of the block's rows: row `p` is query `p / G`).
pub(crate) fn query_span(em: &mut Em, geo: &Geometry, q0: &str) -> (String, String) {
    let last = geo.packed_rows() - 1;
    let q0_64 = em.f.v(format!("sext i32 {q0} to i64"));
    let q1 = em.f.v(format!("add i64 {q0_64}, {}", geo.br - 1));
    let over = em.f.v(format!("icmp sgt i64 {q1}, {last}"));
    let q1 = em.f.v(format!("select i1 {over}, i64 {last}, i64 {q1}"));
    if geo.group == 1 {
        return (q0_64, q1);
    }
    let a = em.f.v(format!("sdiv i64 {q0_64}, {}", geo.group));
    let b = em.f.v(format!("sdiv i64 {q1}, {}", geo.group));
    (a, b)
}

/// The keys `k0..=k1` of key block `kb` (i32), the last clamped to T - 1, as i64 values.
fn key_span(em: &mut Em, geo: &Geometry, kb: &str) -> (String, String) {
    let kb64 = em.f.v(format!("sext i32 {kb} to i64"));
    let k0 = em.f.v(format!("mul i64 {kb64}, {}", geo.bc));
    let k1 = em.f.v(format!("add i64 {k0}, {}", geo.bc - 1));
    let over = em.f.v(format!("icmp sgt i64 {k1}, {}", geo.t_len - 1));
    let k1 = em.f.v(format!("select i1 {over}, i64 {}, i64 {k1}", geo.t_len - 1));
    (k0, k1)
}

/// The largest (`high`) or smallest value of `atom`'s affine side over the block: its extremes
/// are at the corners, picked by the coefficients' signs.
fn affine_side(em: &mut Em, atom: &Atom, (q0, q1): (&str, &str), (k0, k1): (&str, &str), high: bool) -> String {
    let q = if (atom.query >= 0) == high { q1 } else { q0 };
    let k = if (atom.key >= 0) == high { k1 } else { k0 };
    let a = em.f.v(format!("mul i64 {q}, {}", atom.query));
    let b = em.f.v(format!("mul i64 {k}, {}", atom.key));
    let s = em.f.v(format!("add i64 {a}, {b}"));
    em.f.v(format!("add i64 {s}, {}", atom.offset))
}

/// Whether `atom` may hold somewhere in the queries `q0..=q1` and keys `k0..=k1` (i64 values):
/// the affine side's extremes are at the corners, picked by the coefficients' signs.
fn may_hold(em: &mut Em, atom: &Atom, q: (&str, &str), k: (&str, &str)) -> String {
    let hi = affine_side(em, atom, q, k, true);
    let lo = affine_side(em, atom, q, k, false);
    match atom.op {
        CompareOp::Ge => em.f.v(format!("icmp sge i64 {hi}, 0")),
        CompareOp::Gt => em.f.v(format!("icmp sgt i64 {hi}, 0")),
        CompareOp::Le => em.f.v(format!("icmp sle i64 {lo}, 0")),
        CompareOp::Lt => em.f.v(format!("icmp slt i64 {lo}, 0")),
        CompareOp::Eq => {
            let a = em.f.v(format!("icmp sle i64 {lo}, 0"));
            let b = em.f.v(format!("icmp sge i64 {hi}, 0"));
            em.f.v(format!("and i1 {a}, {b}"))
        }
        CompareOp::Ne => {
            let a = em.f.v(format!("icmp ne i64 {lo}, 0"));
            let b = em.f.v(format!("icmp ne i64 {hi}, 0"));
            em.f.v(format!("or i1 {a}, {b}"))
        }
    }
}
