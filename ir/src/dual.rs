//! The dual product: two f16/bf16 matmuls of one left operand whose results meet only in an
//! elementwise epilogue, such as a gated MLP's `silu(x @ w_gate) * (x @ w_up)`. One kernel can
//! compute both products of each output tile side by side (reading the shared operand once) and
//! apply the epilogue to both accumulators, so neither product goes through memory.
//!
//! This module is the one matcher of that structure in a graph: the optimizer's classification of
//! kernel bodies and the GPU backend's plan both ask it.

use crate::schedule::is_warpgroup_encoding;
use crate::{DType, Graph, NodeId, Op, Schedule, WgmmaSchedule};

/// The two products of a dual product and the operand they share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DualProduct {
    /// The shared left operand.
    pub a: NodeId,
    /// The two matmul nodes, in graph order.
    pub products: [NodeId; 2],
}

fn is_elementwise(op: &Op) -> bool {
    matches!(op, Op::Unary(..) | Op::Cast(_) | Op::Binary(..) | Op::Compare(..) | Op::Select { .. })
}

/// For each node, whether it is `root` or depends on it.
fn depends_on(g: &Graph, root: NodeId) -> Vec<bool> {
    let mut dep = vec![false; g.nodes.len()];
    for (i, node) in g.nodes.iter().enumerate() {
        dep[i] = i == root.index() || node.op.operands().iter().any(|o| dep.get(o.index()).copied().unwrap_or(false));
    }
    dep
}

impl DualProduct {
    /// The dual product `g` computes, if it is one: exactly two matmuls and no reduction; both
    /// products read the same left operand node, have f16 or bf16 operands of one dtype and the
    /// same result type (rank at least 2); neither depends on the other; every other node that
    /// depends on a product is elementwise of the products' shape; every output depends on a
    /// product and some output on both.
    pub fn find(g: &Graph) -> Option<DualProduct> {
        if g.nodes.iter().any(|n| matches!(n.op, Op::Reduce { .. })) {
            return None;
        }
        let products: Vec<NodeId> =
            (0..g.nodes.len()).filter(|&i| matches!(g.nodes[i].op, Op::MatMul(..))).map(|i| NodeId(i as u32)).collect();
        let [p0, p1] = products[..] else { return None };
        let (Op::MatMul(a0, b0), Op::MatMul(a1, b1)) = (&g.nodes[p0.index()].op, &g.nodes[p1.index()].op) else {
            return None;
        };
        let dtype = g.nodes.get(a0.index())?.ty.dtype;
        let same_dtype = [b0, b1].iter().all(|b| g.nodes.get(b.index()).is_some_and(|n| n.ty.dtype == dtype));
        if a0 != a1 || !matches!(dtype, DType::F16 | DType::BF16) || !same_dtype {
            return None;
        }
        let ty = &g.nodes[p0.index()].ty;
        if &g.nodes[p1.index()].ty != ty || ty.shape.rank() < 2 {
            return None;
        }
        let (d0, d1) = (depends_on(g, p0), depends_on(g, p1));
        if d0[p1.index()] || d1[p0.index()] {
            return None;
        }
        for (i, node) in g.nodes.iter().enumerate() {
            let after = d0[i] || d1[i];
            if after && i != p0.index() && i != p1.index() && (!is_elementwise(&node.op) || node.ty.shape != ty.shape) {
                return None;
            }
        }
        let every_output_after = g.outputs.iter().all(|o| d0.get(o.index()) == Some(&true) || d1[o.index()]);
        let one_after_both = g.outputs.iter().any(|o| d0.get(o.index()) == Some(&true) && d1[o.index()]);
        (every_output_after && one_after_both).then_some(DualProduct { a: *a0, products: [p0, p1] })
    }
}

/// The untuned warpgroup schedule of a dual product whose block tiles hold both products'
/// columns side by side (`n`: both products' columns together): where 64 x 256 tiles make at
/// least eight waves on `cores` SMs, a producer warpgroup and two consumers taking turns on
/// alternate 64-row tiles in four stages, so that one consumer's epilogue (both accumulators
/// rounded, the gate's sigmoid, the products) runs while the other multiplies; else the plain
/// product's without k splits ([`WgmmaSchedule::untuned_unsplit`]). Measured on an H100
/// (BENCHMARKS.md, session 15: the gated MLP's 4096 x 14336 x 4096 pair): 1.355-1.363 ms
/// against 1.45-1.54 ms for the shared 128 x 256 tile, 1.12x the plain GEMM of both products'
/// columns (the shared tile: 1.20x).
pub fn untuned_warpgroup(m: u64, n: u64, k: u64, batch: u64, cores: u64) -> Option<WgmmaSchedule> {
    let tiles = m.div_ceil(u64::from(crate::schedule::WGMMA_M)) * n.div_ceil(256) * batch;
    if tiles >= 8 * cores {
        return Some(WgmmaSchedule {
            consumers: 2,
            producer: true,
            pingpong: true,
            bn: 256,
            stages: 4,
            swizzle: 8,
            tma: true,
            splits: 1,
        });
    }
    WgmmaSchedule::untuned_unsplit(m, n, k, batch, cores)
}

/// Whether the dual-product kernel runs `schedule` as it is. Each block tile of `tile_n` columns
/// holds `tile_n / 2` columns of each product. It runs an `mma.sync` tiling with one k split
/// (`split_k = 1`, and no k split among a block's warps: `warps` is the number of warp tiles),
/// and a warpgroup (wgmma) tiling whose tiles arrive by TMA (without k splits, not 192 wide),
/// with or without a producer warpgroup (where both Bs are stored `[n, k]`: each k-tile of B is
/// two boxes of `tile_n / 2` rows, one per B; a producer's tiling runs as written where its tiles
/// are stored by TMA, else as the same tile without the producer). The GPU backend runs any
/// other schedule as a default one; the optimizer offers only these.
pub fn runs_schedule(schedule: &Schedule) -> bool {
    if is_warpgroup_encoding(schedule) {
        return WgmmaSchedule::decode(schedule).is_ok_and(|w| w.tma && w.splits == 1 && w.bn != 192);
    }
    let warp_tiles = (schedule.tile_m / schedule.micro_m.max(1)) * (schedule.tile_n / schedule.micro_n.max(1));
    schedule.split_k == 1 && schedule.warps == warp_tiles && schedule.tile_n >= 16 && schedule.tile_n.is_multiple_of(16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::parse_graph;

    const GATED: &str = "fn mlp(x: bf16[8, 16], g: bf16[16, 4], u: bf16[16, 4]) -> (bf16[8, 4]) {
  %0 = input 0 : bf16[8, 16]
  %1 = input 1 : bf16[16, 4]
  %2 = input 2 : bf16[16, 4]
  %3 = matmul %0, %1 : bf16[8, 4]
  %4 = sigmoid %3 : bf16[8, 4]
  %5 = mul %3, %4 : bf16[8, 4]
  %6 = matmul %0, %2 : bf16[8, 4]
  %7 = mul %5, %6 : bf16[8, 4]
  return %7
}";

    fn find(text: &str) -> Option<DualProduct> {
        DualProduct::find(&parse_graph(text).unwrap())
    }

    #[test]
    fn large_dual_products_take_turns_on_alternate_tiles() {
        // The gated MLP at 4096 tokens: 64 x 112 tiles of 64 x 256, 54 waves on 132 SMs.
        let w = untuned_warpgroup(4096, 2 * 14336, 4096, 1, 132).expect("a warpgroup schedule");
        assert!(w.pingpong && w.producer && w.tma && (w.bm(), w.bn, w.stages) == (64, 256, 4), "{w:?}");
        assert!(runs_schedule(&w.encode()));
        // Fewer than eight waves: the plain product's tile.
        assert_eq!(
            untuned_warpgroup(512, 2 * 1024, 4096, 1, 132),
            WgmmaSchedule::untuned_unsplit(512, 2048, 4096, 1, 132)
        );
    }

    #[test]
    fn a_gated_product_is_dual() {
        let d = find(GATED).expect("a dual product");
        assert_eq!((d.a, d.products), (NodeId(0), [NodeId(3), NodeId(6)]));
    }

    #[test]
    fn chains_other_operands_f32_and_reductions_are_not_dual() {
        let chain = GATED
            .replace("u: bf16[16, 4]", "u: bf16[4, 4]")
            .replace("%2 = input 2 : bf16[16, 4]", "%2 = input 2 : bf16[4, 4]")
            .replace("%6 = matmul %0, %2", "%6 = matmul %5, %2");
        assert!(find(&chain).is_none());
        let other = "fn f(x: bf16[8, 16], y: bf16[8, 16], g: bf16[16, 4]) -> (bf16[8, 4]) {
  %0 = input 0 : bf16[8, 16]
  %1 = input 1 : bf16[8, 16]
  %2 = input 2 : bf16[16, 4]
  %3 = matmul %0, %2 : bf16[8, 4]
  %4 = matmul %1, %2 : bf16[8, 4]
  %5 = mul %3, %4 : bf16[8, 4]
  return %5
}";
        assert!(find(other).is_none());
        assert!(find(&GATED.replace("bf16", "f32")).is_none());
        let reduced = GATED
            .replace("  return %7", "  %8 = reduce_sum %7 axes=[1] keepdim : bf16[8, 1]\n  return %8")
            .replace("-> (bf16[8, 4])", "-> (bf16[8, 1])");
        assert!(find(&reduced).is_none());
        // Two outputs, each of one product: no output reads both.
        let apart =
            GATED.replace("  return %7", "  return %5, %6").replace("-> (bf16[8, 4])", "-> (bf16[8, 4], bf16[8, 4])");
        assert!(find(&apart).is_none());
    }
}
