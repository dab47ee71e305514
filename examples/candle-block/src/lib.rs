//! A small Llama-style decoder block in candle, written twice: with candle's own ops, and with
//! its RMSNorm, attention and MLP as tcc kernels applied to the same candle tensors (custom ops:
//! `tcc::candle::KernelOp` for two and three inputs, `tcc::candle::apply` for the MLP's four).
//! The projections, RoPE and residual adds are candle's in both, so the two differ only in the
//! kernels. `src/main.rs` checks one against the other and times both.

pub mod kernels;

use tcc::candle::{KernelOp, apply};
use tcc::candle_core::{D, DType, Device, Result, Tensor};

/// The block's sizes.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Tokens in the sequence.
    pub tokens: usize,
    /// Hidden size (query heads × 64).
    pub hidden: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (each shared by `heads / kv_heads` query heads).
    pub kv_heads: usize,
    /// The MLP's inner size.
    pub mlp: usize,
}

/// The head dimension the attention kernel is written for.
pub const HEAD_DIM: usize = 64;

/// The block's weights (as candle's `Linear` stores them: `[out, in]`) and rotary tables.
#[derive(Debug)]
pub struct Weights {
    attn_norm: Tensor,
    wq: Tensor,
    wk: Tensor,
    wv: Tensor,
    wo: Tensor,
    mlp_norm: Tensor,
    gate: Tensor,
    up: Tensor,
    down: Tensor,
    cos: Tensor,
    sin: Tensor,
}

/// How the block's RMSNorm, attention and MLP are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernels {
    /// candle's own ops.
    Candle,
    /// tcc kernels applied to the candle tensors.
    Tcc,
}

/// Deterministic values in [-scale, scale), none zero (SplitMix64), so runs are reproducible.
pub fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            let v = ((z >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale;
            if v == 0.0 { scale / 2.0 } else { v }
        })
        .collect()
}

/// A tensor of `shape` with [`values`].
pub fn random(shape: &[usize], seed: u64, scale: f32, device: &Device) -> Result<Tensor> {
    Tensor::from_vec(values(shape.iter().product(), seed, scale), shape, device)
}

impl Weights {
    /// Random weights for `c` (scaled as an initialization would be), on `device`.
    pub fn random(c: &Config, device: &Device) -> Result<Weights> {
        let kv = c.kv_heads * HEAD_DIM;
        let w = |rows: usize, cols: usize, seed: u64| random(&[rows, cols], seed, 1.0 / (cols as f32).sqrt(), device);
        let norm = |seed: u64| random(&[c.hidden], seed, 0.1, device)? + 1.0;
        // Rotary tables (rotate-half convention): position p, frequency 10000^(-2i/64).
        let half = HEAD_DIM / 2;
        let mut angles = Vec::with_capacity(c.tokens * HEAD_DIM);
        for p in 0..c.tokens {
            for j in 0..HEAD_DIM {
                let i = (j % half) as f32;
                angles.push(p as f32 * 10000f32.powf(-2.0 * i / HEAD_DIM as f32));
            }
        }
        let angles = Tensor::from_vec(angles, (c.tokens, HEAD_DIM), device)?;
        Ok(Weights {
            attn_norm: norm(1)?,
            wq: w(c.hidden, c.hidden, 2)?,
            wk: w(kv, c.hidden, 3)?,
            wv: w(kv, c.hidden, 4)?,
            wo: w(c.hidden, c.hidden, 5)?,
            mlp_norm: norm(6)?,
            gate: w(c.mlp, c.hidden, 7)?,
            up: w(c.mlp, c.hidden, 8)?,
            down: w(c.hidden, c.mlp, 9)?,
            cos: angles.cos()?,
            sin: angles.sin()?,
        })
    }
}

impl Weights {
    /// The same weights and tables in `dtype`.
    pub fn to_dtype(&self, dtype: DType) -> Result<Weights> {
        let t = |x: &Tensor| x.to_dtype(dtype);
        Ok(Weights {
            attn_norm: t(&self.attn_norm)?,
            wq: t(&self.wq)?,
            wk: t(&self.wk)?,
            wv: t(&self.wv)?,
            wo: t(&self.wo)?,
            mlp_norm: t(&self.mlp_norm)?,
            gate: t(&self.gate)?,
            up: t(&self.up)?,
            down: t(&self.down)?,
            cos: t(&self.cos)?,
            sin: t(&self.sin)?,
        })
    }
}

/// RoPE on `x` of shape `[heads, tokens, 64]`: `x * cos + rotate_half(x) * sin`.
fn rope(x: &Tensor, w: &Weights) -> Result<Tensor> {
    let half = HEAD_DIM / 2;
    let rotated = Tensor::cat(&[&x.narrow(D::Minus1, half, half)?.neg()?, &x.narrow(D::Minus1, 0, half)?], D::Minus1)?;
    x.broadcast_mul(&w.cos)? + rotated.broadcast_mul(&w.sin)?
}

/// RMSNorm with candle's ops (statistics in f32 for a bf16 `x`, as candle-nn's `rms_norm` does).
pub fn rmsnorm(x: &Tensor, weight: &Tensor) -> Result<Tensor> {
    let xf = x.to_dtype(DType::F32)?;
    let ms = xf.sqr()?.mean_keepdim(D::Minus1)?;
    xf.broadcast_mul(&(ms + 1e-5)?.sqrt()?.recip()?)?.to_dtype(x.dtype())?.broadcast_mul(weight)
}

/// Causal grouped-query attention with candle's ops: `q` `[kv, g, s, 64]`, `k` and `v` `[kv, s, 64]`
/// (scores and softmax in f32 for bf16 inputs, as candle-transformers' Llama computes them).
pub fn attention(q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
    let (kv, g, s, hd) = q.dims4()?;
    let keys = k.unsqueeze(1)?.broadcast_as((kv, g, s, hd))?.contiguous()?;
    let values = v.unsqueeze(1)?.broadcast_as((kv, g, s, hd))?.contiguous()?;
    let scores = (q.contiguous()?.matmul(&keys.t()?)?.to_dtype(DType::F32)? * (1.0 / (hd as f64).sqrt()))?;
    // The causal mask, made on the tensors' device (query i sees keys j <= i).
    let positions = Tensor::arange(0u32, s as u32, q.device())?;
    let keep = positions.unsqueeze(1)?.broadcast_ge(&positions.unsqueeze(0)?)?;
    let hidden = Tensor::new(f32::NEG_INFINITY, q.device())?.broadcast_as(scores.shape())?;
    let scores = keep.broadcast_as(scores.shape())?.where_cond(&scores, &hidden)?;
    let e = scores.broadcast_sub(&scores.max_keepdim(D::Minus1)?)?.exp()?;
    e.broadcast_div(&e.sum_keepdim(D::Minus1)?)?.to_dtype(q.dtype())?.matmul(&values)
}

/// The gated MLP with candle's ops.
pub fn mlp(x: &Tensor, gate: &Tensor, up: &Tensor, down: &Tensor) -> Result<Tensor> {
    let g = x.matmul(&gate.t()?)?.to_dtype(DType::F32)?.silu()?.to_dtype(x.dtype())?;
    (g * x.matmul(&up.t()?)?)?.matmul(&down.t()?)
}

/// The tcc kernel of `f32` or `bf16` for tensors of `dtype`.
fn by_dtype(dtype: DType, f32: &'static tcc::Kernel, bf16: &'static tcc::Kernel) -> Result<&'static tcc::Kernel> {
    match dtype {
        DType::F32 => Ok(f32),
        DType::BF16 => Ok(bf16),
        other => Err(tcc::candle_core::Error::Msg(format!("the block's tcc kernels are f32 and bf16, not {other:?}"))),
    }
}

/// The attention part with `kernels`.
pub fn attention_with(kernels: Kernels, q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
    match kernels {
        Kernels::Candle => attention(q, k, v),
        Kernels::Tcc => {
            let kernel = by_dtype(q.dtype(), kernels::attention::kernel(), kernels::attention_bf16::kernel())?;
            q.apply_op3_no_bwd(k, v, &KernelOp::new(kernel))
        }
    }
}

/// The MLP part with `kernels`.
pub fn mlp_with(kernels: Kernels, x: &Tensor, w: &Weights) -> Result<Tensor> {
    match kernels {
        Kernels::Candle => mlp(x, &w.gate, &w.up, &w.down),
        Kernels::Tcc => {
            let kernel = by_dtype(x.dtype(), kernels::mlp::kernel(), kernels::mlp_bf16::kernel())?;
            one(apply(kernel, &[x, &w.gate, &w.up, &w.down])?)
        }
    }
}

/// RMSNorm with `kernels`.
pub fn rmsnorm_with(kernels: Kernels, x: &Tensor, weight: &Tensor) -> Result<Tensor> {
    match kernels {
        Kernels::Candle => rmsnorm(x, weight),
        Kernels::Tcc => {
            let kernel = by_dtype(x.dtype(), kernels::rmsnorm::kernel(), kernels::rmsnorm_bf16::kernel())?;
            x.apply_op2_no_bwd(weight, &KernelOp::new(kernel))
        }
    }
}

/// The only tensor of `outputs`.
fn one(outputs: Vec<Tensor>) -> Result<Tensor> {
    let n = outputs.len();
    <[Tensor; 1]>::try_from(outputs)
        .map(|[t]| t)
        .map_err(|_| tcc::candle_core::Error::Msg(format!("expected one output, got {n}")))
}

/// The attention's inputs for `x` `[tokens, hidden]`: q `[kv, g, tokens, 64]`, k and v
/// `[kv, tokens, 64]`, from RMSNorm, the projections and RoPE.
pub fn qkv(kernels: Kernels, c: &Config, x: &Tensor, w: &Weights) -> Result<(Tensor, Tensor, Tensor)> {
    let n = rmsnorm_with(kernels, x, &w.attn_norm)?;
    let heads = |t: Tensor, h: usize| t.reshape((c.tokens, h, HEAD_DIM))?.transpose(0, 1);
    let q = rope(&heads(n.matmul(&w.wq.t()?)?, c.heads)?, w)?;
    let k = rope(&heads(n.matmul(&w.wk.t()?)?, c.kv_heads)?, w)?;
    let v = heads(n.matmul(&w.wv.t()?)?, c.kv_heads)?;
    let q = q.reshape((c.kv_heads, c.heads / c.kv_heads, c.tokens, HEAD_DIM))?;
    Ok((q, k, v))
}

/// The block: `h = x + wo(attention(..))`, `out = h + mlp(rmsnorm(h))`.
pub fn block(kernels: Kernels, c: &Config, x: &Tensor, w: &Weights) -> Result<Tensor> {
    let (q, k, v) = qkv(kernels, c, x, w)?;
    let o = attention_with(kernels, &q, &k, &v)?;
    let o = o.reshape((c.heads, c.tokens, HEAD_DIM))?.transpose(0, 1)?.reshape((c.tokens, c.hidden))?;
    let h = (x + o.matmul(&w.wo.t()?)?)?;
    let m = mlp_with(kernels, &rmsnorm_with(kernels, &h, &w.mlp_norm)?, w)?;
    h + m
}

/// The largest `|a - e| / (atol + rtol * |e|)` over the elements (at most 1: within tolerance),
/// and the largest `|a - e|`.
pub fn error_ratio(actual: &Tensor, expected: &Tensor, rtol: f32, atol: f32) -> Result<(f32, f32)> {
    if actual.dims() != expected.dims() {
        return Ok((f32::INFINITY, f32::INFINITY));
    }
    let a = actual.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
    let e = expected.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
    let mut worst = (0f32, 0f32);
    for (a, e) in a.iter().zip(&e) {
        let diff = (a - e).abs();
        // NaN anywhere is a mismatch.
        let ratio = if diff.is_nan() { f32::INFINITY } else { diff / (atol + rtol * e.abs()) };
        worst = (worst.0.max(ratio), worst.1.max(diff));
    }
    Ok(worst)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_check_catches_a_difference_and_a_nan() {
        let cpu = Device::Cpu;
        let e = random(&[3, 5], 1, 1.0, &cpu).unwrap();
        assert!(error_ratio(&e, &e, RTOL_TEST, ATOL_TEST).unwrap().0 == 0.0);
        let off = (&e + 1e-2).unwrap();
        assert!(error_ratio(&off, &e, RTOL_TEST, ATOL_TEST).unwrap().0 > 1.0);
        let nan = e.broadcast_mul(&Tensor::new(&[f32::NAN], &cpu).unwrap()).unwrap();
        assert!(error_ratio(&nan, &e, RTOL_TEST, ATOL_TEST).unwrap().0.is_infinite());
        assert!(error_ratio(&e.t().unwrap(), &e, RTOL_TEST, ATOL_TEST).unwrap().0.is_infinite());
    }

    const RTOL_TEST: f32 = 1e-3;
    const ATOL_TEST: f32 = 1e-4;

    #[test]
    fn the_tcc_block_matches_candles_at_odd_sizes() {
        let cpu = Device::Cpu;
        for c in [
            Config { tokens: 1, hidden: 64, heads: 1, kv_heads: 1, mlp: 1 },
            Config { tokens: 7, hidden: 192, heads: 3, kv_heads: 1, mlp: 33 },
        ] {
            let w = Weights::random(&c, &cpu).unwrap();
            let x = random(&[c.tokens, c.hidden], 5, 1.0, &cpu).unwrap();
            let tcc = block(Kernels::Tcc, &c, &x, &w).unwrap();
            let candle = block(Kernels::Candle, &c, &x, &w).unwrap();
            let (ratio, diff) = error_ratio(&tcc, &candle, RTOL_TEST, ATOL_TEST).unwrap();
            assert!(ratio <= 1.0, "{c:?}: max difference {diff}");
        }
    }
}
