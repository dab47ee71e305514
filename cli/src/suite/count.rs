//! The work of a kernel that `tcc bench FILE` reports rates for: the bytes it must move at least
//! (every input read once, every output written once) and, for kernels with a matrix product, its
//! floating-point operations (2·m·n·k per product, one per element of every other op).

use tcc_ir::{Bindings, Kernel, Op, TensorType};

/// Compulsory traffic and countable arithmetic of one kernel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Work {
    /// Bytes read and written at least once.
    pub bytes: f64,
    /// Floating-point operations, for kernels whose rate in FLOP/s means something (those with a
    /// matrix product); `None` for memory-bound classes, which are judged by bytes/s.
    pub flops: Option<f64>,
}

fn size(ty: &TensorType, bindings: &Bindings) -> Option<f64> {
    let dims = ty.shape.resolve(bindings)?;
    Some(dims.iter().map(|&d| d as f64).product())
}

/// The work of `kernel` under `bindings` (`None` when a shape is unbound).
pub fn kernel_work(kernel: &Kernel, bindings: &Bindings) -> Option<Work> {
    let g = &kernel.graph;
    let mut bytes = 0.0;
    for p in &g.params {
        bytes += size(&p.ty, bindings)? * p.ty.dtype.size_bytes() as f64;
    }
    for &o in &g.outputs {
        let ty = g.ty(o)?;
        bytes += size(ty, bindings)? * ty.dtype.size_bytes() as f64;
    }
    let mut flops = 0.0;
    let mut products = false;
    for node in &g.nodes {
        let elements = size(&node.ty, bindings)?;
        flops += match node.op {
            Op::MatMul(a, _) => {
                products = true;
                let k = g.ty(a)?.shape.0.last()?.resolve(bindings)? as f64;
                2.0 * elements * k
            }
            // Data movement and leaves compute nothing.
            Op::Input { .. }
            | Op::Constant { .. }
            | Op::Broadcast(_)
            | Op::Reshape(_)
            | Op::Permute { .. }
            | Op::Slice { .. }
            | Op::Concat { .. } => 0.0,
            Op::Reduce { input, .. } => size(g.ty(input)?, bindings)?,
            _ => elements,
        };
    }
    Some(Work { bytes, flops: products.then_some(flops) })
}
