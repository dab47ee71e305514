//! Host tensors: a dtype, a shape and little-endian element bytes.

use half::{bf16, f16};
use tcc_ir::DType;
use tcc_ir::interp::Tensor;

use crate::error::RuntimeError;

/// An element type a host tensor can be built from or read as.
pub trait Element: Copy {
    /// The dtype of tensors of this element.
    const DTYPE: DType;
    /// Appends the element's little-endian bytes.
    fn put(self, out: &mut Vec<u8>);
    /// Reads one element from exactly `size_bytes` bytes.
    fn get(bytes: &[u8]) -> Self;
    /// The elements' memory as the little-endian bytes a host tensor holds, where it is exactly
    /// that (every element type on a little-endian machine); `None` elsewhere (then they are
    /// copied with [`Element::put`]).
    fn le_bytes(data: &[Self]) -> Option<&[u8]>;
}

/// `data`'s memory as bytes, on a little-endian machine.
///
/// Only for element types whose memory is their little-endian encoding with no padding:
/// f32, i32, `half`'s f16 and bf16 (`repr(transparent)` over u16) and bool (one byte, 0 or 1,
/// the host tensor's encoding of bool).
fn memory_bytes<T: Element>(data: &[T]) -> Option<&[u8]> {
    if cfg!(target_endian = "little") {
        // SAFETY: `data` is a live, initialized slice of a padding-free element type (see above),
        // so its `size_of_val(data)` bytes may be read as u8 (alignment 1) for as long as it is
        // borrowed, which the returned slice's lifetime ties it to.
        Some(unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) })
    } else {
        None
    }
}

macro_rules! element {
    ($t:ty, $d:expr, $n:literal) => {
        impl Element for $t {
            const DTYPE: DType = $d;
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn get(bytes: &[u8]) -> Self {
                let mut a = [0u8; $n];
                a.copy_from_slice(&bytes[..$n]);
                <$t>::from_le_bytes(a)
            }
            fn le_bytes(data: &[Self]) -> Option<&[u8]> {
                memory_bytes(data)
            }
        }
    };
}

element!(f32, DType::F32, 4);
element!(f16, DType::F16, 2);
element!(bf16, DType::BF16, 2);
element!(i32, DType::I32, 4);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn put(self, out: &mut Vec<u8>) {
        out.push(u8::from(self));
    }
    fn get(bytes: &[u8]) -> Self {
        bytes.first().is_some_and(|&b| b != 0)
    }
    fn le_bytes(data: &[Self]) -> Option<&[u8]> {
        memory_bytes(data)
    }
}

/// A tensor in host memory: row-major, little-endian elements (bool as one byte, 0 or 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostTensor {
    dtype: DType,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

fn numel(shape: &[usize]) -> Result<usize, RuntimeError> {
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&n| (n as u64) < tcc_ir::limits::MAX_ELEMENTS)
        .ok_or_else(|| RuntimeError::TooLarge(shape.to_vec()))
}

impl HostTensor {
    /// A tensor from raw little-endian bytes; fails if their length does not fit dtype and shape.
    pub fn from_bytes(dtype: DType, shape: Vec<usize>, bytes: Vec<u8>) -> Result<HostTensor, RuntimeError> {
        let expected =
            numel(&shape)?.checked_mul(dtype.size_bytes()).ok_or_else(|| RuntimeError::TooLarge(shape.clone()))?;
        if bytes.len() != expected {
            return Err(RuntimeError::DataLength { dtype, shape, expected, got: bytes.len() });
        }
        Ok(HostTensor { dtype, shape, bytes })
    }

    /// A tensor of zeros.
    pub fn zeros(dtype: DType, shape: Vec<usize>) -> Result<HostTensor, RuntimeError> {
        let n = numel(&shape)?.checked_mul(dtype.size_bytes()).ok_or_else(|| RuntimeError::TooLarge(shape.clone()))?;
        Ok(HostTensor { dtype, shape, bytes: zeroed_bytes(n) })
    }

    /// A tensor a kernel is about to write: its memory is not cleared (the launch that produces
    /// it writes every element, then calls [`HostTensor::assume_written`]). Debug builds fill it
    /// with 0xFF bytes (NaN in every float dtype) instead, so that a test shows any element a
    /// kernel left unwritten. (Clearing a 16M-element output cost more than the kernel that
    /// writes it: the memory was the previous run's, zeroed again on every run.)
    pub(crate) fn for_kernel(dtype: DType, shape: Vec<usize>) -> Result<HostTensor, RuntimeError> {
        let n = numel(&shape)?.checked_mul(dtype.size_bytes()).ok_or_else(|| RuntimeError::TooLarge(shape.clone()))?;
        let bytes = if cfg!(debug_assertions) { vec![0xFF; n] } else { Vec::with_capacity(n) };
        advise_huge_pages(bytes.as_ptr() as usize, n);
        Ok(HostTensor { dtype, shape, bytes })
    }

    /// Bytes of the tensor's elements.
    fn byte_len(&self) -> usize {
        self.numel() * self.dtype.size_bytes()
    }

    /// Where a kernel writes this tensor (from [`HostTensor::for_kernel`] or written already),
    /// and how many bytes.
    pub(crate) fn kernel_output(&mut self) -> (*mut u8, usize) {
        let n = self.byte_len();
        if self.bytes.len() < n {
            self.bytes.reserve_exact(n - self.bytes.len());
        }
        (self.bytes.as_mut_ptr(), n)
    }

    /// Takes the bytes at [`HostTensor::kernel_output`] as the tensor's elements.
    ///
    /// # Safety
    /// A kernel has written every one of those bytes.
    pub(crate) unsafe fn assume_written(&mut self) {
        let n = self.byte_len();
        if self.bytes.len() < n {
            // SAFETY: `kernel_output` reserved `n` bytes, and the caller guarantees a kernel wrote
            // all of them.
            unsafe { self.bytes.set_len(n) };
        }
    }

    /// Zeros the bytes of a tensor no kernel wrote (a buffer no launch produced).
    pub(crate) fn zero_unwritten(&mut self) {
        let n = self.byte_len();
        if self.bytes.len() < n {
            self.bytes.resize(n, 0);
        }
    }

    /// A tensor of `shape` holding `data` (row-major).
    pub fn from_slice<T: Element>(shape: Vec<usize>, data: &[T]) -> Result<HostTensor, RuntimeError> {
        let n = numel(&shape)?;
        if data.len() != n {
            return Err(RuntimeError::DataLength {
                dtype: T::DTYPE,
                shape,
                expected: n.saturating_mul(T::DTYPE.size_bytes()),
                got: data.len().saturating_mul(T::DTYPE.size_bytes()),
            });
        }
        let mut bytes = Vec::with_capacity(n * T::DTYPE.size_bytes());
        for &x in data {
            x.put(&mut bytes);
        }
        Ok(HostTensor { dtype: T::DTYPE, shape, bytes })
    }

    /// A tensor of `shape` holding `data` (row-major).
    pub fn from_vec<T: Element>(shape: Vec<usize>, data: Vec<T>) -> Result<HostTensor, RuntimeError> {
        HostTensor::from_slice(shape, &data)
    }

    /// The elements, if the tensor holds `T`s.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, RuntimeError> {
        if self.dtype != T::DTYPE {
            return Err(RuntimeError::WrongElementType { actual: self.dtype, requested: T::DTYPE });
        }
        Ok(self.bytes.chunks_exact(T::DTYPE.size_bytes()).map(T::get).collect())
    }

    /// Every element as f64 (exact for every dtype).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        self.view().to_f64_vec()
    }

    /// The tensor as a view of its bytes.
    pub fn view(&self) -> HostView<'_> {
        HostView { dtype: self.dtype, shape: self.shape.clone(), bytes: &self.bytes }
    }
}

/// A host tensor whose bytes someone else owns (a caller's array, read in place by a kernel): a
/// dtype, a shape and little-endian element bytes, as in [`HostTensor`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostView<'a> {
    dtype: DType,
    shape: Vec<usize>,
    bytes: &'a [u8],
}

impl<'a> HostView<'a> {
    /// A view of raw little-endian bytes; fails if their length does not fit dtype and shape.
    pub fn from_bytes(dtype: DType, shape: Vec<usize>, bytes: &'a [u8]) -> Result<HostView<'a>, RuntimeError> {
        let expected =
            numel(&shape)?.checked_mul(dtype.size_bytes()).ok_or_else(|| RuntimeError::TooLarge(shape.clone()))?;
        if bytes.len() != expected {
            return Err(RuntimeError::DataLength { dtype, shape, expected, got: bytes.len() });
        }
        Ok(HostView { dtype, shape, bytes })
    }

    /// A view of `data` (row-major) as a tensor of `shape`, if the elements' memory is their
    /// little-endian encoding ([`Element::le_bytes`]); `None` if it is not (copy with
    /// [`HostTensor::from_slice`] then).
    pub fn from_slice<T: Element>(shape: Vec<usize>, data: &'a [T]) -> Option<Result<HostView<'a>, RuntimeError>> {
        T::le_bytes(data).map(|bytes| HostView::from_bytes(T::DTYPE, shape, bytes))
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The dimensions.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The raw little-endian bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The same values as an interpreter tensor.
    pub fn to_interp(&self) -> Tensor {
        Tensor { dtype: self.dtype, shape: self.shape.clone(), data: self.to_f64_vec() }
    }

    /// A host tensor holding a copy of the bytes.
    pub fn to_tensor(&self) -> HostTensor {
        HostTensor { dtype: self.dtype, shape: self.shape.clone(), bytes: self.bytes.to_vec() }
    }

    /// Every element as f64 (exact for every dtype).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        let size = self.dtype.size_bytes();
        self.bytes
            .chunks_exact(size)
            .map(|b| match self.dtype {
                DType::F32 => f64::from(f32::get(b)),
                DType::F16 => f64::from(f16::get(b)),
                DType::BF16 => f64::from(bf16::get(b)),
                DType::I32 => f64::from(i32::get(b)),
                DType::Bool => f64::from(u8::from(bool::get(b))),
            })
            .collect()
    }
}

impl HostTensor {
    /// A tensor from f64 values, each rounded to `dtype` as casts round (contract §5).
    pub fn from_f64(dtype: DType, shape: Vec<usize>, data: &[f64]) -> Result<HostTensor, RuntimeError> {
        let n = numel(&shape)?;
        if data.len() != n {
            return Err(RuntimeError::DataLength {
                dtype,
                shape,
                expected: n.saturating_mul(dtype.size_bytes()),
                got: data.len().saturating_mul(dtype.size_bytes()),
            });
        }
        let mut bytes = Vec::with_capacity(n * dtype.size_bytes());
        for &v in data {
            match dtype {
                DType::F32 => (v as f32).put(&mut bytes),
                DType::F16 => f16::from_f64(v).put(&mut bytes),
                DType::BF16 => bf16::from_f64(v).put(&mut bytes),
                DType::I32 => (v as i32).put(&mut bytes),
                DType::Bool => (v != 0.0 && !v.is_nan()).put(&mut bytes),
            }
        }
        Ok(HostTensor { dtype, shape, bytes })
    }

    /// The same values as an interpreter tensor.
    pub fn to_interp(&self) -> Tensor {
        Tensor { dtype: self.dtype, shape: self.shape.clone(), data: self.to_f64_vec() }
    }

    /// The same values as an interpreter tensor holds (its values are representable in its dtype).
    pub fn from_interp(t: &Tensor) -> Result<HostTensor, RuntimeError> {
        HostTensor::from_f64(t.dtype, t.shape.clone(), &t.data)
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The dimensions.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The raw little-endian bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The raw bytes, mutably (the length is fixed).
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }
}

#[cfg(feature = "ndarray")]
mod nd {
    use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};

    use super::{Element, HostTensor, HostView};
    use crate::error::RuntimeError;

    impl HostTensor {
        /// A tensor with the elements and shape of an ndarray array, in its logical row-major
        /// order whatever its layout: a standard-layout array is copied as one slice; any other
        /// (transposed, sliced with steps, reversed, broadcast) is gathered element by element.
        pub fn from_ndarray<T: Element, S: Data<Elem = T>, D: Dimension>(
            a: &ArrayBase<S, D>,
        ) -> Result<HostTensor, RuntimeError> {
            // A broadcast view can stand for more elements than memory holds: refuse it first.
            super::numel(a.shape())?;
            match a.as_slice() {
                Some(data) => HostTensor::from_slice(a.shape().to_vec(), data),
                None => HostTensor::from_vec(a.shape().to_vec(), a.iter().copied().collect::<Vec<T>>()),
            }
        }

        /// A view of a standard-layout (C-order) array's elements, read in place; `None` for any
        /// other layout (copy it with [`HostTensor::from_ndarray`] then).
        pub fn view_ndarray<'a, T: Element + 'a, S: Data<Elem = T>, D: Dimension>(
            a: &'a ArrayBase<S, D>,
        ) -> Option<Result<HostView<'a>, RuntimeError>> {
            HostView::from_slice(a.shape().to_vec(), a.as_slice()?)
        }

        /// The tensor as an ndarray array, if it holds `T`s.
        pub fn to_ndarray<T: Element>(&self) -> Result<ArrayD<T>, RuntimeError> {
            let data = self.to_vec::<T>()?;
            ArrayD::from_shape_vec(IxDyn(self.shape()), data)
                .map_err(|e| RuntimeError::Internal(format!("ndarray shape: {e}")))
        }
    }
}

/// Buffers at least this large ask the kernel for transparent huge pages.
const HUGE_PAGE_THRESHOLD: usize = 4 << 20;

/// `n` zero bytes. Large buffers come fresh from `mmap` (calloc does not touch them), so before the
/// first write they are advised to use 2 MiB pages: one fault per 2 MiB instead of per 4 KiB, which
/// under a hypervisor is the difference between a memory-bound kernel and a fault-bound one
/// (numpy does the same for its arrays).
fn zeroed_bytes(n: usize) -> Vec<u8> {
    let bytes = vec![0u8; n];
    advise_huge_pages(bytes.as_ptr() as usize, n);
    bytes
}

/// Asks for 2 MiB pages for the whole 2 MiB pages inside an allocation of `n` bytes at `start`
/// (Linux, allocations of at least [`HUGE_PAGE_THRESHOLD`]; elsewhere nothing).
fn advise_huge_pages(start: usize, n: usize) {
    #[cfg(target_os = "linux")]
    if n >= HUGE_PAGE_THRESHOLD {
        const HUGE: usize = 2 << 20;
        let aligned = start.next_multiple_of(HUGE);
        let end = (start + n) / HUGE * HUGE;
        if end > aligned {
            // SAFETY: the range lies inside a live allocation of `n` bytes at `start`;
            // MADV_HUGEPAGE only changes how pages are backed, never their contents, and its
            // failure (THP disabled) is harmless, so the result is ignored.
            unsafe {
                libc::madvise(aligned as *mut libc::c_void, end - aligned, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, n);
}
