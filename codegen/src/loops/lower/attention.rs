//! The CPU attention kernel: `softmax(f(q kᵀ)) v` ([`Attention`]) as one loop nest with an online
//! softmax, so the score matrix never exists beyond one block.
//!
//! For each batch entry and each block of `bq` queries, the keys are visited a block of `bk` at a
//! time; for each query of the block:
//! 1. the scores of the key block, `q kᵀ`, into a call-local f32 block buffer `S`: register tiles
//!    of the GEMM micro-kernel over packed panels (or, without tiles, a dot product per score);
//! 2. the logits `f(S)` (the graph's own score function inlined: scale, bias, positions, mask)
//!    into a block buffer `X`, and their maximum;
//! 3. the new running maximum `m'` (with `-inf` read as 0, so a block whose logits are all masked
//!    adds nothing and no `-inf - -inf` appears), `p = exp(x - m')` in place of `X` with its sum;
//! 4. the running sum and output rescaled by `exp(m - m')`; then for the whole block `o += p v`
//!    (register tiles again, or a vector loop along the value dimension per key).
//!
//! At the end the output is divided by the running sum and the graph's epilogue (a cast, a
//! residual) applied as it is stored, at its permuted place when a layout tail follows
//! ([`tcc_ir::attention::OutputLayout`]). A row whose every logit is `-inf` ends with `0 / 0`, NaN, as
//! the written formula gives. Key blocks where the mask ([`tcc_ir::attention::Mask`]) holds
//! nowhere are skipped (only with a `-inf` fill). The batch loops are outermost, so the row split
//! runs batch entries (or query blocks, without batch axes) on different threads.
//!
//! With register tiles, K and V are packed into B panels once per K/V head, in a nest of their own
//! before the attention nest, and each query block's queries once per block. A batch axis that a
//! reshape merges from several (the query heads of grouped-query attention, `[Hkv, G]` read as
//! `[H]`) is looped as its parts, so K and V are read through the graph's reshape and broadcast as
//! affine indices (`Lowerer::reshaped_index`) and never copied per query head.

use tcc_ir::attention::{Atom, Attention};
use tcc_ir::{BinaryOp, CompareOp, DType, NodeId, Op, UnaryOp};

use super::{Lowerer, View, broadcast_index, numel, wrap_loops};
use crate::error::CodegenError;
use crate::loops::ir::{BufDecl, BufId, BufKind, Combine, Expr, ExprId, Extent, Index, MicroKernel, Stmt, VarId};

/// The statements of the two products: once per query block (packing the queries), per key
/// block before the softmax (the scores), per key block after it (`o += p v`).
type Products = (Vec<Stmt>, Vec<Stmt>, Vec<Stmt>);

/// The three operands of the products, each a node and its batch index (broadcast to the
/// domain's batch axes), and the head and value dimensions.
struct Operands {
    q: (NodeId, Vec<Index>),
    k: (NodeId, Vec<Index>),
    v: (NodeId, Vec<Index>),
    depth: u64,
    width: u64,
    /// The domain's batch axes and the attention nest's batch loops (one per part of an axis).
    batch_dims: Vec<u64>,
    parts: Vec<(VarId, u64)>,
}

/// The positions of one block: `block * var_outer + var_inner`.
struct Strip {
    outer: VarId,
    inner: VarId,
    block: u64,
    total: u64,
}

impl Strip {
    fn position(&self) -> Index {
        Index::var(self.outer).scale(as_i64(self.block)).add(&Index::var(self.inner))
    }

    fn start(&self) -> Index {
        Index::var(self.outer).scale(as_i64(self.block))
    }

    fn inner_extent(&self) -> Extent {
        Extent::Tail { total: self.total, block: self.block, outer: Index::var(self.outer) }
    }
}

fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Lowerer<'_> {
    /// Plans buffers for the attention `a`: parameters, the output, and what the prologue must
    /// materialize (reshape operands, costly values); nothing after the scores gets a buffer.
    ///
    /// With `copy_reshapes` off, a reshape's operand is not materialized: its reads must resolve
    /// to affine indices ([`Lowerer::reshaped_index`]), or the lowering fails and is redone with
    /// it on.
    pub(super) fn plan_attention(
        &mut self,
        a: &Attention,
        max_inline_cost: usize,
        copy_reshapes: bool,
    ) -> Result<(), CodegenError> {
        let g = self.g;
        for (i, node) in g.nodes.iter().enumerate() {
            if let Op::Input { index } = node.op {
                if index >= g.params.len() {
                    return Err(self.bad(format!("input {index} names no parameter")));
                }
                self.mat[i] = Some(crate::loops::BufId(u32::try_from(index).unwrap_or(u32::MAX)));
            }
        }
        // The output, then the statistics (the row log-sum-exp).
        for (k, &out) in g.outputs.iter().enumerate() {
            if self.mat[out.index()].is_some() {
                return Err(self.bad("an attention kernel's outputs are distinct computed values"));
            }
            let dtype = self.dtype(out)?;
            let len = numel(self.shape(out)?);
            let buf = self.push_buf(BufDecl { dtype, len, kind: BufKind::Output(k) });
            self.mat[out.index()] = Some(buf);
        }
        let after_scores = g.downstream_of(a.scores);
        let mut cost = vec![1usize; g.nodes.len()];
        for (i, node) in g.nodes.iter().enumerate() {
            if after_scores[i] || self.mat[i].is_some() {
                continue;
            }
            if let Op::Reshape(x) = node.op
                && copy_reshapes
                && self.mat.get(x.index()).is_some_and(Option::is_none)
                && numel(self.shape(x)?) > 1
            {
                self.mat[x.index()] = Some(self.scratch(x)?);
            }
            let forced = matches!(node.op, Op::Reduce { .. } | Op::MatMul(..) | Op::Concat { .. });
            let c = 1 + node
                .op
                .operands()
                .iter()
                .map(|o| if self.mat[o.index()].is_some() { 1 } else { cost[o.index()] })
                .sum::<usize>();
            if (forced || c > max_inline_cost) && self.mat[i].is_none() {
                self.mat[i] = Some(self.scratch(NodeId(i as u32))?);
            } else {
                cost[i] = c;
            }
        }
        Ok(())
    }

    /// The nests of the prologue's materialized values, then the attention nest.
    pub(super) fn build_attention(&mut self, a: &Attention, blocks: [u32; 2]) -> Result<(), CodegenError> {
        let after_scores = self.g.downstream_of(a.scores);
        for (i, &after) in after_scores.iter().enumerate() {
            if after {
                continue;
            }
            if let Some(buf) = self.mat[i] {
                let n = NodeId(i as u32);
                let stmt = match &self.g.nodes[i].op {
                    Op::Input { .. } => continue,
                    Op::Reduce { op, input, axes, keepdim } => self.reduce_nest(n, buf, *op, *input, axes, *keepdim)?,
                    Op::MatMul(x, y) => self.matmul_nest(n, buf, *x, *y)?,
                    Op::Concat { inputs, axis } => self.concat_nests(n, buf, inputs, *axis)?,
                    _ => self.pointwise_nest(n, buf, |l, idx| l.op_expr(n, idx))?,
                };
                if !stmt.is_empty() {
                    self.body.push(stmt);
                }
            }
        }
        let nest = self.attention_nest(a, blocks)?;
        self.body.push(nest);
        Ok(())
    }

    fn attention_nest(&mut self, a: &Attention, blocks: [u32; 2]) -> Result<Vec<Stmt>, CodegenError> {
        let g = self.g;
        let Op::MatMul(q, k) = g.nodes[a.scores.index()].op else {
            return Err(self.bad("attention scores are not a product"));
        };
        let Op::MatMul(_, v) = g.nodes[a.output.index()].op else {
            return Err(self.bad("attention output is not a product"));
        };
        let domain = self.shape(a.scores)?.to_vec();
        let out_dims = self.shape(a.output)?.to_vec();
        let (q_dims, k_dims, v_dims) = (self.shape(q)?.to_vec(), self.shape(k)?.to_vec(), self.shape(v)?.to_vec());
        let r = domain.len();
        if r < 2 || out_dims.len() != r || q_dims.len() < 2 || k_dims.len() < 2 || v_dims.len() < 2 {
            return Err(self.bad("attention operands of rank below 2"));
        }
        let (s_len, t_len) = (domain[r - 2], domain[r - 1]);
        let depth = q_dims[q_dims.len() - 1];
        let width = out_dims[r - 1];
        // Register tiles for the two products (blocks rounded to whole tiles), or plain loops.
        let tiles = self.gemm.map(|t| (u64::from(t.mr.max(1)), u64::from(t.nr.max(1)), t));
        let round = |x: u64, m: u64| x.max(1).div_ceil(m) * m;
        let (bq, bk) = {
            let (bq, bk) = (u64::from(blocks[0]).min(s_len.max(1)), u64::from(blocks[1]).min(t_len.max(1)));
            match tiles {
                Some((mr, nr, _)) => (round(bq, mr), round(bk, nr)),
                None => (bq.max(1), bk.max(1)),
            }
        };
        let batch_dims = domain[..r - 2].to_vec();
        let (batch_loops, batch) = self.batch_loops(&batch_dims);
        let queries = self.strip(bq, s_len);
        let keys = self.strip(bk, t_len);
        let ev = self.new_var();
        let (i, j) = (queries.position(), keys.position());
        let (qi, jl) = (Index::var(queries.inner), Index::var(keys.inner));

        // Call-local block buffers.
        let local = |l: &mut Self, dtype: DType, len: u64| l.push_buf(BufDecl { dtype, len, kind: BufKind::Local });
        let s_buf = local(self, DType::F32, bq * bk);
        let x_buf = local(self, DType::F32, bq * bk);
        let o_buf = local(self, DType::F32, bq * width.max(1));
        let m_buf = local(self, DType::F32, bq);
        let new_m = local(self, DType::F32, bq);
        let safe_m = local(self, DType::F32, bq);
        let l_buf = local(self, DType::F32, bq);
        let block_at = qi.scale(as_i64(bk)).add(&jl);
        let row_at = qi.scale(as_i64(width)).add(&Index::var(ev));

        // The scores and the normalized output read the block buffers.
        let mut s_origin = vec![Index::constant(0); r];
        s_origin[r - 2] = queries.start();
        s_origin[r - 1] = keys.start();
        let mut s_strides = vec![0i64; r];
        s_strides[r - 2] = as_i64(bk);
        s_strides[r - 1] = 1;
        self.views.insert(a.scores, View { buf: s_buf, origin: s_origin, strides: s_strides });
        let mut o_origin = vec![Index::constant(0); r];
        o_origin[r - 2] = queries.start();
        let mut o_strides = vec![0i64; r];
        o_strides[r - 2] = as_i64(width);
        o_strides[r - 1] = 1;
        self.views.insert(a.normalized_output(), View { buf: o_buf, origin: o_origin, strides: o_strides });

        let f32c = |l: &mut Self, x: f64| l.arena.constant(DType::F32, x);
        let load = |l: &mut Self, buf, index: Index| l.arena.intern(Expr::Load { buf, index });
        let bin = |l: &mut Self, op, lhs, rhs| l.arena.intern(Expr::Binary { op, dtype: DType::F32, lhs, rhs });
        let exp = |l: &mut Self, arg| l.arena.intern(Expr::Unary { op: UnaryOp::Exp, dtype: DType::F32, arg });
        let zero = f32c(self, 0.0);
        let operands = Operands {
            q: (q, broadcast_index(&batch, &q_dims[..q_dims.len() - 2], &batch_dims)),
            k: (k, broadcast_index(&batch, &k_dims[..k_dims.len() - 2], &batch_dims)),
            v: (v, broadcast_index(&batch, &v_dims[..v_dims.len() - 2], &batch_dims)),
            depth,
            width,
            batch_dims: batch_dims.clone(),
            parts: batch_loops.clone(),
        };

        // 1. Scores into S, and 5. o += p v, as register tiles or as loops.
        let (pack_queries, scores, values) = match tiles {
            Some((mr, nr, t)) => {
                self.tiled_products(&operands, (&queries, &keys), (s_buf, x_buf, o_buf), (mr, nr, t))?
            }
            None => self.looped_products(&operands, (&queries, &keys, ev), (s_buf, x_buf, o_buf))?,
        };

        // 2. Logits and their block maximum.
        let mut at = batch.clone();
        at.extend([i.clone(), j.clone()]);
        let logit = self.expr_at(a.logits, &at)?;
        let logit = self.as_f32(a.logits, logit)?;
        let x = load(self, x_buf, block_at.clone());
        let block_max = self.new_acc(DType::F32);
        let neg_inf = f32c(self, f64::NEG_INFINITY);
        let block_max_value = self.arena.intern(Expr::Acc(block_max));

        // 3. The running maximum (-inf read as 0 for the exponent) and p = exp(x - m').
        let m_old = load(self, m_buf, qi.clone());
        let m_new_value = bin(self, BinaryOp::Max, m_old, block_max_value);
        let m_new = load(self, new_m, qi.clone());
        let is_empty =
            self.arena.intern(Expr::Compare { op: CompareOp::Eq, operand: DType::F32, lhs: m_new, rhs: neg_inf });
        let safe_value =
            self.arena.intern(Expr::Select { dtype: DType::F32, cond: is_empty, on_true: zero, on_false: m_new });
        let m_safe = load(self, safe_m, qi.clone());
        let shifted = bin(self, BinaryOp::Sub, x, m_safe);
        let p = exp(self, shifted);
        let block_sum = self.new_acc(DType::F32);
        let block_sum_value = self.arena.intern(Expr::Acc(block_sum));

        // 4. Rescale the running sum and output.
        let drop = bin(self, BinaryOp::Sub, m_old, m_safe);
        let alpha = exp(self, drop);
        let l_old = load(self, l_buf, qi.clone());
        let l_scaled = bin(self, BinaryOp::Mul, l_old, alpha);
        let l_new = bin(self, BinaryOp::Add, l_scaled, block_sum_value);
        let o = load(self, o_buf, row_at.clone());
        let o_scaled = bin(self, BinaryOp::Mul, o, alpha);

        let softmax = vec![Stmt::Loop {
            var: queries.inner,
            extent: queries.inner_extent(),
            body: vec![
                Stmt::Loop {
                    var: keys.inner,
                    extent: keys.inner_extent(),
                    body: vec![Stmt::Store { buf: x_buf, index: block_at.clone(), value: logit }],
                },
                Stmt::AccInit { acc: block_max, value: neg_inf },
                Stmt::Loop {
                    var: keys.inner,
                    extent: keys.inner_extent(),
                    body: vec![Stmt::AccUpdate { acc: block_max, combine: Combine::Max, value: x }],
                },
                Stmt::Store { buf: new_m, index: qi.clone(), value: m_new_value },
                Stmt::Store { buf: safe_m, index: qi.clone(), value: safe_value },
                Stmt::AccInit { acc: block_sum, value: zero },
                Stmt::Loop {
                    var: keys.inner,
                    extent: keys.inner_extent(),
                    // The sum first: the store replaces x by p, which the sum must not read again.
                    body: vec![
                        Stmt::AccUpdate { acc: block_sum, combine: Combine::Add, value: p },
                        Stmt::Store { buf: x_buf, index: block_at.clone(), value: p },
                    ],
                },
                Stmt::Store { buf: l_buf, index: qi.clone(), value: l_new },
                Stmt::Loop {
                    var: ev,
                    extent: Extent::Const(width),
                    body: vec![Stmt::Store { buf: o_buf, index: row_at.clone(), value: o_scaled }],
                },
                Stmt::Store { buf: m_buf, index: qi.clone(), value: m_new },
            ],
        }];
        let mut per_block = scores;
        per_block.extend(softmax);
        per_block.extend(values);
        let key_block = match self.live_block(a, &queries, &keys) {
            Some(cond) => vec![Stmt::If { cond, body: per_block }],
            None => per_block,
        };

        // Start and finish of a query block.
        let mut init = pack_queries;
        init.push(Stmt::Loop {
            var: queries.inner,
            extent: queries.inner_extent(),
            body: vec![
                Stmt::Store { buf: m_buf, index: qi.clone(), value: neg_inf },
                Stmt::Store { buf: l_buf, index: qi.clone(), value: zero },
                Stmt::Loop {
                    var: ev,
                    extent: Extent::Const(width),
                    body: vec![Stmt::Store { buf: o_buf, index: row_at.clone(), value: zero }],
                },
            ],
        });
        let l_final = load(self, l_buf, qi.clone());
        let o_final = load(self, o_buf, row_at.clone());
        let normalized = bin(self, BinaryOp::Div, o_final, l_final);
        let out = *self.g.outputs.first().ok_or_else(|| self.bad("no output"))?;
        let out_buf = self.mat[out.index()].ok_or_else(|| self.bad("the output has no buffer"))?;
        let mut out_idx = batch.clone();
        out_idx.extend([i.clone(), Index::var(ev)]);
        // Through a layout tail the value is stored at its permuted place.
        let (value, store_at) = match &a.layout {
            Some(l) => (l.value, Index::flatten(&l.permuted(&out_idx), &l.permuted(&out_dims))),
            None => (out, Index::flatten(&out_idx, &out_dims)),
        };
        let result = if self.views.contains_key(&value) {
            self.expr_at(value, &out_idx)?
        } else {
            self.op_expr(value, &out_idx)?
        };
        let mut row_finish = self.statistics(a, (&batch, &i, &queries), (m_buf, l_buf))?;
        row_finish.extend([
            Stmt::Loop {
                var: ev,
                extent: Extent::Const(width),
                body: vec![Stmt::Store { buf: o_buf, index: row_at.clone(), value: normalized }],
            },
            Stmt::Loop {
                var: ev,
                extent: Extent::Const(width),
                body: vec![Stmt::Store { buf: out_buf, index: store_at, value: result }],
            },
        ]);
        let finish = vec![Stmt::Loop { var: queries.inner, extent: queries.inner_extent(), body: row_finish }];

        let mut query_block = init;
        query_block.push(Stmt::Loop { var: keys.outer, extent: Extent::Const(t_len.div_ceil(bk)), body: key_block });
        query_block.extend(finish);
        let nest =
            vec![Stmt::Loop { var: queries.outer, extent: Extent::Const(s_len.div_ceil(bq)), body: query_block }];
        let (vars, extents): (Vec<VarId>, Vec<u64>) = batch_loops.into_iter().unzip();
        Ok(wrap_loops(&vars, &extents, nest))
    }

    /// The stores of the statistic outputs ([`Attention::statistics`], the row log-sum-exp) for
    /// query row `i` of the block, from the final running maximum and sum. The sum is read as NaN
    /// first where the maximum is `-inf` (every logit of the row is): the written formula's
    /// `exp(-inf - -inf)` makes the sum, and so every statistic and the output, NaN there.
    fn statistics(
        &mut self,
        a: &Attention,
        (batch, i, queries): (&[Index], &Index, &Strip),
        (m_buf, l_buf): (BufId, BufId),
    ) -> Result<Vec<Stmt>, CodegenError> {
        if a.statistics.is_empty() {
            return Ok(Vec::new());
        }
        let qi = Index::var(queries.inner);
        let m = self.arena.intern(Expr::Load { buf: m_buf, index: qi.clone() });
        let l = self.arena.intern(Expr::Load { buf: l_buf, index: qi.clone() });
        let neg_inf = self.arena.constant(DType::F32, f64::NEG_INFINITY);
        let nan = self.arena.constant(DType::F32, f64::NAN);
        let empty = self.arena.intern(Expr::Compare { op: CompareOp::Eq, operand: DType::F32, lhs: m, rhs: neg_inf });
        let l_or_nan = self.arena.intern(Expr::Select { dtype: DType::F32, cond: empty, on_true: nan, on_false: l });
        let mut stmts = vec![Stmt::Store { buf: l_buf, index: qi, value: l_or_nan }];
        // The row statistics read the running maximum and sum of the row.
        let r = batch.len() + 2;
        let mut origin = vec![Index::constant(0); r];
        origin[r - 2] = queries.start();
        let mut strides = vec![0i64; r];
        strides[r - 2] = 1;
        self.views.insert(a.row_max, View { buf: m_buf, origin: origin.clone(), strides: strides.clone() });
        self.views.insert(a.row_sum, View { buf: l_buf, origin, strides });
        for &stat in &a.statistics {
            let dims = self.shape(stat)?.to_vec();
            let mut idx = batch.to_vec();
            idx.push(i.clone());
            if dims.len() == r {
                idx.push(Index::constant(0));
            }
            let value = self.op_expr(stat, &idx)?;
            let buf = self.mat[stat.index()].ok_or_else(|| self.bad("a statistic has no buffer"))?;
            stmts.push(Stmt::Store { buf, index: Index::flatten(&idx, &dims), value });
        }
        Ok(stmts)
    }

    /// A strip-mined loop pair over `total` positions in blocks of `block`, with the ranges
    /// [`Lowerer::reshaped_index`] needs.
    fn strip(&mut self, block: u64, total: u64) -> Strip {
        let (outer, inner) = (self.new_var(), self.new_var());
        self.ranges.max.insert(outer, total.div_ceil(block.max(1)));
        self.ranges.max.insert(inner, block);
        self.ranges.tails.insert(inner, (total, as_i64(block), Index::var(outer)));
        Strip { outer, inner, block, total }
    }

    /// The loops over the domain's batch axes and each axis's index. An axis that a reshape in
    /// the graph merges from several (the query heads of grouped-query attention, `[.., Hkv, G]`
    /// read as `[.., H]`) gets one loop per part, so that reading K and V through that reshape
    /// is an affine index of the parts ([`Lowerer::reshaped_index`]) and they are never copied.
    fn batch_loops(&mut self, batch_dims: &[u64]) -> (Vec<(VarId, u64)>, Vec<Index>) {
        let mut parts: Vec<Vec<u64>> = batch_dims.iter().map(|&d| vec![d]).collect();
        for (i, node) in self.g.nodes.iter().enumerate() {
            let Op::Reshape(x) = node.op else { continue };
            let (Some(to), Some(from)) = (self.shapes.get(i), self.shapes.get(x.index())) else { continue };
            let suffix = to.iter().rev().zip(from.iter().rev()).take_while(|(a, b)| a == b).count();
            let (lead_to, lead_from) = (&to[..to.len() - suffix], &from[..from.len() - suffix]);
            if lead_to != batch_dims {
                continue;
            }
            if let Some(groups) = merge_groups(lead_from, lead_to) {
                for (axis, group) in groups.into_iter().enumerate() {
                    if group.len() > 1 && parts[axis].len() == 1 {
                        parts[axis] = group;
                    }
                }
            }
        }
        let mut loops = Vec::new();
        let mut index = Vec::with_capacity(batch_dims.len());
        for sizes in parts {
            let mut at = Index::constant(0);
            for &size in &sizes {
                let v = self.new_var();
                self.ranges.max.insert(v, size);
                loops.push((v, size));
                at = at.scale(as_i64(size)).add(&Index::var(v));
            }
            index.push(at);
        }
        (loops, index)
    }

    /// The products as plain loops: each score a dot product over the head dimension (a vector
    /// reduction), and `o += p v` a vector loop along the value dimension per key.
    fn looped_products(
        &mut self,
        ops: &Operands,
        (queries, keys, ev): (&Strip, &Strip, VarId),
        (s_buf, x_buf, o_buf): (BufId, BufId, BufId),
    ) -> Result<Products, CodegenError> {
        let (i, j) = (queries.position(), keys.position());
        let (qi, jl) = (Index::var(queries.inner), Index::var(keys.inner));
        let block_at = qi.scale(as_i64(keys.block)).add(&jl);
        let row_at = qi.scale(as_i64(ops.width)).add(&Index::var(ev));
        let dv = self.new_var();
        let qe = self.operand(&ops.q, [i.clone(), Index::var(dv)])?;
        let ke = self.operand(&ops.k, [Index::var(dv), j.clone()])?;
        let product = self.arena.intern(Expr::Binary { op: BinaryOp::Mul, dtype: DType::F32, lhs: qe, rhs: ke });
        let dot = self.new_acc(DType::F32);
        let zero = self.arena.constant(DType::F32, 0.0);
        let dot_value = self.arena.intern(Expr::Acc(dot));
        let scores = vec![Stmt::Loop {
            var: queries.inner,
            extent: queries.inner_extent(),
            body: vec![Stmt::Loop {
                var: keys.inner,
                extent: keys.inner_extent(),
                body: vec![
                    Stmt::AccInit { acc: dot, value: zero },
                    Stmt::Loop {
                        var: dv,
                        extent: Extent::Const(ops.depth),
                        body: vec![Stmt::AccUpdate { acc: dot, combine: Combine::Add, value: product }],
                    },
                    Stmt::Store { buf: s_buf, index: block_at.clone(), value: dot_value },
                ],
            }],
        }];
        let ve = self.operand(&ops.v, [j, Index::var(ev)])?;
        let p = self.arena.intern(Expr::Load { buf: x_buf, index: block_at });
        let o = self.arena.intern(Expr::Load { buf: o_buf, index: row_at.clone() });
        let weighted = self.arena.intern(Expr::Binary { op: BinaryOp::Mul, dtype: DType::F32, lhs: p, rhs: ve });
        let o_acc = self.arena.intern(Expr::Binary { op: BinaryOp::Add, dtype: DType::F32, lhs: o, rhs: weighted });
        let values = vec![Stmt::Loop {
            var: queries.inner,
            extent: queries.inner_extent(),
            body: vec![Stmt::Loop {
                var: keys.inner,
                extent: keys.inner_extent(),
                body: vec![Stmt::Loop {
                    var: ev,
                    extent: Extent::Const(ops.width),
                    body: vec![Stmt::Store { buf: o_buf, index: row_at, value: o_acc }],
                }],
            }],
        }];
        Ok((Vec::new(), scores, values))
    }

    /// The products as register tiles over packed panels (the GEMM micro-kernel): the query block
    /// packed once per query block (its prologue, a scale, applied as it packs), each key block's
    /// `kᵀ` and `v` packed once per query block, `S = Q Kᵀ` overwritten and `O += P V`
    /// accumulated tile by tile. Blocks are whole tiles (`bq` a multiple of `mr`, `bk` of `nr`).
    fn tiled_products(
        &mut self,
        ops: &Operands,
        (queries, keys): (&Strip, &Strip),
        (s_buf, x_buf, o_buf): (BufId, BufId, BufId),
        (mr, nr, t): (u64, u64, crate::loops::GemmTiles),
    ) -> Result<Products, CodegenError> {
        let (bq, bk, depth, width) = (queries.block, keys.block, ops.depth, ops.width);
        let local = |l: &mut Self, len: u64| l.push_buf(BufDecl { dtype: DType::F32, len, kind: BufKind::Local });
        let q_panels = local(self, bq * depth.max(1));
        let p_panels = local(self, bq * bk);
        let (ir, ii, pp) = (self.new_var(), self.new_var(), self.new_var());
        let (it, jt) = (self.new_var(), self.new_var());
        let tiles_per = |b: u64, m: u64| as_i64(b / m);
        // Query tile `it` of the block starts at row `(qb * bq/mr + it) * mr`.
        let q_tile = Index::var(queries.outer).scale(tiles_per(bq, mr)).add(&Index::var(ir));
        let q_row = q_tile.scale(as_i64(mr)).add(&Index::var(ii));
        let real_rows = |tile: Index| Extent::Tail { total: queries.total, block: mr, outer: tile };

        // Q panels: qa[ir*depth*mr + p*mr + ii] = q[i0 + ir*mr + ii, p].
        let qv = self.operand(&ops.q, [q_row, Index::var(pp)])?;
        let qv = self.as_f32(ops.q.0, qv)?;
        let qa_at =
            Index::var(ir).scale(as_i64(depth * mr)).add(&Index::var(pp).scale(as_i64(mr))).add(&Index::var(ii));
        let pack_queries = vec![Stmt::Loop {
            var: ir,
            extent: Extent::Const(bq / mr),
            body: vec![Stmt::Loop {
                var: ii,
                extent: real_rows(q_tile.clone()),
                body: vec![Stmt::Loop {
                    var: pp,
                    extent: Extent::Const(depth),
                    body: vec![Stmt::Store { buf: q_panels, index: qa_at, value: qv }],
                }],
            }],
        }];

        // K and V packed whole per batch entry, in a nest of their own before this one.
        let [(k_panels, k_entry), (v_panels, v_entry)] = self.packed_keys_and_values(ops, keys.total, nr)?;
        let real_keys = |tile: Index| Extent::Tail { total: keys.total, block: nr, outer: tile };
        let it_tile = Index::var(queries.outer).scale(tiles_per(bq, mr)).add(&Index::var(it));
        let jt_tile = Index::var(keys.outer).scale(tiles_per(bk, nr)).add(&Index::var(jt));
        let score_tile = Stmt::MicroKernel(Box::new(MicroKernel {
            mr: t.mr,
            nr: t.nr,
            a: q_panels,
            a_at: Index::var(it).scale(as_i64(depth * mr)),
            b: k_panels,
            b_at: k_entry.add(&jt_tile.scale(as_i64(depth * nr))),
            depth: Extent::Const(depth),
            c: s_buf,
            c_row: Index::var(it).scale(as_i64(mr)),
            c_col: Index::var(jt).scale(as_i64(nr)),
            ldc: as_i64(bk),
            bound: (Index::constant(0), bq),
            rows: real_rows(it_tile.clone()),
            cols: real_keys(jt_tile),
            first: Index::constant(0),
        }));
        let scores = vec![Stmt::Loop {
            var: jt,
            extent: Extent::Const(bk / nr),
            body: vec![Stmt::Loop { var: it, extent: Extent::Const(bq / mr), body: vec![score_tile] }],
        }];

        // P panels from X: pa[ir*bk*mr + p*mr + ii] = x[(ir*mr + ii)*bk + p]; V panels:
        // vb[jp*bk*nr + p*nr + jj] = v[j0 + p, jp*nr + jj].
        let keys_here = keys.inner_extent();
        let x_at = Index::var(ir).scale(as_i64(mr)).add(&Index::var(ii)).scale(as_i64(bk)).add(&Index::var(pp));
        let xv = self.arena.intern(Expr::Load { buf: x_buf, index: x_at });
        let pa_at = Index::var(ir).scale(as_i64(bk * mr)).add(&Index::var(pp).scale(as_i64(mr))).add(&Index::var(ii));
        let pack_probs = Stmt::Loop {
            var: ir,
            extent: Extent::Const(bq / mr),
            body: vec![Stmt::Loop {
                var: ii,
                extent: real_rows(q_tile),
                body: vec![Stmt::Loop {
                    var: pp,
                    extent: keys_here.clone(),
                    body: vec![Stmt::Store { buf: p_panels, index: pa_at, value: xv }],
                }],
            }],
        };
        let real_columns = |tile: Index| Extent::Tail { total: width, block: nr, outer: tile };
        let value_tile = Stmt::MicroKernel(Box::new(MicroKernel {
            mr: t.mr,
            nr: t.nr,
            a: p_panels,
            a_at: Index::var(it).scale(as_i64(bk * mr)),
            b: v_panels,
            b_at: v_entry.add(&Index::var(jt).scale(as_i64(keys.total * nr))).add(&keys.start().scale(as_i64(nr))),
            depth: keys_here,
            c: o_buf,
            c_row: Index::var(it).scale(as_i64(mr)),
            c_col: Index::var(jt).scale(as_i64(nr)),
            ldc: as_i64(width),
            bound: (Index::constant(0), bq),
            rows: real_rows(it_tile),
            cols: real_columns(Index::var(jt)),
            first: Index::constant(1),
        }));
        let values = vec![
            pack_probs,
            Stmt::Loop {
                var: jt,
                extent: Extent::Const(width.div_ceil(nr)),
                body: vec![Stmt::Loop { var: it, extent: Extent::Const(bq / mr), body: vec![value_tile] }],
            },
        ];
        Ok((pack_queries, scores, values))
    }

    /// Kᵀ and V packed into B panels of `nr` columns, in a nest of their own (rows: batch entries
    /// and panels) ahead of the attention nest: per entry, the `ceil(T/nr)` panels of `kᵀ`
    /// (`depth x nr` each), then V's `ceil(width/nr)` panels (`T x nr` each). An entry is a value
    /// of the batch loops the operand depends on: K and V shared by a group of query heads are
    /// packed once for the group. Returns, for K then V, the scratch buffer and the attention
    /// nest's index of its entry's first panel.
    fn packed_keys_and_values(
        &mut self,
        ops: &Operands,
        keys: u64,
        nr: u64,
    ) -> Result<[(BufId, Index); 2], CodegenError> {
        let (depth, width) = (ops.depth, ops.width);
        let mut out = Vec::with_capacity(2);
        for (operand, (outer, inner)) in [(&ops.k, (keys, depth)), (&ops.v, (width, keys))] {
            let stride = outer.div_ceil(nr) * inner * nr;
            let (batch_loops, batch) = self.batch_loops(&ops.batch_dims);
            let (jp, p, jj) = (self.new_var(), self.new_var(), self.new_var());
            let column = Index::var(jp).scale(as_i64(nr)).add(&Index::var(jj));
            let dims = self.shape(operand.0)?.to_vec();
            let mut idx = broadcast_index(&batch, &dims[..dims.len().saturating_sub(2)], &ops.batch_dims);
            // Kᵀ is [depth, keys]: panel columns are keys; V is [keys, width]: columns are width.
            idx.extend([Index::var(p), column]);
            let value = self.expr_at(operand.0, &idx)?;
            let value = self.as_f32(operand.0, value)?;
            // The batch loops the value reads with, and the attention nest's loops in their place.
            let used: Vec<bool> = batch_loops.iter().map(|&(v, _)| self.depends_on(value, v)).collect();
            let mut entry = Index::constant(0);
            let mut nest_entry = Index::constant(0);
            let mut entries = 1u64;
            for ((&(v, n), &(nest_v, _)), _) in batch_loops.iter().zip(&ops.parts).zip(&used).filter(|(_, u)| **u) {
                entry = entry.scale(as_i64(n)).add(&Index::var(v));
                nest_entry = nest_entry.scale(as_i64(n)).add(&Index::var(nest_v));
                entries = entries.saturating_mul(n);
            }
            let panels = self.push_buf(BufDecl {
                dtype: DType::F32,
                len: entries.saturating_mul(stride).max(1),
                kind: BufKind::Scratch,
            });
            let at = entry
                .scale(as_i64(stride))
                .add(&Index::var(jp).scale(as_i64(inner * nr)))
                .add(&Index::var(p).scale(as_i64(nr)))
                .add(&Index::var(jj));
            let nest = vec![Stmt::Loop {
                var: jp,
                extent: Extent::Const(outer.div_ceil(nr)),
                body: vec![Stmt::Loop {
                    var: p,
                    extent: Extent::Const(inner),
                    body: vec![Stmt::Loop {
                        var: jj,
                        extent: Extent::Tail { total: outer, block: nr, outer: Index::var(jp) },
                        body: vec![Stmt::Store { buf: panels, index: at, value }],
                    }],
                }],
            }];
            let (vars, extents): (Vec<VarId>, Vec<u64>) =
                batch_loops.into_iter().zip(&used).filter(|(_, u)| **u).map(|(l, _)| l).unzip();
            self.body.push(wrap_loops(&vars, &extents, nest));
            out.push((panels, nest_entry.scale(as_i64(stride))));
        }
        let [k, v]: [(BufId, Index); 2] = out.try_into().map_err(|_| self.bad("packing"))?;
        Ok([k, v])
    }

    /// Whether expression `e` reads at an index that moves with `v`.
    fn depends_on(&self, e: ExprId, v: VarId) -> bool {
        let mut stack = vec![e];
        let mut seen = std::collections::HashSet::new();
        while let Some(x) = stack.pop() {
            if !seen.insert(x) {
                continue;
            }
            match self.arena.get(x) {
                Some(Expr::Load { index, .. } | Expr::Position(index)) if index.coef(v) != 0 => return true,
                Some(e) => stack.extend(e.operands()),
                None => {}
            }
        }
        false
    }

    /// The value of operand `(node, batch index)` at its last two indices.
    fn operand(&mut self, (node, batch): &(NodeId, Vec<Index>), last: [Index; 2]) -> Result<ExprId, CodegenError> {
        let mut idx = batch.clone();
        idx.extend(last);
        self.expr_at(*node, &idx)
    }

    /// `e` (the value of node `n`) as f32, the dtype the online softmax runs in.
    fn as_f32(&mut self, n: NodeId, e: ExprId) -> Result<ExprId, CodegenError> {
        let from = self.dtype(n)?;
        Ok(if from == DType::F32 { e } else { self.arena.intern(Expr::Cast { from, to: DType::F32, arg: e }) })
    }

    /// The condition under which a key block holds some kept logit for the query block, when the
    /// mask lets blocks be skipped: every atom may hold somewhere in the block.
    fn live_block(&mut self, a: &Attention, queries: &Strip, keys: &Strip) -> Option<ExprId> {
        let mask = a.mask.as_ref().filter(|m| m.skips_blocks())?;
        let mut live: Option<ExprId> = None;
        for atom in &mask.atoms {
            let cond = self.atom_may_hold(atom, queries, keys);
            live = Some(match live {
                None => cond,
                Some(prev) => {
                    let no = self.arena.constant(DType::Bool, 0.0);
                    self.arena.intern(Expr::Select { dtype: DType::Bool, cond: prev, on_true: cond, on_false: no })
                }
            });
        }
        live
    }

    /// Whether `atom` can hold in the block (the corners bound an affine function).
    fn atom_may_hold(&mut self, atom: &Atom, queries: &Strip, keys: &Strip) -> ExprId {
        let ends = |s: &Strip| (s.start(), s.start().add_const(as_i64(s.block) - 1));
        let (q0, q1) = ends(queries);
        let (k0, k1) = ends(keys);
        let pick =
            |c: i64, lo: &Index, hi: &Index, high: bool| if (c >= 0) == high { hi.scale(c) } else { lo.scale(c) };
        let hi = pick(atom.query, &q0, &q1, true).add(&pick(atom.key, &k0, &k1, true)).add_const(atom.offset);
        let lo = pick(atom.query, &q0, &q1, false).add(&pick(atom.key, &k0, &k1, false)).add_const(atom.offset);
        let zero = self.arena.constant(DType::I32, 0.0);
        let hi = self.arena.intern(Expr::Position(hi));
        let lo = self.arena.intern(Expr::Position(lo));
        let cmp = |l: &mut Self, op, lhs| l.arena.intern(Expr::Compare { op, operand: DType::I32, lhs, rhs: zero });
        match atom.op {
            CompareOp::Ge => cmp(self, CompareOp::Ge, hi),
            CompareOp::Gt => cmp(self, CompareOp::Gt, hi),
            CompareOp::Le => cmp(self, CompareOp::Le, lo),
            CompareOp::Lt => cmp(self, CompareOp::Lt, lo),
            CompareOp::Eq => {
                let below = cmp(self, CompareOp::Le, lo);
                let above = cmp(self, CompareOp::Ge, hi);
                let no = self.arena.constant(DType::Bool, 0.0);
                self.arena.intern(Expr::Select { dtype: DType::Bool, cond: below, on_true: above, on_false: no })
            }
            CompareOp::Ne => {
                let lo_nonzero = cmp(self, CompareOp::Ne, lo);
                let hi_nonzero = cmp(self, CompareOp::Ne, hi);
                let yes = self.arena.constant(DType::Bool, 1.0);
                self.arena.intern(Expr::Select {
                    dtype: DType::Bool,
                    cond: lo_nonzero,
                    on_true: yes,
                    on_false: hi_nonzero,
                })
            }
        }
    }
}

/// For each axis of `to`, the sizes (above 1) of the axes of `from` a reshape merges into it, or
/// `None` when the reshape does not merge whole consecutive axes.
fn merge_groups(from: &[u64], to: &[u64]) -> Option<Vec<Vec<u64>>> {
    let mut groups = Vec::with_capacity(to.len());
    let mut rest = from.iter().copied().filter(|&d| d > 1).peekable();
    for &size in to {
        let mut group = Vec::new();
        let mut product = 1u64;
        while product < size {
            let d = rest.next()?;
            product = product.checked_mul(d)?;
            group.push(d);
        }
        if product != size {
            return None;
        }
        groups.push(group);
    }
    rest.next().is_none().then_some(groups)
}
