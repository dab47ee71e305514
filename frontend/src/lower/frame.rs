//! The evaluation loop: frames of fn bodies on an explicit stack, so inlined calls never recurse.
//!
//! A frame evaluates its fn's arena in index order (children come before parents, so every operand
//! is ready). A call to another fn pushes a frame for the callee with its parameters bound; when the
//! callee's body is done its result is stored at the call and the caller goes on. The first error in
//! an inlined body abandons the whole call and is reported once, at the call in the fn being lowered.

use std::collections::HashMap;

use tcc_ir::{Graph, NodeId, TensorType};

use crate::ast::{ExprKind, Pattern, RetAst, TypeAst};
use crate::diag::Diag;
use crate::lower::cx::{Budget, Cx, Program};
use crate::lower::eval::Step;
use crate::lower::types::{Subst, describe_subst, resolve_type};
use crate::lower::value::Val;
use crate::span::{Loc, Sp};

/// The declared result types of a frame's fn, resolved under its shape variables.
#[derive(Debug, Clone)]
pub(crate) struct RetTypes {
    /// Per returned value: its type, or `None` where the written type had an error.
    pub types: Vec<Option<TensorType>>,
    /// Where each type is written.
    pub spans: Vec<Sp>,
    /// True for a tuple return type.
    pub tuple: bool,
}

/// One fn body being evaluated.
#[derive(Debug)]
pub(crate) struct Frame {
    /// The fn (index into the program's fns).
    pub func: usize,
    /// The next expression to evaluate.
    pub next: usize,
    /// The statement the next expression belongs to.
    pub stmt: usize,
    /// The value of every expression evaluated so far.
    pub values: Vec<Val>,
    /// Parameters and `let` bindings in scope.
    pub env: HashMap<String, Val>,
    /// The callee's shape variables in the caller's terms (empty for the fn being lowered).
    pub subst: Subst,
    /// The declared result types, if the fn declares them.
    pub ret: Option<RetTypes>,
    /// The call expression in the parent frame this frame's result goes to.
    pub call_node: usize,
}

impl Frame {
    /// A frame for fn `func` with `len` expressions, called from `call_node`.
    pub fn new(func: usize, len: usize, env: HashMap<String, Val>, subst: Subst, call_node: usize) -> Frame {
        Frame { func, next: 0, stmt: 0, values: vec![Val::Error; len], env, subst, ret: None, call_node }
    }
}

/// What lowering one fn gave.
#[derive(Debug)]
pub(crate) struct FnOutcome {
    /// The graph (complete only when `ok`).
    pub graph: Graph,
    /// Its errors.
    pub diags: Vec<Diag>,
    /// True when the fn lowered without any problem (its callers may inline it).
    pub ok: bool,
    /// True when a program-wide limit stopped lowering.
    pub fatal: bool,
}

/// Resolves a fn's declared result types under `subst`, reporting written types that are invalid.
pub(crate) fn resolve_ret(cx: &mut Cx<'_, '_>, ret: Option<&RetAst>, subst: &Subst) -> Option<RetTypes> {
    let (written, tuple): (Vec<&TypeAst>, bool) = match ret? {
        RetAst::One(t) => (vec![t], false),
        RetAst::Tuple(ts) => (ts.iter().collect(), true),
    };
    let mut types = Vec::with_capacity(written.len());
    for t in &written {
        match resolve_type(t, subst) {
            Ok(ty) => types.push(Some(ty)),
            Err(d) => {
                cx.report(*d);
                types.push(None);
            }
        }
    }
    Some(RetTypes { types, spans: written.iter().map(|t| t.sp).collect(), tuple })
}

/// Lowers fn `f` of `prog` into its own graph, inlining the fns it calls.
pub(crate) fn lower_fn(prog: &Program<'_>, f: usize, budget: &mut Budget) -> FnOutcome {
    let Some(ast) = prog.fns.get(f) else {
        return FnOutcome { graph: Graph::default(), diags: Vec::new(), ok: false, fatal: false };
    };
    let mut cx = Cx {
        prog,
        top: f,
        graph: Graph::new(ast.name.text.clone()),
        diags: Vec::new(),
        pending: None,
        inlined: false,
        fatal: false,
        budget,
    };
    let mut env = HashMap::new();
    let mut seen: HashMap<&str, Sp> = HashMap::new();
    for p in &ast.params {
        if let Some(first) = seen.get(p.name.text.as_str()) {
            cx.report(
                Diag::new(format!("parameter `{}` is declared twice", p.name.text), p.name.sp, "declared again here")
                    .with_label(*first, "first declared here"),
            );
            continue;
        }
        seen.insert(&p.name.text, p.name.sp);
        let value = match resolve_type(&p.ty, &Subst::new()) {
            Ok(ty) => match cx.graph.add_param(p.name.text.clone(), ty) {
                Ok(id) => Val::Tensor(id),
                Err(e) => {
                    cx.report(Diag::new(e.to_string(), p.ty.sp, "in this parameter type"));
                    Val::Error
                }
            },
            Err(d) => {
                cx.report(*d);
                Val::Error
            }
        };
        env.insert(p.name.text.clone(), value);
    }
    cx.budget.ops_used += cx.graph.nodes.len();
    let mut frame = Frame::new(f, ast.nodes.len(), env, Subst::new(), 0);
    frame.ret = resolve_ret(&mut cx, ast.ret.as_ref(), &Subst::new());
    let mut frames = vec![frame];
    let outputs = run(&mut cx, &mut frames);
    let ok = cx.diags.is_empty() && !cx.fatal && outputs.is_some();
    if let Some(outputs) = outputs {
        cx.graph.outputs = outputs;
    }
    let fatal = cx.fatal;
    FnOutcome { graph: cx.graph, diags: cx.diags, ok, fatal }
}

/// Runs frames until the bottom one is done; returns its outputs when they are all well typed.
fn run(cx: &mut Cx<'_, '_>, frames: &mut Vec<Frame>) -> Option<Vec<NodeId>> {
    loop {
        if cx.fatal {
            return None;
        }
        let depth = frames.len();
        let frame = frames.last_mut()?;
        let len = cx.fn_ast(frame.func).map_or(0, |f| f.nodes.len());
        if frame.next < len {
            if cx.budget.work_left == 0 {
                cx.fatal(
                    format!(
                        "the program is too large: lowering it, with every call inlined, takes more than {} steps",
                        crate::lower::cx::MAX_WORK
                    ),
                    "lowering this fn exceeds the limit",
                );
                return None;
            }
            cx.budget.work_left -= 1;
            cx.inlined = depth > 1;
            let id = frame.next;
            match cx.eval(frame, id) {
                Step::Value(v) => store(cx, frame, id, v),
                Step::Inline(callee) => {
                    cx.budget.work_left = cx.budget.work_left.saturating_sub(crate::lower::cx::CALL_COST);
                    frames.push(*callee);
                }
            }
        } else {
            let done = frames.pop()?;
            cx.inlined = depth > 1;
            let (value, outputs) = finish(cx, &done);
            match frames.last_mut() {
                Some(parent) => {
                    cx.inlined = depth > 2;
                    store(cx, parent, done.call_node, value);
                }
                None => return outputs,
            }
        }
        if cx.pending.is_some() {
            unwind(cx, frames);
        }
    }
}

/// Stores the value of expression `id` and binds the statement it completes.
fn store(cx: &mut Cx<'_, '_>, frame: &mut Frame, id: usize, value: Val) {
    if let Some(slot) = frame.values.get_mut(id) {
        *slot = value;
    }
    frame.next = id + 1;
    let Some(ast) = cx.fn_ast(frame.func) else { return };
    let Some(stmt) = ast.stmts.get(frame.stmt) else { return };
    if stmt.end != frame.next {
        return;
    }
    frame.stmt += 1;
    let Some(pat) = &stmt.pat else { return };
    let mut value = cx.value(frame, stmt.root);
    if let (Some(ty), Some(v)) = (&stmt.ty, value.clone()) {
        value = match resolve_type(ty, &frame.subst) {
            Ok(want) => {
                let sp = ast.nodes.get(stmt.root).map_or(ty.sp, |e| e.sp);
                check_value(cx, v, &want, sp, ty.sp, "type annotation").map(Val::Tensor)
            }
            Err(d) => {
                cx.report(*d);
                None
            }
        };
    }
    match pat {
        Pattern::Name(n) => {
            frame.env.insert(n.text.clone(), value.unwrap_or(Val::Error));
        }
        Pattern::Tuple(names, psp) => {
            let items = match value {
                Some(Val::Tuple(items)) if items.len() == names.len() => Some(items),
                Some(Val::Error) | None => None,
                Some(other) => {
                    let found = match &other {
                        Val::Tuple(items) => format!("a tuple of {} values", items.len()),
                        _ => "a single value".to_string(),
                    };
                    let sp = ast.nodes.get(stmt.root).map_or(*psp, |e| e.sp);
                    cx.report(
                        Diag::new(
                            format!("expected a tuple of {} values, found {found}", names.len()),
                            sp,
                            found.clone(),
                        )
                        .with_label(*psp, format!("this pattern has {} names", names.len())),
                    );
                    None
                }
            };
            match items {
                Some(items) => {
                    for (n, v) in names.iter().zip(items.iter()) {
                        frame.env.insert(n.text.clone(), v.clone());
                    }
                }
                None => {
                    for n in names {
                        frame.env.insert(n.text.clone(), Val::Error);
                    }
                }
            }
        }
    }
}

/// Checks a value against a declared type; a literal takes the type if it is a scalar.
fn check_value(cx: &mut Cx<'_, '_>, value: Val, want: &TensorType, sp: Sp, decl: Sp, what: &str) -> Option<NodeId> {
    match value {
        Val::Tensor(t) => {
            let have = cx.ty(t);
            if have == *want {
                return Some(t);
            }
            cx.report(
                Diag::new(
                    format!("mismatched {what}: declared {want}, computed {have}"),
                    sp,
                    format!("this is {have}"),
                )
                .with_label(decl, format!("declared {want} here")),
            );
            None
        }
        Val::Num(n, nsp) if want.shape.rank() == 0 => cx.materialize(n, nsp, want.dtype),
        Val::Num(n, nsp) => {
            cx.report(
                Diag::new(
                    format!("mismatched {what}: declared {want}, found {}", n.describe()),
                    nsp,
                    "a scalar literal",
                )
                .with_label(decl, format!("declared {want} here"))
                .with_help("broadcast it: `(1.0).broadcast_to([..])`, or compute it from a tensor"),
            );
            None
        }
        Val::Tuple(items) => {
            cx.report(
                Diag::new(
                    format!("mismatched {what}: declared {want}, found a tuple of {} values", items.len()),
                    sp,
                    "a tuple",
                )
                .with_label(decl, format!("declared {want} here")),
            );
            None
        }
        Val::Unbound | Val::List | Val::Error => None,
    }
}

/// A value with no declared type as tensors (literals take their default dtype).
fn flatten(cx: &mut Cx<'_, '_>, value: Val, sp: Sp) -> Option<Vec<NodeId>> {
    let items: Vec<Val> = match value {
        Val::Tuple(items) => items.to_vec(),
        other => vec![other],
    };
    let mut ids = Vec::with_capacity(items.len());
    let mut ok = true;
    for item in items {
        match item {
            Val::Tensor(t) => ids.push(t),
            Val::Num(n, nsp) => match cx.materialize(n, nsp, n.default_dtype()) {
                Some(id) => ids.push(id),
                None => ok = false,
            },
            Val::Tuple(_) => {
                cx.report(Diag::new("a fn cannot return nested tuples", sp, "this tuple contains a tuple"));
                ok = false;
            }
            Val::Unbound | Val::List | Val::Error => ok = false,
        }
    }
    ok.then_some(ids)
}

/// The result of a finished frame: its value for the caller, and its outputs if all are well typed.
fn finish(cx: &mut Cx<'_, '_>, frame: &Frame) -> (Val, Option<Vec<NodeId>>) {
    let Some(ast) = cx.fn_ast(frame.func) else { return (Val::Error, None) };
    let Some(tail) = ast.stmts.last() else { return (Val::Error, None) };
    let Some(tail_expr) = ast.nodes.get(tail.root) else { return (Val::Error, None) };
    let Some(value) = cx.value(frame, tail.root) else { return (Val::Error, None) };
    let Some(ret) = &frame.ret else {
        return match flatten(cx, value.clone(), tail_expr.sp) {
            Some(ids) if !matches!(value, Val::Tuple(_)) && ids.len() == 1 => (Val::Tensor(ids[0]), Some(ids)),
            Some(ids) => (Val::Tuple(ids.iter().map(|&i| Val::Tensor(i)).collect()), Some(ids)),
            None => (Val::Error, None),
        };
    };
    let element_sp = |i: usize| match &tail_expr.kind {
        ExprKind::Tuple(items) => items.get(i).and_then(|&e| ast.nodes.get(e)).map_or(tail_expr.sp, |e| e.sp),
        _ => tail_expr.sp,
    };
    let values: Vec<Val> = if ret.tuple {
        match value {
            Val::Tuple(items) if items.len() == ret.types.len() => items.to_vec(),
            other => {
                let found = match &other {
                    Val::Tuple(items) => format!("a tuple of {} values", items.len()),
                    _ => "a single value".to_string(),
                };
                let decl = ret.spans.first().copied().unwrap_or(tail_expr.sp);
                let decl = ret.spans.last().map_or(decl, |last| decl.to(*last));
                cx.report(
                    Diag::new(
                        format!(
                            "mismatched return type: declared a tuple of {} tensors, computed {found}",
                            ret.types.len()
                        ),
                        tail_expr.sp,
                        found,
                    )
                    .with_label(decl, "declared here"),
                );
                return (Val::Error, None);
            }
        }
    } else {
        vec![value]
    };
    let mut ids = Vec::with_capacity(values.len());
    let mut all = true;
    for (i, v) in values.into_iter().enumerate() {
        let (Some(Some(want)), Some(decl)) = (ret.types.get(i), ret.spans.get(i)) else {
            all = false;
            continue;
        };
        match check_value(cx, v, want, element_sp(i), *decl, "return type") {
            Some(id) => ids.push(id),
            None => all = false,
        }
    }
    if !all {
        return (Val::Error, None);
    }
    let value = if ret.tuple {
        Val::Tuple(ids.iter().map(|&i| Val::Tensor(i)).collect())
    } else {
        ids.first().map_or(Val::Error, |&i| Val::Tensor(i))
    };
    (value, Some(ids))
}

/// Abandons the inlined call that hit an error and reports the error at that call.
fn unwind(cx: &mut Cx<'_, '_>, frames: &mut Vec<Frame>) {
    let Some(inner) = cx.pending.take() else { return };
    let callee = frames.get(1).map(|f| (f.func, describe_subst(&f.subst)));
    frames.truncate(1);
    let Some(top) = frames.first_mut() else { return };
    let id = top.next;
    cx.inlined = false;
    let call_sp = cx.fn_ast(top.func).and_then(|f| f.nodes.get(id)).map(|e| e.sp);
    let callee_name =
        callee.as_ref().and_then(|(f, _)| cx.fn_ast(*f)).map_or("?", |f| f.name.text.as_str()).to_string();
    if let Some(call_sp) = call_sp {
        let mut diag = Diag::new(
            format!("in this call to `{callee_name}`: {}", inner.message),
            call_sp,
            format!("`{callee_name}` does not type-check for these arguments"),
        );
        if let Loc::Tokens(sp) = inner.primary {
            diag = diag.with_label(sp, inner.label);
        }
        if let Some((_, subst)) = callee
            && !subst.is_empty()
        {
            diag = diag.with_note(format!("in this call, the shape variables of `{callee_name}` are {subst}"));
        }
        diag.help = inner.help;
        cx.diags.push(diag);
    }
    store(cx, top, id, Val::Error);
}
