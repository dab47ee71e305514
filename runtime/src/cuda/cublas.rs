//! cuBLAS in the same process, as the correctness and speed baseline of tcc's matmuls:
//! `cublasGemmEx` on row-major f16/bf16/f32 operands with f32 accumulation (no TF32).
//!
//! libcublas is loaded at run time (cudarc's dynamic loading); without it [`Cublas::new`]
//! returns [`CublasError::NotFound`] and nothing panics.

use std::ffi::c_void;

use cudarc::cublas::result as cr;
use cudarc::cublas::sys;
use cudarc::driver::DevicePtr;
use tcc_ir::DType;

use super::device::{CudaDevice, DeviceBuffer};
use super::error::CudaError;
use super::program::{Timing, TimingOptions};
use crate::tensor::HostTensor;

/// Why a cuBLAS call could not run.
#[derive(Debug, thiserror::Error)]
pub enum CublasError {
    /// libcublas could not be loaded.
    #[error("libcublas not found (set LD_LIBRARY_PATH to a CUDA toolkit's or PyTorch's cuBLAS)")]
    NotFound,
    /// cuBLAS returned an error.
    #[error("cuBLAS {what} failed: {message}")]
    Call {
        /// The call.
        what: &'static str,
        /// cuBLAS's status.
        message: String,
    },
    /// The GEMM's operands do not match its sizes, or the dtype is not supported.
    #[error("cuBLAS gemm: {0}")]
    Invalid(String),
    /// A CUDA driver call around it failed.
    #[error(transparent)]
    Cuda(#[from] CudaError),
}

/// A row-major GEMM `C[m, n] = A[m, k] · B` with B stored `[k, n]` or (`b_nk`) `[n, k]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GemmShape {
    /// Rows of C.
    pub m: usize,
    /// Columns of C.
    pub n: usize,
    /// Depth.
    pub k: usize,
    /// Element type of A, B and C (accumulation is f32).
    pub dtype: DType,
    /// B is stored `[n, k]` (a linear layer's weight).
    pub b_nk: bool,
}

/// A cuBLAS handle bound to a device's stream.
#[derive(Debug)]
pub struct Cublas {
    handle: sys::cublasHandle_t,
}

// SAFETY: the handle is only used through `&self` calls that cuBLAS allows from any thread as
// long as they are not concurrent on one handle; tcc uses one handle per benchmark thread.
unsafe impl Send for Cublas {}

impl Drop for Cublas {
    fn drop(&mut self) {
        // SAFETY: the handle was created by `create_handle` and is destroyed once.
        let _ = unsafe { cr::destroy_handle(self.handle) };
    }
}

fn call(what: &'static str, r: Result<(), cr::CublasError>) -> Result<(), CublasError> {
    r.map_err(|e| CublasError::Call { what, message: format!("{e:?}") })
}

fn data_type(dtype: DType) -> Result<sys::cudaDataType, CublasError> {
    match dtype {
        DType::F16 => Ok(sys::cudaDataType::CUDA_R_16F),
        DType::BF16 => Ok(sys::cudaDataType::CUDA_R_16BF),
        DType::F32 => Ok(sys::cudaDataType::CUDA_R_32F),
        other => Err(CublasError::Invalid(format!("no cuBLAS gemm for {other}"))),
    }
}

#[cfg(not(feature = "cuda-dynamic-linking"))]
fn cublas_present() -> bool {
    // SAFETY: only tries to dlopen libcublas.
    unsafe { sys::is_culib_present() }
}

/// With cudarc linked against libcublas (feature `cuda-dynamic-linking`) the program could not
/// have started without it.
#[cfg(feature = "cuda-dynamic-linking")]
fn cublas_present() -> bool {
    true
}

fn int(v: usize, what: &str) -> Result<i32, CublasError> {
    i32::try_from(v).map_err(|_| CublasError::Invalid(format!("{what} = {v} does not fit cuBLAS's int")))
}

impl Cublas {
    /// Loads libcublas (or fails with [`CublasError::NotFound`]) and creates a handle on the
    /// device's stream.
    pub fn new(device: &CudaDevice) -> Result<Cublas, CublasError> {
        if !cublas_present() {
            return Err(CublasError::NotFound);
        }
        let stream = device.stream();
        let ctx = stream.context();
        ctx.bind_to_thread().map_err(|e| CudaError::driver("binding the context", e))?;
        let handle =
            cr::create_handle().map_err(|e| CublasError::Call { what: "create", message: format!("{e:?}") })?;
        let blas = Cublas { handle };
        // SAFETY: the handle is live and the stream belongs to the device's context.
        call("set_stream", unsafe { cr::set_stream(handle, stream.cu_stream() as _) })?;
        Ok(blas)
    }

    /// Queues `c = a · b` on the device's stream (row-major, f32 accumulation).
    pub fn gemm(
        &self,
        device: &CudaDevice,
        s: GemmShape,
        a: &DeviceBuffer,
        b: &DeviceBuffer,
        c: &mut DeviceBuffer,
    ) -> Result<(), CublasError> {
        let elem = s.dtype.size_bytes() as u64;
        let (m, n, k) = (s.m as u64, s.n as u64, s.k as u64);
        if a.bytes() < m * k * elem || b.bytes() < k * n * elem || c.bytes() < m * n * elem {
            return Err(CublasError::Invalid(format!("buffers too small for {m}x{n}x{k}")));
        }
        let ty = data_type(s.dtype)?;
        let (mi, ni, ki) = (int(s.m, "m")?, int(s.n, "n")?, int(s.k, "k")?);
        let alpha = 1.0f32;
        let beta = 0.0f32;
        let stream = device.stream();
        let (ap, _ga) = a.slice.device_ptr(stream);
        let (bp, _gb) = b.slice.device_ptr(stream);
        let (cp, _gc) = c.slice.device_ptr(stream);
        // Column-major view: C^T[n, m] = B^T[n, k] · A^T[k, m].
        let (op_b, ldb) =
            if s.b_nk { (sys::cublasOperation_t::CUBLAS_OP_T, ki) } else { (sys::cublasOperation_t::CUBLAS_OP_N, ni) };
        // SAFETY: the pointers are live device allocations at least as large as checked above;
        // alpha and beta are host f32 values (compute type 32F); leading dimensions match the
        // row-major layouts.
        let r = unsafe {
            cr::gemm_ex(
                self.handle,
                op_b,
                sys::cublasOperation_t::CUBLAS_OP_N,
                ni,
                mi,
                ki,
                (&alpha as *const f32).cast::<c_void>(),
                bp as *const c_void,
                ty,
                ldb,
                ap as *const c_void,
                ty,
                ki,
                (&beta as *const f32).cast::<c_void>(),
                cp as *mut c_void,
                ty,
                ni,
                sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        };
        call("gemm_ex", r)
    }

    /// Runs the GEMM on host operands once (checked), then times it like
    /// [`CudaDevice::time_program`]; returns the timing and C.
    pub fn time_gemm(
        &self,
        device: &CudaDevice,
        s: GemmShape,
        a: &HostTensor,
        b: &HostTensor,
        options: TimingOptions,
    ) -> Result<(Timing, HostTensor), CublasError> {
        let da = device.upload(a, "cuBLAS operand A")?;
        let db = device.upload(b, "cuBLAS operand B")?;
        let mut dc = device.alloc((s.m * s.n * s.dtype.size_bytes()) as u64, "cuBLAS result")?;
        self.gemm(device, s, &da, &db, &mut dc)?;
        device.sync_after("cublas_gemm")?;
        for _ in 0..options.warmup {
            self.gemm(device, s, &da, &db, &mut dc)?;
        }
        device.synchronize()?;
        let mut flush = if options.flush_l2 {
            Some(device.alloc(device.info().l2_bytes.max(1) * 2, "the L2 flush buffer")?)
        } else {
            None
        };
        let mut samples = Vec::with_capacity(options.repetitions.max(1));
        for _ in 0..options.repetitions.max(1) {
            if let Some(f) = flush.as_mut() {
                device.clear(f)?;
            }
            let start = device.record_event()?;
            self.gemm(device, s, &da, &db, &mut dc)?;
            let end = device.record_event()?;
            samples.push(f64::from(device.elapsed_ms(&start, &end)?));
        }
        device.sync_after("cublas_gemm")?;
        let out = device.download(&dc, s.dtype, vec![s.m, s.n], "cuBLAS result")?;
        Ok((Timing::from_samples(samples), out))
    }
}
