//! The error of running a kernel: every variant names the kernel and, where one is to blame, the
//! parameter, the device or the stage that failed.

use tcc_ir::DType;
use tcc_ir::interp::InterpError;
use tcc_passes::PassError;
use tcc_runtime::RuntimeError;
use tcc_runtime::cuda::CudaError;

/// Why a kernel could not run.
///
/// `InputCount`, `DType`, `Shape`, `Tensor` and `MemoryLimit` are mistakes in the caller's
/// arguments (or its limit);
/// `DeviceUnavailable` and `Cuda` describe the environment; `Ir`, `Optimize` and `Internal`
/// are bugs in tcc (the macro checked the program at compile time).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kernel was called with the wrong number of tensors.
    #[error("kernel `{kernel}` takes {expected} tensors, got {got}")]
    InputCount {
        /// The kernel.
        kernel: String,
        /// Parameters declared.
        expected: usize,
        /// Tensors given.
        got: usize,
    },
    /// A tensor's element type differs from its parameter's dtype.
    #[error("kernel `{kernel}`: parameter `{param}` has dtype {expected}, got a {got} tensor")]
    DType {
        /// The kernel.
        kernel: String,
        /// The parameter.
        param: String,
        /// The declared dtype.
        expected: DType,
        /// The tensor's dtype.
        got: DType,
    },
    /// A tensor's shape does not fit its parameter's shape (rank, a constant dimension, or a shape
    /// variable already bound to another value by an earlier parameter).
    #[error("kernel `{kernel}`: parameter `{param}` has shape {expected}, got {got:?}")]
    Shape {
        /// The kernel.
        kernel: String,
        /// The parameter.
        param: String,
        /// The declared shape with the values bound so far (`[M=3, 4096]`).
        expected: String,
        /// The tensor's shape.
        got: Vec<usize>,
    },
    /// A tensor argument could not be built (its data does not fit its shape, or it is too large).
    #[error("kernel `{kernel}`: argument `{param}`: {source}")]
    Tensor {
        /// The kernel.
        kernel: String,
        /// The parameter the argument was for.
        param: String,
        /// What is wrong with it.
        #[source]
        source: Box<RuntimeError>,
    },
    /// The device cannot be used (no driver, no GPU, or a feature this build lacks).
    #[error("device {device} is unavailable: {reason}")]
    DeviceUnavailable {
        /// The device asked for (`cpu`, `cuda:0`).
        device: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// Compiling or running on the CPU failed.
    #[error("kernel `{kernel}` on the CPU: {source}")]
    Runtime {
        /// The kernel.
        kernel: String,
        /// The runtime's error.
        #[source]
        source: Box<RuntimeError>,
    },
    /// Compiling or running on a CUDA device failed.
    #[error("kernel `{kernel}` on {device}: {source}")]
    Cuda {
        /// The kernel.
        kernel: String,
        /// The device (`cuda:0`).
        device: String,
        /// The CUDA runtime's error.
        #[source]
        source: Box<CudaError>,
    },
    /// The reference interpreter failed (for example, a tensor above its memory limit).
    #[error("kernel `{kernel}` on the interpreter: {source}")]
    Interp {
        /// The kernel.
        kernel: String,
        /// The interpreter's error.
        #[source]
        source: Box<InterpError>,
    },
    /// The run would need more memory than the device's limit ([`crate::Device::with_max_memory`]),
    /// or a tensor is too large: refused before anything is compiled or allocated.
    #[error("kernel `{kernel}`: {source}")]
    MemoryLimit {
        /// The kernel.
        kernel: String,
        /// How much, and the largest tensor.
        #[source]
        source: crate::memory::MemoryError,
    },
    /// Bug: the IR text the macro embedded does not parse or verify.
    #[error("kernel `{kernel}`: the embedded IR is invalid (a bug in tcc): {message}")]
    Ir {
        /// The kernel.
        kernel: String,
        /// What is wrong with the text.
        message: String,
    },
    /// Bug: the optimizer failed on a program the front end accepted.
    #[error("kernel `{kernel}`: the optimizer failed for target {target}: {source}")]
    Optimize {
        /// The kernel.
        kernel: String,
        /// The target model (`cpu`, `sm_90a`).
        target: String,
        /// The optimizer's error.
        #[source]
        source: Box<PassError>,
    },
    /// Bug: an inconsistency inside tcc (the message says which).
    #[error("kernel `{kernel}`: internal error: {message}")]
    Internal {
        /// The kernel.
        kernel: String,
        /// What went wrong.
        message: String,
    },
}

impl Error {
    /// True when the caller's arguments are to blame (count, dtype, shape, tensor data, or sizes
    /// over the device's memory limit).
    pub fn is_argument_error(&self) -> bool {
        matches!(
            self,
            Error::InputCount { .. }
                | Error::DType { .. }
                | Error::Shape { .. }
                | Error::Tensor { .. }
                | Error::MemoryLimit { .. }
        )
    }

    /// Maps an error of binding inputs (count, dtype, shape) to the caller-facing variants.
    pub(crate) fn from_binding(kernel: &str, e: RuntimeError) -> Error {
        let kernel = kernel.to_string();
        match e {
            RuntimeError::InputCount { expected, got, .. } => Error::InputCount { kernel, expected, got },
            RuntimeError::DTypeMismatch { param, expected, got } => Error::DType { kernel, param, expected, got },
            RuntimeError::ShapeMismatch { param, expected, got } => Error::Shape { kernel, param, expected, got },
            source => Error::Runtime { kernel, source: Box::new(source) },
        }
    }
}
