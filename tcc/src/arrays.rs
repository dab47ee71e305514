//! Kernel results as `ndarray` arrays (feature `ndarray`).
//!
//! Arguments: every `ndarray` array or view of a kernel parameter's element type is an argument
//! ([`crate::IntoTensor`]), of any dimension and any layout. A standard-layout (C-order) array
//! passed by reference is read in place by the CPU, with no copy; any other layout (a transpose, a
//! slice with steps, a reversed axis, a broadcast view), or an array passed by value, is copied in
//! its logical row-major order, so a kernel sees the same values either way. A broadcast view whose element count is over the limits of contract §6
//! is refused with [`crate::Error::Tensor`] before anything is allocated.
//!
//! Results: the `kernel!` macro gives each kernel `f::array(..)` (on the CPU) and
//! `f::array_on(&device, ..)`, which return [`ndarray::ArrayD`]s (a tuple of them for a kernel with
//! several outputs) in standard layout.

use ndarray::ArrayD;
use tcc_runtime::{Element, HostTensor};

use crate::error::Error;

/// Output `t` of `kernel` as an array of `E`s (what the `array` functions `kernel!` generates
/// return). A dtype other than `E`'s is an [`Error::Internal`]: the macro asks for the dtype the
/// kernel declares.
pub fn into_array<E: Element>(kernel: &str, t: &HostTensor) -> Result<ArrayD<E>, Error> {
    t.to_ndarray::<E>().map_err(|e| Error::Internal { kernel: kernel.to_string(), message: format!("an output: {e}") })
}
