//! How far a correct kernel's results may be from the interpreter's because it sums in f32 in
//! another order.
//!
//! The interpreter sums in f64; a kernel accumulates a matmul's products or a reduction's terms in
//! f32, in an order the semantics leave open (tiles, k splits, warps). Each f32 addition rounds by
//! at most 2^-24 of the partial sum, and partial sums of `n` unit-scale terms of random sign grow
//! as `√k`, so the error of the whole sum has a standard deviation of about `2^-24 · n / √2`
//! (measured on an H100: 0.004 for 49,152-term dot products of standard normal f16 values, twice
//! that figure). Every comparison that checks a kernel against the interpreter on standard normal
//! inputs (the tuner's validation, the GPU tests) allows [`ACCUMULATION_STEPS`] times `2^-24 · n`
//! on top of its per-dtype bound: about 11 of those standard deviations, while a wrong kernel is
//! off by the size of the values themselves (about `√n`).

use crate::graph::Graph;
use crate::op::Op;
use crate::shape::Bindings;

/// Multiples of `2^-24 · n` allowed for a sum of `n` terms.
pub const ACCUMULATION_STEPS: f64 = 16.0;

/// The absolute error a sum of `terms` unit-scale terms accumulated in f32 may carry (0 for one
/// term).
pub fn accumulation_allowance(terms: u64) -> f64 {
    if terms <= 1 { 0.0 } else { ACCUMULATION_STEPS * (-24f64).exp2() * terms as f64 }
}

/// The most terms any one value of `graph` sums under `bindings`: a matmul's inner dimension or
/// the elements a reduction combines into one output; 1 for a graph without either, and for
/// shapes that do not resolve.
pub fn longest_sum(graph: &Graph, bindings: &Bindings) -> u64 {
    let resolve = |id: crate::NodeId| graph.ty(id).and_then(|t| t.shape.resolve(bindings));
    graph
        .nodes
        .iter()
        .filter_map(|node| match &node.op {
            Op::MatMul(a, _) => resolve(*a).and_then(|d| d.last().copied()).map(|k| k as u64),
            Op::Reduce { input, axes, .. } => {
                let dims = resolve(*input)?;
                Some(axes.iter().filter_map(|&a| dims.get(a)).map(|&d| d as u64).product())
            }
            _ => None,
        })
        .max()
        .unwrap_or(1)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DType, Dim, ReduceOp, Shape, TensorType};

    #[test]
    fn the_longest_sum_is_a_matmuls_depth_or_a_reductions_extent() {
        let mut g = Graph::new("g");
        let t = |dims: Vec<Dim>| TensorType { dtype: DType::F32, shape: Shape(dims) };
        let a = g.add_param("a", t(vec![Dim::Const(4), Dim::Var("K".into())])).unwrap();
        let b = g.add_param("b", t(vec![Dim::Var("K".into()), Dim::Const(3)])).unwrap();
        let c = g.push(Op::MatMul(a, b)).unwrap();
        g.push(Op::Reduce { op: ReduceOp::Sum, input: c, axes: vec![0, 1], keepdim: false }).unwrap();
        let bindings: Bindings = [("K".to_string(), 5000u64)].into_iter().collect();
        assert_eq!(longest_sum(&g, &bindings), 5000);
        let small: Bindings = [("K".to_string(), 2u64)].into_iter().collect();
        assert_eq!(longest_sum(&g, &small), 12);
        assert_eq!(longest_sum(&g, &Bindings::new()), 12, "unbound shapes are skipped");
    }

    #[test]
    fn the_allowance_grows_with_the_terms() {
        assert_eq!(accumulation_allowance(1), 0.0);
        assert!((accumulation_allowance(49_152) - 0.046875).abs() < 1e-12);
        assert!(accumulation_allowance(4096) < 0.004);
    }
}
