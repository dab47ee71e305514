//! Candle CPU storages and layouts to tcc host tensors, and back.

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, Layout, Shape};
use tcc_runtime::{Element, HostTensor, HostView};

use super::CandleError;
use crate::error::Error;
use crate::kernel::TensorArg;

/// Input `index` of `kernel`, stored in `s` with layout `l`, as a kernel argument of the layout's
/// shape holding its elements in logical row-major order: a contiguous f32, f16, bf16 or i32
/// tensor is read in place, any other is copied.
pub(super) fn to_arg<'s>(
    kernel: &str,
    index: usize,
    s: &'s CpuStorage,
    l: &Layout,
) -> Result<TensorArg<'s>, CandleError> {
    let in_place = match s {
        CpuStorage::F32(v) => view(v, l),
        CpuStorage::F16(v) => view(v, l),
        CpuStorage::BF16(v) => view(v, l),
        CpuStorage::I32(v) => view(v, l),
        _ => None,
    };
    match in_place {
        Some(Ok(v)) => Ok(TensorArg::view(v)),
        Some(Err(source)) => Err(tensor_error(kernel, index, source)),
        None => to_host(kernel, index, s, l).map(TensorArg::owned),
    }
}

/// A view of the elements of `data` under a contiguous `l`; `None` for another layout (or one
/// reaching past `data`, which the copy reports).
fn view<'s, T: Element>(data: &'s [T], l: &Layout) -> Option<Result<HostView<'s>, tcc_runtime::RuntimeError>> {
    let (start, end) = l.contiguous_offsets()?;
    HostView::from_slice(l.dims().to_vec(), data.get(start..end)?)
}

fn tensor_error(kernel: &str, index: usize, source: tcc_runtime::RuntimeError) -> CandleError {
    CandleError::Kernel(Error::Tensor {
        kernel: kernel.to_string(),
        param: format!("input {index}"),
        source: Box::new(source),
    })
}

/// Input `index` of `kernel`, stored in `s` with layout `l`, as a host tensor of the layout's
/// shape holding a copy of its elements in logical row-major order.
fn to_host(kernel: &str, index: usize, s: &CpuStorage, l: &Layout) -> Result<HostTensor, CandleError> {
    let layout_error = || CandleError::Layout {
        kernel: kernel.to_string(),
        index,
        dims: l.dims().to_vec(),
        stride: l.stride().to_vec(),
        offset: l.start_offset(),
    };
    let tensor = match s {
        CpuStorage::F32(v) => host(v, l).ok_or_else(layout_error)?,
        CpuStorage::F16(v) => host(v, l).ok_or_else(layout_error)?,
        CpuStorage::BF16(v) => host(v, l).ok_or_else(layout_error)?,
        CpuStorage::I32(v) => host(v, l).ok_or_else(layout_error)?,
        CpuStorage::U8(v) => {
            let bytes = gather(v, l).ok_or_else(layout_error)?;
            let bools: Vec<bool> = bytes.iter().map(|&b| b != 0).collect();
            HostTensor::from_vec(l.dims().to_vec(), bools)
        }
        other => {
            return Err(CandleError::UnsupportedDType {
                kernel: kernel.to_string(),
                index,
                dtype: other.dtype().as_str().to_string(),
            });
        }
    };
    tensor.map_err(|source| tensor_error(kernel, index, source))
}

/// The elements of `data` under `l` as a host tensor (`None` if the layout reaches past `data`).
fn host<T: Element>(data: &[T], l: &Layout) -> Option<Result<HostTensor, tcc_runtime::RuntimeError>> {
    let dims = l.dims().to_vec();
    match l.contiguous_offsets() {
        Some((start, end)) => data.get(start..end).map(|slice| HostTensor::from_slice(dims, slice)),
        None => gather(data, l).map(|v| HostTensor::from_vec(dims, v)),
    }
}

/// The elements of `data` under `l`, in logical row-major order (`None` if the layout reaches
/// past `data`).
fn gather<T: Copy>(data: &[T], l: &Layout) -> Option<Vec<T>> {
    let dims = l.dims();
    let stride = l.stride();
    let count: usize = dims.iter().product();
    let mut out = Vec::with_capacity(count);
    if count == 0 {
        return Some(out);
    }
    // An odometer over the multi-index; `offset` follows it through the strides.
    let mut index = vec![0usize; dims.len()];
    let mut offset = l.start_offset();
    loop {
        out.push(*data.get(offset)?);
        let mut axis = dims.len();
        loop {
            if axis == 0 {
                return Some(out);
            }
            axis -= 1;
            index[axis] += 1;
            offset += stride[axis];
            if index[axis] < dims[axis] {
                break;
            }
            offset -= stride[axis] * dims[axis];
            index[axis] = 0;
        }
    }
}

/// Output `t` of `kernel` as a candle CPU storage and its shape.
pub(super) fn to_cpu_storage(kernel: &str, t: HostTensor) -> Result<(CpuStorage, Shape), CandleError> {
    let internal = |e: tcc_runtime::RuntimeError| {
        CandleError::Kernel(Error::Internal { kernel: kernel.to_string(), message: format!("an output: {e}") })
    };
    let shape = Shape::from(t.shape().to_vec());
    let storage = match t.dtype() {
        tcc_ir::DType::F32 => CpuStorage::F32(t.to_vec().map_err(internal)?),
        tcc_ir::DType::F16 => CpuStorage::F16(t.to_vec().map_err(internal)?),
        tcc_ir::DType::BF16 => CpuStorage::BF16(t.to_vec().map_err(internal)?),
        tcc_ir::DType::I32 => CpuStorage::I32(t.to_vec().map_err(internal)?),
        tcc_ir::DType::Bool => {
            CpuStorage::U8(t.to_vec::<bool>().map_err(internal)?.into_iter().map(u8::from).collect())
        }
    };
    Ok((storage, shape))
}
