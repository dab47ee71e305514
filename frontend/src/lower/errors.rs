//! The IR's type errors, told in the words of the source: which operator, which operands, which types.

use tcc_ir::{Dim, TensorType, TypeError};

use crate::diag::Diag;
use crate::span::Sp;

/// How an operation is named in messages.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Verb {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`.
    Div,
    /// A comparison.
    Compare,
    /// `a @ b` or `matmul(a, b)`.
    MatMul,
    /// Any other operation, by its name.
    Named,
}

/// What was being built when the IR refused it.
#[derive(Debug, Clone)]
pub(crate) struct OpCtx {
    /// How to phrase the operation.
    pub verb: Verb,
    /// The operation's name as written (`exp`, `sum`, `+`).
    pub name: String,
    /// The operator or function name: where the error points.
    pub at: Sp,
    /// The operands, with where they are and their types.
    pub operands: Vec<(Sp, TensorType)>,
    /// The two operands a pairwise message names (`cannot add A and B`), if any.
    pub pair: Option<(usize, usize)>,
}

fn last_two(shape: &tcc_ir::Shape) -> Option<(&Dim, &Dim)> {
    let d = shape.dims();
    let n = d.len();
    if n < 2 { None } else { Some((&d[n - 2], &d[n - 1])) }
}

impl OpCtx {
    fn pair_types(&self) -> Option<(&TensorType, &TensorType)> {
        let (i, j) = self.pair?;
        Some((&self.operands.get(i)?.1, &self.operands.get(j)?.1))
    }

    fn pair_message(&self, l: &TensorType, r: &TensorType) -> String {
        match self.verb {
            Verb::Add => format!("cannot add {l} and {r}"),
            Verb::Sub => format!("cannot subtract {r} from {l}"),
            Verb::Mul => format!("cannot multiply {l} by {r}"),
            Verb::Div => format!("cannot divide {l} by {r}"),
            Verb::Compare => format!("cannot compare {l} with {r}"),
            Verb::MatMul => format!("cannot multiply matrices {l} @ {r}"),
            Verb::Named => format!("cannot apply `{}` to {l} and {r}", self.name),
        }
    }
}

/// The diagnostic for `err`, raised while building the operation described by `ctx`.
pub(crate) fn type_error(err: &TypeError, ctx: &OpCtx) -> Diag {
    let pair = ctx.pair_types();
    let (message, label) = match (err, pair) {
        (TypeError::CannotBroadcast { .. }, Some((l, r))) if ctx.verb == Verb::MatMul => {
            (ctx.pair_message(l, r), "the batch dimensions cannot be broadcast together".to_string())
        }
        (TypeError::CannotBroadcast { .. }, Some((l, r))) => {
            (ctx.pair_message(l, r), format!("shapes {} and {} cannot be broadcast together", l.shape, r.shape))
        }
        (TypeError::DTypeMismatch { left, right, .. }, Some((l, r))) => {
            (ctx.pair_message(l, r), format!("mismatched dtypes: {left} and {right}"))
        }
        (TypeError::MatMulInner { left, right }, Some((l, r))) => {
            let inner = match (last_two(left), last_two(right)) {
                (Some((_, ka)), Some((kb, _))) => format!("inner dimensions {ka} and {kb} differ"),
                _ => "inner dimensions differ".to_string(),
            };
            (ctx.pair_message(l, r), inner)
        }
        (TypeError::MatMulRank(shape), _) => (
            format!("`{}` needs operands of rank 2 or more, found shape {shape}", ctx.name),
            "matrix product".to_string(),
        ),
        (TypeError::UnsupportedDType { dtype, .. }, _) => {
            (format!("`{}` does not accept {dtype} operands", ctx.name), format!("`{}` applied to {dtype}", ctx.name))
        }
        (TypeError::BadPermutation { perm, rank }, _) => (
            format!(
                "`{}` needs a permutation of the {rank} axes of {}, found {perm:?}",
                ctx.name,
                ctx.operands.first().map_or_else(String::new, |(_, t)| t.to_string())
            ),
            "not a permutation".to_string(),
        ),
        (TypeError::ConditionNotBool(dtype), _) => {
            (format!("the condition of `{}` must be bool, found {dtype}", ctx.name), "condition".to_string())
        }
        (TypeError::EmptyReduction(shape), _) => (
            format!("`{}` reduces over an axis of size 0 in shape {shape}", ctx.name),
            "reducing an empty axis is an error".to_string(),
        ),
        (TypeError::TooManyElements(shape), _) => (
            format!("the result of `{}` would have shape {shape}, with 2^40 or more elements", ctx.name),
            "too large".to_string(),
        ),
        (TypeError::RankTooLarge(rank), _) => (
            format!(
                "the result of `{}` would have rank {rank}, above the limit of {}",
                ctx.name,
                tcc_ir::limits::MAX_RANK
            ),
            "too many dimensions".to_string(),
        ),
        (other, _) => (other.to_string(), format!("in this `{}`", ctx.name)),
    };
    let mut diag = Diag::new(message, ctx.at, label);
    for (sp, ty) in &ctx.operands {
        diag = diag.with_label(*sp, format!("{ty}"));
    }
    if matches!(err, TypeError::DTypeMismatch { .. }) {
        diag = diag.with_help("convert one operand with `.cast::<dtype>()`");
    }
    diag
}
