//! What a run holds in memory, counted before anything is compiled or allocated: parameters,
//! intermediates and outputs together, against a limit (`tcc run --max-memory`,
//! [`crate::Device::with_max_memory`]), and every tensor below the element-count limit of
//! contract §6.

use tcc_ir::{Bindings, Graph, Op, Program, TensorType};

/// Why a run is refused before it starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    /// Its tensors together need more than the limit.
    #[error(
        "the run needs {needed} bytes, more than the limit of {limit}; the largest tensor is {tensor}, {ty}, {bytes} bytes"
    )]
    OverLimit {
        /// Bytes of every tensor together.
        needed: u64,
        /// The limit.
        limit: u64,
        /// The largest tensor (`parameter `x``, `the output of kernel `k0``).
        tensor: String,
        /// Its dtype and dims (`f32[100000, 100000]`).
        ty: String,
        /// Its size in bytes.
        bytes: u64,
    },
    /// One tensor has 2^40 elements or more, or its size cannot be computed.
    #[error("{tensor} of type {ty} is too large")]
    TooLarge {
        /// The tensor.
        tensor: String,
        /// Its type (with shape variables).
        ty: String,
    },
}

/// Refuses `program` under `bindings` when a tensor is too large or all of them together need
/// more than `limit` bytes. Counts what a compiled program holds: its parameters and buffers
/// (intermediates and outputs).
pub fn check_program(program: &Program, bindings: &Bindings, limit: u64) -> Result<(), MemoryError> {
    let params = program.params.iter().map(|p| (format!("parameter `{}`", p.name), &p.ty));
    let buffers = program.buffers.iter().enumerate().map(|(i, ty)| {
        let writer = program
            .launches
            .iter()
            .find(|l| l.outputs.contains(&tcc_ir::ValueRef::Buffer(i)))
            .map_or_else(|| format!("buffer {i}"), |l| format!("the output of kernel `{}`", l.kernel.name));
        (writer, ty)
    });
    check(params.chain(buffers), bindings, limit)
}

/// [`check_program`] for a graph run as it is (the interpreter): the value of every node, its
/// parameters included.
pub fn check_graph(graph: &Graph, bindings: &Bindings, limit: u64) -> Result<(), MemoryError> {
    let nodes = graph.nodes.iter().enumerate().map(|(i, n)| {
        let name = match &n.op {
            Op::Input { index } => graph.params.get(*index).map(|p| format!("parameter `{}`", p.name)),
            _ => None,
        };
        (name.unwrap_or_else(|| format!("value %{i} ({})", n.op.kind_name())), &n.ty)
    });
    check(nodes, bindings, limit)
}

fn check<'a>(
    tensors: impl Iterator<Item = (String, &'a TensorType)>,
    bindings: &Bindings,
    limit: u64,
) -> Result<(), MemoryError> {
    let mut needed: u64 = 0;
    let mut largest: Option<(String, String, u64)> = None;
    for (tensor, ty) in tensors {
        let dims = ty.shape.resolve(bindings);
        let numel = dims.as_ref().and_then(|d| d.iter().try_fold(1u64, |acc, &x| acc.checked_mul(x as u64)));
        let bytes = numel.and_then(|n| n.checked_mul(ty.dtype.size_bytes() as u64));
        let Some(bytes) = bytes.filter(|_| numel.is_some_and(|n| n < tcc_ir::limits::MAX_ELEMENTS)) else {
            return Err(MemoryError::TooLarge { tensor, ty: ty.to_string() });
        };
        needed = needed.saturating_add(bytes);
        if largest.as_ref().is_none_or(|(_, _, b)| bytes > *b) {
            largest = Some((tensor, format!("{}{:?}", ty.dtype, dims.unwrap_or_default()), bytes));
        }
    }
    if needed > limit {
        let (tensor, ty, bytes) = largest.unwrap_or_default();
        return Err(MemoryError::OverLimit { needed, limit, tensor, ty, bytes });
    }
    Ok(())
}
