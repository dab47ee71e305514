//! The online softmax on a warp's score accumulators (FlashAttention-2's): each query row's
//! scores of one key block are spread over the four lanes of a quad (two values per 8-key tile),
//! so the row maximum is the lane's own maximum reduced over the quad by two butterfly shuffles;
//! the row sums stay per lane until the end ([`quad_sum`]).
//!
//! With the running maximum `m` (read as 0 while it is `-inf`, so that a block whose logits are
//! all `-inf` adds nothing and no `-inf - -inf` appears) the probabilities are
//! `p = 2^(x·log2 e − m·log2 e)` (one FMA and one `ex2.approx` each) and the old sum and output
//! are rescaled by `α = 2^(m_old·log2 e − m·log2 e)`.

use tcc_ir::{DType, ReduceOp};

use crate::ptx::arch::{CapsExt, Feature};
use crate::ptx::error::PtxError;
use crate::ptx::expr::Em;
use crate::ptx::math;

/// One row's update for one key block: the new running maximum and (per-lane) sum, the
/// probabilities in place of the logits, and the factor that rescales the old output.
pub(crate) struct RowUpdate {
    /// The running maximum after the block.
    pub(crate) m: String,
    /// This lane's share of the running sum after the block.
    pub(crate) l: String,
    /// The probabilities (unnormalized), in the order of the logits.
    pub(crate) p: Vec<String>,
    /// `exp(m_old - m)`.
    pub(crate) alpha: String,
}

/// A butterfly shuffle of `v` (f32) with the lane `lane ^ mask`.
fn shuffle(em: &mut Em, v: &str, mask: u32) -> String {
    em.f.call(
        "float",
        "llvm.nvvm.shfl.sync.bfly.f32",
        &[("i32", "-1"), ("float", v), ("i32", &mask.to_string()), ("i32", "31")],
    )
}

/// The sum of `v` over the four lanes of the quad.
pub(crate) fn quad_sum(em: &mut Em, v: &str) -> String {
    let mut s = v.to_string();
    for mask in [1, 2] {
        let o = shuffle(em, &s, mask);
        s = em.f.v(format!("fadd float {s}, {o}"));
    }
    s
}

/// The online softmax step of one row: `x` this lane's logits of the row in the key block,
/// `m_old` and `l_old` the running maximum and this lane's sum.
pub(crate) fn update(em: &mut Em, x: &[String], m_old: &str, l_old: &str) -> RowUpdate {
    let max = |em: &mut Em, a: &str, b: &str| math::reduce_step(&mut em.f, ReduceOp::Max, DType::F32, a, b);
    let mut bm = x[0].clone();
    for v in &x[1..] {
        bm = max(em, &bm, v);
    }
    for mask in [1, 2] {
        let o = shuffle(em, &bm, mask);
        bm = max(em, &bm, &o);
    }
    let m = max(em, m_old, &bm);
    let empty = em.f.v(format!("fcmp oeq float {m}, {}", math::fc(f32::NEG_INFINITY)));
    let safe = em.f.v(format!("select i1 {empty}, float {}, float {m}", math::fc(0.0)));
    let log2e = math::fc(std::f32::consts::LOG2_E);
    let shift = em.f.v(format!("fmul float {safe}, {log2e}"));
    let shift = em.f.v(format!("fneg float {shift}"));
    let exp2 = |em: &mut Em, v: &str| -> String {
        let e = em.f.call("float", "llvm.fma.f32", &[("float", v), ("float", &log2e), ("float", &shift)]);
        em.f.call("float", "llvm.nvvm.ex2.approx.f", &[("float", &e)])
    };
    let p: Vec<String> = x.iter().map(|v| exp2(em, v)).collect();
    let alpha = exp2(em, m_old);
    let mut sum = p[0].clone();
    for v in &p[1..] {
        sum = em.f.v(format!("fadd float {sum}, {v}"));
    }
    let l = em.f.call("float", "llvm.fma.f32", &[("float", l_old), ("float", &alpha), ("float", &sum)]);
    RowUpdate { m, l, p, alpha }
}

/// Two f32 values rounded to the 16-bit `dtype` and packed as one register (`lo` in the low half),
/// as an `mma.sync` A fragment holds them: one `cvt.rn.f16x2.f32` (or `bf16x2`), whose first
/// source goes to the upper half.
pub(crate) fn pack(em: &mut Em, dtype: DType, lo: &str, hi: &str) -> Result<String, PtxError> {
    let ty = match dtype {
        DType::F16 => "f16x2",
        DType::BF16 => {
            em.caps.require(Feature::Bf16Convert, "bf16 values")?;
            "bf16x2"
        }
        _ => {
            return Err(PtxError::Unsupported {
                target: em.caps.name,
                what: format!("attention operands of {dtype:?} (f16 or bf16 only)"),
            });
        }
    };
    Ok(em.f.v(format!("call i32 asm \"cvt.rn.{ty}.f32 $0, $1, $2;\", \"=r,f,f\"(float {hi}, float {lo})")))
}

/// Two f32 values each rounded to the 16-bit `dtype` (round to nearest even), as f32 again: one
/// packed conversion and two exact widenings instead of two conversions each way.
pub(crate) fn round_pair(em: &mut Em, dtype: DType, lo: &str, hi: &str) -> Result<[String; 2], PtxError> {
    let packed = pack(em, dtype, lo, hi)?;
    Ok(match dtype {
        DType::BF16 => {
            // A bf16 is the upper half of the f32 with the same value.
            let l = em.f.v(format!("shl i32 {packed}, 16"));
            let h = em.f.v(format!("and i32 {packed}, -65536"));
            [em.f.v(format!("bitcast i32 {l} to float")), em.f.v(format!("bitcast i32 {h} to float"))]
        }
        _ => {
            let v = em.f.v(format!("bitcast i32 {packed} to <2 x half>"));
            let mut out = [String::new(), String::new()];
            for (i, slot) in out.iter_mut().enumerate() {
                let x = em.f.v(format!("extractelement <2 x half> {v}, i32 {i}"));
                *slot = em.f.v(format!("fpext half {x} to float"));
            }
            out
        }
    })
}
