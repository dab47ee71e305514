//! The builtin functions and methods: elementwise ops, reductions, layout ops, casts.
//!
//! Static arguments (axes, dimensions, `keepdim`) are read from the syntax tree; tensor arguments
//! from the evaluated values.

use tcc_ir::limits::MAX_ELEMENTS;
use tcc_ir::shape::normalize_axis;
use tcc_ir::{BinaryOp, DType, Dim, NodeId, Op, ReduceOp, Shape, TensorType, UnaryOp};

use crate::ast::{Expr, ExprId, ExprKind, Name};
use crate::diag::Diag;
use crate::lower::cx::{Cx, METHODS};
use crate::lower::errors::Verb;
use crate::lower::frame::Frame;
use crate::lower::types::resolve_dtype;
use crate::lower::value::{Num, Operand, Val};
use crate::span::Sp;
use crate::suggest::did_you_mean;

/// The arguments of one builtin call, with the syntax they came from.
struct Args<'f> {
    /// The fn's expressions.
    nodes: &'f [Expr],
    /// The call's name.
    name: &'f Name,
    /// The whole call.
    sp: Sp,
    /// The arguments (the receiver of a method is not among them).
    args: &'f [ExprId],
    /// True for the method form.
    method: bool,
}

impl Args<'_> {
    fn sp_of(&self, id: ExprId) -> Sp {
        self.nodes.get(id).map_or(self.sp, |e| e.sp)
    }

    fn kind(&self, id: ExprId) -> Option<&ExprKind> {
        self.nodes.get(id).map(|e| &e.kind)
    }

    /// An integer literal, possibly negated.
    fn static_int(&self, id: ExprId) -> Option<i128> {
        let mut negative = false;
        let mut cur = id;
        // Bounded by the nesting limit on unary minus chains.
        loop {
            match self.kind(cur)? {
                ExprKind::Neg(inner) => {
                    negative = !negative;
                    cur = *inner;
                }
                ExprKind::Int(v) => {
                    let v = i128::from(*v);
                    return Some(if negative { -v } else { v });
                }
                _ => return None,
            }
        }
    }

    /// `keepdim`, `true` or `false`.
    fn static_flag(&self, id: ExprId) -> Option<bool> {
        match self.kind(id)? {
            ExprKind::Name(n) if n == "keepdim" => Some(true),
            ExprKind::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The elements of a list argument, or the argument itself.
    fn items(&self, id: ExprId) -> Vec<ExprId> {
        match self.kind(id) {
            Some(ExprKind::List(items)) => items.clone(),
            _ => vec![id],
        }
    }

    fn what(&self) -> String {
        if self.method { format!("method `{}`", self.name.text) } else { format!("`{}`", self.name.text) }
    }
}

/// Checks the argument count; reports and returns false if it is not one of `allowed`.
fn arity(cx: &mut Cx<'_, '_>, a: &Args<'_>, allowed: &[usize]) -> bool {
    if allowed.contains(&a.args.len()) {
        return true;
    }
    let want = allowed.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(" or ");
    let given = a.args.len();
    cx.report(Diag::new(
        format!(
            "{} takes {want} argument{} but {given} {} given",
            a.what(),
            if allowed == [1] { "" } else { "s" },
            if given == 1 { "was" } else { "were" }
        ),
        a.sp,
        format!("expected {want} argument{}", if allowed == [1] { "" } else { "s" }),
    ));
    false
}

/// Reports a `::<dtype>` on anything but `cast`.
fn no_type_arg(cx: &mut Cx<'_, '_>, a: &Args<'_>, dtype_arg: Option<&Name>) -> bool {
    match dtype_arg {
        Some(d) => {
            cx.report(Diag::new(format!("{} takes no type argument", a.what()), d.sp, "unexpected type argument"));
            false
        }
        None => true,
    }
}

/// An axis argument, normalized against `ty` (negative axes count from the end).
fn axis(cx: &mut Cx<'_, '_>, a: &Args<'_>, id: ExprId, ty: &TensorType) -> Option<usize> {
    let sp = a.sp_of(id);
    let Some(v) = a.static_int(id) else {
        cx.report(Diag::new(
            format!("{} expects an axis here: an integer literal (negative counts from the end)", a.what()),
            sp,
            "not an integer literal",
        ));
        return None;
    };
    let rank = ty.shape.rank();
    match i64::try_from(v).ok().and_then(|v| normalize_axis(v, rank)) {
        Some(axis) => Some(axis),
        None => {
            cx.report(Diag::new(
                format!("axis {v} is out of range for {ty} (rank {rank})"),
                sp,
                format!("valid axes are {}..{}", -i128::try_from(rank).unwrap_or(0), rank),
            ));
            None
        }
    }
}

/// A non-negative integer argument (slice bounds).
fn index(cx: &mut Cx<'_, '_>, a: &Args<'_>, id: ExprId) -> Option<u64> {
    match a.static_int(id).map(u64::try_from) {
        Some(Ok(v)) => Some(v),
        _ => {
            cx.report(Diag::new(
                format!("{} expects a non-negative integer literal here", a.what()),
                a.sp_of(id),
                "not a non-negative integer literal",
            ));
            None
        }
    }
}

/// A dimension argument: an integer literal or a shape variable.
fn dim(cx: &mut Cx<'_, '_>, a: &Args<'_>, frame: &Frame, id: ExprId) -> Option<Dim> {
    let sp = a.sp_of(id);
    if let Some(ExprKind::Name(v)) = a.kind(id) {
        if frame.env.contains_key(v) && !frame.subst.contains_key(v) {
            cx.report(Diag::new(
                format!("{} expects a dimension here, but `{v}` is a tensor", a.what()),
                sp,
                "a tensor, not a dimension",
            ));
            return None;
        }
        return Some(frame.subst.get(v).cloned().unwrap_or_else(|| Dim::Var(v.clone())));
    }
    match a.static_int(id).map(u64::try_from) {
        Some(Ok(n)) if n < MAX_ELEMENTS => Some(Dim::Const(n)),
        Some(Ok(n)) => {
            cx.report(Diag::new(format!("dimension {n} is too large"), sp, "every dimension must be below 2^40"));
            None
        }
        _ => {
            cx.report(Diag::new(
                format!("{} expects a dimension here: a non-negative integer or a shape variable", a.what()),
                sp,
                "not a dimension",
            ));
            None
        }
    }
}

/// A call of a builtin function `name(args)`.
pub(crate) fn call(
    cx: &mut Cx<'_, '_>,
    frame: &Frame,
    sp: Sp,
    name: &Name,
    dtype_arg: Option<&Name>,
    args: &[ExprId],
) -> Val {
    let Some(f) = cx.fn_ast(frame.func) else { return Val::Error };
    let a = Args { nodes: &f.nodes, name, sp, args, method: false };
    if name.text == "cast" {
        if !arity(cx, &a, &[1]) {
            return Val::Error;
        }
        return cast(cx, frame, &a, dtype_arg, args[0]);
    }
    if !no_type_arg(cx, &a, dtype_arg) {
        return Val::Error;
    }
    if let Some(u) = UnaryOp::from_name(&name.text) {
        if !arity(cx, &a, &[1]) {
            return Val::Error;
        }
        return unary(cx, frame, &a, u, args[0]);
    }
    match name.text.as_str() {
        "max" | "min" | "pow" => {
            if !arity(cx, &a, &[2]) {
                return Val::Error;
            }
            let op = match name.text.as_str() {
                "max" => BinaryOp::Max,
                "min" => BinaryOp::Min,
                _ => BinaryOp::Pow,
            };
            binary(cx, frame, &a, op, args[0], args[1])
        }
        "matmul" => {
            if !arity(cx, &a, &[2]) {
                return Val::Error;
            }
            matmul(cx, frame, &a, args[0], args[1])
        }
        "select" | "where" => {
            if !arity(cx, &a, &[3]) {
                return Val::Error;
            }
            select(cx, frame, &a, args[0], args[1], args[2])
        }
        "concat" => {
            if !arity(cx, &a, &[2]) {
                return Val::Error;
            }
            concat(cx, frame, &a, args[0], args[1])
        }
        "iota" => {
            if !arity(cx, &a, &[1]) {
                return Val::Error;
            }
            let Some(len) = dim(cx, &a, frame, args[0]) else { return Val::Error };
            let ctx = move |cx: &Cx<'_, '_>| cx.ctx(Verb::Named, "iota", name.sp, &[], None);
            cx.push_typed(Op::Iota, TensorType { dtype: DType::I32, shape: Shape(vec![len]) }, ctx)
        }
        _ => {
            cx.report(Diag::new(format!("cannot find function `{}`", name.text), name.sp, "not found"));
            Val::Error
        }
    }
}

/// A method call `recv.name(args)`.
pub(crate) fn method(
    cx: &mut Cx<'_, '_>,
    frame: &Frame,
    sp: Sp,
    recv: ExprId,
    name: &Name,
    dtype_arg: Option<&Name>,
    args: &[ExprId],
) -> Val {
    let Some(f) = cx.fn_ast(frame.func) else { return Val::Error };
    let a = Args { nodes: &f.nodes, name, sp, args, method: true };
    let known = METHODS.contains(&name.text.as_str());
    if !known {
        let hint = did_you_mean(&name.text, METHODS.iter().copied());
        let is_fn = cx.prog.by_name.contains_key(name.text.as_str());
        let help =
            if is_fn { Some(format!("`{0}` is a fn of this file: call it as `{0}(x, ...)`", name.text)) } else { hint };
        cx.report(Diag::new(format!("no method named `{}`", name.text), name.sp, "unknown method").with_help_opt(help));
        return Val::Error;
    }
    if name.text == "cast" {
        if !arity(cx, &a, &[0]) {
            return Val::Error;
        }
        return cast(cx, frame, &a, dtype_arg, recv);
    }
    if !no_type_arg(cx, &a, dtype_arg) {
        return Val::Error;
    }
    if let Some(u) = UnaryOp::from_name(&name.text) {
        if !arity(cx, &a, &[0]) {
            return Val::Error;
        }
        return unary(cx, frame, &a, u, recv);
    }
    let first_is_axis =
        args.first().is_none_or(|&x| a.static_int(x).is_some() || matches!(a.kind(x), Some(ExprKind::List(_))));
    match name.text.as_str() {
        "sum" => reduce(cx, frame, &a, ReduceOp::Sum, recv),
        "mean" => reduce(cx, frame, &a, ReduceOp::Mean, recv),
        "max" if first_is_axis => reduce(cx, frame, &a, ReduceOp::Max, recv),
        "min" if first_is_axis => reduce(cx, frame, &a, ReduceOp::Min, recv),
        "max" | "min" | "pow" => {
            if !arity(cx, &a, &[1]) {
                return Val::Error;
            }
            let op = match name.text.as_str() {
                "max" => BinaryOp::Max,
                "min" => BinaryOp::Min,
                _ => BinaryOp::Pow,
            };
            binary(cx, frame, &a, op, recv, args[0])
        }
        "matmul" => {
            if !arity(cx, &a, &[1]) {
                return Val::Error;
            }
            matmul(cx, frame, &a, recv, args[0])
        }
        _ => layout(cx, frame, &a, recv),
    }
}

/// The receiver (or argument) `id` as a tensor; a literal takes its default dtype.
fn tensor_arg(cx: &mut Cx<'_, '_>, frame: &Frame, id: ExprId) -> Option<NodeId> {
    let op = cx.operand(frame, id)?;
    cx.tensor(op, None)
}

fn unary(cx: &mut Cx<'_, '_>, frame: &Frame, a: &Args<'_>, u: UnaryOp, x: ExprId) -> Val {
    let t = match cx.operand(frame, x) {
        None => return Val::Error,
        Some(Operand::Num(Num::Int(i), _)) if u == UnaryOp::Neg => return Val::Num(Num::Int(-i), a.sp),
        Some(Operand::Num(Num::Float(f), _)) if u == UnaryOp::Neg => return Val::Num(Num::Float(-f), a.sp),
        Some(Operand::Num(n, sp)) => {
            // Ops that only take floats read a literal as f32.
            let dtype = if u.accepts(DType::I32) { n.default_dtype() } else { DType::F32 };
            match cx.materialize(n, sp, dtype) {
                Some(t) => t,
                None => return Val::Error,
            }
        }
        Some(Operand::Tensor(t)) => t,
    };
    let xsp = a.sp_of(x);
    cx.push(Op::Unary(u, t), |cx| cx.ctx(Verb::Named, u.name(), a.name.sp, &[(xsp, t)], None))
}

fn binary(cx: &mut Cx<'_, '_>, frame: &Frame, a: &Args<'_>, op: BinaryOp, l: ExprId, r: ExprId) -> Val {
    let x = cx.operand(frame, l);
    let y = cx.operand(frame, r);
    let (Some(x), Some(y)) = (x, y) else { return Val::Error };
    let Some((x, y)) = cx.unify(x, y) else { return Val::Error };
    let (lsp, rsp) = (a.sp_of(l), a.sp_of(r));
    cx.push(Op::Binary(op, x, y), |cx| cx.ctx(Verb::Named, op.name(), a.name.sp, &[(lsp, x), (rsp, y)], Some((0, 1))))
}

fn matmul(cx: &mut Cx<'_, '_>, frame: &Frame, a: &Args<'_>, l: ExprId, r: ExprId) -> Val {
    let x = cx.operand(frame, l);
    let y = cx.operand(frame, r);
    let (Some(x), Some(y)) = (x, y) else { return Val::Error };
    let Some((x, y)) = cx.unify(x, y) else { return Val::Error };
    let (lsp, rsp) = (a.sp_of(l), a.sp_of(r));
    cx.push(Op::MatMul(x, y), |cx| cx.ctx(Verb::MatMul, "matmul", a.name.sp, &[(lsp, x), (rsp, y)], Some((0, 1))))
}

fn select(cx: &mut Cx<'_, '_>, frame: &Frame, a: &Args<'_>, c: ExprId, t: ExprId, f: ExprId) -> Val {
    let cond = cx.operand(frame, c);
    let on_true = cx.operand(frame, t);
    let on_false = cx.operand(frame, f);
    let (Some(cond), Some(on_true), Some(on_false)) = (cond, on_true, on_false) else { return Val::Error };
    let cond = cx.tensor(cond, Some(DType::Bool));
    let pair = cx.unify(on_true, on_false);
    let (Some(cond), Some((x, y))) = (cond, pair) else { return Val::Error };
    let sps = [(a.sp_of(c), cond), (a.sp_of(t), x), (a.sp_of(f), y)];
    let name = a.name.text.clone();
    cx.push(Op::Select { cond, on_true: x, on_false: y }, |cx| {
        cx.ctx(Verb::Named, &name, a.name.sp, &sps, Some((1, 2)))
    })
}

fn concat(cx: &mut Cx<'_, '_>, frame: &Frame, a: &Args<'_>, list: ExprId, ax: ExprId) -> Val {
    let Some(ExprKind::List(items)) = a.kind(list) else {
        cx.report(Diag::new("`concat` expects a list of tensors: `concat([a, b], axis)`", a.sp_of(list), "not a list"));
        return Val::Error;
    };
    let mut inputs = Vec::with_capacity(items.len());
    let mut ok = true;
    for &item in items {
        match cx.operand(frame, item) {
            Some(Operand::Tensor(t)) => inputs.push((a.sp_of(item), t)),
            Some(Operand::Num(n, sp)) => {
                cx.report(Diag::new(format!("`concat` joins tensors, found {}", n.describe()), sp, "not a tensor"));
                ok = false;
            }
            None => ok = false,
        }
    }
    if !ok {
        return Val::Error;
    }
    let Some(&(_, first)) = inputs.first() else {
        cx.report(Diag::new("`concat` needs at least one tensor", a.sp_of(list), "empty list"));
        return Val::Error;
    };
    let ty = cx.ty(first);
    let Some(axis) = axis(cx, a, ax, &ty) else { return Val::Error };
    let ids = inputs.iter().map(|&(_, t)| t).collect();
    cx.push(Op::Concat { inputs: ids, axis }, |cx| cx.ctx(Verb::Named, "concat", a.name.sp, &inputs, None))
}

fn cast(cx: &mut Cx<'_, '_>, frame: &Frame, a: &Args<'_>, dtype_arg: Option<&Name>, x: ExprId) -> Val {
    let Some(d) = dtype_arg else {
        let example = if a.method { "x.cast::<f32>()" } else { "cast::<f32>(x)" };
        cx.report(
            Diag::new("`cast` needs a target dtype", a.name.sp, "no target dtype")
                .with_help(format!("write it as `{example}`")),
        );
        return Val::Error;
    };
    let dtype = match resolve_dtype(d) {
        Ok(dtype) => dtype,
        Err(diag) => {
            cx.report(*diag);
            return Val::Error;
        }
    };
    let Some(t) = tensor_arg(cx, frame, x) else { return Val::Error };
    let shape = cx.ty(t).shape;
    let xsp = a.sp_of(x);
    cx.push_typed(Op::Cast(t), TensorType { dtype, shape }, |cx| {
        cx.ctx(Verb::Named, "cast", a.name.sp, &[(xsp, t)], None)
    })
}

fn reduce(cx: &mut Cx<'_, '_>, frame: &Frame, a: &Args<'_>, op: ReduceOp, x: ExprId) -> Val {
    let Some(t) = tensor_arg(cx, frame, x) else { return Val::Error };
    let ty = cx.ty(t);
    let (axis_args, keepdim) = match a.args.split_last() {
        Some((&last, rest)) => match a.static_flag(last) {
            Some(flag) => (rest, flag),
            None => (a.args, false),
        },
        None => (a.args, false),
    };
    let mut axes: Vec<(usize, Sp)> = Vec::new();
    let mut ok = true;
    for &arg in axis_args {
        for item in a.items(arg) {
            match axis(cx, a, item, &ty) {
                Some(ax) => axes.push((ax, a.sp_of(item))),
                None => ok = false,
            }
        }
    }
    if !ok {
        return Val::Error;
    }
    if axis_args.is_empty() {
        axes = (0..ty.shape.rank()).map(|i| (i, a.name.sp)).collect();
    }
    axes.sort_by_key(|(ax, _)| *ax);
    for pair in axes.windows(2) {
        if let [(x0, _), (x1, sp)] = pair
            && x0 == x1
        {
            cx.report(Diag::new(format!("axis {x1} is listed twice"), *sp, "repeated axis"));
            return Val::Error;
        }
    }
    let axes: Vec<usize> = axes.into_iter().map(|(ax, _)| ax).collect();
    let xsp = a.sp_of(x);
    let name = a.name.text.clone();
    cx.push(Op::Reduce { op, input: t, axes, keepdim }, |cx| cx.ctx(Verb::Named, &name, a.name.sp, &[(xsp, t)], None))
}

/// `t`, `transpose`, `permute`, `reshape`, `broadcast_to`, `slice`.
fn layout(cx: &mut Cx<'_, '_>, frame: &Frame, a: &Args<'_>, x: ExprId) -> Val {
    let Some(t) = tensor_arg(cx, frame, x) else { return Val::Error };
    let ty = cx.ty(t);
    let rank = ty.shape.rank();
    let xsp = a.sp_of(x);
    let name = a.name.text.clone();
    let ctx = move |cx: &Cx<'_, '_>| cx.ctx(Verb::Named, &name, a.name.sp, &[(xsp, t)], None);
    match a.name.text.as_str() {
        "t" => {
            if !arity(cx, a, &[0]) {
                return Val::Error;
            }
            if rank < 2 {
                cx.report(Diag::new(
                    format!("`t()` swaps the last two axes and needs rank 2 or more, found {ty}"),
                    a.name.sp,
                    "needs a matrix",
                ));
                return Val::Error;
            }
            let mut perm: Vec<usize> = (0..rank).collect();
            perm.swap(rank - 2, rank - 1);
            cx.push(Op::Permute { input: t, perm }, ctx)
        }
        "transpose" => {
            if !arity(cx, a, &[2]) {
                return Val::Error;
            }
            let i = axis(cx, a, a.args[0], &ty);
            let j = axis(cx, a, a.args[1], &ty);
            let (Some(i), Some(j)) = (i, j) else { return Val::Error };
            let mut perm: Vec<usize> = (0..rank).collect();
            perm.swap(i, j);
            cx.push(Op::Permute { input: t, perm }, ctx)
        }
        "permute" => {
            let items: Vec<ExprId> = match a.args {
                [one] => a.items(*one),
                many => many.to_vec(),
            };
            let mut perm = Vec::with_capacity(items.len());
            for item in items {
                match axis(cx, a, item, &ty) {
                    Some(ax) => perm.push(ax),
                    None => return Val::Error,
                }
            }
            cx.push(Op::Permute { input: t, perm }, ctx)
        }
        "reshape" | "broadcast_to" => {
            let items: Vec<ExprId> = match a.args {
                [one] => a.items(*one),
                many => many.to_vec(),
            };
            let mut dims = Vec::with_capacity(items.len());
            for item in items {
                match dim(cx, a, frame, item) {
                    Some(d) => dims.push(d),
                    None => return Val::Error,
                }
            }
            let target = TensorType { dtype: ty.dtype, shape: Shape(dims) };
            let op = if a.name.text == "reshape" { Op::Reshape(t) } else { Op::Broadcast(t) };
            cx.push_typed(op, target, ctx)
        }
        "slice" => {
            if !arity(cx, a, &[3]) {
                return Val::Error;
            }
            let ax = axis(cx, a, a.args[0], &ty);
            let start = index(cx, a, a.args[1]);
            let end = index(cx, a, a.args[2]);
            let (Some(axis), Some(start), Some(end)) = (ax, start, end) else { return Val::Error };
            cx.push(Op::Slice { input: t, axis, start, end }, ctx)
        }
        other => {
            cx.report(Diag::new(format!("no method named `{other}`"), a.name.sp, "unknown method"));
            Val::Error
        }
    }
}
