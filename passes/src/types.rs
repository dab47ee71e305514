//! The type of an e-node, computed by the IR's own typing rules ([`tcc_ir::infer`]), so the optimizer
//! can never disagree with the verifier about which ops are well-typed.

use tcc_ir::infer::{check_declared, infer};
use tcc_ir::{Graph, NodeId, Shape, TensorType, TypeError};

use crate::lang::TOp;

/// The result type of `op` over operands of types `operands`, or why it is ill-typed.
///
/// Kernel nodes are typed by their body, not here: for them this returns an error.
pub fn type_of(op: &TOp, operands: &[&TensorType]) -> Result<TensorType, TypeError> {
    let mut g = Graph::new("typing");
    let mut ids: Vec<NodeId> = Vec::with_capacity(operands.len());
    for (i, ty) in operands.iter().enumerate() {
        let id = g.add_param(format!("p{i}"), (*ty).clone()).map_err(|_| TypeError::UnknownParam(i))?;
        ids.push(id);
    }
    if let TOp::Input(index) = op {
        return Err(TypeError::UnknownParam(*index));
    }
    let ir = op.to_ir(&ids).ok_or(TypeError::UnknownParam(usize::MAX))?;
    let declared = match op {
        TOp::Const { dtype, .. } => Some(TensorType { dtype: *dtype, shape: Shape::scalar() }),
        TOp::Iota(len) => Some(TensorType { dtype: tcc_ir::DType::I32, shape: Shape(vec![len.clone()]) }),
        TOp::Cast(dtype) => {
            let shape = operands.first().map(|t| t.shape.clone()).unwrap_or_default();
            Some(TensorType { dtype: *dtype, shape })
        }
        TOp::Broadcast(shape) | TOp::Reshape(shape) => {
            let dtype = operands.first().map(|t| t.dtype).ok_or(TypeError::UnknownOperand(NodeId(0)))?;
            Some(TensorType { dtype, shape: shape.clone() })
        }
        _ => None,
    };
    match declared {
        Some(ty) => {
            check_declared(&g, &ir, &ty)?;
            Ok(ty)
        }
        None => infer(&g, &ir),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcc_ir::{BinaryOp, DType};

    fn t(dims: &[u64]) -> TensorType {
        TensorType { dtype: DType::F32, shape: Shape::from_consts(dims) }
    }

    #[test]
    fn binary_broadcasts() {
        let ty = type_of(&TOp::Binary(BinaryOp::Add), &[&t(&[4, 3]), &t(&[3])]).unwrap();
        assert_eq!(ty, t(&[4, 3]));
    }

    #[test]
    fn matmul_inner_mismatch_is_an_error() {
        assert!(type_of(&TOp::MatMul, &[&t(&[4, 3]), &t(&[4, 3])]).is_err());
    }

    #[test]
    fn broadcast_checks_target() {
        assert!(type_of(&TOp::Broadcast(Shape::from_consts(&[2, 4, 3])), &[&t(&[4, 3])]).is_ok());
        assert!(type_of(&TOp::Broadcast(Shape::from_consts(&[2, 4, 5])), &[&t(&[4, 3])]).is_err());
    }
}
