//! The cost model: time = max(bytes moved / bandwidth, flops / throughput) / schedule efficiency
//! + launch overhead, per op (for the algebra phase) and per kernel (for fusion and schedules).

use tcc_ir::attention::GpuAttention;
use tcc_ir::schedule::{GpuAttentionSchedule, is_warpgroup_encoding};
use tcc_ir::{Bindings, DType, Dim, KernelClass, Schedule, Shape, TensorType, UnaryOp, WgmmaSchedule};

use crate::body::{Body, BodyNode};
use crate::lang::TOp;
use crate::schedule::has_warpgroup_mma;
use crate::target::TargetModel;

/// How much faster a warpgroup (wgmma) GEMM runs than an mma.sync one on the same target: the
/// 4096³ f16 GEMM on an H100 took 0.207 ms with wgmma and 0.324 ms with mma.sync (BENCHMARKS.md).
const WARPGROUP_SPEEDUP: f64 = 1.5;

/// The size the cost model assumes for a shape variable that is not bound.
pub const DEFAULT_DIM: u64 = 1024;

/// The size of one dimension under `bindings` (unbound variables count as [`DEFAULT_DIM`]).
pub fn dim(d: &Dim, bindings: &Bindings) -> f64 {
    d.resolve(bindings).unwrap_or(DEFAULT_DIM) as f64
}

/// The element count of `shape` under `bindings`.
pub fn numel(shape: &Shape, bindings: &Bindings) -> f64 {
    shape.0.iter().map(|d| dim(d, bindings)).product()
}

/// The bytes of a tensor of type `ty`.
pub fn bytes(ty: &TensorType, bindings: &Bindings) -> f64 {
    numel(&ty.shape, bindings) * ty.dtype.size_bytes() as f64
}

/// Flops charged per element of an op (transcendentals cost several).
fn op_weight(op: &TOp) -> f64 {
    match op {
        TOp::Unary(UnaryOp::Exp | UnaryOp::Log | UnaryOp::Tanh | UnaryOp::Sigmoid | UnaryOp::Gelu) => 8.0,
        TOp::Unary(UnaryOp::Sqrt | UnaryOp::Rsqrt) | TOp::Binary(tcc_ir::BinaryOp::Div) => 4.0,
        TOp::Binary(tcc_ir::BinaryOp::Pow) => 16.0,
        op if op.is_elementwise() => 1.0,
        TOp::Reduce { .. } => 1.0,
        _ => 0.0,
    }
}

/// The model's estimate of one kernel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Estimated time, seconds.
    pub seconds: f64,
    /// Bytes moved to and from memory.
    pub bytes: f64,
    /// Floating-point operations.
    pub flops: f64,
    /// True when memory traffic, not arithmetic, bounds the kernel.
    pub memory_bound: bool,
}

/// The cost of one op run on its own (the algebra and layout phase's extraction cost).
pub fn op_seconds(op: &TOp, out: &TensorType, operands: &[&TensorType], target: &TargetModel, b: &Bindings) -> f64 {
    if !op.is_compute() {
        return 0.0;
    }
    let moved: f64 = bytes(out, b) + operands.iter().map(|t| bytes(t, b)).sum::<f64>();
    let flops = match op {
        TOp::MatMul => {
            2.0 * numel(&out.shape, b) * operands.first().and_then(|t| t.shape.0.last()).map_or(1.0, |d| dim(d, b))
        }
        TOp::Reduce { .. } => operands.first().map_or(0.0, |t| numel(&t.shape, b)),
        _ => numel(&out.shape, b) * op_weight(op),
    };
    let throughput = if *op == TOp::MatMul { target.matmul_flops(out.dtype) } else { target.flops_f32 };
    (moved / target.bandwidth).max(flops / throughput) + target.launch_overhead
}

fn ceil_div(a: f64, b: f64) -> f64 {
    (a / b.max(1.0)).ceil()
}

/// `a / b`, or 1 when `b` is not positive (an empty tensor is not inefficient, just empty).
fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 1.0 }
}

/// `(batch, m, n, k)` of the matmul in a body, and the indices of its operands.
fn matmul_dims(body: &Body, b: &Bindings) -> Option<(f64, f64, f64, f64)> {
    body.nodes.iter().enumerate().find_map(|(i, n)| match n {
        BodyNode::Op(TOp::MatMul, kids) => {
            let out = &body.types.get(i)?.shape;
            let a = &body.types.get(*kids.first()?)?.shape;
            let r = out.rank();
            let m = dim(out.0.get(r.checked_sub(2)?)?, b);
            let n = dim(out.0.get(r - 1)?, b);
            let k = dim(a.0.last()?, b);
            let batch: f64 = out.0.iter().take(r - 2).map(|d| dim(d, b)).product();
            Some((batch, m, n, k))
        }
        _ => None,
    })
}

/// The flops of every matmul of `body` (two per multiply-add).
fn product_flops(body: &Body, b: &Bindings) -> f64 {
    let mut flops = 0.0;
    for (i, n) in body.nodes.iter().enumerate() {
        if let BodyNode::Op(TOp::MatMul, kids) = n
            && let (Some(out), Some(a)) = (body.types.get(i), kids.first().and_then(|k| body.types.get(*k)))
        {
            flops += 2.0 * numel(&out.shape, b) * a.shape.0.last().map_or(1.0, |d| dim(d, b));
        }
    }
    flops
}

/// For each value of `body`: is it computed before a matmul and read by it (a prologue op, run
/// again for every tile that loads it)? Epilogue ops, after the matmul, run once per output element.
fn matmul_prologue(body: &Body) -> Vec<bool> {
    let mut feeds = vec![false; body.nodes.len()];
    for (i, node) in body.nodes.iter().enumerate().rev() {
        if let BodyNode::Op(op, kids) = node
            && (*op == TOp::MatMul || feeds[i])
        {
            for &k in kids {
                if let Some(f) = feeds.get_mut(k) {
                    *f = true;
                }
            }
        }
    }
    feeds
}

/// Whether a product whose B joins several tensors along its columns (a joined product) reads
/// them in place under `schedule`: an `mma.sync` tiling (chunk by chunk), or a TMA warpgroup tile
/// whose columns divide every part's; true for any other product.
fn reads_joined_b_in_place(body: &Body, schedule: &Schedule, b: &Bindings) -> bool {
    let Some(kids) = crate::classify::joined_b_parts(body) else { return true };
    // As the backend reads them: each part a weight's transpose (`[n, k]` rows in memory) of a
    // depth that is a multiple of 8, its columns a multiple of a warpgroup tile's.
    let cols = if is_warpgroup_encoding(schedule) { f64::from(schedule.tile_n.max(1)) } else { 1.0 };
    let part_in_place = |k: &usize| {
        let transposed = matches!(body.nodes.get(*k), Some(BodyNode::Op(TOp::Permute(p), w))
            if p.as_slice() == [1, 0] && w.first().is_some_and(|w| matches!(body.nodes.get(*w), Some(BodyNode::Input(_)))));
        let ty = body.types.get(*k);
        let n = ty.and_then(|t| t.shape.0.last()).map(|d| dim(d, b));
        let depth = ty.and_then(|t| t.shape.0.first()).map(|d| dim(d, b));
        transposed && n.is_some_and(|n| n % cols == 0.0) && depth.is_some_and(|k| k % 8.0 == 0.0)
    };
    let warpgroup = is_warpgroup_encoding(schedule);
    let tma = warpgroup && WgmmaSchedule::decode(schedule).is_ok_and(|w| w.tma);
    let in_place = |k: &usize| if warpgroup { tma && part_in_place(k) } else { part_in_place(k) };
    kids.iter().all(in_place)
}

/// The bytes a kernel reads of its input `at`: all of it, or where only slices read it (the
/// columns of a joined product that a consumer reads in place), the slices' bytes (at most all).
fn input_bytes_read(body: &Body, at: usize, b: &Bindings) -> f64 {
    let whole = body.input_types.get(at).map_or(0.0, |t| bytes(t, b));
    let Some(v) = body.nodes.iter().position(|n| *n == BodyNode::Input(at)) else { return whole };
    let mut sliced = 0.0;
    for (i, node) in body.nodes.iter().enumerate() {
        if let BodyNode::Op(op, kids) = node
            && kids.contains(&v)
        {
            match op {
                TOp::Slice { .. } => sliced += body.types.get(i).map_or(whole, |t| bytes(t, b)),
                _ => return whole,
            }
        }
    }
    if sliced > 0.0 { sliced.min(whole) } else { whole }
}

/// What a GPU attention schedule other than the kernel's default costs more in the estimate.
const NOT_DEFAULT_FACTOR: f64 = 1.05;

/// What the estimate adds for a kernel the target cannot run as one (an attention body the GPU
/// kernel does not accept): far more than any alternative made of kernels it runs.
const UNRUNNABLE_SECONDS: f64 = 1e9;

/// The estimate of `body` run under `schedule` on `target`.
pub fn kernel_estimate(body: &Body, schedule: &Schedule, target: &TargetModel, b: &Bindings) -> Estimate {
    let out_ty = body.output_type();
    let out_bytes: f64 =
        (0..=body.side_outputs.len()).filter_map(|o| body.nth_output_type(o)).map(|t| bytes(t, b)).sum();
    let in_bytes: f64 = (0..body.input_types.len()).map(|i| input_bytes_read(body, i, b)).sum();
    let prologue = matmul_prologue(body);
    let (mut flops_prologue, mut flops_other) = (0.0, 0.0);
    for (i, node) in body.nodes.iter().enumerate() {
        if let BodyNode::Op(op, kids) = node {
            let elems = match op {
                TOp::Reduce { .. } => kids.first().and_then(|k| body.types.get(*k)).map_or(0.0, |t| numel(&t.shape, b)),
                _ => body.types.get(i).map_or(0.0, |t| numel(&t.shape, b)),
            };
            let flops = elems * op_weight(op);
            if prologue.get(i).copied().unwrap_or(false) {
                flops_prologue += flops;
            } else {
                flops_other += flops;
            }
        }
    }
    let dtype = out_ty.map_or(DType::F32, |t| t.dtype);
    let mut moved = in_bytes + out_bytes;
    let mut flops_mm = 0.0;
    let mut efficiency = 1.0;
    let mut seconds_extra = 0.0;
    if body.class == KernelClass::Attention {
        // Both products; the scores stay on chip, so only the inputs and the output move.
        flops_mm = product_flops(body, b);
    }
    if let (KernelClass::MatMul, Some((batch, m, n, k))) = (body.class, matmul_dims(body, b)) {
        // A dual product's block tiles hold both products' columns side by side: one product
        // of twice the columns, whose second half is read in the epilogue, not from memory.
        let n = if crate::classify::is_dual_product(body) { 2.0 * n } else { n };
        flops_mm = 2.0 * batch * m * n * k;
        // Ping-pong consumers multiply alternate tiles of one block at once, which stream the
        // same B columns: for operand traffic the block's rows are both tiles' (for every
        // product; measured only on the dual product, whose default it is, session 15).
        let turns = is_warpgroup_encoding(schedule) && WgmmaSchedule::decode(schedule).is_ok_and(|w| w.pingpong);
        let rows = schedule.tile_m.max(1) * if turns { 2 } else { 1 };
        let (tm, tn) = (f64::from(rows), f64::from(schedule.tile_n.max(1)));
        let elem = body.input_types.first().map_or(4.0, |t| t.dtype.size_bytes() as f64);
        // Operand traffic of a tiled product (with some L2 reuse), at least one read of each.
        let reuse = if schedule.swizzle > 1 { 4.0 } else { 2.0 };
        let tiled = batch * m * n * k * (1.0 / tm + 1.0 / tn) * elem / reuse;
        moved = moved.max(tiled + out_bytes);
        // A joined B (sibling products' weights side by side) is read in place only by TMA
        // warpgroup tiles that never straddle two weights; any other schedule would copy the
        // weights on every call (the backend's fallback): priced out, the products stay apart.
        if !reads_joined_b_in_place(body, schedule, b) {
            seconds_extra += UNRUNNABLE_SECONDS;
        }
        // Partial sums of split-k go through memory in f32.
        let split = f64::from(schedule.split_k.max(1));
        if split > 1.0 {
            moved += batch * m * n * 4.0 * split * 2.0;
            // On the GPU the partial sums are added by a second launch (the `_reduce` entry).
            if target.gpu() {
                seconds_extra += target.launch_overhead;
            }
        }
        // Tile and wave quantization.
        let blocks_m = ceil_div(m, tm);
        let blocks_n = ceil_div(n, tn);
        let padded = blocks_m * tm * blocks_n * tn;
        efficiency *= ratio(m * n, padded);
        if target.gpu() {
            let blocks = blocks_m * blocks_n * batch * split;
            let slots = f64::from(target.cores.max(1));
            let waves = ceil_div(blocks, slots);
            efficiency *= ratio(blocks, waves * slots);
            // Split-k only helps when there are too few blocks.
            let stage_eff = if schedule.stages >= 3 { 1.0 } else { 0.85 };
            efficiency *= stage_eff;
            // Warpgroup MMA feeds the tensor cores from shared memory without register fragments.
            if has_warpgroup_mma(target) && is_warpgroup_encoding(schedule) {
                efficiency *= WARPGROUP_SPEEDUP;
            }
        }
        // Prologue ops run once per tile load; epilogue ops once per output element.
        flops_prologue *= (n / tn).clamp(1.0, 64.0);
    } else if body.class != KernelClass::Attention {
        let vec_bytes = f64::from(schedule.vector_width.max(1)) * dtype.size_bytes() as f64;
        let vec_eff = (vec_bytes / f64::from(target.vector_bytes.max(1))).min(1.0);
        efficiency *= 0.6 + 0.4 * vec_eff;
        if target.gpu() {
            let elems = out_ty.map_or(1.0, |t| numel(&t.shape, b));
            let per_block = f64::from(schedule.warps.max(1)) * 32.0 * f64::from(schedule.vector_width.max(1));
            let blocks = ceil_div(elems, per_block);
            let slots = f64::from(target.cores.max(1)) * 4.0;
            efficiency *= ratio(blocks, ceil_div(blocks, slots) * slots).clamp(0.05, 1.0).sqrt();
        }
    }
    let t_mem = moved / target.bandwidth;
    let flops_other = flops_other + flops_prologue;
    let t_flop = flops_mm / target.matmul_flops(dtype) + flops_other / target.flops_f32;
    let mut seconds = t_mem.max(t_flop) / efficiency.max(1e-3) + target.launch_overhead + seconds_extra;
    if body.class == KernelClass::Attention && target.gpu() {
        match body.to_graph("attention").ok().and_then(|g| GpuAttention::find(&g)) {
            // The model does not tell the attention kernel's schedules apart: it prefers the
            // kernel's default (measured fastest), and the tuner measures the others.
            Some(a) => {
                let shared = target.attention_device();
                let runs = GpuAttentionSchedule::effective(schedule, &a.shape(), shared);
                if runs != GpuAttentionSchedule::default_for(&a.shape(), shared) {
                    seconds *= NOT_DEFAULT_FACTOR;
                }
            }
            // No kernel of this target runs it: priced out, so the three kernels it replaces stay.
            None => seconds += UNRUNNABLE_SECONDS,
        }
    }
    Estimate { seconds, bytes: moved, flops: flops_mm + flops_other, memory_bound: t_mem >= t_flop }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::fusion::seed_body;
    use crate::rules::testkit::graph;

    fn body(params: &str, e: &str) -> Body {
        let g = graph(params, &[e]);
        let built = crate::convert::to_egraph(&g, crate::analysis::TensorAnalysis::default(), false);
        let root = built.roots[0];
        let node = built.egraph[root].nodes[0].clone();
        seed_body(&built.egraph, root, &node).unwrap().0
    }

    #[test]
    fn big_matmuls_are_compute_bound_and_copies_memory_bound() {
        let t = TargetModel::sm_90a();
        let s = Schedule { tile_m: 128, tile_n: 128, swizzle: 8, stages: 3, ..Schedule::default_for(t.tier()) };
        let mm =
            kernel_estimate(&body("a: f16[4096, 4096]; b: f16[4096, 4096]", "(matmul a b)"), &s, &t, &Bindings::new());
        assert!(!mm.memory_bound && mm.flops == 2.0 * 4096f64.powi(3));
        let add =
            kernel_estimate(&body("a: f16[4096, 4096]; b: f16[4096, 4096]", "(add a b)"), &s, &t, &Bindings::new());
        assert!(add.memory_bound && add.bytes == 3.0 * 2.0 * 4096f64.powi(2));
    }

    #[test]
    fn a_gpu_k_split_pays_a_second_launch_for_its_reduce() {
        let t = TargetModel::sm_90a();
        let free = TargetModel { launch_overhead: 0.0, ..t.clone() };
        let mm = body("a: bf16[64, 4096]; b: bf16[4096, 1024]", "(matmul a b)");
        for (split_k, launches) in [(1, 1.0), (2, 2.0), (8, 2.0)] {
            let s = Schedule { tile_m: 64, tile_n: 64, stages: 4, split_k, ..Schedule::default_for(t.tier()) };
            let paid = kernel_estimate(&mm, &s, &t, &Bindings::new()).seconds;
            let unpaid = kernel_estimate(&mm, &s, &free, &Bindings::new()).seconds;
            let overhead = paid - unpaid;
            assert!((overhead - launches * t.launch_overhead).abs() < 1e-12, "split {split_k}: {overhead}");
        }
    }

    #[test]
    fn empty_tensors_have_finite_costs() {
        let t = TargetModel::sm_80();
        let s = Schedule::default_for(t.tier());
        let e = kernel_estimate(&body("a: f32[0, 8]; b: f32[8, 4]", "(matmul a b)"), &s, &t, &Bindings::new());
        assert!(e.seconds.is_finite());
        let e = kernel_estimate(&body("a: f32[0, 8]", "(exp a)"), &s, &t, &Bindings::new());
        assert!(e.seconds.is_finite());
    }

    #[test]
    fn unbound_shape_variables_count_as_the_default_size() {
        let shape = Shape(vec![Dim::Var("M".into()), Dim::Const(2)]);
        assert_eq!(numel(&shape, &Bindings::new()), 2.0 * DEFAULT_DIM as f64);
        let bound: Bindings = [("M".to_string(), 3u64)].into_iter().collect();
        assert_eq!(numel(&shape, &bound), 6.0);
    }
}
