//! TMA tensor maps: the 128-byte descriptors an entry takes by value after its scratch pointer
//! ([`tcc_codegen::ptx::PtxStep::tensor_maps`]), encoded before each launch with the driver's
//! `cuTensorMapEncodeTiled` from a [`TensorMapSpec`] and the device address of the buffer it
//! names.
//!
//! Every limit the driver puts on a tiled map is checked first by [`validate`] (a pure function),
//! so a bad spec is a [`CudaError::TensorMap`](super::error::CudaError::TensorMap) naming the
//! kernel, the entry and the field, not an opaque `CUDA_ERROR_INVALID_VALUE`. [`validate`] also
//! checks that the tensor the map describes lies inside its buffer, which is what makes passing
//! the map to a kernel memory-safe.

use cudarc::driver::DeviceRepr;
use cudarc::driver::sys::{
    self, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave, CUtensorMapL2promotion,
    CUtensorMapSwizzle,
};
use tcc_codegen::ptx::{TensorMapSpec, TmaBuffer};
use tcc_ir::DType;

/// Highest tensor rank a tiled map takes.
const MAX_RANK: usize = 5;
/// Largest extent of one dimension.
const MAX_DIM: u64 = 1 << 32;
/// Byte strides must be below this.
const STRIDE_LIMIT: u64 = 1 << 40;
/// Largest extent of one box dimension.
const MAX_BOX: u32 = 256;
/// Alignment of the base address, of every stride and of the innermost box row, in bytes.
const ALIGN: u64 = 16;
/// The swizzle width: the innermost box row spans at most this many bytes.
const SWIZZLE_BYTES: u64 = 128;

/// One encoded tensor map, laid out as the driver's `CUtensorMap` and as an entry takes it
/// (`.param .align 64 .b8 [128]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(64))]
pub(crate) struct TensorMap([u64; 16]);

// SAFETY: a tensor map is 128 plain bytes with no pointers the host owns (the device address it
// holds is checked against its buffer by `validate`); it is passed by value as the entry's
// 128-byte `.param`, which the driver copies from this struct at launch.
unsafe impl DeviceRepr for TensorMap {}

/// Where a tensor map's buffer is among a launch's buffers: `Input(i)` is `inputs[i]`,
/// `Output(k)` is `outputs[k]`, `Scratch(off)` is `scratch` from byte `off` (which must leave at
/// least 16 of its `scratch_bytes`). Returns the buffer and the byte offset into it.
pub(crate) fn locate<B: Copy>(
    buffer: TmaBuffer,
    inputs: &[B],
    outputs: &[B],
    scratch: B,
    scratch_bytes: u64,
) -> Result<(B, u64), String> {
    match buffer {
        TmaBuffer::Input(i) => inputs
            .get(i)
            .map(|&b| (b, 0))
            .ok_or_else(|| format!("`buffer` is input {i}, but the kernel has {} input(s)", inputs.len())),
        TmaBuffer::Output(k) => outputs
            .get(k)
            .map(|&b| (b, 0))
            .ok_or_else(|| format!("`buffer` is output {k}, but the kernel has {} output(s)", outputs.len())),
        TmaBuffer::Scratch(off) => match off.checked_add(ALIGN) {
            Some(end) if end <= scratch_bytes => Ok((scratch, off)),
            _ => Err(format!("`buffer` is scratch from byte {off}, but the scratch buffer has {scratch_bytes} bytes")),
        },
    }
}

/// Checks `spec` against every limit of `cuTensorMapEncodeTiled` with interleave none and a
/// 128-byte swizzle, for a tensor at device address `base` with `available` bytes of its buffer
/// from `base` on; returns the driver's data type. The error names the field that is wrong.
pub(crate) fn validate(spec: &TensorMapSpec, base: u64, available: u64) -> Result<CUtensorMapDataType, String> {
    let rank = spec.dims.len();
    if !(1..=MAX_RANK).contains(&rank) {
        return Err(format!("rank (`dims.len()`) is {rank}; it must be 1 to {MAX_RANK}"));
    }
    if spec.box_dims.len() != rank {
        return Err(format!("`box_dims` has {} entries for a rank-{rank} tensor", spec.box_dims.len()));
    }
    if spec.strides.len() != rank - 1 {
        return Err(format!(
            "`strides` has {} entries for a rank-{rank} tensor (needs {})",
            spec.strides.len(),
            rank - 1
        ));
    }
    let data_type = match spec.dtype {
        DType::F16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        DType::BF16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        other => return Err(format!("`dtype` is {other}; tensor maps take f16 or bf16")),
    };
    if !base.is_multiple_of(ALIGN) {
        return Err(format!("the base address {base:#x} is not a multiple of {ALIGN}"));
    }
    for (d, &n) in spec.dims.iter().enumerate() {
        if !(1..=MAX_DIM).contains(&n) {
            return Err(format!("`dims[{d}]` is {n}; it must be 1 to {MAX_DIM}"));
        }
    }
    for (d, &s) in spec.strides.iter().enumerate() {
        if !s.is_multiple_of(ALIGN) || s >= STRIDE_LIMIT {
            return Err(format!("`strides[{d}]` is {s}; it must be a multiple of {ALIGN} below {STRIDE_LIMIT}"));
        }
    }
    for (d, &b) in spec.box_dims.iter().enumerate() {
        if !(1..=MAX_BOX).contains(&b) {
            return Err(format!("`box_dims[{d}]` is {b}; it must be 1 to {MAX_BOX}"));
        }
    }
    let elem = spec.dtype.size_bytes() as u64;
    let row = u64::from(spec.box_dims[0]) * elem;
    if !row.is_multiple_of(ALIGN) || row > SWIZZLE_BYTES {
        return Err(format!(
            "`box_dims[0]` spans {row} bytes; it must be a multiple of {ALIGN} of at most {SWIZZLE_BYTES} (the swizzle)"
        ));
    }
    // The last byte the map can address, plus one: the driver never reads outside the dims.
    let elem = u128::from(elem);
    let span = elem
        + u128::from(spec.dims[0] - 1) * elem
        + spec.dims[1..].iter().zip(&spec.strides).map(|(&n, &s)| u128::from(n - 1) * u128::from(s)).sum::<u128>();
    if span > u128::from(available) {
        return Err(format!("`dims` and `strides` span {span} bytes, but the buffer has {available} from the base"));
    }
    Ok(data_type)
}

/// Encodes the tensor map of `spec` for the tensor at device address `base` (the buffer's
/// address plus the spec's offset), which has `available` bytes of its buffer from there on. The
/// driver must be loaded (a device is open). The error says what is wrong (the caller names the
/// kernel, entry and map: [`CudaError::TensorMap`](super::error::CudaError::TensorMap)).
pub(crate) fn encode(spec: &TensorMapSpec, base: u64, available: u64) -> Result<TensorMap, String> {
    let data_type = validate(spec, base, available)?;
    if !encoder_present() {
        return Err("the CUDA driver has no cuTensorMapEncodeTiled (it needs CUDA 12.0 or later)".into());
    }
    let rank = u32::try_from(spec.dims.len()).map_err(|_| "rank out of range".to_string())?;
    let element_strides = [1u32; MAX_RANK];
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    // SAFETY: `map` is a writable CUtensorMap; `dims` and `box_dims` have `rank` entries,
    // `strides` `rank - 1` and `element_strides` at least `rank` (checked by `validate`), all
    // live across the call; the driver only reads them and writes `map`. `base` is an address the
    // driver does not dereference here.
    let result = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            data_type,
            rank,
            base as *mut std::ffi::c_void,
            spec.dims.as_ptr(),
            spec.strides.as_ptr(),
            spec.box_dims.as_ptr(),
            element_strides.as_ptr(),
            CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    result.result().map_err(|e| format!("cuTensorMapEncodeTiled failed: {e}"))?;
    Ok(TensorMap(map.opaque))
}

/// Whether the loaded driver exports `cuTensorMapEncodeTiled` (cudarc panics calling a missing
/// symbol); looked up once per process, not at every launch.
#[cfg(not(feature = "cuda-dynamic-linking"))]
fn encoder_present() -> bool {
    static PRESENT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // SAFETY: only looks the symbol up in the driver library, which is loaded (a device is open);
    // the symbol is not called.
    *PRESENT.get_or_init(|| unsafe { sys::culib().get::<unsafe extern "C" fn()>(b"cuTensorMapEncodeTiled").is_ok() })
}

/// With cudarc linked against libcuda (feature `cuda-dynamic-linking`) every symbol it names was
/// resolved when the program was loaded.
#[cfg(feature = "cuda-dynamic-linking")]
fn encoder_present() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 256 x 512 f16 row-major tensor (innermost first: 512 columns, 256 rows) read in
    /// 64 x 128 boxes.
    fn spec() -> TensorMapSpec {
        TensorMapSpec {
            buffer: TmaBuffer::Input(0),
            dtype: DType::F16,
            dims: vec![512, 256],
            strides: vec![1024],
            box_dims: vec![64, 128],
        }
    }

    const BYTES: u64 = 256 * 1024;

    fn rejects(spec: &TensorMapSpec, base: u64, available: u64, field: &str) {
        let err = validate(spec, base, available).expect_err("spec should be rejected");
        assert!(err.contains(field), "error {err:?} should name {field:?}");
    }

    #[test]
    fn layout_matches_the_driver() {
        assert_eq!(std::mem::size_of::<TensorMap>(), 128);
        assert_eq!(std::mem::align_of::<TensorMap>(), 64);
        assert_eq!(std::mem::size_of::<TensorMap>(), std::mem::size_of::<sys::CUtensorMap>());
    }

    #[test]
    fn accepts_a_valid_spec() {
        let dt = validate(&spec(), 0x7f00_0000_0100, BYTES).unwrap();
        assert_eq!(dt, CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
        let bf16 = TensorMapSpec { dtype: DType::BF16, ..spec() };
        assert_eq!(validate(&bf16, 0, BYTES).unwrap(), CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
        // Rank 1 and rank 5, limits at their edges.
        let r1 = TensorMapSpec { dims: vec![MAX_DIM], strides: vec![], box_dims: vec![8], ..spec() };
        assert!(validate(&r1, 16, 2 * MAX_DIM).is_ok());
        let r5 = TensorMapSpec {
            dims: vec![64, 2, 2, 2, 2],
            strides: vec![128, 256, 512, 1024],
            box_dims: vec![64, 1, 1, 1, MAX_BOX],
            ..spec()
        };
        assert!(validate(&r5, 0, 2048).is_ok());
    }

    #[test]
    fn rejects_bad_ranks_and_lengths() {
        rejects(&TensorMapSpec { dims: vec![], strides: vec![], box_dims: vec![], ..spec() }, 0, BYTES, "rank");
        let r6 = TensorMapSpec { dims: vec![8; 6], strides: vec![16; 5], box_dims: vec![8; 6], ..spec() };
        rejects(&r6, 0, BYTES, "rank");
        rejects(&TensorMapSpec { box_dims: vec![64], ..spec() }, 0, BYTES, "box_dims");
        rejects(&TensorMapSpec { strides: vec![], ..spec() }, 0, BYTES, "strides");
    }

    #[test]
    fn rejects_other_dtypes() {
        for dtype in [DType::F32, DType::I32, DType::Bool] {
            rejects(&TensorMapSpec { dtype, ..spec() }, 0, BYTES, "dtype");
        }
    }

    #[test]
    fn rejects_a_misaligned_base() {
        rejects(&spec(), 8, BYTES, "base address");
    }

    #[test]
    fn rejects_bad_dims() {
        rejects(&TensorMapSpec { dims: vec![512, 0], ..spec() }, 0, BYTES, "dims[1]");
        let big = TensorMapSpec { dims: vec![MAX_DIM + 1], strides: vec![], box_dims: vec![8], ..spec() };
        rejects(&big, 0, u64::MAX, "dims[0]");
    }

    #[test]
    fn rejects_bad_strides() {
        rejects(&TensorMapSpec { strides: vec![1000], ..spec() }, 0, BYTES, "strides[0]");
        rejects(&TensorMapSpec { strides: vec![STRIDE_LIMIT], ..spec() }, 0, u64::MAX, "strides[0]");
    }

    #[test]
    fn rejects_bad_boxes() {
        rejects(&TensorMapSpec { box_dims: vec![64, 0], ..spec() }, 0, BYTES, "box_dims[1]");
        rejects(&TensorMapSpec { box_dims: vec![64, MAX_BOX + 1], ..spec() }, 0, BYTES, "box_dims[1]");
        // 4 f16 = 8 bytes: not a multiple of 16; 128 f16 = 256 bytes: wider than the swizzle.
        rejects(&TensorMapSpec { box_dims: vec![4, 128], ..spec() }, 0, BYTES, "box_dims[0]");
        rejects(&TensorMapSpec { box_dims: vec![128, 128], ..spec() }, 0, BYTES, "box_dims[0]");
    }

    #[test]
    fn rejects_a_tensor_larger_than_its_buffer() {
        assert!(validate(&spec(), 0, BYTES).is_ok());
        rejects(&spec(), 0, BYTES - 1, "dims");
    }

    #[test]
    fn locates_buffers() {
        let (inputs, outputs) = (["a", "b"], ["c"]);
        assert_eq!(locate(TmaBuffer::Input(1), &inputs, &outputs, "s", 64), Ok(("b", 0)));
        assert_eq!(locate(TmaBuffer::Output(0), &inputs, &outputs, "s", 64), Ok(("c", 0)));
        assert_eq!(locate(TmaBuffer::Scratch(48), &inputs, &outputs, "s", 64), Ok(("s", 48)));
        let missing = [TmaBuffer::Input(2), TmaBuffer::Output(1), TmaBuffer::Scratch(49), TmaBuffer::Scratch(u64::MAX)];
        for buffer in missing {
            let err = locate(buffer, &inputs, &outputs, "s", 64).unwrap_err();
            assert!(err.contains("`buffer`"), "{err}");
        }
    }
}
