//! Evaluating one expression: names, literals, operators, tuples, and calls (inlined or builtin).

use std::collections::HashMap;

use tcc_ir::{BinaryOp, Op, UnaryOp};

use crate::ast::{BinOp, DimAst, ExprId, ExprKind, Name, TypeAst};
use crate::diag::Diag;
use crate::lower::builtins;
use crate::lower::cx::{Cx, FUNCTIONS};
use crate::lower::errors::Verb;
use crate::lower::frame::{Frame, resolve_ret};
use crate::lower::types::{Subst, bind_param, describe_subst, resolve_dtype};
use crate::lower::value::{Num, Operand, Val};
use crate::span::Sp;
use crate::suggest::did_you_mean;

/// What evaluating an expression asks of the loop.
#[derive(Debug)]
pub(crate) enum Step {
    /// The expression's value.
    Value(Val),
    /// Evaluate this callee frame first; its result is the expression's value.
    Inline(Box<Frame>),
}

/// A written type as text (`f32[N, 4]`).
pub(crate) fn type_text(ty: &TypeAst) -> String {
    let dims: Vec<String> = ty
        .dims
        .iter()
        .map(|d| match &d.dim {
            DimAst::Const(n) => n.to_string(),
            DimAst::Var(v) => v.clone(),
        })
        .collect();
    format!("{}[{}]", ty.dtype.text, dims.join(", "))
}

impl Cx<'_, '_> {
    /// Evaluates expression `id` of `frame` (its operands are already evaluated).
    pub fn eval(&mut self, frame: &Frame, id: ExprId) -> Step {
        let Some(expr) = self.fn_ast(frame.func).and_then(|f| f.nodes.get(id)) else {
            return Step::Value(Val::Error);
        };
        let value = match &expr.kind {
            ExprKind::Name(n) => match frame.env.get(n) {
                Some(v) => v.clone(),
                // `inf` is the float literal of positive infinity (`-inf` negates it) unless a
                // binding shadows it.
                None if n == "inf" => Val::Num(Num::Float(f64::INFINITY), expr.sp),
                None => Val::Unbound,
            },
            ExprKind::Int(v) => Val::Num(Num::Int(i128::from(*v)), expr.sp),
            ExprKind::Float(v) => Val::Num(Num::Float(*v), expr.sp),
            ExprKind::Bool(b) => Val::Num(Num::Bool(*b), expr.sp),
            ExprKind::Neg(a) => self.neg(frame, *a, expr.sp),
            ExprKind::Binary { op, op_sp, lhs, rhs } => self.binary(frame, *op, *op_sp, *lhs, *rhs),
            ExprKind::Tuple(items) => {
                let values: Vec<Option<Val>> = items.iter().map(|&i| self.element(frame, i)).collect();
                values.into_iter().collect::<Option<Vec<Val>>>().map_or(Val::Error, |v| Val::Tuple(v.into()))
            }
            ExprKind::List(_) => Val::List,
            ExprKind::Call { callee, dtype_arg, args } => {
                if let Some(&f) = self.prog.by_name.get(callee.text.as_str()) {
                    if let Some(n) = dtype_arg {
                        self.report(Diag::new(format!("`{}` takes no type argument", callee.text), n.sp, "unexpected"));
                        return Step::Value(Val::Error);
                    }
                    return self.inline_call(frame, id, f, callee, args);
                }
                if self.prog.broken.contains(&callee.text) {
                    Val::Error
                } else if frame.env.contains_key(&callee.text) {
                    self.report(Diag::new(
                        format!("`{}` is a value, not a function", callee.text),
                        callee.sp,
                        "not a function",
                    ));
                    Val::Error
                } else if FUNCTIONS.contains(&callee.text.as_str()) {
                    builtins::call(self, frame, expr.sp, callee, dtype_arg.as_ref(), args)
                } else {
                    let few = self.prog.by_name.len() + FUNCTIONS.len() <= crate::suggest::MAX_CANDIDATES;
                    let help = if few && self.take_suggestion() {
                        let mut names: Vec<&str> = FUNCTIONS.to_vec();
                        names.extend(self.prog.by_name.keys().copied());
                        names.sort_unstable();
                        did_you_mean(&callee.text, names)
                    } else {
                        None
                    };
                    self.report(
                        Diag::new(format!("cannot find function `{}`", callee.text), callee.sp, "not found")
                            .with_help_opt(help),
                    );
                    Val::Error
                }
            }
            ExprKind::Method { recv, method, dtype_arg, args } => {
                builtins::method(self, frame, expr.sp, *recv, method, dtype_arg.as_ref(), args)
            }
        };
        Step::Value(value)
    }

    /// The value of a tuple element: anything but a tuple.
    fn element(&mut self, frame: &Frame, id: ExprId) -> Option<Val> {
        let value = self.value(frame, id)?;
        if let Val::Tuple(items) = &value {
            let sp = self.fn_ast(frame.func).and_then(|f| f.nodes.get(id)).map(|e| e.sp)?;
            self.report(Diag::new(
                format!("tuples cannot be nested: this element is a tuple of {} values", items.len()),
                sp,
                "a tuple inside a tuple",
            ));
            return None;
        }
        Some(value)
    }

    fn neg(&mut self, frame: &Frame, a: ExprId, sp: Sp) -> Val {
        match self.operand(frame, a) {
            None => Val::Error,
            Some(Operand::Num(Num::Int(i), _)) => Val::Num(Num::Int(-i), sp),
            Some(Operand::Num(Num::Float(f), _)) => Val::Num(Num::Float(-f), sp),
            Some(Operand::Num(Num::Bool(b), _)) => {
                self.report(Diag::new(format!("cannot negate `{b}`"), sp, "a bool literal"));
                Val::Error
            }
            Some(Operand::Tensor(t)) => {
                let operand_sp = self.fn_ast(frame.func).and_then(|f| f.nodes.get(a)).map_or(sp, |e| e.sp);
                self.push(Op::Unary(UnaryOp::Neg, t), |cx| {
                    cx.ctx(Verb::Named, "-", Sp { lo: sp.lo, hi: sp.lo }, &[(operand_sp, t)], None)
                })
            }
        }
    }

    fn binary(&mut self, frame: &Frame, op: BinOp, op_sp: Sp, lhs: ExprId, rhs: ExprId) -> Val {
        let a = self.operand(frame, lhs);
        let b = self.operand(frame, rhs);
        let (Some(a), Some(b)) = (a, b) else { return Val::Error };
        let Some((x, y)) = self.unify(a, b) else { return Val::Error };
        let (ir, verb) = match op {
            BinOp::Add => (Op::Binary(BinaryOp::Add, x, y), Verb::Add),
            BinOp::Sub => (Op::Binary(BinaryOp::Sub, x, y), Verb::Sub),
            BinOp::Mul => (Op::Binary(BinaryOp::Mul, x, y), Verb::Mul),
            BinOp::Div => (Op::Binary(BinaryOp::Div, x, y), Verb::Div),
            BinOp::MatMul => (Op::MatMul(x, y), Verb::MatMul),
            BinOp::Cmp(c) => (Op::Compare(c, x, y), Verb::Compare),
        };
        let f = self.fn_ast(frame.func);
        let lsp = f.and_then(|f| f.nodes.get(lhs)).map_or(op_sp, |e| e.sp);
        let rsp = f.and_then(|f| f.nodes.get(rhs)).map_or(op_sp, |e| e.sp);
        let name = if verb == Verb::MatMul { "@" } else { op.symbol() };
        let name = name.to_string();
        self.push(ir, |cx| cx.ctx(verb, &name, op_sp, &[(lsp, x), (rsp, y)], Some((0, 1))))
    }

    /// Prepares the frame of a call to fn `f`: checks the arguments against its parameters and
    /// binds its shape variables.
    fn inline_call(&mut self, frame: &Frame, id: ExprId, f: usize, callee: &Name, args: &[ExprId]) -> Step {
        let Some(callee_ast) = self.fn_ast(f) else { return Step::Value(Val::Error) };
        let operands: Vec<Option<Operand>> = args.iter().map(|&a| self.operand(frame, a)).collect();
        if self.prog.unusable.get(f).copied().unwrap_or(true) {
            return Step::Value(Val::Error);
        }
        if args.len() != callee_ast.params.len() {
            let n = callee_ast.params.len();
            self.report(
                Diag::new(
                    format!(
                        "`{}` takes {n} argument{} but {} {} given",
                        callee.text,
                        if n == 1 { "" } else { "s" },
                        args.len(),
                        if args.len() == 1 { "was" } else { "were" }
                    ),
                    callee.sp,
                    format!("expected {n} argument{}", if n == 1 { "" } else { "s" }),
                )
                .with_label(callee_ast.name.sp, format!("`{}` is defined here", callee.text)),
            );
            return Step::Value(Val::Error);
        }
        let Some(operands) = operands.into_iter().collect::<Option<Vec<Operand>>>() else {
            return Step::Value(Val::Error);
        };
        let mut subst = Subst::new();
        let mut env = HashMap::new();
        let mut ok = true;
        for ((param, operand), &arg) in callee_ast.params.iter().zip(operands).zip(args) {
            let Ok(dtype) = resolve_dtype(&param.ty.dtype) else { return Step::Value(Val::Error) };
            let arg_sp = self.fn_ast(frame.func).and_then(|f| f.nodes.get(arg)).map_or(callee.sp, |e| e.sp);
            let value = match operand {
                Operand::Tensor(t) => {
                    let have = self.ty(t);
                    if bind_param(&param.ty, dtype, &have, &mut subst) {
                        Some(t)
                    } else {
                        let mut diag = Diag::new(
                            format!(
                                "mismatched argument: `{}` expects {} for `{}`, found {have}",
                                callee.text,
                                type_text(&param.ty),
                                param.name.text
                            ),
                            arg_sp,
                            format!("this is {have}"),
                        )
                        .with_label(param.ty.sp, "parameter declared here");
                        if !subst.is_empty() {
                            diag = diag.with_note(format!(
                                "shape variables bound by the arguments: {}",
                                describe_subst(&subst)
                            ));
                        }
                        self.report(diag);
                        None
                    }
                }
                Operand::Num(n, sp) if param.ty.dims.is_empty() => self.materialize(n, sp, dtype),
                Operand::Num(n, sp) => {
                    self.report(
                        Diag::new(
                            format!(
                                "mismatched argument: `{}` expects {} for `{}`, found {}",
                                callee.text,
                                type_text(&param.ty),
                                param.name.text,
                                n.describe()
                            ),
                            sp,
                            "a scalar literal",
                        )
                        .with_label(param.ty.sp, "parameter declared here"),
                    );
                    None
                }
            };
            match value {
                Some(t) => {
                    env.insert(param.name.text.clone(), Val::Tensor(t));
                }
                None => ok = false,
            }
        }
        if !ok {
            return Step::Value(Val::Error);
        }
        // The return types can only fail here for these shapes (the callee itself type-checked):
        // catch that error and report it at the call.
        let (saved_pending, saved_inlined) = (self.pending.take(), self.inlined);
        self.inlined = true;
        let ret = resolve_ret(self, callee_ast.ret.as_ref(), &subst);
        let failure = std::mem::replace(&mut self.pending, saved_pending);
        self.inlined = saved_inlined;
        if let Some(inner) = failure {
            let call_sp = self.fn_ast(frame.func).and_then(|f| f.nodes.get(id)).map_or(callee.sp, |e| e.sp);
            let mut diag = Diag::new(
                format!("in this call to `{}`: {}", callee.text, inner.message),
                call_sp,
                format!("`{}` does not type-check for these arguments", callee.text),
            );
            if let crate::span::Loc::Tokens(sp) = inner.primary {
                diag = diag.with_label(sp, inner.label);
            }
            self.report(diag.with_note(format!(
                "in this call, the shape variables of `{}` are {}",
                callee.text,
                describe_subst(&subst)
            )));
            return Step::Value(Val::Error);
        }
        let mut callee_frame = Frame::new(f, callee_ast.nodes.len(), env, subst, id);
        callee_frame.ret = ret;
        Step::Inline(Box::new(callee_frame))
    }
}
