//! Tensor arguments: what a kernel accepts for each parameter.
//!
//! [`IntoTensor<E>`] is implemented, for every element type `E` ([`f32`], [`crate::f16`],
//! [`crate::bf16`], [`i32`], [`bool`]), by
//! - `(data, shape)` pairs, where `data` is `&[E]`, `&[E; N]`, `&Vec<E>` or `Vec<E>` and `shape`
//!   is `[usize; R]`, `&[usize; R]`, `&[usize]`, `Vec<usize>` or `&Vec<usize>` (row-major, copied once);
//! - `&HostTensor` and `HostTensor` (any dtype: checked against the parameter when called);
//! - with feature `ndarray`, `ndarray` arrays and views of `E` (any layout: a standard-layout one
//!   passed by reference is read in place, any other copied in logical order);
//! - `&DeviceTensor` (memory of a CUDA device, any dtype: checked when called; used in place by a
//!   kernel on the same device, an error elsewhere).
//!
//! The code the `kernel!` macro generates asks for `impl IntoTensor<'a, E>` with `E` the
//! parameter's dtype, so passing an `f16` slice where an `f32` is declared does not compile.

use tcc_ir::{Bindings, DType, Param};
use tcc_runtime::{Element, HostTensor, HostView, RuntimeError};

use crate::device::{Device, DeviceTensor, ResidentArg};
use crate::error::Error;

/// One tensor argument of a kernel call: a host tensor (borrowed or owned), a view of memory the
/// caller owns, a device tensor, or the error met while building one (reported when the kernel is
/// called, naming the parameter).
#[derive(Debug)]
pub struct TensorArg<'a>(Repr<'a>);

#[derive(Debug)]
enum Repr<'a> {
    Borrowed(&'a HostTensor),
    Owned(HostTensor),
    /// Someone else's memory, read in place on the CPU.
    View(HostView<'a>),
    Device(&'a DeviceTensor),
    Invalid(RuntimeError),
}

/// A host argument ready for a call: its bytes borrowed or owned.
#[derive(Debug)]
pub(crate) enum HostArg<'a> {
    /// A tensor the call owns.
    Owned(HostTensor),
    /// Memory the caller owns, read in place.
    View(HostView<'a>),
}

impl HostArg<'_> {
    /// The argument as a view (what the CPU reads in place).
    pub(crate) fn view(&self) -> HostView<'_> {
        match self {
            HostArg::Owned(t) => t.view(),
            HostArg::View(v) => v.clone(),
        }
    }

    /// The argument as an owned tensor (a copy of a view), for devices that take their own.
    pub(crate) fn into_tensor(self) -> HostTensor {
        match self {
            HostArg::Owned(t) => t,
            HostArg::View(v) => v.to_tensor(),
        }
    }
}

impl<'a> TensorArg<'a> {
    /// A borrowed host tensor.
    pub fn host(t: &'a HostTensor) -> TensorArg<'a> {
        TensorArg(Repr::Borrowed(t))
    }

    /// An owned host tensor.
    pub fn owned(t: HostTensor) -> TensorArg<'a> {
        TensorArg(Repr::Owned(t))
    }

    /// A tensor of `shape` holding a copy of `data` (row-major). If the lengths disagree the
    /// call it is passed to fails with [`Error::Tensor`].
    pub fn slice<E: Element>(data: &[E], shape: &[usize]) -> TensorArg<'a> {
        TensorArg::from_result(HostTensor::from_slice(shape.to_vec(), data))
    }

    fn from_result(r: Result<HostTensor, RuntimeError>) -> TensorArg<'a> {
        TensorArg(match r {
            Ok(t) => Repr::Owned(t),
            Err(e) => Repr::Invalid(e),
        })
    }

    /// A tensor read in place from memory the caller owns (on the CPU; other devices copy it).
    pub fn view(v: HostView<'a>) -> TensorArg<'a> {
        TensorArg(Repr::View(v))
    }

    /// A view, or the error met while making it (reported at the call, naming the parameter).
    pub fn view_result(r: Result<HostView<'a>, RuntimeError>) -> TensorArg<'a> {
        TensorArg(match r {
            Ok(v) => Repr::View(v),
            Err(e) => Repr::Invalid(e),
        })
    }

    /// A tensor in a CUDA device's memory.
    pub fn device(t: &'a DeviceTensor) -> TensorArg<'a> {
        TensorArg(Repr::Device(t))
    }

    /// True for a tensor in device memory.
    pub fn is_device(&self) -> bool {
        matches!(self.0, Repr::Device(_))
    }

    /// The host tensor, or the error naming `param` of `kernel` (a device tensor is one: a kernel
    /// that takes one runs on its device).
    pub(crate) fn into_host(self, kernel: &str, param: &str, device: &Device) -> Result<HostArg<'a>, Error> {
        // Borrowed tensors and views are read in place.
        match self.0 {
            Repr::Borrowed(t) => Ok(HostArg::View(t.view())),
            Repr::Owned(t) => Ok(HostArg::Owned(t)),
            Repr::View(v) => Ok(HostArg::View(v)),
            Repr::Device(t) => Err(elsewhere(kernel, param, t, device)),
            Repr::Invalid(source) => {
                Err(Error::Tensor { kernel: kernel.to_string(), param: param.to_string(), source: Box::new(source) })
            }
        }
    }

    /// The argument for a run on `device` with outputs in device memory: a device tensor of that
    /// device in place, a host tensor to upload, or the error naming `param` of `kernel`.
    pub(crate) fn into_resident(self, kernel: &str, param: &str, device: &Device) -> Result<ResidentArg<'a>, Error> {
        match self.0 {
            Repr::Device(t) if t.is_on(device) => Ok(ResidentArg::Device(t)),
            Repr::Device(t) => Err(elsewhere(kernel, param, t, device)),
            other => TensorArg(other).into_host(kernel, param, device).map(|h| ResidentArg::Host(h.into_tensor())),
        }
    }
}

fn elsewhere(kernel: &str, param: &str, t: &DeviceTensor, device: &Device) -> Error {
    Error::DeviceUnavailable {
        device: device.name(),
        reason: format!(
            "argument `{param}` of kernel `{kernel}` is a tensor on {}; pass a host tensor or one on this device",
            t.device_name()
        ),
    }
}

/// Binds every shape variable of `params` from the arguments' dtypes and shapes, checking counts,
/// dtypes, ranks, constant dimensions and that each variable gets one value; the error names the
/// parameter and both shapes (what `tcc_runtime::bind::bind_inputs` does for host tensors).
pub(crate) fn bind_shapes<'s>(
    kernel: &str,
    params: &[Param],
    args: impl IntoIterator<Item = (DType, &'s [usize])>,
) -> Result<Bindings, Error> {
    let mut bindings = Bindings::new();
    let mut count = 0;
    for (p, (dtype, shape)) in params.iter().zip(args) {
        count += 1;
        if p.ty.dtype != dtype {
            return Err(Error::DType {
                kernel: kernel.to_string(),
                param: p.name.clone(),
                expected: p.ty.dtype,
                got: dtype,
            });
        }
        let mismatch = |b: &Bindings| Error::Shape {
            kernel: kernel.to_string(),
            param: p.name.clone(),
            expected: tcc_runtime::bind::describe(&p.ty.shape, b),
            got: shape.to_vec(),
        };
        if !tcc_runtime::bind::bind_dims(&p.ty.shape, shape, &mut bindings) {
            return Err(mismatch(&bindings));
        }
    }
    if count != params.len() {
        return Err(Error::InputCount { kernel: kernel.to_string(), expected: params.len(), got: count });
    }
    Ok(bindings)
}

/// Something that can be passed as a kernel's tensor argument whose dtype is `E`'s.
pub trait IntoTensor<'a, E: Element> {
    /// The argument.
    fn into_tensor(self) -> TensorArg<'a>;
}

impl<'a, E: Element> IntoTensor<'a, E> for TensorArg<'a> {
    fn into_tensor(self) -> TensorArg<'a> {
        self
    }
}

impl<'a, E: Element> IntoTensor<'a, E> for &'a HostTensor {
    fn into_tensor(self) -> TensorArg<'a> {
        TensorArg::host(self)
    }
}

impl<'a, E: Element> IntoTensor<'a, E> for HostTensor {
    fn into_tensor(self) -> TensorArg<'a> {
        TensorArg::owned(self)
    }
}

impl<'a, E: Element> IntoTensor<'a, E> for &'a DeviceTensor {
    fn into_tensor(self) -> TensorArg<'a> {
        TensorArg::device(self)
    }
}

/// `(data, shape)` implementations for each data container and each shape container.
macro_rules! data_shape {
    ($([$($g:tt)*] $data:ty, $shape:ty;)*) => {$(
        impl<'a, 'b, E: Element, $($g)*> IntoTensor<'a, E> for ($data, $shape) {
            fn into_tensor(self) -> TensorArg<'a> {
                let (data, shape) = self;
                TensorArg::slice::<E>(&data[..], &shape[..])
            }
        }
    )*};
}

data_shape! {
    [const R: usize] &'b [E], [usize; R];
    [const R: usize] &'b [E], &'b [usize; R];
    [] &'b [E], &'b [usize];
    [] &'b [E], Vec<usize>;
    [] &'b [E], &'b Vec<usize>;
    [const N: usize, const R: usize] &'b [E; N], [usize; R];
    [const N: usize, const R: usize] &'b [E; N], &'b [usize; R];
    [const N: usize] &'b [E; N], &'b [usize];
    [const N: usize] &'b [E; N], Vec<usize>;
    [const N: usize] &'b [E; N], &'b Vec<usize>;
    [const R: usize] &'b Vec<E>, [usize; R];
    [const R: usize] &'b Vec<E>, &'b [usize; R];
    [] &'b Vec<E>, &'b [usize];
    [] &'b Vec<E>, Vec<usize>;
    [] &'b Vec<E>, &'b Vec<usize>;
    [const R: usize] Vec<E>, [usize; R];
    [const R: usize] Vec<E>, &'b [usize; R];
    [] Vec<E>, &'b [usize];
    [] Vec<E>, Vec<usize>;
    [] Vec<E>, &'b Vec<usize>;
}

#[cfg(feature = "ndarray")]
mod nd {
    use ndarray::{ArrayBase, Data, Dimension};
    use tcc_runtime::{Element, HostTensor};

    use super::{IntoTensor, TensorArg};

    impl<'a, E: Element + 'a, S: Data<Elem = E>, D: Dimension> IntoTensor<'a, E> for &'a ArrayBase<S, D> {
        fn into_tensor(self) -> TensorArg<'a> {
            // A standard-layout array is read in place; any other layout is copied in logical order.
            match HostTensor::view_ndarray(self) {
                Some(view) => TensorArg::view_result(view),
                None => TensorArg::from_result(HostTensor::from_ndarray(self)),
            }
        }
    }

    impl<'a, E: Element, S: Data<Elem = E>, D: Dimension> IntoTensor<'a, E> for ArrayBase<S, D> {
        fn into_tensor(self) -> TensorArg<'a> {
            TensorArg::from_result(HostTensor::from_ndarray(&self))
        }
    }
}
