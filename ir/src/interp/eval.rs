//! Evaluation of one node from the values of its operands.

use crate::dtype::DType;
use crate::graph::Node;
use crate::op::TensorType;
use crate::op::{NodeId, Op, ReduceOp};
use crate::shape::{Bindings, Dim};

use super::tensor::{contiguous_strides, numel_of};
use super::walk::{Walker, broadcast_strides, broadcast_strides_with};
use super::{InterpError, Tensor, scalar};

/// What every node evaluation needs besides its operands.
pub(crate) struct Ctx<'a> {
    /// Values of the shape variables.
    pub bindings: &'a Bindings,
    /// The inputs of the graph.
    pub inputs: &'a [Tensor],
    /// The cap on the bytes of one value.
    pub max_bytes: u64,
}

/// Bytes the interpreter needs per element (it stores `f64`).
const BYTES_PER_ELEMENT: u64 = 8;

fn invalid(node: NodeId, reason: String) -> InterpError {
    InterpError::InvalidGraph { node, reason }
}

/// The concrete dimensions of `ty` under `bindings`; the error names `what` and every unbound
/// variable.
pub(crate) fn resolve(ty: &TensorType, bindings: &Bindings, what: &str) -> Result<Vec<usize>, InterpError> {
    let mut dims = Vec::with_capacity(ty.shape.rank());
    let mut unbound = Vec::new();
    for d in ty.shape.dims() {
        match d.resolve(bindings) {
            Some(n) => dims.push(
                usize::try_from(n)
                    .map_err(|_| InterpError::TooManyElements { what: what.to_string(), shape: Vec::new() })?,
            ),
            None => {
                if let Dim::Var(v) = d {
                    unbound.push(v.clone());
                }
            }
        }
    }
    if unbound.is_empty() {
        Ok(dims)
    } else {
        unbound.sort();
        unbound.dedup();
        Err(InterpError::Unbound { what: what.to_string(), ty: ty.clone(), vars: unbound })
    }
}

/// The value of node `id`, whose operands are in `values` (`None` once freed or not yet computed).
pub(crate) fn eval_node(
    ctx: &Ctx<'_>,
    id: NodeId,
    node: &Node,
    values: &[Option<Tensor>],
) -> Result<Tensor, InterpError> {
    let what = format!("{id} ({})", node.op.kind_name());
    let shape = resolve(&node.ty, ctx.bindings, &what)?;
    let numel = numel_of(&shape, &what)?;
    let bytes = u64::try_from(numel).unwrap_or(u64::MAX).saturating_mul(BYTES_PER_ELEMENT);
    if bytes > ctx.max_bytes {
        return Err(InterpError::MemoryLimit { node: id, op: node.op.kind_name(), shape, bytes, limit: ctx.max_bytes });
    }
    let dtype = node.ty.dtype;
    let arg = |operand: NodeId| -> Result<&Tensor, InterpError> {
        match values.get(operand.index()) {
            Some(Some(t)) if operand < id => Ok(t),
            _ => Err(invalid(id, format!("operand {operand} is not an earlier, live value"))),
        }
    };
    let data = match &node.op {
        Op::Input { index } => {
            let t = ctx.inputs.get(*index).ok_or_else(|| invalid(id, format!("input index {index} names no input")))?;
            same_shape(id, &t.shape, &shape)?;
            t.data.iter().map(|&v| dtype.round(v)).collect()
        }
        Op::Constant { value } => vec![dtype.round(*value); numel],
        Op::Iota => {
            if numel > i32::MAX as usize {
                return Err(invalid(id, format!("iota of {numel} positions: at most {} fit i32", i32::MAX)));
            }
            (0..numel).map(|i| i as f64).collect()
        }
        Op::Unary(u, a) => {
            let int = dtype == DType::I32;
            elementwise(id, &shape, [arg(*a)?], |[x]| dtype.round(scalar::unary(*u, int, x)))?
        }
        Op::Cast(a) => elementwise(id, &shape, [arg(*a)?], |[x]| dtype.round(x))?,
        Op::Binary(b, x, y) => {
            let int = dtype == DType::I32;
            elementwise(id, &shape, [arg(*x)?, arg(*y)?], |[p, q]| dtype.round(scalar::binary(*b, int, p, q)))?
        }
        Op::Compare(c, x, y) => elementwise(id, &shape, [arg(*x)?, arg(*y)?], |[p, q]| scalar::compare(*c, p, q))?,
        Op::Select { cond, on_true, on_false } => {
            let args = [arg(*cond)?, arg(*on_true)?, arg(*on_false)?];
            elementwise(id, &shape, args, |[c, t, f]| dtype.round(if c != 0.0 { t } else { f }))?
        }
        Op::Broadcast(a) => elementwise(id, &shape, [arg(*a)?], |[x]| dtype.round(x))?,
        Op::Reshape(a) => {
            let t = arg(*a)?;
            if t.data.len() != numel {
                return Err(invalid(id, format!("cannot reshape {:?} into {:?}", t.shape, shape)));
            }
            t.data.iter().map(|&v| dtype.round(v)).collect()
        }
        Op::Permute { input, perm } => permute(id, arg(*input)?, perm, &shape)?,
        Op::Slice { input, axis, start, end } => slice(id, arg(*input)?, *axis, *start, *end, &shape)?,
        Op::Concat { inputs, axis } => {
            let args = inputs.iter().map(|&i| arg(i)).collect::<Result<Vec<_>, _>>()?;
            concat(id, &args, *axis, &shape)?
        }
        Op::Reduce { op, input, axes, keepdim } => reduce(id, *op, arg(*input)?, axes, *keepdim, dtype, &shape)?,
        Op::MatMul(a, b) => matmul(id, arg(*a)?, arg(*b)?, dtype, &shape)?,
    };
    Ok(Tensor { dtype, shape, data })
}

fn same_shape(id: NodeId, got: &[usize], expected: &[usize]) -> Result<(), InterpError> {
    if got == expected {
        Ok(())
    } else {
        Err(invalid(id, format!("computed shape {got:?} differs from the node's type {expected:?}")))
    }
}

/// Checks that a tensor's data matches its shape (true of every tensor the interpreter builds;
/// checked so that hand-made inputs cannot make indexing go out of range).
fn check_data(id: NodeId, t: &Tensor) -> Result<(), InterpError> {
    if t.data.len() == t.shape.iter().product::<usize>() {
        Ok(())
    } else {
        Err(invalid(id, format!("operand of shape {:?} holds {} values", t.shape, t.data.len())))
    }
}

/// Applies `f` to the operands broadcast to `shape`, element by element.
fn elementwise<const N: usize>(
    id: NodeId,
    shape: &[usize],
    args: [&Tensor; N],
    f: impl Fn([f64; N]) -> f64,
) -> Result<Vec<f64>, InterpError> {
    let numel: usize = shape.iter().product();
    let mut strides = Vec::with_capacity(N);
    for a in &args {
        check_data(id, a)?;
        let s = broadcast_strides(&a.shape, shape)
            .ok_or_else(|| invalid(id, format!("operand shape {:?} does not broadcast to {shape:?}", a.shape)))?;
        strides.push(s);
    }
    let mut out = Vec::with_capacity(numel);
    if args.iter().all(|a| a.shape == shape) {
        for i in 0..numel {
            out.push(f(std::array::from_fn(|k| args[k].data[i])));
        }
    } else {
        let mut w = Walker::new(shape, strides, vec![0; N]);
        for _ in 0..numel {
            let offs = w.offsets();
            out.push(f(std::array::from_fn(|k| args[k].data[offs[k]])));
            w.advance();
        }
    }
    Ok(out)
}

/// Reads `t` through `strides` starting at `base`, over every index of `shape`.
fn gather(t: &Tensor, shape: &[usize], strides: Vec<usize>, base: usize) -> Vec<f64> {
    let numel: usize = shape.iter().product();
    let mut out = Vec::with_capacity(numel);
    let mut w = Walker::new(shape, vec![strides], vec![base]);
    for _ in 0..numel {
        out.push(t.data[w.offsets()[0]]);
        w.advance();
    }
    out
}

fn permute(id: NodeId, t: &Tensor, perm: &[usize], shape: &[usize]) -> Result<Vec<f64>, InterpError> {
    check_data(id, t)?;
    let rank = t.rank();
    let mut seen = vec![false; rank];
    let valid = perm.len() == rank
        && perm.iter().all(|&p| match seen.get_mut(p) {
            Some(s) if !*s => {
                *s = true;
                true
            }
            _ => false,
        });
    if !valid {
        return Err(invalid(id, format!("{perm:?} is not a permutation of {rank} axes")));
    }
    let in_strides = contiguous_strides(&t.shape);
    let out_shape: Vec<usize> = perm.iter().map(|&p| t.shape[p]).collect();
    same_shape(id, &out_shape, shape)?;
    let strides = perm.iter().map(|&p| in_strides[p]).collect();
    Ok(gather(t, shape, strides, 0))
}

fn slice(id: NodeId, t: &Tensor, axis: usize, start: u64, end: u64, shape: &[usize]) -> Result<Vec<f64>, InterpError> {
    check_data(id, t)?;
    let size = *t.shape.get(axis).ok_or_else(|| invalid(id, format!("slice axis {axis} out of range")))?;
    let (start, end) = match (usize::try_from(start), usize::try_from(end)) {
        (Ok(s), Ok(e)) if s < e && e <= size => (s, e),
        _ => return Err(invalid(id, format!("slice {start}..{end} out of range for size {size}"))),
    };
    let mut out_shape = t.shape.clone();
    out_shape[axis] = end - start;
    same_shape(id, &out_shape, shape)?;
    let strides = contiguous_strides(&t.shape);
    let base = start * strides[axis];
    Ok(gather(t, shape, strides, base))
}

fn concat(id: NodeId, args: &[&Tensor], axis: usize, shape: &[usize]) -> Result<Vec<f64>, InterpError> {
    let first = args.first().ok_or_else(|| invalid(id, "concat of no operands".into()))?;
    if axis >= first.rank() {
        return Err(invalid(id, format!("concat axis {axis} out of range")));
    }
    let mut out_shape = first.shape.clone();
    out_shape[axis] = 0;
    for a in args {
        check_data(id, a)?;
        let agrees = a.rank() == first.rank()
            && a.shape.iter().zip(&first.shape).enumerate().all(|(i, (x, y))| i == axis || x == y);
        if !agrees {
            return Err(invalid(id, format!("cannot concatenate {:?} and {:?}", first.shape, a.shape)));
        }
        out_shape[axis] += a.shape[axis];
    }
    same_shape(id, &out_shape, shape)?;
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let mut out = Vec::with_capacity(shape.iter().product());
    for o in 0..outer {
        for a in args {
            let chunk = a.shape[axis] * inner;
            out.extend_from_slice(&a.data[o * chunk..(o + 1) * chunk]);
        }
    }
    Ok(out)
}

fn reduce(
    id: NodeId,
    op: ReduceOp,
    t: &Tensor,
    axes: &[usize],
    keepdim: bool,
    dtype: DType,
    shape: &[usize],
) -> Result<Vec<f64>, InterpError> {
    check_data(id, t)?;
    let rank = t.rank();
    let mut reduced = vec![false; rank];
    for &a in axes {
        match reduced.get_mut(a) {
            Some(r) if !*r => *r = true,
            _ => return Err(invalid(id, format!("bad reduction axes {axes:?} for rank {rank}"))),
        }
    }
    if axes.is_empty() {
        return Err(invalid(id, "a reduction needs at least one axis".into()));
    }
    if axes.iter().any(|&a| t.shape[a] == 0) {
        return Err(InterpError::EmptyReduction {
            node: id,
            op: format!("reduce_{}", op.name()),
            shape: t.shape.clone(),
        });
    }
    // The output as if keepdim: reduced axes have size 1 (same row-major layout either way).
    let kept: Vec<usize> = t.shape.iter().zip(&reduced).map(|(&d, &r)| if r { 1 } else { d }).collect();
    let out_shape: Vec<usize> = if keepdim {
        kept.clone()
    } else {
        t.shape.iter().zip(&reduced).filter(|(_, r)| !**r).map(|(&d, _)| d).collect()
    };
    same_shape(id, &out_shape, shape)?;
    let out_numel: usize = kept.iter().product();
    let count: usize = axes.iter().map(|&a| t.shape[a]).product();
    let int = dtype == DType::I32;
    let init = match op {
        ReduceOp::Sum | ReduceOp::Mean => 0.0,
        ReduceOp::Max => f64::NEG_INFINITY,
        ReduceOp::Min => f64::INFINITY,
    };
    let mut acc = vec![init; out_numel];
    let mut strides = contiguous_strides(&kept);
    for (s, &r) in strides.iter_mut().zip(&reduced) {
        if r {
            *s = 0;
        }
    }
    let mut w = Walker::new(&t.shape, vec![strides], vec![0]);
    for &x in &t.data {
        let slot = &mut acc[w.offsets()[0]];
        *slot = match op {
            ReduceOp::Sum | ReduceOp::Mean if int => f64::from((*slot as i32).wrapping_add(x as i32)),
            ReduceOp::Sum | ReduceOp::Mean => *slot + x,
            ReduceOp::Max => scalar::reduce_max(*slot, x),
            ReduceOp::Min => scalar::reduce_min(*slot, x),
        };
        w.advance();
    }
    if op == ReduceOp::Mean {
        // Exact for every count below 2^53, far above the element limit.
        let n = count as f64;
        for v in &mut acc {
            *v /= n;
        }
    }
    for v in &mut acc {
        *v = dtype.round(*v);
    }
    Ok(acc)
}

fn matmul(id: NodeId, a: &Tensor, b: &Tensor, dtype: DType, shape: &[usize]) -> Result<Vec<f64>, InterpError> {
    check_data(id, a)?;
    check_data(id, b)?;
    let (ra, rb) = (a.rank(), b.rank());
    if ra < 2 || rb < 2 {
        return Err(invalid(id, format!("matmul of {:?} and {:?}: rank below 2", a.shape, b.shape)));
    }
    let (m, k) = (a.shape[ra - 2], a.shape[ra - 1]);
    let (kb, n) = (b.shape[rb - 2], b.shape[rb - 1]);
    if k != kb {
        return Err(invalid(id, format!("matmul inner dimensions differ: {:?} @ {:?}", a.shape, b.shape)));
    }
    if k == 0 {
        return Err(InterpError::EmptyReduction { node: id, op: "matmul".into(), shape: a.shape.clone() });
    }
    let rank = shape.len();
    if rank < 2 || shape[rank - 2] != m || shape[rank - 1] != n {
        return Err(invalid(id, format!("matmul result {shape:?} does not end in [{m}, {n}]")));
    }
    let batch = &shape[..rank - 2];
    let bad_batch =
        || invalid(id, format!("batch axes of {:?} and {:?} do not broadcast to {batch:?}", a.shape, b.shape));
    let a_strides = contiguous_strides(&a.shape);
    let b_strides = contiguous_strides(&b.shape);
    let sa = broadcast_strides_with(&a.shape[..ra - 2], &a_strides[..ra - 2], batch).ok_or_else(bad_batch)?;
    let sb = broadcast_strides_with(&b.shape[..rb - 2], &b_strides[..rb - 2], batch).ok_or_else(bad_batch)?;
    let batches: usize = batch.iter().product();
    if batches == 0 || m == 0 || n == 0 {
        return Ok(Vec::new());
    }
    let mut out = Vec::with_capacity(batches * m * n);
    let mut row = vec![0.0f64; n];
    let mut w = Walker::new(batch, vec![sa, sb], vec![0, 0]);
    for _ in 0..batches {
        let (a_off, b_off) = (w.offsets()[0], w.offsets()[1]);
        let a_mat = &a.data[a_off..a_off + m * k];
        let b_mat = &b.data[b_off..b_off + k * n];
        for a_row in a_mat.chunks_exact(k) {
            row.fill(0.0);
            for (&aip, b_row) in a_row.iter().zip(b_mat.chunks_exact(n)) {
                for (acc, &bpj) in row.iter_mut().zip(b_row) {
                    *acc += aip * bpj;
                }
            }
            out.extend(row.iter().map(|&v| dtype.round(v)));
        }
        w.advance();
    }
    Ok(out)
}
