//! Attention-shaped programs for the property and differential tests of the attention kernels:
//! `softmax(f(q kᵀ)) v` written as plain math with every score form and mask the optimizer must
//! recognize ([`AttentionCase`]), drawn at random by [`arb_attention`], and an f64 model of what an
//! online-softmax kernel computes from the logits ([`online_softmax_product`]).

use proptest::prelude::*;

use crate::attention::Mask;
use crate::dtype::DType;
use crate::graph::{BuildError, Graph};
use crate::op::{BinaryOp, CompareOp, NodeId, Op, ReduceOp, TensorType, UnaryOp};
use crate::shape::{Dim, Shape};

/// How the scores are transformed before the mask.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ScoreForm {
    /// `q kᵀ · scale`.
    Plain,
    /// ALiBi: `+ slope · (key position - query position)`, positions from `iota`.
    Alibi(f64),
    /// Soft cap: `cap · tanh(s / cap)`.
    SoftCap(f64),
    /// `+ bias[S, T]`, a tensor parameter.
    BiasTensor,
}

/// Which logits are kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MaskForm {
    /// Every logit.
    None,
    /// Causal by positions: a query (the last `q_len` positions of `kv_len`) sees keys at or
    /// before it.
    Causal,
    /// Causal and fewer than `W` positions back (two nested `select`s).
    Window(u64),
    /// `keep[S, T]`, a bool tensor parameter.
    Tensor,
}

/// One attention program's sizes and forms.
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionCase {
    /// Leading batch axes (zero, one or two of them).
    pub batch: Vec<u64>,
    /// Query heads (an axis only when `heads > 1` or `kv_heads != heads`).
    pub heads: u64,
    /// Key/value heads: each serves `heads / kv_heads` consecutive query heads, written with
    /// `reshape` and `broadcast_to` (grouped-query attention) when they differ.
    pub kv_heads: u64,
    /// Queries.
    pub q_len: u64,
    /// Keys.
    pub kv_len: u64,
    /// Query/key head dimension.
    pub head_dim: u64,
    /// Value head dimension.
    pub value_dim: u64,
    /// Inputs' and output's dtype (the softmax runs in f32).
    pub dtype: DType,
    /// The score transform.
    pub score: ScoreForm,
    /// The mask.
    pub mask: MaskForm,
    /// The masked logits' value: `-inf`, or a finite fill such as -10000.
    pub fill: f64,
    /// Divide by the row sum after the product instead of before (f32 only).
    pub divide_after: bool,
    /// Also return the rows' log-sum-exp of the logits, `row_max + log(row_sum)` without the key
    /// axis (f32).
    pub log_sum_exp: bool,
    /// K and V passed as a projection writes them, token-major: `[.., L, kv_heads * D]`, read
    /// through `reshape` to `[.., L, kv_heads, D]` and `permute` to `[.., kv_heads, L, D]` (only
    /// with a head axis).
    pub token_major: bool,
    /// The output as an output projection reads it, token-major: `[S, .., heads * Dv]`, the
    /// product's `[.., heads, S, Dv]` permuted to `[S, .., heads, Dv]` (a cycle of three or more
    /// axes with batch axes, not its own inverse) and reshaped (only with a head axis): the
    /// attention kernel's layout tail.
    pub token_major_output: bool,
}

impl AttentionCase {
    /// A small causal f32 case.
    pub fn causal(q_len: u64, kv_len: u64, head_dim: u64) -> AttentionCase {
        AttentionCase {
            batch: Vec::new(),
            heads: 2,
            kv_heads: 2,
            q_len,
            kv_len,
            head_dim,
            value_dim: head_dim,
            dtype: DType::F32,
            score: ScoreForm::Plain,
            mask: MaskForm::Causal,
            fill: f64::NEG_INFINITY,
            divide_after: false,
            log_sum_exp: false,
            token_major: false,
            token_major_output: false,
        }
    }

    /// A causal f32 case with grouped heads, the differential tests' base: 2 batch entries, 4
    /// query heads over 2 K/V heads.
    pub fn grouped_heads(q_len: u64, kv_len: u64, head_dim: u64) -> AttentionCase {
        AttentionCase { batch: vec![2], heads: 4, kv_heads: 2, ..AttentionCase::causal(q_len, kv_len, head_dim) }
    }

    fn has_head_axis(&self) -> bool {
        self.heads > 1 || self.kv_heads != self.heads
    }

    fn head_axes(&self, heads: u64) -> Vec<u64> {
        let mut dims = self.batch.clone();
        if self.has_head_axis() {
            dims.push(heads);
        }
        dims
    }

    /// A token-major `[.., L, kv_heads * d]` parameter as `[.., kv_heads, L, d]`: reshaped to
    /// `[.., L, kv_heads, d]`, then permuted.
    fn heads_first(&self, g: &mut Graph, x: NodeId, d: u64) -> Result<NodeId, BuildError> {
        let dt = self.dtype;
        let mut split = self.batch.clone();
        split.extend([self.kv_len, self.kv_heads, d]);
        let x = g.push_typed(Op::Reshape(x), TensorType { dtype: dt, shape: Shape::from_consts(&split) })?;
        let b = self.batch.len();
        let mut perm: Vec<usize> = (0..b).collect();
        perm.extend([b + 1, b, b + 2]);
        g.push(Op::Permute { input: x, perm })
    }

    /// The program: `attn(q, k, v [, bias | keep]) -> o` (and the log-sum-exp after `o`).
    pub fn graph(&self) -> Result<Graph, BuildError> {
        let dt = self.dtype;
        let ty = |dims: Vec<u64>, dtype: DType| TensorType { dtype, shape: Shape::from_consts(&dims) };
        let with = |mut lead: Vec<u64>, rest: &[u64]| {
            lead.extend_from_slice(rest);
            lead
        };
        let mut g = Graph::new("attn");
        let q = g.add_param("q", ty(with(self.head_axes(self.heads), &[self.q_len, self.head_dim]), dt))?;
        let (k, v) = if self.token_major && self.has_head_axis() {
            let rows = |d: u64| with(self.batch.clone(), &[self.kv_len, self.kv_heads * d]);
            let k = g.add_param("k", ty(rows(self.head_dim), dt))?;
            let v = g.add_param("v", ty(rows(self.value_dim), dt))?;
            (self.heads_first(&mut g, k, self.head_dim)?, self.heads_first(&mut g, v, self.value_dim)?)
        } else {
            let k_dims = with(self.head_axes(self.kv_heads), &[self.kv_len, self.head_dim]);
            let v_dims = with(self.head_axes(self.kv_heads), &[self.kv_len, self.value_dim]);
            (g.add_param("k", ty(k_dims, dt))?, g.add_param("v", ty(v_dims, dt))?)
        };
        let extra = match (self.score, self.mask) {
            (ScoreForm::BiasTensor, _) => Some(g.add_param("bias", ty(vec![self.q_len, self.kv_len], DType::F32))?),
            (_, MaskForm::Tensor) => Some(g.add_param("keep", ty(vec![self.q_len, self.kv_len], DType::Bool))?),
            _ => None,
        };
        let (k, v) = (self.grouped(&mut g, k)?, self.grouped(&mut g, v)?);
        let rank = g.ty(k).map_or(2, |t| t.shape.rank());
        let mut perm: Vec<usize> = (0..rank).collect();
        perm.swap(rank - 2, rank - 1);
        let kt = g.push(Op::Permute { input: k, perm })?;
        let s = g.push(Op::MatMul(q, kt))?;
        let mut s = if dt == DType::F32 { s } else { cast(&mut g, s, DType::F32)? };
        let scale = g.constant(1.0 / (self.head_dim as f64).sqrt(), DType::F32)?;
        s = g.push(Op::Binary(BinaryOp::Mul, s, scale))?;
        // Query positions are the last q_len of kv_len.
        let offset = self.kv_len as i64 - self.q_len as i64;
        let query_pos = |g: &mut Graph| -> Result<NodeId, BuildError> {
            let iq = g.iota(Dim::Const(self.q_len))?;
            let off = g.constant(offset as f64, DType::I32)?;
            let iq = g.push(Op::Binary(BinaryOp::Add, iq, off))?;
            g.push_typed(Op::Reshape(iq), ty(vec![self.q_len, 1], DType::I32))
        };
        match self.score {
            ScoreForm::Plain => {}
            ScoreForm::Alibi(slope) => {
                let ik = g.iota(Dim::Const(self.kv_len))?;
                let iq = query_pos(&mut g)?;
                let rel = g.push(Op::Binary(BinaryOp::Sub, ik, iq))?;
                let rel = cast(&mut g, rel, DType::F32)?;
                let slope = g.constant(slope, DType::F32)?;
                let bias = g.push(Op::Binary(BinaryOp::Mul, rel, slope))?;
                s = g.push(Op::Binary(BinaryOp::Add, s, bias))?;
            }
            ScoreForm::SoftCap(cap) => {
                let c = g.constant(cap, DType::F32)?;
                let t = g.push(Op::Binary(BinaryOp::Div, s, c))?;
                let t = g.push(Op::Unary(UnaryOp::Tanh, t))?;
                s = g.push(Op::Binary(BinaryOp::Mul, c, t))?;
            }
            ScoreForm::BiasTensor => {
                let bias = extra.ok_or(crate::TypeError::UnknownParam(3))?;
                s = g.push(Op::Binary(BinaryOp::Add, s, bias))?;
            }
        }
        let fill = g.constant(self.fill, DType::F32)?;
        let keep_where =
            |g: &mut Graph, keep: NodeId, s: NodeId| g.push(Op::Select { cond: keep, on_true: s, on_false: fill });
        match self.mask {
            MaskForm::None => {}
            MaskForm::Causal | MaskForm::Window(_) => {
                let iq = query_pos(&mut g)?;
                let ik = g.iota(Dim::Const(self.kv_len))?;
                let causal = g.push(Op::Compare(CompareOp::Ge, iq, ik))?;
                if let MaskForm::Window(w) = self.mask {
                    let back = g.push(Op::Binary(BinaryOp::Sub, iq, ik))?;
                    let w = g.constant(w as f64, DType::I32)?;
                    let near = g.push(Op::Compare(CompareOp::Lt, back, w))?;
                    s = keep_where(&mut g, near, s)?;
                }
                s = keep_where(&mut g, causal, s)?;
            }
            MaskForm::Tensor => {
                let keep = extra.ok_or(crate::TypeError::UnknownParam(3))?;
                s = keep_where(&mut g, keep, s)?;
            }
        }
        let last = g.ty(s).map_or(1, |t| t.shape.rank()) - 1;
        let m = g.push(Op::Reduce { op: ReduceOp::Max, input: s, axes: vec![last], keepdim: true })?;
        let d = g.push(Op::Binary(BinaryOp::Sub, s, m))?;
        let e = g.push(Op::Unary(UnaryOp::Exp, d))?;
        let l = g.push(Op::Reduce { op: ReduceOp::Sum, input: e, axes: vec![last], keepdim: true })?;
        let out = if self.divide_after && dt == DType::F32 {
            let o = g.push(Op::MatMul(e, v))?;
            g.push(Op::Binary(BinaryOp::Div, o, l))?
        } else {
            let p = g.push(Op::Binary(BinaryOp::Div, e, l))?;
            let p = if dt == DType::F32 { p } else { cast(&mut g, p, dt)? };
            g.push(Op::MatMul(p, v))?
        };
        let out = if self.token_major_output && self.has_head_axis() { self.tokens_first(&mut g, out)? } else { out };
        g.outputs.push(out);
        if self.log_sum_exp {
            let log = g.push(Op::Unary(UnaryOp::Log, l))?;
            let lse = g.push(Op::Binary(BinaryOp::Add, m, log))?;
            let rows = g.ty(lse).map(|t| t.shape.dims()[..last].to_vec()).unwrap_or_default();
            let lse = g.push_typed(Op::Reshape(lse), TensorType { dtype: DType::F32, shape: Shape(rows) })?;
            g.outputs.push(lse);
        }
        Ok(g)
    }

    /// The output `[.., heads, S, Dv]` as `[S, .., heads * Dv]`: permuted to `[S, .., heads, Dv]`
    /// (the decoder layer's `o.permute([2, 0, 1, 3])` with one batch axis), then reshaped.
    fn tokens_first(&self, g: &mut Graph, o: NodeId) -> Result<NodeId, BuildError> {
        let b = self.batch.len();
        let mut perm = vec![b + 1];
        perm.extend(0..b);
        perm.extend([b, b + 2]);
        let o = g.push(Op::Permute { input: o, perm })?;
        let t = g.ty(o).cloned().ok_or(crate::TypeError::UnknownOperand(o))?;
        let mut rows = vec![self.q_len];
        rows.extend(with_dims(&self.batch, &[self.heads * self.value_dim]));
        g.push_typed(Op::Reshape(o), TensorType { dtype: t.dtype, shape: Shape::from_consts(&rows) })
    }

    /// `x` (`[.., kv_heads, L, D]`) read by the query heads of its group: reshaped to
    /// `[.., kv_heads, 1, L, D]`, broadcast to `[.., kv_heads, group, L, D]`, reshaped to
    /// `[.., heads, L, D]`.
    fn grouped(&self, g: &mut Graph, x: NodeId) -> Result<NodeId, BuildError> {
        if self.kv_heads == self.heads {
            return Ok(x);
        }
        let t = g.ty(x).cloned().ok_or(crate::TypeError::UnknownOperand(x))?;
        let dims: Vec<u64> = t.shape.dims().iter().map(|d| d.as_const().unwrap_or(1)).collect();
        let r = dims.len();
        let group = self.heads / self.kv_heads.max(1);
        let mut split = dims[..r - 2].to_vec();
        split.push(1);
        split.extend_from_slice(&dims[r - 2..]);
        let x = g.push_typed(Op::Reshape(x), TensorType { dtype: t.dtype, shape: Shape::from_consts(&split) })?;
        let mut wide = split.clone();
        wide[r - 2] = group;
        let x = g.push_typed(Op::Broadcast(x), TensorType { dtype: t.dtype, shape: Shape::from_consts(&wide) })?;
        let mut merged = dims[..r - 3].to_vec();
        merged.push(self.heads);
        merged.extend_from_slice(&dims[r - 2..]);
        g.push_typed(Op::Reshape(x), TensorType { dtype: t.dtype, shape: Shape::from_consts(&merged) })
    }
}

fn with_dims(lead: &[u64], rest: &[u64]) -> Vec<u64> {
    lead.iter().chain(rest).copied().collect()
}

fn cast(g: &mut Graph, x: NodeId, to: DType) -> Result<NodeId, BuildError> {
    let shape = g.ty(x).map(|t| t.shape.clone()).ok_or(crate::TypeError::UnknownOperand(x))?;
    g.push_typed(Op::Cast(x), TensorType { dtype: to, shape })
}

/// Random attention cases: shapes that include 1 and lengths off any block, every score form and
/// mask, grouped heads, K and V stored head-major or token-major, the output head-major or
/// token-major, both normalizations, -inf and finite fills.
pub fn arb_attention() -> impl Strategy<Value = AttentionCase> {
    let lens = prop_oneof![Just(1u64), 2u64..24, 24u64..80];
    let dims = prop_oneof![Just(1u64), Just(8u64), 2u64..20];
    let score = prop_oneof![
        Just(ScoreForm::Plain),
        (0.01f64..0.5).prop_map(ScoreForm::Alibi),
        (5.0f64..30.0).prop_map(ScoreForm::SoftCap),
        Just(ScoreForm::BiasTensor),
    ];
    let mask = prop_oneof![
        Just(MaskForm::None),
        Just(MaskForm::Causal),
        (1u64..9).prop_map(MaskForm::Window),
        Just(MaskForm::Tensor)
    ];
    let dtype = prop_oneof![3 => Just(DType::F32), 1 => Just(DType::F16), 1 => Just(DType::BF16)];
    let batch =
        prop_oneof![Just(vec![]), (1u64..3).prop_map(|b| vec![b]), (1u64..3, 1u64..3).prop_map(|(a, b)| vec![a, b])];
    let heads = prop_oneof![Just((1u64, 1u64)), Just((2, 2)), Just((4, 2)), Just((4, 1)), Just((3, 3))];
    let flags = (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>());
    (batch, heads, lens.clone(), lens, dims.clone(), dims, dtype, score, mask, flags).prop_map(
        |(batch, (heads, kv_heads), q_len, kv_len, head_dim, value_dim, dtype, score, mask, flags)| {
            let (finite, divide_after, log_sum_exp, token_major, token_major_output) = flags;
            // A tensor bias and a tensor mask are both an extra parameter: keep one.
            let mask = if score == ScoreForm::BiasTensor && mask == MaskForm::Tensor { MaskForm::Causal } else { mask };
            AttentionCase {
                batch,
                heads,
                kv_heads,
                q_len: q_len.min(kv_len),
                kv_len,
                head_dim,
                value_dim,
                dtype,
                score,
                mask,
                fill: if finite { -10000.0 } else { f64::NEG_INFINITY },
                divide_after,
                log_sum_exp,
                token_major,
                token_major_output,
            }
        },
    )
}

/// What an online-softmax kernel computes, in f64: for each row of `logits` (`rows x keys`,
/// row-major; row `r` is query position `r % queries`), blocks of `block` keys visited in order,
/// skipping the blocks `mask` marks as fully masked for the query block of `query_block` rows
/// that holds the row (when it allows skipping), the running maximum with `-inf` read as 0 for
/// the exponent, the running sum and output rescaled; then the output divided by the sum.
/// `values` is `keys x width` per row group: row `r` uses `values[r / queries]`.
pub fn online_softmax_product(
    logits: &[f64],
    values: &[f64],
    (rows, queries, keys, width): (usize, usize, usize, usize),
    (query_block, block): (usize, usize),
    mask: Option<&Mask>,
) -> Vec<f64> {
    let mut out = vec![0.0; rows * width];
    let block = block.max(1);
    let query_block = query_block.max(1);
    for r in 0..rows {
        let (i, group) = (r % queries.max(1), r / queries.max(1));
        let q0 = (i / query_block * query_block) as i64;
        let q_range = (q0, q0 + query_block as i64 - 1);
        let (mut m, mut l) = (f64::NEG_INFINITY, 0.0);
        let mut o = vec![0.0; width];
        for start in (0..keys).step_by(block) {
            let k_range = (start as i64, (start + block) as i64 - 1);
            if mask.is_some_and(|m| m.skips_blocks() && m.block_is_masked(q_range, k_range)) {
                continue;
            }
            let end = (start + block).min(keys);
            let x = &logits[r * keys + start..r * keys + end];
            let block_max =
                x.iter().fold(f64::NEG_INFINITY, |a, &b| if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) });
            let m_new = if m.is_nan() || block_max.is_nan() { f64::NAN } else { m.max(block_max) };
            let safe = if m_new == f64::NEG_INFINITY { 0.0 } else { m_new };
            let alpha = (m - safe).exp();
            l *= alpha;
            for e in o.iter_mut() {
                *e *= alpha;
            }
            for (jj, &xv) in x.iter().enumerate() {
                let p = (xv - safe).exp();
                l += p;
                let row = (group * keys + start + jj) * width;
                for (e, vv) in o.iter_mut().zip(&values[row..row + width]) {
                    *e += p * vv;
                }
            }
            m = m_new;
        }
        for (dst, e) in out[r * width..(r + 1) * width].iter_mut().zip(&o) {
            *dst = e / l;
        }
    }
    out
}
