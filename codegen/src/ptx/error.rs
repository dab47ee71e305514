//! Errors of the PTX backend.

/// Why a kernel could not be compiled to PTX.
///
/// `Unbound`, `Unsupported` and `TooLarge` describe the input; `Llvm` and `Internal` are bugs of
/// this backend (the IR it generated was rejected), reported with the kernel's name.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PtxError {
    /// A shape variable of the kernel has no value in the bindings.
    #[error("kernel `{kernel}`: unbound shape variable(s) {}", vars.join(", "))]
    Unbound {
        /// The kernel.
        kernel: String,
        /// The unbound variables.
        vars: Vec<String>,
    },
    /// The kernel needs something the target lacks.
    #[error("target {target} cannot run this kernel: {what}")]
    Unsupported {
        /// The target name.
        target: &'static str,
        /// What is missing.
        what: String,
    },
    /// A size does not fit what the generated code can index.
    #[error("kernel `{kernel}`: {what}")]
    TooLarge {
        /// The kernel.
        kernel: String,
        /// What is too large.
        what: String,
    },
    /// The kernel graph is malformed (an operand or output names no node).
    #[error("kernel `{kernel}`: invalid kernel graph: {reason}")]
    InvalidGraph {
        /// The kernel.
        kernel: String,
        /// What is wrong.
        reason: String,
    },
    /// LLVM rejected the generated IR or failed to emit PTX (a bug of this backend).
    #[error("kernel `{kernel}`: LLVM {stage} failed (a tcc bug): {message}")]
    Llvm {
        /// The kernel.
        kernel: String,
        /// Which step failed (`parse`, `verify`, `optimize`, `emit`, `target`, or `link`: merging
        /// the kernels of a program into one module).
        stage: &'static str,
        /// LLVM's message.
        message: String,
    },
}
