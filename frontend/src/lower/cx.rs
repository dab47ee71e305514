//! The lowering context of one fn: the graph being built, the errors found, the shared budgets, and
//! the helpers every construct uses (reporting, operands, literals, pushing nodes).

use std::collections::{HashMap, HashSet};

use tcc_ir::limits::MAX_OPS;
use tcc_ir::{BuildError, DType, Graph, NodeId, Op, TensorType};

use crate::ast::{ExprId, ExprKind, FnAst};
use crate::diag::Diag;
use crate::lower::errors::{OpCtx, Verb, type_error};
use crate::lower::frame::Frame;
use crate::lower::value::{Num, Operand, Val};
use crate::span::Sp;
use crate::suggest::{MAX_CANDIDATES, did_you_mean};

/// Every fn of the input, as the lowering of one of them sees the others.
pub(crate) struct Program<'a> {
    /// The parsed fns, in source order.
    pub fns: &'a [FnAst],
    /// Callable fns by name (the first of duplicates; builtin names excluded).
    pub by_name: HashMap<&'a str, usize>,
    /// Names of items that failed to parse: calls to them fail silently.
    pub broken: HashSet<String>,
    /// Per fn: true if calls to it must fail silently (it is recursive or has errors).
    pub unusable: Vec<bool>,
}

/// Limits shared by every fn of one input, so inlining cannot blow up the total work.
#[derive(Debug)]
pub(crate) struct Budget {
    /// Graph nodes built so far, over every fn.
    pub ops_used: usize,
    /// Expression evaluations left (every inlined call evaluates its callee's body again).
    pub work_left: usize,
    /// "Did you mean" searches left: past the errors anyone reads, they are skipped.
    pub suggestions_left: usize,
}

/// How much work lowering one input may take: one unit per expression evaluated, [`CALL_COST`] per
/// inlined call (every inlined call evaluates its callee's body again).
pub(crate) const MAX_WORK: usize = 10 * MAX_OPS;

/// The work units an inlined call costs on top of its body (setting up its frame).
pub(crate) const CALL_COST: usize = 4;

/// The state of lowering one fn.
pub(crate) struct Cx<'p, 'a> {
    /// All fns.
    pub prog: &'p Program<'a>,
    /// The fn being lowered (its index in `prog.fns`).
    pub top: usize,
    /// The graph being built.
    pub graph: Graph,
    /// Errors of this fn.
    pub diags: Vec<Diag>,
    /// The first error found inside an inlined call; the call is then abandoned.
    pub pending: Option<Diag>,
    /// True while evaluating the body of an inlined call.
    pub inlined: bool,
    /// Set when a program-wide limit was hit: lowering stops.
    pub fatal: bool,
    /// The shared budgets.
    pub budget: &'p mut Budget,
}

/// One candidate list of the builtin functions (for suggestions).
pub(crate) const FUNCTIONS: &[&str] = &[
    "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "abs", "neg", "max", "min", "pow", "select",
    "where", "matmul", "concat", "cast", "iota",
];

/// Every method name (for suggestions).
pub(crate) const METHODS: &[&str] = &[
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "tanh",
    "sigmoid",
    "relu",
    "gelu",
    "abs",
    "neg",
    "sum",
    "mean",
    "max",
    "min",
    "pow",
    "matmul",
    "t",
    "transpose",
    "permute",
    "reshape",
    "broadcast_to",
    "slice",
    "cast",
];

impl<'p, 'a> Cx<'p, 'a> {
    /// The fn with index `f`.
    pub fn fn_ast(&self, f: usize) -> Option<&'a FnAst> {
        self.prog.fns.get(f)
    }

    /// Records an error: inside an inlined call it becomes the call's (first) error.
    pub fn report(&mut self, diag: Diag) {
        if self.inlined {
            if self.pending.is_none() {
                self.pending = Some(diag);
            }
        } else {
            self.diags.push(diag);
        }
    }

    /// True if a "did you mean" search may still be made (and counts it).
    pub fn take_suggestion(&mut self) -> bool {
        if self.budget.suggestions_left == 0 {
            return false;
        }
        self.budget.suggestions_left -= 1;
        true
    }

    /// Stops lowering because a program-wide limit was hit.
    pub fn fatal(&mut self, message: String, label: &str) {
        if self.fatal {
            return;
        }
        self.fatal = true;
        let at = match self.fn_ast(self.top) {
            Some(f) => f.name.sp,
            None => return,
        };
        self.diags.push(
            Diag::new(message, at, label).with_note("lowering stopped here; calls are inlined into every caller"),
        );
    }

    /// The type of node `id` (nodes always come from this graph).
    pub fn ty(&self, id: NodeId) -> TensorType {
        self.graph.ty(id).cloned().unwrap_or(TensorType { dtype: DType::F32, shape: tcc_ir::Shape::scalar() })
    }

    fn charge_op(&mut self) -> bool {
        if self.budget.ops_used + 1 > MAX_OPS {
            self.fatal(format!("the program has more than {MAX_OPS} ops"), "lowering this fn exceeds the limit");
            return false;
        }
        self.budget.ops_used += 1;
        true
    }

    fn build_error(&mut self, err: BuildError, ctx: impl FnOnce(&Self) -> OpCtx) {
        match err {
            BuildError::Type(e) => {
                let diag = type_error(&e, &ctx(self));
                self.report(diag);
            }
            BuildError::TooManyOps => {
                self.fatal(format!("the program has more than {MAX_OPS} ops"), "lowering this fn exceeds the limit");
            }
        }
    }

    /// Appends an op whose type the IR infers; on error reports it in the terms of `ctx`.
    pub fn push(&mut self, op: Op, ctx: impl FnOnce(&Self) -> OpCtx) -> Val {
        if !self.charge_op() {
            return Val::Error;
        }
        match self.graph.push(op) {
            Ok(id) => Val::Tensor(id),
            Err(e) => {
                self.build_error(e, ctx);
                Val::Error
            }
        }
    }

    /// Appends an op with a chosen result type (casts, reshapes, broadcasts).
    pub fn push_typed(&mut self, op: Op, ty: TensorType, ctx: impl FnOnce(&Self) -> OpCtx) -> Val {
        if !self.charge_op() {
            return Val::Error;
        }
        match self.graph.push_typed(op, ty) {
            Ok(id) => Val::Tensor(id),
            Err(e) => {
                self.build_error(e, ctx);
                Val::Error
            }
        }
    }

    /// A context naming one operation and its operands.
    pub fn ctx(
        &self,
        verb: Verb,
        name: &str,
        at: Sp,
        operands: &[(Sp, NodeId)],
        pair: Option<(usize, usize)>,
    ) -> OpCtx {
        OpCtx {
            verb,
            name: name.to_string(),
            at,
            operands: operands.iter().map(|(sp, id)| (*sp, self.ty(*id))).collect(),
            pair,
        }
    }

    /// A literal as a constant node of `dtype`, if the literal fits that dtype.
    pub fn materialize(&mut self, num: Num, sp: Sp, dtype: DType) -> Option<NodeId> {
        let value = match (num, dtype) {
            (Num::Bool(b), DType::Bool) => f64::from(u8::from(b)),
            (Num::Bool(b), _) => {
                self.report(Diag::new(format!("cannot use `{b}` as {dtype}"), sp, format!("expected {dtype} here")));
                return None;
            }
            (_, DType::Bool) => {
                self.report(
                    Diag::new(format!("cannot use a number as bool: {}", num.describe()), sp, "expected bool here")
                        .with_help("compare instead, for example `x != 0`"),
                );
                return None;
            }
            (Num::Float(f), DType::I32) => {
                self.report(
                    Diag::new(format!("{} cannot be used as i32", num.describe()), sp, "expected i32 here").with_help(
                        format!("write an integer, or cast the other operand: `.cast::<f32>()` ({f:?} is a float)"),
                    ),
                );
                return None;
            }
            (Num::Int(i), DType::I32) => match i32::try_from(i) {
                Ok(v) => f64::from(v),
                Err(_) => {
                    self.report(Diag::new(
                        format!("{} does not fit in i32", num.describe()),
                        sp,
                        "out of range for i32",
                    ));
                    return None;
                }
            },
            // Integer literals are below 2^64 in magnitude, so the conversion only rounds.
            (Num::Int(i), _) => i as f64,
            (Num::Float(f), _) => f,
        };
        // A finite literal that rounds to infinity is a mistake; `inf` itself is meant.
        if dtype.is_float() && value.is_finite() && !dtype.round(value).is_finite() {
            self.report(Diag::new(
                format!("{} is out of range for {dtype}", num.describe()),
                sp,
                format!("rounds to infinity in {dtype}"),
            ));
            return None;
        }
        if !self.charge_op() {
            return None;
        }
        match self.graph.constant(value, dtype) {
            Ok(id) => Some(id),
            Err(e) => {
                self.build_error(e, |_| OpCtx {
                    verb: Verb::Named,
                    name: "constant".into(),
                    at: sp,
                    operands: Vec::new(),
                    pair: None,
                });
                None
            }
        }
    }

    /// Both operands as tensors of one dtype: a literal adopts the other operand's dtype, and two
    /// literals take their default (f32 if either is a float).
    pub fn unify(&mut self, a: Operand, b: Operand) -> Option<(NodeId, NodeId)> {
        match (a, b) {
            (Operand::Tensor(x), Operand::Tensor(y)) => Some((x, y)),
            (Operand::Tensor(x), Operand::Num(n, sp)) => {
                let d = self.ty(x).dtype;
                Some((x, self.materialize(n, sp, d)?))
            }
            (Operand::Num(n, sp), Operand::Tensor(y)) => {
                let d = self.ty(y).dtype;
                Some((self.materialize(n, sp, d)?, y))
            }
            (Operand::Num(m, msp), Operand::Num(n, nsp)) => {
                let d = if matches!(m, Num::Float(_)) || matches!(n, Num::Float(_)) {
                    DType::F32
                } else {
                    m.default_dtype()
                };
                let x = self.materialize(m, msp, d);
                let y = self.materialize(n, nsp, d);
                Some((x?, y?))
            }
        }
    }

    /// An operand as a tensor, a literal taking `dtype` (or its default).
    pub fn tensor(&mut self, op: Operand, dtype: Option<DType>) -> Option<NodeId> {
        match op {
            Operand::Tensor(t) => Some(t),
            Operand::Num(n, sp) => self.materialize(n, sp, dtype.unwrap_or(n.default_dtype())),
        }
    }

    /// The value of expression `id` of `frame` as an operand; reports what cannot be one.
    pub fn operand(&mut self, frame: &Frame, id: ExprId) -> Option<Operand> {
        match frame.values.get(id) {
            Some(Val::Tensor(t)) => Some(Operand::Tensor(*t)),
            Some(Val::Num(n, sp)) => Some(Operand::Num(*n, *sp)),
            Some(Val::Tuple(items)) => {
                let n = items.len();
                self.not_a_value(
                    frame,
                    id,
                    format!("expected a tensor, found a tuple of {n} values"),
                    "this is a tuple",
                );
                None
            }
            Some(Val::Unbound) => {
                self.unknown_name(frame, id);
                None
            }
            Some(Val::List) => {
                self.not_a_value(
                    frame,
                    id,
                    "expected a tensor, found a list `[..]`".into(),
                    "lists are arguments of builtins such as `reshape` and `concat`",
                );
                None
            }
            Some(Val::Error) | None => None,
        }
    }

    /// The value of expression `id` as a bindable value (tensor, literal or tuple).
    pub fn value(&mut self, frame: &Frame, id: ExprId) -> Option<Val> {
        match frame.values.get(id) {
            Some(Val::Unbound) => {
                self.unknown_name(frame, id);
                None
            }
            Some(Val::List) => {
                self.not_a_value(
                    frame,
                    id,
                    "expected a value, found a list `[..]`".into(),
                    "lists are arguments of builtins such as `reshape` and `concat`",
                );
                None
            }
            Some(Val::Error) | None => None,
            Some(v) => Some(v.clone()),
        }
    }

    fn expr_sp(&self, frame: &Frame, id: ExprId) -> Option<Sp> {
        Some(self.fn_ast(frame.func)?.nodes.get(id)?.sp)
    }

    fn not_a_value(&mut self, frame: &Frame, id: ExprId, message: String, label: &str) {
        if let Some(sp) = self.expr_sp(frame, id) {
            self.report(Diag::new(message, sp, label));
        }
    }

    /// Reports the name at `id` as unknown, with a suggestion.
    pub fn unknown_name(&mut self, frame: &Frame, id: ExprId) {
        let Some(f) = self.fn_ast(frame.func) else { return };
        let Some(expr) = f.nodes.get(id) else { return };
        let ExprKind::Name(name) = &expr.kind else {
            self.report(Diag::new("expected a value", expr.sp, ""));
            return;
        };
        let sp = expr.sp;
        // Past the errors anyone reads, skip the search for a better message.
        let diag = if !self.take_suggestion() {
            Diag::new(format!("cannot find value `{name}` in this scope"), sp, "not found in this scope")
        } else if self.prog.by_name.contains_key(name.as_str()) || FUNCTIONS.contains(&name.as_str()) {
            Diag::new(format!("`{name}` is a function, not a value"), sp, "not a value")
                .with_help(format!("call it: `{name}(...)`"))
        } else if f.shape_vars().contains(&name.as_str()) {
            Diag::new(format!("`{name}` is a shape variable, not a value"), sp, "not a value")
                .with_note("shape variables name dimensions; they can appear in types and in `reshape`/`broadcast_to`")
        } else {
            let help = if frame.env.len() <= MAX_CANDIDATES {
                let mut names: Vec<&str> = frame.env.keys().map(String::as_str).collect();
                names.sort_unstable();
                did_you_mean(name, names)
            } else {
                None
            };
            Diag::new(format!("cannot find value `{name}` in this scope"), sp, "not found in this scope")
                .with_help_opt(help)
        };
        self.report(diag);
    }
}
