//! Errors of the reference interpreter; each names the parameter, variable, node or kernel at fault.

use crate::dtype::DType;
use crate::op::{NodeId, TensorType};
use crate::program::ValueRef;

/// Why the interpreter refused to run, or stopped running, a graph or program.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InterpError {
    /// The number of inputs differs from the number of parameters.
    #[error("`{function}` takes {expected} inputs, got {got}")]
    InputCount {
        /// The function or program name.
        function: String,
        /// Number of parameters.
        expected: usize,
        /// Number of inputs given.
        got: usize,
    },
    /// An input's dtype or shape does not fit its parameter's declared type.
    #[error("parameter `{param}` expects {expected}, got {got_dtype}{got_shape:?}")]
    InputMismatch {
        /// The parameter's name.
        param: String,
        /// Its declared type.
        expected: TensorType,
        /// The input's dtype.
        got_dtype: DType,
        /// The input's shape.
        got_shape: Vec<usize>,
    },
    /// A shape variable is given two different values by the inputs.
    #[error(
        "shape variable `{var}` is {first} from an earlier parameter but {second} from parameter `{param}` (shape {got_shape:?})"
    )]
    ConflictingBinding {
        /// The variable.
        var: String,
        /// The value bound first.
        first: u64,
        /// The conflicting value.
        second: u64,
        /// The parameter that gave the second value.
        param: String,
        /// That parameter's input shape.
        got_shape: Vec<usize>,
    },
    /// A tensor's data length differs from its shape's element count.
    #[error("{what}: shape {shape:?} needs {expected} values, got {got}")]
    DataLength {
        /// Which tensor (`tensor`, or `parameter `x``).
        what: String,
        /// The shape.
        shape: Vec<usize>,
        /// Element count of the shape.
        expected: usize,
        /// Length of the data.
        got: usize,
    },
    /// A type mentions shape variables that no input binds.
    #[error("unbound shape variable(s) {} in the type {ty} of {what}", vars.join(", "))]
    Unbound {
        /// Where the type appears (a node, a parameter or a buffer).
        what: String,
        /// The type.
        ty: TensorType,
        /// The unbound variables, sorted.
        vars: Vec<String>,
    },
    /// A reduction or matmul runs over an axis of size 0 (a variable bound to 0).
    #[error("{node} ({op}) reduces over an empty axis of its operand of shape {shape:?}")]
    EmptyReduction {
        /// The node.
        node: NodeId,
        /// Its op kind.
        op: String,
        /// The operand's shape.
        shape: Vec<usize>,
    },
    /// A value would need more memory than the limit allows.
    #[error("{node} ({op}) of shape {shape:?} needs {bytes} bytes, above the limit of {limit} bytes")]
    MemoryLimit {
        /// The node.
        node: NodeId,
        /// Its op kind.
        op: String,
        /// Its shape.
        shape: Vec<usize>,
        /// The bytes it needs (8 per element: the interpreter stores f64).
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// A shape's element count overflows or reaches [`crate::limits::MAX_ELEMENTS`].
    #[error("{what}: shape {shape:?} has 2^40 or more elements")]
    TooManyElements {
        /// Which tensor.
        what: String,
        /// The shape.
        shape: Vec<usize>,
    },
    /// The graph breaks an invariant the verifier checks (bad operand id, operand shapes that do
    /// not fit the node's type, ...).
    #[error("invalid graph at {node}: {reason}")]
    InvalidGraph {
        /// The node (or output position) at fault.
        node: NodeId,
        /// What is wrong.
        reason: String,
    },
    /// A program refers to a parameter or buffer that does not exist or has no value yet.
    #[error("{context}: {value:?} {reason}")]
    BadValueRef {
        /// Where the reference appears (`launch 2 (k2_softmax) input 0`, `output 1`).
        context: String,
        /// The reference.
        value: ValueRef,
        /// What is wrong with it.
        reason: String,
    },
    /// A kernel of a program failed.
    #[error("launch {launch} (`{kernel}`): {source}")]
    Kernel {
        /// Position of the launch.
        launch: usize,
        /// The kernel's name.
        kernel: String,
        /// The kernel's error.
        #[source]
        source: Box<InterpError>,
    },
    /// A kernel wrote a value whose dtype or shape differs from its buffer's declared type.
    #[error(
        "launch {launch} (`{kernel}`) output {output} is {got_dtype}{got_shape:?}, but buffer {buffer} is {expected}"
    )]
    BufferMismatch {
        /// Position of the launch.
        launch: usize,
        /// The kernel's name.
        kernel: String,
        /// Position of the kernel output.
        output: usize,
        /// The buffer written.
        buffer: usize,
        /// The buffer's declared type.
        expected: TensorType,
        /// The value's dtype.
        got_dtype: DType,
        /// The value's shape.
        got_shape: Vec<usize>,
    },
}
