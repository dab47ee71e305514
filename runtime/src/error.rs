//! Errors of the runtime.

use tcc_codegen::CodegenError;
use tcc_ir::DType;

/// Why a tensor could not be built or a program could not run.
///
/// `Internal` means a bug in tcc (an inconsistent program); the others describe bad input or a
/// failure of the environment.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The number of inputs differs from the number of parameters.
    #[error("`{function}` takes {expected} inputs, got {got}")]
    InputCount {
        /// The function's name.
        function: String,
        /// Parameters declared.
        expected: usize,
        /// Inputs given.
        got: usize,
    },
    /// An input's dtype differs from its parameter's.
    #[error("parameter `{param}` has dtype {expected}, got {got}")]
    DTypeMismatch {
        /// The parameter's name.
        param: String,
        /// Its declared dtype.
        expected: DType,
        /// The input's dtype.
        got: DType,
    },
    /// An input's shape does not fit its parameter's shape.
    #[error("parameter `{param}` has shape {expected}, got {got:?}")]
    ShapeMismatch {
        /// The parameter's name.
        param: String,
        /// The declared shape, with the values its variables are bound to.
        expected: String,
        /// The input's shape.
        got: Vec<usize>,
    },
    /// Tensor data does not match its dtype and shape.
    #[error("a {dtype} tensor of shape {shape:?} needs {expected} bytes, got {got}")]
    DataLength {
        /// The dtype.
        dtype: DType,
        /// The shape.
        shape: Vec<usize>,
        /// Bytes needed.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// A tensor was read as a different element type.
    #[error("the tensor holds {actual} elements, not {requested}")]
    WrongElementType {
        /// The tensor's dtype.
        actual: DType,
        /// The dtype asked for.
        requested: DType,
    },
    /// A tensor is larger than the runtime will allocate.
    #[error("a tensor of shape {0:?} is too large")]
    TooLarge(Vec<usize>),
    /// Compiling a kernel failed.
    #[error(transparent)]
    Codegen(#[from] CodegenError),
    /// The thread pool could not be created.
    #[error("cannot start the thread pool: {0}")]
    ThreadPool(String),
    /// Bug: the program is inconsistent (dangling buffer, kernel and launch disagree).
    #[error("internal error: {0}")]
    Internal(String),
}
