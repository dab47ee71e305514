//! Written types to IR types: dtype names, dimension limits, and shape variables of inlined calls.

use std::collections::HashMap;

use tcc_ir::infer::check_limits;
use tcc_ir::limits::{MAX_ELEMENTS, MAX_RANK};
use tcc_ir::{DType, Dim, Shape, TensorType, TypeError};

use crate::ast::{DimAst, Name, TypeAst};
use crate::diag::Diag;
use crate::span::Sp;
use crate::suggest::did_you_mean;

/// Values of a callee's shape variables at one call: its variable name → the caller's dimension.
pub(crate) type Subst = HashMap<String, Dim>;

/// The dtype named `name`.
pub(crate) fn resolve_dtype(name: &Name) -> Result<DType, Box<Diag>> {
    DType::from_name(&name.text).ok_or_else(|| {
        let names: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
        Box::new(
            Diag::new(format!("unknown dtype `{}`", name.text), name.sp, "not a dtype")
                .with_help_opt(did_you_mean(&name.text, names.iter().copied()))
                .with_note(format!("the dtypes are {}", names.join(", "))),
        )
    })
}

/// A dimension as written, with the call's shape variables substituted.
pub(crate) fn resolve_dim(dim: &DimAst, sp: Sp, subst: &Subst) -> Result<Dim, Box<Diag>> {
    match dim {
        DimAst::Const(n) if *n >= MAX_ELEMENTS => {
            Err(Box::new(Diag::new(format!("dimension {n} is too large"), sp, "every dimension must be below 2^40")))
        }
        DimAst::Const(n) => Ok(Dim::Const(*n)),
        DimAst::Var(v) => Ok(subst.get(v).cloned().unwrap_or_else(|| Dim::Var(v.clone()))),
    }
}

/// Checks a shape against the rank and element limits; `sp` is what the error points at.
pub(crate) fn check_shape(ty: &TensorType, sp: Sp) -> Result<(), Box<Diag>> {
    if ty.shape.rank() > MAX_RANK {
        return Err(Box::new(Diag::new(
            format!("rank {} exceeds the limit of {MAX_RANK}", ty.shape.rank()),
            sp,
            format!("this type has {} dimensions", ty.shape.rank()),
        )));
    }
    match check_limits(ty) {
        Ok(()) => Ok(()),
        Err(TypeError::TooManyElements(_)) => Err(Box::new(Diag::new(
            format!("{ty} has too many elements"),
            sp,
            "a tensor must have fewer than 2^40 elements",
        ))),
        Err(other) => Err(Box::new(Diag::new(other.to_string(), sp, ""))),
    }
}

/// The IR type of a written type, with the call's shape variables substituted.
pub(crate) fn resolve_type(ty: &TypeAst, subst: &Subst) -> Result<TensorType, Box<Diag>> {
    let dtype = resolve_dtype(&ty.dtype)?;
    let dims = ty.dims.iter().map(|d| resolve_dim(&d.dim, d.sp, subst)).collect::<Result<Vec<_>, _>>()?;
    let resolved = TensorType { dtype, shape: Shape(dims) };
    check_shape(&resolved, ty.sp)?;
    Ok(resolved)
}

/// Matches an argument's type against a parameter's written type, binding the parameter's shape
/// variables in `subst`. False if they do not match.
pub(crate) fn bind_param(param: &TypeAst, dtype: DType, arg: &TensorType, subst: &mut Subst) -> bool {
    if dtype != arg.dtype || param.dims.len() != arg.shape.rank() {
        return false;
    }
    for (want, have) in param.dims.iter().zip(arg.shape.dims()) {
        match &want.dim {
            DimAst::Const(n) => {
                if have != &Dim::Const(*n) {
                    return false;
                }
            }
            DimAst::Var(v) => match subst.get(v) {
                Some(bound) if bound != have => return false,
                Some(_) => {}
                None => {
                    subst.insert(v.clone(), have.clone());
                }
            },
        }
    }
    true
}

/// `N = 4, D = M` for the variables of a substitution, sorted by name.
pub(crate) fn describe_subst(subst: &Subst) -> String {
    let mut pairs: Vec<(&String, &Dim)> = subst.iter().collect();
    pairs.sort();
    pairs.iter().map(|(k, v)| format!("{k} = {v}")).collect::<Vec<_>>().join(", ")
}
