//! Host tensors: conversions from and to vectors and interpreter tensors, and their errors.

use half::{bf16, f16};
use tcc_ir::DType;
use tcc_ir::interp::Tensor;
use tcc_runtime::{HostTensor, HostView, RuntimeError};

#[test]
fn round_trips_through_vectors() {
    let t = HostTensor::from_vec(vec![2, 2], vec![1.5f32, -2.0, 0.0, 3.25]).unwrap();
    assert_eq!(t.dtype(), DType::F32);
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.5, -2.0, 0.0, 3.25]);
    let h = HostTensor::from_vec(vec![3], vec![f16::from_f32(0.5), f16::MAX, f16::NEG_INFINITY]).unwrap();
    assert_eq!(h.bytes().len(), 6);
    assert_eq!(h.to_vec::<f16>().unwrap()[1], f16::MAX);
    let b = HostTensor::from_vec(vec![1], vec![bf16::from_f32(3.0)]).unwrap();
    assert_eq!(b.to_f64_vec(), vec![3.0]);
    let i = HostTensor::from_vec(vec![2], vec![i32::MIN, 7]).unwrap();
    assert_eq!(i.to_vec::<i32>().unwrap(), vec![i32::MIN, 7]);
    let z = HostTensor::from_vec(vec![3], vec![true, false, true]).unwrap();
    assert_eq!(z.bytes(), &[1, 0, 1]);
    assert_eq!(z.to_vec::<bool>().unwrap(), vec![true, false, true]);
}

#[test]
fn wrong_lengths_and_types_are_errors() {
    let err = HostTensor::from_vec(vec![2, 3], vec![1f32; 5]).unwrap_err();
    assert!(matches!(err, RuntimeError::DataLength { expected: 24, got: 20, .. }), "{err}");
    let t = HostTensor::from_vec(vec![1], vec![1i32]).unwrap();
    assert!(matches!(t.to_vec::<f32>(), Err(RuntimeError::WrongElementType { .. })));
    assert!(HostTensor::from_bytes(DType::F16, vec![2], vec![0; 3]).is_err());
    assert!(HostTensor::zeros(DType::F32, vec![1 << 30, 1 << 30]).is_err());
}

#[test]
fn converts_from_and_to_interpreter_tensors() {
    let t = Tensor::new(DType::BF16, vec![2], vec![1.0, -0.5]).unwrap();
    let h = HostTensor::from_interp(&t).unwrap();
    assert_eq!(h.to_interp(), t);
    let s = Tensor::scalar(DType::Bool, 1.0);
    assert_eq!(HostTensor::from_interp(&s).unwrap().to_vec::<bool>().unwrap(), vec![true]);
}

#[cfg(feature = "ndarray")]
#[test]
fn converts_from_and_to_ndarray() {
    let a = ndarray::arr2(&[[1f32, 2.0], [3.0, 4.0]]);
    let t = HostTensor::from_ndarray(&a.t()).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 3.0, 2.0, 4.0]);
    assert_eq!(t.to_ndarray::<f32>().unwrap().shape(), &[2, 2]);
    // A standard-layout array is viewed in place; a transposed one is not (it is copied).
    let v = HostTensor::view_ndarray(&a).unwrap().unwrap();
    assert_eq!(v.bytes().as_ptr(), a.as_ptr().cast::<u8>());
    assert_eq!(v.to_tensor(), HostTensor::from_ndarray(&a).unwrap());
    assert!(HostTensor::view_ndarray(&a.t()).is_none());
}

#[test]
fn views_read_elements_in_place_with_the_encoding_of_host_tensors() {
    let data = vec![1.5f32, -2.25, 3.0, 7.5, -0.125, 9.0];
    let v = HostView::from_slice(vec![2, 3], &data).unwrap().unwrap();
    assert_eq!(v.bytes().as_ptr(), data.as_ptr().cast::<u8>(), "a view copies nothing");
    let copied = HostTensor::from_slice(vec![2, 3], &data).unwrap();
    assert_eq!(v.bytes(), copied.bytes());
    assert_eq!(v.to_tensor(), copied);
    assert_eq!(v.to_interp(), copied.to_interp());
    assert_eq!(copied.view(), v);
    for (h, b) in [
        (HostView::from_slice(vec![3], &[f16::from_f32(0.5), f16::MAX, f16::NEG_INFINITY]).unwrap().unwrap(), {
            HostTensor::from_vec(vec![3], vec![f16::from_f32(0.5), f16::MAX, f16::NEG_INFINITY]).unwrap()
        }),
        (
            HostView::from_slice(vec![1], &[bf16::from_f32(-3.0)]).unwrap().unwrap(),
            HostTensor::from_vec(vec![1], vec![bf16::from_f32(-3.0)]).unwrap(),
        ),
        (
            HostView::from_slice(vec![2], &[i32::MIN, 7]).unwrap().unwrap(),
            HostTensor::from_vec(vec![2], vec![i32::MIN, 7]).unwrap(),
        ),
        (
            HostView::from_slice(vec![3], &[true, false, true]).unwrap().unwrap(),
            HostTensor::from_vec(vec![3], vec![true, false, true]).unwrap(),
        ),
    ] {
        assert_eq!(h.to_tensor(), b);
    }
    // A shape the data does not fill is an error, as for host tensors.
    let e = HostView::from_slice(vec![4], &data).unwrap().unwrap_err();
    assert!(matches!(e, RuntimeError::DataLength { expected: 16, got: 24, .. }), "{e}");
}
