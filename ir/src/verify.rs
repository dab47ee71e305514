//! The verifier: checks every invariant of a [`Graph`] and of a [`Program`], naming the offending
//! node or launch. Passes run it after each rewrite; the front end and the parser produce graphs
//! that pass it.

use crate::dtype::DType;
use crate::graph::Graph;
use crate::infer::{TypeError, check_declared, check_limits};
use crate::limits;
use crate::op::{NodeId, Op, TensorType};
use crate::program::{Program, ValueRef};

/// Why a graph or program is invalid.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VerifyError {
    /// The graph has more than [`limits::MAX_OPS`] nodes.
    #[error("the graph has {0} nodes, more than the limit of {max}", max = limits::MAX_OPS)]
    TooManyOps(usize),
    /// A parameter's type breaks a limit.
    #[error("parameter {index}: {source}")]
    Param {
        /// Position of the parameter.
        index: usize,
        /// The limit broken.
        source: TypeError,
    },
    /// A node uses itself or a later node, so the order is not topological.
    #[error("node {node} uses {operand}, which is not an earlier node")]
    OperandNotEarlier {
        /// The user.
        node: NodeId,
        /// The operand.
        operand: NodeId,
    },
    /// An `Input` node names a parameter that does not exist.
    #[error("node {node} reads parameter {index}, but there are only {params}")]
    BadInput {
        /// The node.
        node: NodeId,
        /// The index it reads.
        index: usize,
        /// How many parameters there are.
        params: usize,
    },
    /// An `Input` node's type differs from its parameter's type.
    #[error("node {node} reads parameter {index} of type {param} but is declared {declared}")]
    InputType {
        /// The node.
        node: NodeId,
        /// The parameter read.
        index: usize,
        /// The parameter's type.
        param: TensorType,
        /// The node's type.
        declared: TensorType,
    },
    /// A constant's value is not representable in its dtype.
    #[error("node {node}: constant {value:?} is not representable in {dtype}")]
    Constant {
        /// The node.
        node: NodeId,
        /// The value.
        value: f64,
        /// The node's dtype.
        dtype: DType,
    },
    /// A node is ill-typed, its declared type is not one its op produces, or it breaks a limit.
    #[error("node {node}: {source}")]
    Type {
        /// The node.
        node: NodeId,
        /// The rule broken.
        source: TypeError,
    },
    /// An output names no node.
    #[error("output {index} is {id}, which is not a node")]
    BadOutput {
        /// Position among the outputs.
        index: usize,
        /// The id returned.
        id: NodeId,
    },
    /// An intermediate buffer's type breaks a limit.
    #[error("buffer {index}: {source}")]
    Buffer {
        /// The buffer.
        index: usize,
        /// The limit broken.
        source: TypeError,
    },
    /// A kernel's graph does not verify.
    #[error("launch {launch} (kernel `{kernel}`): {source}")]
    Kernel {
        /// Position of the launch.
        launch: usize,
        /// The kernel's name.
        kernel: String,
        /// What is wrong in its graph.
        source: Box<VerifyError>,
    },
    /// A launch passes a different number of inputs or outputs than its kernel graph has.
    #[error("launch {launch} passes {found} {what} but its kernel has {expected}")]
    LaunchArity {
        /// Position of the launch.
        launch: usize,
        /// `inputs` or `outputs`.
        what: &'static str,
        /// What the kernel graph has.
        expected: usize,
        /// What the launch passes.
        found: usize,
    },
    /// A launch or program output names a parameter or buffer that does not exist.
    #[error("launch {launch} names {value:?}, which does not exist")]
    UnknownValue {
        /// Position of the launch, or the number of launches for a program output.
        launch: usize,
        /// The reference.
        value: ValueRef,
    },
    /// A launch writes a parameter.
    #[error("launch {launch} writes {value:?}; kernels write only buffers")]
    WritesParam {
        /// Position of the launch.
        launch: usize,
        /// The reference.
        value: ValueRef,
    },
    /// A value's type differs from the kernel's parameter or output it is bound to.
    #[error("launch {launch}: {what} {index} is bound to {value:?} of type {actual}, but the kernel has {expected}")]
    LaunchType {
        /// Position of the launch.
        launch: usize,
        /// `input` or `output`.
        what: &'static str,
        /// Position among the launch's inputs or outputs.
        index: usize,
        /// The reference.
        value: ValueRef,
        /// The type in the kernel graph.
        expected: TensorType,
        /// The type of the referenced value.
        actual: TensorType,
    },
    /// A launch reads a buffer no earlier launch wrote.
    #[error("launch {launch} reads buffer {buffer} before any launch writes it")]
    ReadBeforeWrite {
        /// Position of the launch.
        launch: usize,
        /// The buffer.
        buffer: usize,
    },
    /// A program output is invalid: unknown, or a buffer that no launch writes.
    #[error("program output {index} ({value:?}) {reason}")]
    ProgramOutput {
        /// Position among the outputs.
        index: usize,
        /// The reference.
        value: ValueRef,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// Checks every invariant of a graph: node count within [`limits::MAX_OPS`], parameter types
/// within limits, operands earlier than their users (so the graph is acyclic and in topological
/// order), `Input` nodes reading existing parameters with their types, every declared type valid
/// for its op ([`check_declared`], which also checks rank and element limits), constants
/// representable in their dtype (NaN is accepted for float dtypes only), and outputs naming nodes.
pub fn verify(g: &Graph) -> Result<(), VerifyError> {
    if g.nodes.len() > limits::MAX_OPS {
        return Err(VerifyError::TooManyOps(g.nodes.len()));
    }
    for (index, p) in g.params.iter().enumerate() {
        check_limits(&p.ty).map_err(|source| VerifyError::Param { index, source })?;
    }
    for (i, node) in g.nodes.iter().enumerate() {
        // `i` < MAX_OPS < u32::MAX, checked above.
        let id = NodeId(u32::try_from(i).map_err(|_| VerifyError::TooManyOps(g.nodes.len()))?);
        if let Some(&operand) = node.op.operands().iter().find(|o| o.index() >= i) {
            return Err(VerifyError::OperandNotEarlier { node: id, operand });
        }
        match node.op {
            Op::Input { index } => {
                let param =
                    g.params.get(index).ok_or(VerifyError::BadInput { node: id, index, params: g.params.len() })?;
                if param.ty != node.ty {
                    return Err(VerifyError::InputType {
                        node: id,
                        index,
                        param: param.ty.clone(),
                        declared: node.ty.clone(),
                    });
                }
            }
            Op::Constant { value } => {
                let dtype = node.ty.dtype;
                let representable = if value.is_nan() { dtype.is_float() } else { dtype.round(value) == value };
                if !representable {
                    return Err(VerifyError::Constant { node: id, value, dtype });
                }
            }
            _ => {}
        }
        check_declared(g, &node.op, &node.ty).map_err(|source| VerifyError::Type { node: id, source })?;
    }
    if let Some((index, &id)) = g.outputs.iter().enumerate().find(|(_, id)| id.index() >= g.nodes.len()) {
        return Err(VerifyError::BadOutput { index, id });
    }
    Ok(())
}

/// The type of a program value, if it exists.
fn value_type(p: &Program, v: ValueRef) -> Option<&TensorType> {
    match v {
        ValueRef::Param(i) => p.params.get(i).map(|p| &p.ty),
        ValueRef::Buffer(i) => p.buffers.get(i),
    }
}

/// Checks a program: parameter and buffer types within limits; each kernel graph verifies; each
/// launch binds one existing value per kernel parameter and one buffer per kernel output, with
/// equal types; no launch reads a buffer before an earlier launch writes it; the program's outputs
/// name parameters or written buffers.
pub fn verify_program(p: &Program) -> Result<(), VerifyError> {
    for (index, param) in p.params.iter().enumerate() {
        check_limits(&param.ty).map_err(|source| VerifyError::Param { index, source })?;
    }
    for (index, ty) in p.buffers.iter().enumerate() {
        check_limits(ty).map_err(|source| VerifyError::Buffer { index, source })?;
    }
    let mut written = vec![false; p.buffers.len()];
    for (launch, l) in p.launches.iter().enumerate() {
        let graph = &l.kernel.graph;
        verify(graph).map_err(|e| VerifyError::Kernel {
            launch,
            kernel: l.kernel.name.clone(),
            source: Box::new(e),
        })?;
        let arity = |what, expected: usize, found: usize| {
            if expected == found { Ok(()) } else { Err(VerifyError::LaunchArity { launch, what, expected, found }) }
        };
        arity("inputs", graph.params.len(), l.inputs.len())?;
        arity("outputs", graph.outputs.len(), l.outputs.len())?;
        for (index, (&value, param)) in l.inputs.iter().zip(&graph.params).enumerate() {
            let actual = value_type(p, value).ok_or(VerifyError::UnknownValue { launch, value })?;
            if let ValueRef::Buffer(b) = value
                && !written.get(b).copied().unwrap_or(false)
            {
                return Err(VerifyError::ReadBeforeWrite { launch, buffer: b });
            }
            if *actual != param.ty {
                return Err(VerifyError::LaunchType {
                    launch,
                    what: "input",
                    index,
                    value,
                    expected: param.ty.clone(),
                    actual: actual.clone(),
                });
            }
        }
        for (index, (&value, &out)) in l.outputs.iter().zip(&graph.outputs).enumerate() {
            let ValueRef::Buffer(b) = value else { return Err(VerifyError::WritesParam { launch, value }) };
            let actual = p.buffers.get(b).ok_or(VerifyError::UnknownValue { launch, value })?;
            // `verify(graph)` succeeded, so every output names a node.
            let expected = graph.ty(out).ok_or(VerifyError::BadOutput { index, id: out })?;
            if actual != expected {
                return Err(VerifyError::LaunchType {
                    launch,
                    what: "output",
                    index,
                    value,
                    expected: expected.clone(),
                    actual: actual.clone(),
                });
            }
        }
        for value in &l.outputs {
            if let ValueRef::Buffer(b) = *value
                && let Some(w) = written.get_mut(b)
            {
                *w = true;
            }
        }
    }
    for (index, &value) in p.outputs.iter().enumerate() {
        let reason = match value {
            ValueRef::Param(i) if i >= p.params.len() => Some("names no parameter"),
            ValueRef::Buffer(b) if b >= p.buffers.len() => Some("names no buffer"),
            ValueRef::Buffer(b) if !written.get(b).copied().unwrap_or(false) => Some("is a buffer no launch writes"),
            _ => None,
        };
        if let Some(reason) = reason {
            return Err(VerifyError::ProgramOutput { index, value, reason });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
