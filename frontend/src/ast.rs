//! The syntax tree of one `fn` item, kept in an arena.
//!
//! Expressions live in [`FnAst::nodes`], children always before their parents, so every pass over an
//! expression is a loop over indices: nothing recurses on the depth of the tree and nothing is dropped
//! recursively. The statements of a body occupy consecutive ranges of the arena, in order.

use tcc_ir::CompareOp;

use crate::span::Sp;

/// Index of an expression in [`FnAst::nodes`].
pub(crate) type ExprId = usize;

/// An identifier with its location.
#[derive(Debug, Clone)]
pub(crate) struct Name {
    /// The identifier as written (raw identifiers without their `r#`).
    pub text: String,
    /// Where it is.
    pub sp: Sp,
}

/// One dimension as written in a type or a shape list.
#[derive(Debug, Clone)]
pub(crate) enum DimAst {
    /// An integer literal.
    Const(u64),
    /// A shape variable.
    Var(String),
}

/// A dimension with its location.
#[derive(Debug, Clone)]
pub(crate) struct DimSpec {
    /// The dimension.
    pub dim: DimAst,
    /// Where it is.
    pub sp: Sp,
}

/// A tensor type as written: `f16[M, 4096]`.
#[derive(Debug, Clone)]
pub(crate) struct TypeAst {
    /// The element type's name (checked when lowering).
    pub dtype: Name,
    /// The dimensions.
    pub dims: Vec<DimSpec>,
    /// The whole type.
    pub sp: Sp,
}

/// A declared return type: one tensor or a tuple of them.
#[derive(Debug, Clone)]
pub(crate) enum RetAst {
    /// `-> f32[N]`.
    One(TypeAst),
    /// `-> (f32[N], f32[N])`.
    Tuple(Vec<TypeAst>),
}

/// A parameter: `x: f32[N, D]`.
#[derive(Debug, Clone)]
pub(crate) struct ParamAst {
    /// Its name.
    pub name: Name,
    /// Its type.
    pub ty: TypeAst,
}

/// Binary operators of the surface language.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum BinOp {
    /// `+`.
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/`.
    Div,
    /// `@`.
    MatMul,
    /// `==`, `!=`, `<`, `<=`, `>`, `>=`.
    Cmp(CompareOp),
}

impl BinOp {
    /// Binding strength: comparisons bind loosest, then `+ -`, then `* / @`.
    pub fn precedence(self) -> u8 {
        match self {
            BinOp::Cmp(_) => 1,
            BinOp::Add | BinOp::Sub => 2,
            BinOp::Mul | BinOp::Div | BinOp::MatMul => 3,
        }
    }

    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::MatMul => "@",
            BinOp::Cmp(CompareOp::Eq) => "==",
            BinOp::Cmp(CompareOp::Ne) => "!=",
            BinOp::Cmp(CompareOp::Lt) => "<",
            BinOp::Cmp(CompareOp::Le) => "<=",
            BinOp::Cmp(CompareOp::Gt) => ">",
            BinOp::Cmp(CompareOp::Ge) => ">=",
        }
    }
}

/// What an expression is.
#[derive(Debug, Clone)]
pub(crate) enum ExprKind {
    /// A name: a parameter, a `let` binding, or (as an argument) `keepdim` or a shape variable.
    Name(String),
    /// An integer literal.
    Int(u64),
    /// A float literal (finite).
    Float(f64),
    /// `true` or `false`.
    Bool(bool),
    /// Unary minus.
    Neg(ExprId),
    /// A binary operator.
    Binary {
        /// Which operator.
        op: BinOp,
        /// The operator token.
        op_sp: Sp,
        /// Left operand.
        lhs: ExprId,
        /// Right operand.
        rhs: ExprId,
    },
    /// `name(args)` or `name::<dtype>(args)`.
    Call {
        /// The function called.
        callee: Name,
        /// The `::<dtype>` argument, if any.
        dtype_arg: Option<Name>,
        /// The arguments.
        args: Vec<ExprId>,
    },
    /// `recv.name(args)` or `recv.name::<dtype>(args)`.
    Method {
        /// The receiver.
        recv: ExprId,
        /// The method.
        method: Name,
        /// The `::<dtype>` argument, if any.
        dtype_arg: Option<Name>,
        /// The arguments.
        args: Vec<ExprId>,
    },
    /// `(a, b, ...)`, two or more elements.
    Tuple(Vec<ExprId>),
    /// `[a, b, ...]`: axes, dimensions or the operands of `concat`.
    List(Vec<ExprId>),
}

/// An expression with its location.
#[derive(Debug, Clone)]
pub(crate) struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Where it is, first token to last.
    pub sp: Sp,
}

/// The left side of a `let`.
#[derive(Debug, Clone)]
pub(crate) enum Pattern {
    /// `let x = ...`.
    Name(Name),
    /// `let (a, b) = ...`.
    Tuple(Vec<Name>, Sp),
}

/// A statement of a body: a `let`, or the final expression (the value returned).
#[derive(Debug, Clone)]
pub(crate) struct Stmt {
    /// The binding; `None` for the final expression.
    pub pat: Option<Pattern>,
    /// The optional type annotation of a `let`.
    pub ty: Option<TypeAst>,
    /// The statement's expression (the last node of its range).
    pub root: ExprId,
    /// One past the last node of the statement's range in the arena.
    pub end: usize,
}

/// One parsed `fn` item.
#[derive(Debug, Clone)]
pub(crate) struct FnAst {
    /// The fn's name.
    pub name: Name,
    /// Its parameters.
    pub params: Vec<ParamAst>,
    /// Its declared return type, if any.
    pub ret: Option<RetAst>,
    /// Every expression of the body, children before parents.
    pub nodes: Vec<Expr>,
    /// The statements, in order; the last one is the final expression.
    pub stmts: Vec<Stmt>,
}

impl FnAst {
    /// Every shape variable named in the parameter types, in order of first appearance.
    pub fn shape_vars(&self) -> Vec<&str> {
        let mut vars: Vec<&str> = Vec::new();
        for p in &self.params {
            for d in &p.ty.dims {
                if let DimAst::Var(v) = &d.dim
                    && !vars.contains(&v.as_str())
                {
                    vars.push(v);
                }
            }
        }
        vars
    }
}
