//! Errors of code generation.

use tcc_ir::DType;

/// Why a kernel could not be compiled.
///
/// `UnboundDim`, `TooLarge` and `UnsupportedHost` describe the input or the machine; every other
/// variant means a bug in tcc (the optimizer handed over an inconsistent kernel, or the emitter
/// produced invalid code) and should be reported.
#[derive(Debug, thiserror::Error)]
pub enum CodegenError {
    /// A shape variable the kernel uses has no value in the bindings.
    #[error("shape variable `{0}` is not bound")]
    UnboundDim(String),
    /// A tensor is too large to index (element count or byte size overflows).
    #[error("tensor of shape {0:?} is too large")]
    TooLarge(Vec<u64>),
    /// The host CPU is not supported by the code generator.
    #[error("the host CPU is not supported: {0}")]
    UnsupportedHost(String),
    /// Bug: the kernel graph is inconsistent (dangling ids, types that break the IR's rules).
    #[error("internal error: malformed kernel `{kernel}`: {reason}")]
    Malformed {
        /// The kernel's name.
        kernel: String,
        /// What is wrong.
        reason: String,
    },
    /// Bug: an op and dtype combination the emitter does not handle.
    #[error("internal error: `{op}` on {dtype} is not supported by the emitter")]
    UnsupportedOp {
        /// The op.
        op: String,
        /// The dtype.
        dtype: DType,
    },
    /// Bug: cranelift rejected the generated function (verifier or lowering failure).
    #[error("internal error: cranelift failed on kernel `{kernel}`: {message}")]
    Cranelift {
        /// The kernel's name.
        kernel: String,
        /// Cranelift's message.
        message: String,
    },
    /// Bug: LLVM rejected the generated IR or failed to compile it (CPU LLVM tier).
    #[error("internal error: LLVM failed on kernel `{kernel}` ({stage}): {message}")]
    Llvm {
        /// The kernel's name.
        kernel: String,
        /// Which step failed (parse, verify, optimize, jit, ...).
        stage: &'static str,
        /// LLVM's message.
        message: String,
    },
}

impl CodegenError {
    /// A [`CodegenError::Malformed`] for `kernel`.
    pub fn malformed(kernel: &str, reason: impl Into<String>) -> CodegenError {
        CodegenError::Malformed { kernel: kernel.to_string(), reason: reason.into() }
    }

    /// True if the error means a bug in tcc rather than bad input or an unsupported machine.
    pub fn is_bug(&self) -> bool {
        !matches!(self, CodegenError::UnboundDim(_) | CodegenError::TooLarge(_) | CodegenError::UnsupportedHost(_))
    }
}
