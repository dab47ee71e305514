//! Tensor maps for the tensor memory accelerator (TMA, `cp.async.bulk.tensor`, `sm_90`+): what
//! an entry that loads tiles through TMA needs the runtime to encode before each launch.
//!
//! Such an entry takes, after the scratch pointer of the kernel ABI, one 128-byte tensor map per
//! [`TensorMapSpec`] of its [`super::PtxStep`], by value (`.param .align 64 .b8 [128]`, a
//! `grid_constant` parameter whose address the kernel passes to the copies). The runtime fills
//! each with `cuTensorMapEncodeTiled` from the spec and the device address of the buffer it
//! names: interleave none, 128-byte swizzle, element strides 1, zero fill outside the tensor.

use tcc_ir::DType;

/// The kernel buffer a tensor map reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TmaBuffer {
    /// Input pointer `i` of the kernel ABI.
    Input(usize),
    /// Output pointer `k`.
    Output(usize),
    /// The scratch buffer, from this byte offset on (a multiple of 16).
    Scratch(u64),
}

/// One tensor map an entry takes by value, for the runtime to encode at launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorMapSpec {
    /// Where the tensor lives.
    pub buffer: TmaBuffer,
    /// Element type (f16 or bf16).
    pub dtype: DType,
    /// Extent of each dimension, innermost first (rank 1 to 5).
    pub dims: Vec<u64>,
    /// Byte stride of every dimension but the innermost (`dims.len() - 1` entries), each a
    /// multiple of 16.
    pub strides: Vec<u64>,
    /// The box (tile) one copy moves, innermost first; the innermost spans at most 128 bytes
    /// (the swizzle width).
    pub box_dims: Vec<u32>,
}

impl TensorMapSpec {
    /// Bytes one copy of the whole box delivers (out-of-bounds elements included, zero-filled).
    pub fn box_bytes(&self) -> u64 {
        self.box_dims.iter().map(|&d| u64::from(d)).product::<u64>() * self.dtype.size_bytes() as u64
    }
}

/// The LLVM parameter declaration of tensor map `j` of an entry (`%tmap{j}`).
pub(crate) fn param(j: usize) -> String {
    format!("ptr byval([128 x i8]) align 64 %tmap{j}")
}
