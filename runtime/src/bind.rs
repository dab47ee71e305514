//! Binding shape variables from the shapes of actual inputs.

use tcc_ir::{Bindings, Dim, Param, Shape};

use crate::error::RuntimeError;
use crate::tensor::{HostTensor, HostView};

/// The shape as declared, with each bound variable's value (`[M=3, 4]`).
pub fn describe(shape: &Shape, bindings: &Bindings) -> String {
    let dims: Vec<String> = shape
        .dims()
        .iter()
        .map(|d| match d {
            Dim::Var(v) => match bindings.get(v) {
                Some(n) => format!("{v}={n}"),
                None => v.clone(),
            },
            Dim::Const(n) => n.to_string(),
        })
        .collect();
    format!("[{}]", dims.join(", "))
}

/// Binds the variables of a declared `shape` from an actual one: `false` when the ranks differ, a
/// constant dimension differs, or a variable already bound gets another value. Variables bound
/// before such a mismatch stay in `bindings` (error messages show them).
pub fn bind_dims(shape: &Shape, actual: &[usize], bindings: &mut Bindings) -> bool {
    if shape.rank() != actual.len() {
        return false;
    }
    for (d, &n) in shape.dims().iter().zip(actual) {
        let n = n as u64;
        match d {
            Dim::Const(c) if *c != n => return false,
            Dim::Const(_) => {}
            Dim::Var(v) => match bindings.get(v) {
                Some(&bound) if bound != n => return false,
                Some(_) => {}
                None => {
                    bindings.insert(v.clone(), n);
                }
            },
        }
    }
    true
}

/// Binds every shape variable of `params` from `inputs`, checking counts, dtypes, ranks,
/// constant dimensions and that each variable gets one value.
pub fn bind_inputs(function: &str, params: &[Param], inputs: &[HostTensor]) -> Result<Bindings, RuntimeError> {
    bind_views(function, params, &inputs.iter().map(HostTensor::view).collect::<Vec<_>>())
}

/// [`bind_inputs`] for tensors given as views.
pub fn bind_views(function: &str, params: &[Param], inputs: &[HostView<'_>]) -> Result<Bindings, RuntimeError> {
    if params.len() != inputs.len() {
        return Err(RuntimeError::InputCount {
            function: function.to_string(),
            expected: params.len(),
            got: inputs.len(),
        });
    }
    let mut bindings = Bindings::new();
    for (p, t) in params.iter().zip(inputs) {
        if p.ty.dtype != t.dtype() {
            return Err(RuntimeError::DTypeMismatch { param: p.name.clone(), expected: p.ty.dtype, got: t.dtype() });
        }
        let mismatch = |b: &Bindings| RuntimeError::ShapeMismatch {
            param: p.name.clone(),
            expected: describe(&p.ty.shape, b),
            got: t.shape().to_vec(),
        };
        if !bind_dims(&p.ty.shape, t.shape(), &mut bindings) {
            return Err(mismatch(&bindings));
        }
    }
    Ok(bindings)
}
