//! Tensor arguments: what a kernel accepts for each parameter.
//!
//! [`IntoTensor<E>`] is implemented, for every element type `E` ([`f32`], [`crate::f16`],
//! [`crate::bf16`], [`i32`], [`bool`]), by
//! - `(data, shape)` pairs, where `data` is `&[E]`, `&[E; N]`, `&Vec<E>` or `Vec<E>` and `shape`
//!   is `[usize; R]`, `&[usize; R]`, `&[usize]`, `Vec<usize>` or `&Vec<usize>` (row-major, copied once);
//! - `&HostTensor` and `HostTensor` (any dtype: checked against the parameter when called);
//! - with feature `ndarray`, `ndarray` arrays and views of `E` (any layout; copied in logical order).
//!
//! The code the `kernel!` macro generates asks for `impl IntoTensor<'a, E>` with `E` the
//! parameter's dtype, so passing an `f16` slice where an `f32` is declared does not compile.

use tcc_runtime::{Element, HostTensor, RuntimeError};

use crate::error::Error;

/// One tensor argument of a kernel call: a host tensor (borrowed or owned), or the error met
/// while building one (reported when the kernel is called, naming the parameter).
#[derive(Debug)]
pub struct TensorArg<'a>(Repr<'a>);

#[derive(Debug)]
enum Repr<'a> {
    Borrowed(&'a HostTensor),
    Owned(HostTensor),
    Invalid(RuntimeError),
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

    /// The host tensor, or the error naming `param` of `kernel`.
    pub(crate) fn into_host(self, kernel: &str, param: &str) -> Result<HostTensor, Error> {
        // The runtime takes a slice of owned tensors: a borrowed one is copied here, once.
        match self.0 {
            Repr::Borrowed(t) => Ok(t.clone()),
            Repr::Owned(t) => Ok(t),
            Repr::Invalid(source) => {
                Err(Error::Tensor { kernel: kernel.to_string(), param: param.to_string(), source: Box::new(source) })
            }
        }
    }
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

    impl<'a, E: Element, S: Data<Elem = E>, D: Dimension> IntoTensor<'a, E> for &ArrayBase<S, D> {
        fn into_tensor(self) -> TensorArg<'a> {
            TensorArg::from_result(HostTensor::from_ndarray(self))
        }
    }

    impl<'a, E: Element, S: Data<Elem = E>, D: Dimension> IntoTensor<'a, E> for ArrayBase<S, D> {
        fn into_tensor(self) -> TensorArg<'a> {
            TensorArg::from_result(HostTensor::from_ndarray(&self))
        }
    }
}
