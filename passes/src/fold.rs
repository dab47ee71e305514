//! Constant folding by the reference interpreter itself, so a folded value is exactly what the
//! interpreter would compute (rounding, NaN, wrapping and all).

use tcc_ir::interp::{Tensor, run_graph};
use tcc_ir::{DType, Graph, NodeId, Shape, TensorType};

use crate::lang::TOp;

/// The value of the scalar elementwise op `op` over constant operands `values` (of `dtypes`),
/// whose result has dtype `out`; `None` if it cannot be folded.
pub fn fold_constant(op: &TOp, values: &[f64], dtypes: &[DType], out: DType) -> Option<f64> {
    if !op.is_elementwise() || values.len() != dtypes.len() {
        return None;
    }
    let mut g = Graph::new("fold");
    let mut ids: Vec<NodeId> = Vec::with_capacity(values.len());
    for (v, d) in values.iter().zip(dtypes) {
        ids.push(g.constant(*v, *d).ok()?);
    }
    let id = g.push_typed(op.to_ir(&ids)?, TensorType { dtype: out, shape: Shape::scalar() }).ok()?;
    g.outputs.push(id);
    let result = run_graph(&g, &[] as &[Tensor]).ok()?;
    result.first()?.data.first().copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcc_ir::{BinaryOp, UnaryOp};

    #[test]
    fn folds_like_the_interpreter() {
        let f = |op, v: &[f64], d| fold_constant(&op, v, &vec![d; v.len()], d);
        assert_eq!(f(TOp::Binary(BinaryOp::Add), &[2.0, 3.0], DType::F32), Some(5.0));
        assert_eq!(f(TOp::Binary(BinaryOp::Div), &[7.0, 0.0], DType::I32), Some(0.0));
        assert_eq!(f(TOp::Binary(BinaryOp::Add), &[2147483647.0, 1.0], DType::I32), Some(-2147483648.0));
        assert_eq!(f(TOp::Unary(UnaryOp::Neg), &[1.5], DType::F16), Some(-1.5));
    }
}
