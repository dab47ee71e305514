//! Errors of the CUDA runtime. None of them is a panic: no driver, no device, out of memory, a
//! failed launch and a kernel fault are all values, and each names what was being done.

use cudarc::driver::DriverError;

use crate::error::RuntimeError;

/// Why the CUDA runtime could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// The CUDA driver library (libcuda.so) could not be loaded.
    #[error("no CUDA driver found (libcuda.so): install the NVIDIA driver or run on a machine with a GPU")]
    NoDriver,
    /// The driver is there but there is no such device.
    #[error("no CUDA device {ordinal} (the driver reports {count} device(s))")]
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// Devices the driver reports.
        count: usize,
    },
    /// The device is older than every target tcc generates code for.
    #[error("device {name} has compute capability {major}.{minor}; tcc's PTX needs 8.0 or later")]
    UnsupportedDevice {
        /// Its name.
        name: String,
        /// Compute capability major.
        major: u32,
        /// Compute capability minor.
        minor: u32,
    },
    /// An allocation failed for lack of device memory.
    #[error("out of device memory allocating {bytes} bytes for {what}")]
    OutOfMemory {
        /// What the memory was for (a buffer, naming the kernel that writes it, or a kernel's scratch).
        what: String,
        /// The size asked for.
        bytes: u64,
    },
    /// A kernel could not be loaded or launched.
    #[error("launching kernel `{kernel}` (entry `{entry}`) failed: {source}")]
    Launch {
        /// The kernel.
        kernel: String,
        /// The entry.
        entry: String,
        /// The driver's error.
        #[source]
        source: DriverError,
    },
    /// A kernel faulted while running (the CUDA context is unusable afterwards).
    #[error("kernel `{kernel}` (entry `{entry}`) faulted on the device: {source}")]
    Fault {
        /// The kernel.
        kernel: String,
        /// The entry.
        entry: String,
        /// The driver's error.
        #[source]
        source: DriverError,
    },
    /// A tensor map an entry takes could not be encoded: its spec is outside the driver's limits,
    /// names a buffer the launch lacks or a tensor larger than its buffer, or the driver refused it.
    #[error("kernel `{kernel}` (entry `{entry}`): tensor map {index}: {reason}")]
    TensorMap {
        /// The kernel.
        kernel: String,
        /// The entry.
        entry: String,
        /// Which of the entry's tensor maps.
        index: usize,
        /// What is wrong, naming the field.
        reason: String,
    },
    /// Any other driver call failed.
    #[error("CUDA {what} failed: {source}")]
    Driver {
        /// What was being done.
        what: String,
        /// The driver's error.
        #[source]
        source: DriverError,
    },
    /// Compiling a kernel to PTX failed.
    #[error(transparent)]
    Codegen(#[from] tcc_codegen::ptx::PtxError),
    /// The inputs do not fit the program, or a tensor is malformed.
    #[error(transparent)]
    Input(#[from] RuntimeError),
    /// Bug: the program or a compiled kernel is inconsistent.
    #[error("internal error: {0}")]
    Internal(String),
}

impl CudaError {
    /// Wraps a driver error from `what`, recognizing out-of-memory.
    pub(crate) fn driver(what: impl Into<String>, source: DriverError) -> CudaError {
        CudaError::Driver { what: what.into(), source }
    }

    /// Wraps an allocation error: out of memory, or another driver error.
    pub(crate) fn alloc(what: impl Into<String>, bytes: u64, source: DriverError) -> CudaError {
        if source.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            CudaError::OutOfMemory { what: what.into(), bytes }
        } else {
            CudaError::Driver { what: format!("allocating {bytes} bytes for {}", what.into()), source }
        }
    }
}
