//! The f64 reference interpreter: the oracle every backend, pass and the autotuner is checked
//! against (contract §5).
//!
//! Every op computes in f64 from its operands' values (already representable in their dtype) and
//! rounds its result once to the node's dtype with [`crate::DType::round`]. i32 `add`/`sub`/`mul`/`neg`/
//! `abs` and sums wrap; i32 division truncates toward zero and `x / 0 = 0`; casts use
//! [`crate::DType::round`] (round to nearest even for floats; float → i32 truncates toward zero, saturates
//! and maps NaN to 0; bool is `x != 0`). `max`/`min`/`relu` propagate NaN, comparisons with NaN
//! are false except `ne`. Reductions and matmul accumulate in f64 and round once. Bool values are
//! 0.0 and 1.0.
//!
//! The interpreter walks the nodes once, in order (no recursion), skips nodes no output depends
//! on, and frees each value after its last use.

mod error;
mod eval;
mod program;
mod scalar;
mod tensor;
#[cfg(test)]
mod tests;
mod walk;

pub use error::InterpError;
pub use program::{run_program, run_program_with_limit};
pub use tensor::Tensor;
#[cfg(feature = "testing")]
pub(crate) use tensor::numel_of;

use crate::graph::{Graph, Param};
use crate::limits;
use crate::op::{NodeId, TensorType};
use crate::shape::{Bindings, Dim};

/// Binds the shape variables of `g`'s parameters from the shapes of `inputs`, checking the number
/// of inputs and each input's dtype, rank and constant dimensions.
pub fn bind_shapes(g: &Graph, inputs: &[Tensor]) -> Result<Bindings, InterpError> {
    bind_params(&g.name, &g.params, inputs)
}

/// Binds the shape variables of `params` (of the function `function`) from `inputs`.
pub fn bind_params(function: &str, params: &[Param], inputs: &[Tensor]) -> Result<Bindings, InterpError> {
    if params.len() != inputs.len() {
        return Err(InterpError::InputCount {
            function: function.to_string(),
            expected: params.len(),
            got: inputs.len(),
        });
    }
    let mut bindings = Bindings::new();
    for (param, input) in params.iter().zip(inputs) {
        let mismatch = || InterpError::InputMismatch {
            param: param.name.clone(),
            expected: param.ty.clone(),
            got_dtype: input.dtype,
            got_shape: input.shape.clone(),
        };
        if param.ty.dtype != input.dtype || param.ty.shape.rank() != input.rank() {
            return Err(mismatch());
        }
        let what = format!("parameter `{}`", param.name);
        let numel = tensor::numel_of(&input.shape, &what)?;
        if input.data.len() != numel {
            return Err(InterpError::DataLength {
                what,
                shape: input.shape.clone(),
                expected: numel,
                got: input.data.len(),
            });
        }
        for (dim, &size) in param.ty.shape.dims().iter().zip(&input.shape) {
            let size = u64::try_from(size).map_err(|_| mismatch())?;
            match dim {
                Dim::Const(c) if *c != size => return Err(mismatch()),
                Dim::Const(_) => {}
                Dim::Var(v) => match bindings.get(v) {
                    Some(&first) if first != size => {
                        return Err(InterpError::ConflictingBinding {
                            var: v.clone(),
                            first,
                            second: size,
                            param: param.name.clone(),
                            got_shape: input.shape.clone(),
                        });
                    }
                    Some(_) => {}
                    None => {
                        bindings.insert(v.clone(), size);
                    }
                },
            }
        }
    }
    Ok(bindings)
}

/// The concrete dimensions of `ty` under `bindings`; the error names `what` (a parameter, node or
/// buffer) and every unbound variable.
pub fn resolve_type(ty: &TensorType, bindings: &Bindings, what: &str) -> Result<Vec<usize>, InterpError> {
    eval::resolve(ty, bindings, what)
}

/// Runs `g` on `inputs`, refusing any single value above [`limits::DEFAULT_MAX_MEMORY`] bytes.
pub fn run_graph(g: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, InterpError> {
    run_graph_with_limit(g, inputs, limits::DEFAULT_MAX_MEMORY)
}

/// Runs `g` on `inputs`, refusing to materialize any single value of more than `max_bytes` bytes
/// (the interpreter stores 8 bytes per element). Returns one tensor per graph output.
pub fn run_graph_with_limit(g: &Graph, inputs: &[Tensor], max_bytes: u64) -> Result<Vec<Tensor>, InterpError> {
    run_graph_within(g, inputs, &Bindings::new(), max_bytes)
}

/// Like [`run_graph_with_limit`], with shape variables that no parameter of `g` carries taken from
/// `outer` (a program's bindings: a kernel computing `iota(N)` from no input of length `N`).
pub fn run_graph_within(
    g: &Graph,
    inputs: &[Tensor],
    outer: &Bindings,
    max_bytes: u64,
) -> Result<Vec<Tensor>, InterpError> {
    let mut bindings = bind_shapes(g, inputs)?;
    for (var, &size) in outer {
        bindings.entry(var.clone()).or_insert(size);
    }
    let mut remaining = live_use_counts(g)?;
    let ctx = eval::Ctx { bindings: &bindings, inputs, max_bytes };
    let mut values: Vec<Option<Tensor>> = (0..g.nodes.len()).map(|_| None).collect();
    for (i, node) in g.nodes.iter().enumerate() {
        if remaining[i] == 0 {
            continue;
        }
        let id = node_id(i)?;
        let value = eval::eval_node(&ctx, id, node, &values)?;
        values[i] = Some(value);
        for operand in node.op.operands() {
            let j = operand.index();
            // `live_use_counts` counted this use, so the count is positive.
            remaining[j] = remaining[j].saturating_sub(1);
            if remaining[j] == 0 {
                values[j] = None;
            }
        }
    }
    let mut outputs = Vec::with_capacity(g.outputs.len());
    for (pos, out) in g.outputs.iter().enumerate() {
        let j = out.index();
        remaining[j] = remaining[j].saturating_sub(1);
        let value = if remaining[j] == 0 { values[j].take() } else { values[j].clone() };
        let value = value.ok_or_else(|| InterpError::InvalidGraph {
            node: *out,
            reason: format!("output {pos} was not computed"),
        })?;
        outputs.push(value);
    }
    Ok(outputs)
}

fn node_id(i: usize) -> Result<NodeId, InterpError> {
    u32::try_from(i)
        .map(NodeId)
        .map_err(|_| InterpError::InvalidGraph { node: NodeId(u32::MAX), reason: "more nodes than ids".into() })
}

/// For each node, how many times a node that some output depends on (or an output) uses it; 0 for
/// dead nodes. Fails if an operand or output names no earlier node.
fn live_use_counts(g: &Graph) -> Result<Vec<usize>, InterpError> {
    let n = g.nodes.len();
    let mut live = vec![false; n];
    for (pos, out) in g.outputs.iter().enumerate() {
        match live.get_mut(out.index()) {
            Some(l) => *l = true,
            None => {
                return Err(InterpError::InvalidGraph { node: *out, reason: format!("output {pos} names no node") });
            }
        }
    }
    let mut counts = vec![0usize; n];
    for out in &g.outputs {
        counts[out.index()] += 1;
    }
    for i in (0..n).rev() {
        if !live[i] {
            continue;
        }
        for operand in g.nodes[i].op.operands() {
            let j = operand.index();
            if j >= i {
                return Err(InterpError::InvalidGraph {
                    node: node_id(i)?,
                    reason: format!("operand {operand} is not an earlier node"),
                });
            }
            live[j] = true;
            counts[j] += 1;
        }
    }
    Ok(counts)
}
