//! Binding shape variables from the shapes of actual inputs.

use tcc_ir::{Bindings, Dim, Param, Shape};

use crate::error::RuntimeError;
use crate::tensor::HostTensor;

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

/// Binds every shape variable of `params` from `inputs`, checking counts, dtypes, ranks,
/// constant dimensions and that each variable gets one value.
pub fn bind_inputs(function: &str, params: &[Param], inputs: &[HostTensor]) -> Result<Bindings, RuntimeError> {
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
        if p.ty.shape.rank() != t.shape().len() {
            return Err(mismatch(&bindings));
        }
        for (d, &n) in p.ty.shape.dims().iter().zip(t.shape()) {
            let n = n as u64;
            match d {
                Dim::Const(c) if *c != n => return Err(mismatch(&bindings)),
                Dim::Const(_) => {}
                Dim::Var(v) => match bindings.get(v) {
                    Some(&bound) if bound != n => return Err(mismatch(&bindings)),
                    Some(_) => {}
                    None => {
                        bindings.insert(v.clone(), n);
                    }
                },
            }
        }
    }
    Ok(bindings)
}
