//! PTX backend (feature `llvm`): hand-built kernels of every class and random generator programs
//! compiled for sm_80 and sm_90a and assembled with ptxas (no GPU needed), with no spills.

mod attention;
mod dual;
mod gemm;
mod rows;
mod sim;
mod wgmma;

use std::path::PathBuf;
use std::sync::OnceLock;

use proptest::prelude::*;
use tcc_codegen::ptx::{self, CapsExt, Feature, GpuArch, PtxError, PtxKernel};
use tcc_ir::interp::{Tensor, run_graph};
use tcc_ir::testing::{GenConfig, Tolerance, arb_graph, compare_outputs, random_inputs};
use tcc_ir::{
    BinaryOp, Bindings, DType, Dim, Graph, Kernel, KernelClass, NodeId, Op, Program, ReduceOp, Schedule, Shape,
    TensorType, Tier, UnaryOp, ValueRef,
};

/// Entries allowed to spill, with the reason (none so far).
const SPILL_ALLOWLIST: &[(&str, &str)] = &[];

fn ptxas() -> &'static PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| match ptx::find_ptxas() {
        Ok(p) => p,
        Err(e) => panic!("feature `llvm` tests need ptxas: {e}"),
    })
}

fn kernel(name: &str, class: KernelClass, graph: Graph) -> Kernel {
    Kernel { name: name.to_string(), class, graph, schedule: Schedule::default_for(Tier::Ptx) }
}

/// Runs `check` on every item on all of the machine's cores (the long ptxas sweeps of a space;
/// a panic in any of them fails the test once every thread has stopped).
pub(crate) fn on_every_core<T: Sync>(items: &[T], check: impl Fn(&T) + Sync) {
    let threads = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get).min(items.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while let Some(item) = items.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) {
                    check(item);
                }
            });
        }
    });
}

/// Compiles `k` for both targets, assembles each with ptxas and checks for spills.
pub(crate) fn check_kernel(k: &Kernel, bindings: &Bindings) -> Vec<PtxKernel> {
    GpuArch::ALL
        .iter()
        .map(|&arch| {
            let compiled = ptx::compile_kernel(k, bindings, arch)
                .unwrap_or_else(|e| panic!("{} for {arch}: {e}\n{:#?}", k.name, k.graph));
            if let Some(dir) = std::env::var_os("TCC_DUMP_PTX") {
                let base = std::path::Path::new(&dir).join(format!("{}_{arch}", k.name));
                std::fs::write(base.with_extension("ptx"), &compiled.ptx).unwrap();
                std::fs::write(base.with_extension("ll"), &compiled.ir.llvm_ir).unwrap();
            }
            let report = ptx::assemble(ptxas(), &compiled.ptx, arch)
                .unwrap_or_else(|e| panic!("{} for {arch}: {e}\nLLVM IR:\n{}", k.name, compiled.ir.llvm_ir));
            assert_eq!(report.entries.len(), compiled.ir.steps.len(), "{}: {}", k.name, report.output);
            for e in &report.entries {
                let spills = e.spill_stores + e.spill_loads;
                let allowed = SPILL_ALLOWLIST.iter().any(|(n, _)| e.name.starts_with(n));
                assert!(
                    spills == 0 || allowed,
                    "{} for {arch}: entry {} spills {spills} bytes\n{}",
                    k.name,
                    e.name,
                    report.output
                );
            }
            compiled
        })
        .collect()
}

pub(crate) fn t(dtype: DType, dims: &[u64]) -> TensorType {
    TensorType { dtype, shape: Shape::from_consts(dims) }
}

pub(crate) fn lowerings(k: &PtxKernel) -> Vec<&'static str> {
    k.ir.steps.iter().map(|s| s.lowering).collect()
}

/// Whole graph as one kernel, and one kernel per op (as the runtime tests partition).
fn partitions(g: &Graph) -> Vec<Kernel> {
    partitions_with_inputs(g).into_iter().map(|(k, _)| k).collect()
}

/// Like [`partitions`], with the nodes of `g` (or `None`: the graph's own params) each kernel
/// reads, in the order of its params.
fn partitions_with_inputs(g: &Graph) -> Vec<(Kernel, Option<Vec<NodeId>>)> {
    let mut out = vec![(kernel(&format!("{}_all", g.name), KernelClass::Generic, g.clone()), None)];
    for (i, node) in g.nodes.iter().enumerate() {
        if matches!(node.op, Op::Input { .. }) {
            continue;
        }
        let mut kg = Graph::new(format!("op{i}"));
        let mut map = std::collections::HashMap::new();
        let mut reads = Vec::new();
        for a in node.op.operands() {
            if let std::collections::hash_map::Entry::Vacant(slot) = map.entry(a) {
                slot.insert(kg.add_param(format!("a{}", a.0), g.nodes[a.index()].ty.clone()).unwrap());
                reads.push(a);
            }
        }
        let out_id = kg.push_typed(node.op.map_operands(|a| map[&a]), node.ty.clone()).unwrap();
        kg.outputs.push(out_id);
        out.push((kernel(&format!("k{i}_{}", node.op.kind_name()), KernelClass::Generic, kg), Some(reads)));
    }
    out
}

pub(crate) fn sim_tolerance() -> Tolerance {
    // As the CPU backend's differential tests: approximate transcendentals and f32 accumulation in
    // another order than the f64 interpreter; a rare flip of a nearly tied comparison is allowed.
    Tolerance { outlier_fraction: 0.02, ..Tolerance::default() }.scaled(4.0)
}

/// The IR the emulator runs: sm_90a without tensor cores (the emulator has no mma.sync,
/// ldmatrix or cp.async; the tensor-core GEMMs are checked on a GPU by the runtime's gpu-tests).
fn sim_ir(k: &Kernel, bindings: &Bindings) -> Result<ptx::KernelIr, PtxError> {
    static SIMT: &[Feature] = &[Feature::Bf16Convert, Feature::WarpShuffle];
    let caps = ptx::GpuCaps { features: SIMT, ..GpuArch::Sm90a.caps() };
    ptx::emit_llvm_ir_with_caps(k, bindings, GpuArch::Sm90a, &caps)
}

/// Emulates `k` (compiled for sm_90a) on `inputs` and compares with the interpreter.
fn sim_check(k: &Kernel, inputs: &[Tensor], bindings: &Bindings, sm_count: u32) -> Result<(), String> {
    let expected = run_graph(&k.graph, inputs).map_err(|e| format!("interp: {e}"))?;
    let ir = sim_ir(k, bindings).map_err(|e| e.to_string())?;
    let types: Vec<TensorType> = k.graph.outputs.iter().map(|o| k.graph.nodes[o.index()].ty.clone()).collect();
    let actual = sim::run(&ir, inputs, &types, bindings, sm_count);
    compare_outputs(&expected, &actual, &sim_tolerance())
        .map_err(|m| format!("{} ({:?}): {m}", k.name, ir.steps.iter().map(|s| s.lowering).collect::<Vec<_>>()))
}

/// Every partition of `g` emulated and compared with the interpreter.
fn sim_check_graph(g: &Graph, inputs: &[Tensor], bindings: &Bindings, sm_count: u32) -> Result<(), String> {
    let mut all = g.clone();
    all.outputs = (0..g.nodes.len()).map(|i| NodeId(i as u32)).collect();
    let values = run_graph(&all, inputs).map_err(|e| format!("interp: {e}"))?;
    for (k, reads) in partitions_with_inputs(g) {
        let ins: Vec<Tensor> = match reads {
            None => inputs.to_vec(),
            Some(r) => r.iter().map(|n| values[n.index()].clone()).collect(),
        };
        sim_check(&k, &ins, bindings, sm_count)?;
    }
    Ok(())
}

fn softmax(dtype: DType, n: u64) -> Graph {
    let mut g = Graph::new("softmax");
    let x = g.add_param("x", TensorType { dtype, shape: Shape(vec![Dim::Var("M".into()), Dim::Const(n)]) }).unwrap();
    let m = g.push(Op::Reduce { op: ReduceOp::Max, input: x, axes: vec![1], keepdim: true }).unwrap();
    let d = g.push(Op::Binary(BinaryOp::Sub, x, m)).unwrap();
    let e = g.push(Op::Unary(UnaryOp::Exp, d)).unwrap();
    let s = g.push(Op::Reduce { op: ReduceOp::Sum, input: e, axes: vec![1], keepdim: true }).unwrap();
    let y = g.push(Op::Binary(BinaryOp::Div, e, s)).unwrap();
    g.outputs.push(y);
    g
}

fn layernorm(dtype: DType, n: u64) -> Graph {
    let mut g = Graph::new("layernorm");
    let x = g.add_param("x", t(dtype, &[64, n])).unwrap();
    let w = g.add_param("w", t(dtype, &[n])).unwrap();
    let b = g.add_param("b", t(dtype, &[n])).unwrap();
    let mean = g.push(Op::Reduce { op: ReduceOp::Mean, input: x, axes: vec![1], keepdim: true }).unwrap();
    let xc = g.push(Op::Binary(BinaryOp::Sub, x, mean)).unwrap();
    let sq = g.push(Op::Binary(BinaryOp::Mul, xc, xc)).unwrap();
    let var = g.push(Op::Reduce { op: ReduceOp::Mean, input: sq, axes: vec![1], keepdim: true }).unwrap();
    let eps = g.constant(1e-5, dtype).unwrap();
    let ve = g.push(Op::Binary(BinaryOp::Add, var, eps)).unwrap();
    let r = g.push(Op::Unary(UnaryOp::Rsqrt, ve)).unwrap();
    let xn = g.push(Op::Binary(BinaryOp::Mul, xc, r)).unwrap();
    let xw = g.push(Op::Binary(BinaryOp::Mul, xn, w)).unwrap();
    let y = g.push(Op::Binary(BinaryOp::Add, xw, b)).unwrap();
    g.outputs.push(y);
    g
}

fn rmsnorm(dtype: DType, n: u64) -> Graph {
    let mut g = Graph::new("rmsnorm");
    let x = g.add_param("x", t(dtype, &[32, n])).unwrap();
    let w = g.add_param("w", t(dtype, &[n])).unwrap();
    let sq = g.push(Op::Binary(BinaryOp::Mul, x, x)).unwrap();
    let ms = g.push(Op::Reduce { op: ReduceOp::Mean, input: sq, axes: vec![1], keepdim: true }).unwrap();
    let eps = g.constant(1e-6, dtype).unwrap();
    let ve = g.push(Op::Binary(BinaryOp::Add, ms, eps)).unwrap();
    let r = g.push(Op::Unary(UnaryOp::Rsqrt, ve)).unwrap();
    let xn = g.push(Op::Binary(BinaryOp::Mul, x, r)).unwrap();
    let y = g.push(Op::Binary(BinaryOp::Mul, xn, w)).unwrap();
    g.outputs.push(y);
    g
}

fn matmul_bias_relu(dtype: DType, m: u64, k: u64, n: u64) -> Graph {
    let mut g = Graph::new("mlp");
    let a = g.add_param("a", t(dtype, &[m, k])).unwrap();
    let b = g.add_param("b", t(dtype, &[k, n])).unwrap();
    let bias = g.add_param("bias", t(dtype, &[n])).unwrap();
    let mm = g.push(Op::MatMul(a, b)).unwrap();
    let s = g.push(Op::Binary(BinaryOp::Add, mm, bias)).unwrap();
    let y = g.push(Op::Unary(UnaryOp::Relu, s)).unwrap();
    g.outputs.push(y);
    g
}

fn pointwise(dtype: DType) -> Graph {
    let mut g = Graph::new("pointwise");
    let x = g.add_param("x", t(dtype, &[1000, 1024])).unwrap();
    let y = g.add_param("y", t(dtype, &[1024])).unwrap();
    let s = g.push(Op::Binary(BinaryOp::Add, x, y)).unwrap();
    let a = g.push(Op::Unary(UnaryOp::Gelu, s)).unwrap();
    let c = g.push_typed(Op::Cast(a), t(DType::F32, &[1000, 1024])).unwrap();
    g.outputs.push(a);
    g.outputs.push(c);
    g
}

#[test]
fn pointwise_kernels_are_vectorized_and_assemble() {
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let g = pointwise(dtype);
        for k in check_kernel(&kernel("pointwise", KernelClass::Pointwise, g), &Bindings::new()) {
            assert_eq!(lowerings(&k), ["elementwise"]);
            // 16-byte vector accesses of the contiguous operands.
            assert!(k.ptx.contains(".v4.") || k.ptx.contains(".v2.b64"), "{dtype}: no vector access\n{}", k.ptx);
        }
    }
}

/// `relu(x * a + b)` over `n` elements of `dtype` (the suite's axpb_relu at any length).
fn axpb_relu(dtype: DType, n: u64) -> Graph {
    let mut g = Graph::new("axpb_relu");
    let [x, a, b] = ["x", "a", "b"].map(|name| g.add_param(name, t(dtype, &[n])).unwrap());
    let xa = g.push(Op::Binary(BinaryOp::Mul, x, a)).unwrap();
    let s = g.push(Op::Binary(BinaryOp::Add, xa, b)).unwrap();
    let r = g.push(Op::Unary(UnaryOp::Relu, s)).unwrap();
    g.outputs.push(r);
    g
}

#[test]
fn pointwise_kernels_of_any_length_move_16_bytes_per_access_and_match_the_interpreter() {
    // Lengths: 1, below one vector, primes, one off a power of two either way.
    for dtype in [DType::F16, DType::BF16, DType::F32] {
        let lanes = 16 / dtype.size_bytes() as u64;
        for n in [1u64, 3, 7, 9, 97, 1021, 4095, 4097] {
            let k = kernel(&format!("axpb_relu_{n}"), KernelClass::Pointwise, axpb_relu(dtype, n));
            for c in check_kernel(&k, &Bindings::new()) {
                let vector = c.ptx.contains(".v4.") || c.ptx.contains(".v2.b64");
                assert_eq!(vector, n >= lanes, "{dtype} n={n}: vector accesses {vector}\n{}", c.ptx);
            }
            let inputs = random_inputs(&k.graph, &Bindings::new(), n).unwrap();
            sim_check(&k, &inputs, &Bindings::new(), 2).unwrap_or_else(|e| panic!("{dtype} n={n}: {e}"));
        }
    }
}

#[test]
fn softmax_layernorm_rmsnorm_are_one_row_stage() {
    let mut bindings = Bindings::new();
    bindings.insert("M".into(), 256);
    for (dtype, n) in [(DType::F16, 4096), (DType::F32, 100), (DType::BF16, 8192)] {
        for (name, g) in
            [("softmax", softmax(dtype, n)), ("layernorm", layernorm(dtype, n)), ("rmsnorm", rmsnorm(dtype, n))]
        {
            for k in check_kernel(&kernel(name, KernelClass::RowReduction, g), &bindings) {
                assert_eq!(lowerings(&k), ["rows"], "{name} {dtype}");
                assert!(k.ptx.contains("shfl.sync.bfly"), "{name}: no warp shuffle");
                // Rows this long are held in registers: no loop over the row inside the loop
                // over rows (tests/ptx/rows.rs checks the streaming passes of longer rows).
                let loops = k.ir.llvm_ir.lines().filter(|l| l.starts_with("head")).count();
                assert_eq!(loops, 1, "{name} {dtype}: expected only the loop over rows");
            }
        }
    }
}

#[test]
fn matmuls_fuse_their_epilogue_and_assemble() {
    for (dtype, m, k, n) in [(DType::F32, 128, 256, 96), (DType::F16, 77, 50, 33), (DType::BF16, 1, 8, 1)] {
        let g = matmul_bias_relu(dtype, m, k, n);
        for c in check_kernel(&kernel("mlp", KernelClass::MatMul, g), &Bindings::new()) {
            // f16/bf16 run on tensor cores; operands whose rows are not 16-byte aligned are packed.
            let mut want = Vec::new();
            if dtype == DType::F32 {
                want.push("matmul");
            } else {
                want.extend(std::iter::repeat_n("matmul-pack", usize::from(k % 8 != 0) + usize::from(n % 8 != 0)));
                want.push("matmul-mma");
            }
            assert_eq!(lowerings(&c), want);
        }
    }
}

#[test]
fn batched_matmul_with_broadcast_batch_and_transposed_operand() {
    let mut g = Graph::new("bmm");
    let a = g.add_param("a", t(DType::F16, &[4, 1, 40, 24])).unwrap();
    let b = g.add_param("b", t(DType::F16, &[3, 56, 24])).unwrap();
    let bt = g.push(Op::Permute { input: b, perm: vec![0, 2, 1] }).unwrap();
    let mm = g.push(Op::MatMul(a, bt)).unwrap();
    g.outputs.push(mm);
    for c in check_kernel(&kernel("bmm", KernelClass::MatMul, g), &Bindings::new()) {
        // A's batch [4, 1] and B's [3] both broadcast to the output's [4, 3]: both are packed.
        assert_eq!(lowerings(&c), ["matmul-pack", "matmul-pack", "matmul-mma"]);
    }
}

#[test]
fn generic_kernels_materialize_and_assemble() {
    // Reduction over a leading axis, a concat of slices and a reduction feeding a matmul.
    let mut g = Graph::new("generic");
    let x = g.add_param("x", t(DType::F32, &[33, 65])).unwrap();
    let s0 = g.push(Op::Reduce { op: ReduceOp::Sum, input: x, axes: vec![0], keepdim: false }).unwrap();
    let a = g.push(Op::Slice { input: x, axis: 1, start: 1, end: 30 }).unwrap();
    let b = g.push(Op::Slice { input: x, axis: 1, start: 40, end: 65 }).unwrap();
    let c = g.push(Op::Concat { inputs: vec![b, a], axis: 1 }).unwrap();
    let m = g.push(Op::Reduce { op: ReduceOp::Max, input: c, axes: vec![1], keepdim: true }).unwrap();
    let xt = g.push(Op::Permute { input: x, perm: vec![1, 0] }).unwrap();
    let mm = g.push(Op::MatMul(xt, m)).unwrap();
    g.outputs.push(s0);
    g.outputs.push(mm);
    g.outputs.push(s0);
    for k in check_kernel(&kernel("generic", KernelClass::Generic, g), &Bindings::new()) {
        assert_eq!(lowerings(&k), ["reduce", "rows", "matmul", "elementwise"]);
        assert!(k.ir.scratch_bytes > 0);
    }
}

#[test]
fn every_scalar_op_and_cast_assembles() {
    let mut g = Graph::new("ops");
    let dims = [3u64, 5];
    let mut outs: Vec<NodeId> = Vec::new();
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let x = g.add_param("x", t(dtype, &dims)).unwrap();
        let y = g.add_param("y", t(dtype, &dims)).unwrap();
        for u in UnaryOp::ALL {
            outs.push(g.push(Op::Unary(u, x)).unwrap());
        }
        for b in BinaryOp::ALL {
            outs.push(g.push(Op::Binary(b, x, y)).unwrap());
        }
        for to in DType::ALL {
            outs.push(g.push_typed(Op::Cast(x), t(to, &dims)).unwrap());
        }
    }
    let i = g.add_param("i", t(DType::I32, &dims)).unwrap();
    let j = g.add_param("j", t(DType::I32, &dims)).unwrap();
    for b in tcc_ir::infer::int_binary_ops() {
        outs.push(g.push(Op::Binary(b, i, j)).unwrap());
    }
    for u in [UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Relu] {
        outs.push(g.push(Op::Unary(u, i)).unwrap());
    }
    for to in DType::ALL {
        outs.push(g.push_typed(Op::Cast(i), t(to, &dims)).unwrap());
    }
    let c = g.push(Op::Compare(tcc_ir::CompareOp::Lt, i, j)).unwrap();
    outs.push(g.push(Op::Select { cond: c, on_true: i, on_false: j }).unwrap());
    outs.push(g.push(Op::Compare(tcc_ir::CompareOp::Ge, c, c)).unwrap());
    g.outputs = outs;
    check_kernel(&kernel("ops", KernelClass::Pointwise, g), &Bindings::new());
}

#[test]
fn integer_negation_reaches_ptxas_as_not_and_add() {
    // `min(min(-m, s), t)` on i32 (GPU soak seed 30001436): ptxas 13.0 for sm_90a folds a
    // `neg.s32` feeding two signed mins into one VIMNMX3 and drops the negation, so no negation
    // may reach it in that form (`math::ineg`).
    let mut g = Graph::new("neg_min3");
    let p0 = g.add_param("p0", t(DType::I32, &[1, 1, 1])).unwrap();
    let p1 = g.add_param("p1", t(DType::I32, &[13, 127, 5])).unwrap();
    let m = g.push(Op::Binary(BinaryOp::Min, p1, p0)).unwrap();
    let s = g.push(Op::Binary(BinaryOp::Sub, p0, m)).unwrap();
    let c = g.push_typed(Op::Cast(s), t(DType::Bool, &[13, 127, 5])).unwrap();
    let n = g.push(Op::Unary(UnaryOp::Neg, m)).unwrap();
    let picked = g.push(Op::Select { cond: c, on_true: s, on_false: p1 }).unwrap();
    let u = g.push(Op::Binary(BinaryOp::Min, n, s)).unwrap();
    let a = g.push(Op::Unary(UnaryOp::Abs, u)).unwrap();
    g.outputs = vec![g.push(Op::Binary(BinaryOp::Min, u, picked)).unwrap(), a];
    for k in check_kernel(&kernel("neg_min3", KernelClass::Pointwise, g), &Bindings::new()) {
        assert!(!k.ptx.contains("neg.s32"), "a neg.s32 reaches ptxas:\n{}", k.ptx);
        assert!(k.ptx.contains("not.b32"), "no `~x + 1` negation:\n{}", k.ptx);
    }
}

#[test]
fn kernels_over_2_pow_31_elements_use_64_bit_indices_and_assemble() {
    let mut bindings = Bindings::new();
    bindings.insert("M".into(), 1 << 20);
    let graphs = [
        ("pointwise", KernelClass::Pointwise, pointwise(DType::F16)),
        ("softmax", KernelClass::RowReduction, softmax(DType::F16, 4096)),
        ("mlp", KernelClass::MatMul, matmul_bias_relu(DType::F16, 1 << 21, 1024, 1024)),
    ];
    for (name, class, mut g) in graphs {
        if name == "pointwise" {
            // [2^21, 1024] instead of [1000, 1024].
            g.params[0].ty = t(DType::F16, &[1 << 21, 1024]);
            for n in &mut g.nodes {
                if n.ty.shape.rank() == 2 {
                    n.ty.shape = Shape::from_consts(&[1 << 21, 1024]);
                }
            }
        }
        for k in check_kernel(&kernel(name, class, g), &bindings) {
            assert!(
                k.ir.llvm_ir.contains("i64 %t") || k.ir.llvm_ir.contains("icmp ult i64"),
                "{name}: no 64-bit indices"
            );
        }
    }
}

#[test]
fn unbound_shape_variables_are_an_error() {
    let g = softmax(DType::F32, 64);
    let err = ptx::emit_llvm_ir(&kernel("softmax", KernelClass::RowReduction, g), &Bindings::new(), GpuArch::Sm80)
        .unwrap_err();
    assert_eq!(err, PtxError::Unbound { kernel: "softmax".into(), vars: vec!["M".into()] });
}

#[test]
fn capabilities_are_data_and_checked() {
    let (a, h) = (GpuArch::Sm80.caps(), GpuArch::Sm90a.caps());
    assert!(h.has(Feature::Wgmma) && !a.has(Feature::Wgmma));
    assert!(matches!(a.require(Feature::Tma, "tma copy"), Err(PtxError::Unsupported { target: "sm_80", .. })));
    assert_eq!(GpuArch::for_compute_capability(9, 0), Some(GpuArch::Sm90a));
    assert_eq!(GpuArch::for_compute_capability(8, 9), Some(GpuArch::Sm80));
    assert_eq!(GpuArch::for_compute_capability(7, 5), None);
    assert_eq!(GpuArch::from_name("sm_90a"), Some(GpuArch::Sm90a));
}

/// The bindings the example tests use for the examples' shape variables.
fn example_bindings() -> Bindings {
    [("M", 64u64), ("N", 256), ("S", 96), ("T", 80), ("B", 2), ("D", 64), ("H", 3), ("KV", 2), ("G", 2), ("F", 96)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// Runs a whole program in the emulator (launch by launch) and returns its outputs.
fn sim_program(program: &Program, inputs: &[Tensor], bindings: &Bindings) -> Vec<Tensor> {
    let mut buffers: Vec<Option<Tensor>> = vec![None; program.buffers.len()];
    let value = |buffers: &[Option<Tensor>], v: ValueRef| match v {
        ValueRef::Param(i) => inputs[i].clone(),
        ValueRef::Buffer(b) => buffers[b].clone().unwrap_or_else(|| panic!("buffer {b} read before written")),
    };
    for launch in &program.launches {
        let k = &launch.kernel;
        let ir = sim_ir(k, bindings).unwrap_or_else(|e| panic!("{}: {e}", k.name));
        let ins: Vec<Tensor> = launch.inputs.iter().map(|&v| value(&buffers, v)).collect();
        let types: Vec<TensorType> = k.graph.outputs.iter().map(|o| k.graph.nodes[o.index()].ty.clone()).collect();
        let outs = sim::run(&ir, &ins, &types, bindings, 2);
        for (&v, t) in launch.outputs.iter().zip(outs) {
            if let ValueRef::Buffer(b) = v {
                buffers[b] = Some(t);
            }
        }
    }
    program.outputs.iter().map(|&v| value(&buffers, v)).collect()
}

/// The optimizer's program for `g` (and its alternatives) for sm_90a: every kernel assembles
/// without spills and the emulated program matches the interpreter.
fn check_optimized(g: &Graph, bindings: &Bindings, inputs: &[Tensor]) -> Result<(), String> {
    let mut opts = tcc_passes::OptimizeOptions::new(tcc_passes::TargetModel::sm_90a());
    opts.bindings = bindings.clone();
    opts.top_k = 2;
    let optimized = tcc_passes::optimize(g, &opts).map_err(|e| format!("optimizer: {e}"))?;
    let expected = run_graph(g, inputs).map_err(|e| format!("interp: {e}"))?;
    for program in std::iter::once(&optimized.program).chain(&optimized.alternatives) {
        for launch in &program.launches {
            let c = check_kernel(&launch.kernel, bindings);
            if std::env::var_os("TCC_SHOW_LOWERINGS").is_some() {
                eprintln!("{} {:?}: {:?}", launch.kernel.name, launch.kernel.class, lowerings(&c[0]));
            }
        }
        let actual = sim_program(program, inputs, bindings);
        let classes: Vec<_> = program.launches.iter().map(|l| (l.kernel.name.clone(), l.kernel.class)).collect();
        compare_outputs(&expected, &actual, &sim_tolerance()).map_err(|m| format!("{classes:?}: {m}"))?;
    }
    Ok(())
}

#[test]
fn emulated_optimizer_programs_for_the_examples_match_the_interpreter() {
    let bindings: Bindings = [("M", 6u64), ("N", 40), ("S", 24), ("T", 20), ("B", 2), ("D", 16)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut checked = 0;
    for name in ["softmax", "layernorm", "rmsnorm", "residual", "attention_scores", "mlp"] {
        let path = dir.join(format!("{name}.tc"));
        let text = std::fs::read_to_string(&path).unwrap();
        let module = tcc_frontend::parse_source(&path.display().to_string(), &text).unwrap();
        for g in &module.functions {
            let inputs = random_inputs(g, &bindings, 11).unwrap();
            check_optimized(g, &bindings, &inputs).unwrap_or_else(|e| panic!("{name} `{}`: {e}", g.name));
            checked += 1;
        }
    }
    assert!(checked >= 6);
}

#[test]
fn every_example_function_compiles_whole_and_per_op() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut functions = 0;
    for path in files.iter().filter(|p| p.extension().is_some_and(|e| e == "tc")) {
        let text = std::fs::read_to_string(path).unwrap();
        let module = tcc_frontend::parse_source(&path.display().to_string(), &text)
            .unwrap_or_else(|d| panic!("{}: {d:?}", path.display()));
        for g in &module.functions {
            for k in partitions(g) {
                check_kernel(&k, &example_bindings());
            }
            functions += 1;
        }
    }
    assert!(functions >= 7, "only {functions} example functions found in {}", dir.display());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_programs_assemble_without_spills(gp in arb_graph(GenConfig { max_ops: 16, ..GenConfig::default() })) {
        for k in partitions(&gp.graph) {
            check_kernel(&k, &gp.bindings);
        }
    }
}

#[test]
fn emulated_hand_kernels_match_the_interpreter() {
    let mut bindings = Bindings::new();
    bindings.insert("M".into(), 37);
    let graphs = [
        softmax(DType::F32, 100),
        softmax(DType::F16, 2048),
        layernorm(DType::F32, 96),
        layernorm(DType::BF16, 1500),
        rmsnorm(DType::F16, 256),
        matmul_bias_relu(DType::F32, 70, 33, 65),
        matmul_bias_relu(DType::F16, 16, 64, 8),
    ];
    for g in &graphs {
        let inputs = random_inputs(g, &bindings, 3).unwrap();
        for sm_count in [1, 3] {
            sim_check_graph(g, &inputs, &bindings, sm_count).unwrap_or_else(|e| panic!("{}: {e}", g.name));
        }
    }
}

#[test]
fn emulated_online_softmax_and_welford_keep_the_interpreters_special_values() {
    let mut bindings = Bindings::new();
    bindings.insert("M".into(), 5);
    let (ninf, inf, nan) = (f64::NEG_INFINITY, f64::INFINITY, f64::NAN);
    let n = 40;
    let mut data = Vec::new();
    for row in 0..5 {
        for j in 0..n {
            data.push(match (row, j) {
                (0, _) => ninf,
                (1, j) if j % 3 == 0 => ninf,
                (2, 7) => inf,
                (3, 11) => nan,
                _ => (j as f64 * 0.37).sin() * 4.0,
            });
        }
    }
    let x = Tensor::new(DType::F32, vec![5, n as usize], data).unwrap();
    let g = softmax(DType::F32, n);
    sim_check_graph(&g, &[x], &bindings, 1).unwrap();
    // Layernorm of rows with a large mean and a small variance, in f16: the rounded mean matters.
    let g = layernorm(DType::F16, 96);
    let mut inputs = random_inputs(&g, &Bindings::new(), 5).unwrap();
    // Rows alternating 500 and 500.25: the mean 500.125 rounds to 500 in f16, which doubles the
    // interpreter's variance.
    for (i, v) in inputs[0].data.iter_mut().enumerate() {
        *v = 500.0 + 0.25 * (i % 2) as f64;
    }
    sim_check_graph(&g, &inputs, &Bindings::new(), 1).unwrap();
}

#[test]
fn emulated_unary_ops_keep_the_sign_of_zero_and_the_interpreters_special_values() {
    // `1 / op(x)` turns a zero of the wrong sign into an infinity of the wrong sign (the CPU tiers'
    // tanh had `tanh(-0) = +0`, found by a long random program; the PTX tanh shared the form).
    let xs = [0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1.5, -1.5, 0.25, -0.25];
    for op in UnaryOp::ALL {
        let mut g = Graph::new(op.name());
        let x = g.add_param("x", t(DType::F32, &[xs.len() as u64])).unwrap();
        let y = g.push(Op::Unary(op, x)).unwrap();
        let one = g.push_typed(Op::Constant { value: 1.0 }, t(DType::F32, &[])).unwrap();
        let z = g.push(Op::Binary(BinaryOp::Div, one, y)).unwrap();
        g.outputs.extend([y, z]);
        let input = Tensor::new(DType::F32, vec![xs.len()], xs.to_vec()).unwrap();
        sim_check_graph(&g, &[input], &Bindings::new(), 1).unwrap_or_else(|e| panic!("{}: {e}", op.name()));
    }
    // max and min keep their first operand where they tie (zeros of both signs, contract §5).
    let mut g = Graph::new("max_min");
    let x = g.add_param("x", t(DType::F32, &[xs.len() as u64])).unwrap();
    let y = g.push(Op::Unary(UnaryOp::Neg, x)).unwrap();
    let one = g.push_typed(Op::Constant { value: 1.0 }, t(DType::F32, &[])).unwrap();
    for (a, b) in [(x, y), (y, x)] {
        for op in [BinaryOp::Max, BinaryOp::Min] {
            let m = g.push(Op::Binary(op, a, b)).unwrap();
            let r = g.push(Op::Binary(BinaryOp::Div, one, m)).unwrap();
            g.outputs.push(r);
        }
    }
    let input = Tensor::new(DType::F32, vec![xs.len()], xs.to_vec()).unwrap();
    sim_check_graph(&g, &[input], &Bindings::new(), 1).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn emulated_optimizer_programs_match_the_interpreter(gp in arb_graph(GenConfig { max_ops: 12, max_elements: 2_000, ..GenConfig::default() }), seed in any::<u64>()) {
        let inputs = gp.random_inputs(seed).map_err(|e| TestCaseError::reject(e.to_string()))?;
        check_optimized(&gp.graph, &gp.bindings, &inputs).map_err(|e| TestCaseError::fail(format!("{e}\n{:#?}", gp.graph)))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn emulated_random_programs_match_the_interpreter(gp in arb_graph(GenConfig { max_ops: 16, max_elements: 3_000, ..GenConfig::default() }), seed in any::<u64>()) {
        let inputs = gp.random_inputs(seed).map_err(|e| TestCaseError::reject(e.to_string()))?;
        sim_check_graph(&gp.graph, &inputs, &gp.bindings, 2).map_err(|e| TestCaseError::fail(format!("{e}\n{:#?}", gp.graph)))?;
    }
}
