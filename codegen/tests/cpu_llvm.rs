//! The CPU LLVM tier (feature `llvm`): hand-built kernels of every class and random generator
//! programs JIT-compiled for the host, run on buffers here (rows split over threads as the runtime
//! does) and compared with the interpreter; plus the 8-lane (AVX2-shaped), 4-lane (scalar tails)
//! and software-f16 paths.

use std::sync::OnceLock;

use proptest::prelude::*;
use tcc_codegen::loops::Stmt;
use tcc_codegen::{Backend, BufKind, CodegenError, GemmTiles, LlvmCpuBackend, LlvmCpuKernel, LowerOptions};
use tcc_ir::interp::{Tensor, run_graph};
use tcc_ir::testing::{
    GenConfig, Tolerance, arb_graph, compare_outputs, dual_gemm_graph, gemm_epilogue_graphs, gemm_two_outputs_graph,
    random_inputs,
};
use tcc_ir::{
    BinaryOp, Bindings, CompareOp, DType, Dim, Graph, Kernel, KernelClass, NodeId, Op, ReduceOp, Schedule, Shape,
    TensorType, Tier, UnaryOp,
};

// ---- backends ----

/// The host's own code: 16 lanes with AVX-512, hardware f16 conversions.
fn native() -> &'static LlvmCpuBackend {
    static B: OnceLock<LlvmCpuBackend> = OnceLock::new();
    B.get_or_init(|| match LlvmCpuBackend::new() {
        Ok(b) => b,
        Err(e) => panic!("feature `llvm` tests need an x86-64 host LLVM can target: {e}"),
    })
}

/// AVX2-shaped code (8 lanes), software f16 conversions, small odd matmul tiles.
fn narrow() -> &'static LlvmCpuBackend {
    static B: OnceLock<LlvmCpuBackend> = OnceLock::new();
    B.get_or_init(|| {
        let host = native().host().clone().with_max_lanes(8).with_f16c(false);
        LlvmCpuBackend::with_host(host, LowerOptions::default()).with_tiles(GemmTiles {
            mr: 5,
            nr: 24,
            mc: 15,
            nc: 48,
            kc: 7,
        })
    })
}

/// AVX2-shaped code (8 lanes) with the default tiles for 8 lanes.
fn avx2() -> &'static LlvmCpuBackend {
    static B: OnceLock<LlvmCpuBackend> = OnceLock::new();
    B.get_or_init(|| {
        let host = native().host().clone().with_max_lanes(8);
        LlvmCpuBackend::with_host(host, LowerOptions::default())
    })
}

/// Every node materialized, matmuls as plain loop nests, 4 lanes (scalar tails, no masks).
fn materializing() -> &'static LlvmCpuBackend {
    static B: OnceLock<LlvmCpuBackend> = OnceLock::new();
    B.get_or_init(|| {
        LlvmCpuBackend::with_host(
            native().host().clone().with_max_lanes(4),
            LowerOptions { materialize_all: true, gemm: None, ..LowerOptions::default() },
        )
    })
}

// ---- running a compiled kernel ----

fn to_bytes(t: &Tensor) -> Vec<u8> {
    let mut out = Vec::with_capacity(t.data.len() * t.dtype.size_bytes());
    for &v in &t.data {
        match t.dtype {
            DType::F32 => out.extend((v as f32).to_le_bytes()),
            DType::F16 => out.extend(half::f16::from_f64(v).to_bits().to_le_bytes()),
            DType::BF16 => out.extend(half::bf16::from_f64(v).to_bits().to_le_bytes()),
            DType::I32 => out.extend((v as i32).to_le_bytes()),
            DType::Bool => out.push(u8::from(v != 0.0)),
        }
    }
    out
}

fn from_bytes(dtype: DType, shape: Vec<usize>, b: &[u8]) -> Tensor {
    let data = match dtype {
        DType::F32 => b.chunks_exact(4).map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap()))).collect(),
        DType::F16 => {
            b.chunks_exact(2).map(|c| half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f64()).collect()
        }
        DType::BF16 => {
            b.chunks_exact(2).map(|c| half::bf16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f64()).collect()
        }
        DType::I32 => b.chunks_exact(4).map(|c| f64::from(i32::from_le_bytes(c.try_into().unwrap()))).collect(),
        DType::Bool => b.iter().map(|&x| f64::from(x)).collect(),
    };
    Tensor { dtype, shape, data }
}

/// 64-byte aligned zeroed storage of at least `bytes` bytes.
fn storage(bytes: usize) -> Vec<[u64; 8]> {
    vec![[0u64; 8]; bytes.div_ceil(64).max(1)]
}

type PhaseEntry = unsafe extern "C" fn(*const *mut u8, u64, u64);

/// Runs every phase of `k`, splitting each phase's rows into chunks run on `threads` threads
/// (each call with its own local buffers), and returns the outputs.
fn run_kernel(k: &LlvmCpuKernel, g: &Graph, inputs: &[Tensor], bindings: &Bindings, threads: usize) -> Vec<Tensor> {
    let decls = k.buffers();
    let mut store: Vec<Vec<[u64; 8]>> = Vec::new();
    let mut ptrs: Vec<usize> = Vec::new();
    let mut locals = Vec::new();
    for (i, d) in decls.iter().enumerate() {
        let bytes = d.len as usize * d.dtype.size_bytes();
        let mut s = storage(bytes);
        if let BufKind::Input(p) = d.kind {
            let b = to_bytes(&inputs[p]);
            assert_eq!(b.len(), bytes, "input {p} size");
            // SAFETY: `s` holds at least `bytes` bytes.
            unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), s.as_mut_ptr().cast::<u8>(), bytes) };
        }
        if d.kind == BufKind::Local {
            locals.push((i, bytes));
        }
        ptrs.push(s.as_mut_ptr() as usize);
        store.push(s);
    }
    for p in k.phases() {
        // SAFETY: `entry` is a JIT'd function of the uniform ABI, alive while `k` is.
        let f: PhaseEntry = unsafe { std::mem::transmute::<usize, PhaseEntry>(p.entry) };
        let rows = p.rows.max(1);
        let chunks = (threads as u64 * 3).min(rows).max(1);
        let call = |c: u64| {
            let mut mine = ptrs.clone();
            let mut own: Vec<Vec<[u64; 8]>> = Vec::new();
            for &(slot, bytes) in &locals {
                let mut s = storage(bytes);
                mine[slot] = s.as_mut_ptr() as usize;
                own.push(s);
            }
            // SAFETY: one pointer per declared buffer, each large enough; different chunks cover
            // disjoint rows, which the lowering proved write disjoint memory.
            unsafe { f(mine.as_ptr().cast(), rows * c / chunks, rows * (c + 1) / chunks) };
            drop(own);
        };
        if threads <= 1 {
            (0..chunks).for_each(call);
        } else {
            std::thread::scope(|s| {
                for t in 0..threads as u64 {
                    let call = &call;
                    s.spawn(move || (t..chunks).step_by(threads).for_each(call));
                }
            });
        }
    }
    g.outputs
        .iter()
        .enumerate()
        .map(|(o, node)| {
            let ty = &g.nodes[node.index()].ty;
            let shape: Vec<usize> = ty.shape.dims().iter().map(|d| d.resolve(bindings).unwrap() as usize).collect();
            let i = decls.iter().position(|d| d.kind == BufKind::Output(o)).unwrap();
            let bytes = decls[i].len as usize * ty.dtype.size_bytes();
            // SAFETY: the storage holds at least `bytes` bytes.
            let b = unsafe { std::slice::from_raw_parts(store[i].as_ptr().cast::<u8>(), bytes) };
            from_bytes(ty.dtype, shape, b)
        })
        .collect()
}

fn tolerance() -> Tolerance {
    // As the cranelift tier's differential tests: approximate transcendentals and f32 intermediates;
    // a rare flip of a nearly tied comparison is allowed.
    Tolerance { outlier_fraction: 0.02, ..Tolerance::default() }.scaled(4.0)
}

fn kernel(name: &str, class: KernelClass, graph: Graph) -> Kernel {
    Kernel { name: name.to_string(), class, graph, schedule: Schedule::default_for(Tier::LlvmCpu) }
}

/// Compiles `k` with `backend`, runs it and compares with the interpreter.
fn check_with(
    backend: &LlvmCpuBackend,
    k: &Kernel,
    inputs: &[Tensor],
    bindings: &Bindings,
    threads: usize,
) -> Result<(), String> {
    let expected = run_graph(&k.graph, inputs).map_err(|e| format!("interp: {e}"))?;
    let compiled = backend.compile(k, bindings).map_err(|e| format!("{}: {e}", k.name))?;
    let actual = run_kernel(&compiled, &k.graph, inputs, bindings, threads);
    compare_outputs(&expected, &actual, &tolerance())
        .map_err(|m| format!("{} (lanes {}): {m}", k.name, backend.host().lanes))
}

fn check(k: &Kernel, inputs: &[Tensor], bindings: &Bindings) {
    for b in [native(), avx2(), narrow(), materializing()] {
        if let Err(e) = check_with(b, k, inputs, bindings, 2) {
            panic!("{e}\n{:#?}", k.graph);
        }
    }
}

fn t(dtype: DType, dims: &[u64]) -> TensorType {
    TensorType { dtype, shape: Shape::from_consts(dims) }
}

/// Whole graph as one kernel, and one kernel per op (reading the interpreter's operand values).
fn check_graph(g: &Graph, inputs: &[Tensor], bindings: &Bindings, every_backend: bool) -> Result<(), String> {
    let whole = kernel(&format!("{}_all", g.name), KernelClass::Generic, g.clone());
    let backends: Vec<&LlvmCpuBackend> =
        if every_backend { vec![native(), narrow(), materializing()] } else { vec![native()] };
    for b in &backends {
        check_with(b, &whole, inputs, bindings, 2)?;
    }
    let mut all = g.clone();
    all.outputs = (0..g.nodes.len()).map(|i| NodeId(i as u32)).collect();
    let values = run_graph(&all, inputs).map_err(|e| format!("interp: {e}"))?;
    for (i, node) in g.nodes.iter().enumerate() {
        if matches!(node.op, Op::Input { .. }) {
            continue;
        }
        let mut kg = Graph::new(format!("op{i}"));
        let mut map = std::collections::HashMap::new();
        let mut ins = Vec::new();
        for a in node.op.operands() {
            if let std::collections::hash_map::Entry::Vacant(slot) = map.entry(a) {
                slot.insert(kg.add_param(format!("a{}", a.0), g.nodes[a.index()].ty.clone()).unwrap());
                ins.push(values[a.index()].clone());
            }
        }
        let out = kg.push_typed(node.op.map_operands(|a| map[&a]), node.ty.clone()).unwrap();
        kg.outputs.push(out);
        let k = kernel(&format!("k{i}_{}", node.op.kind_name()), KernelClass::Generic, kg);
        check_with(native(), &k, &ins, bindings, 1)?;
    }
    Ok(())
}

// ---- hand-built kernels ----

fn softmax(dtype: DType, rows: u64, cols: u64) -> Graph {
    let mut g = Graph::new("softmax");
    let x = g.add_param("x", t(dtype, &[rows, cols])).unwrap();
    let m = g.push(Op::Reduce { op: ReduceOp::Max, input: x, axes: vec![1], keepdim: true }).unwrap();
    let d = g.push(Op::Binary(BinaryOp::Sub, x, m)).unwrap();
    let e = g.push(Op::Unary(UnaryOp::Exp, d)).unwrap();
    let s = g.push(Op::Reduce { op: ReduceOp::Sum, input: e, axes: vec![1], keepdim: true }).unwrap();
    let y = g.push(Op::Binary(BinaryOp::Div, e, s)).unwrap();
    g.outputs.push(y);
    g
}

fn layernorm(dtype: DType, rows: u64, n: u64) -> Graph {
    let mut g = Graph::new("layernorm");
    let x = g.add_param("x", t(dtype, &[rows, n])).unwrap();
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

fn matmul_bias_gelu(dtype: DType, batch: Option<u64>, m: u64, k: u64, n: u64) -> Graph {
    let mut g = Graph::new("mlp");
    let (ad, bd) = match batch {
        Some(b) => (vec![b, m, k], vec![b, k, n]),
        None => (vec![m, k], vec![k, n]),
    };
    let a = g.add_param("a", t(dtype, &ad)).unwrap();
    let b = g.add_param("b", t(dtype, &bd)).unwrap();
    let bias = g.add_param("bias", t(dtype, &[n])).unwrap();
    let mm = g.push(Op::MatMul(a, b)).unwrap();
    let s = g.push(Op::Binary(BinaryOp::Add, mm, bias)).unwrap();
    let y = g.push(Op::Unary(UnaryOp::Gelu, s)).unwrap();
    g.outputs.push(y);
    g
}

fn inputs_for(g: &Graph, seed: u64) -> Vec<Tensor> {
    random_inputs(g, &Bindings::new(), seed).unwrap()
}

#[test]
fn softmax_and_layernorm_match_the_interpreter_in_every_float_dtype() {
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for (rows, cols) in [(7, 100), (33, 16), (4, 1000), (3, 5)] {
            for g in [softmax(dtype, rows, cols), layernorm(dtype, rows, cols)] {
                let k = kernel(&g.name.clone(), KernelClass::RowReduction, g);
                check(&k, &inputs_for(&k.graph, rows * cols), &Bindings::new());
            }
        }
    }
}

#[test]
fn matmuls_with_edges_batches_and_epilogues_match_the_interpreter() {
    for (dtype, batch, m, k, n) in [
        (DType::F32, None, 1, 1, 1),
        (DType::F32, None, 13, 17, 35),
        (DType::F32, None, 100, 70, 129),
        (DType::F16, None, 25, 300, 33),
        (DType::BF16, Some(3), 14, 9, 40),
        (DType::F32, Some(2), 37, 260, 64),
    ] {
        let g = matmul_bias_gelu(dtype, batch, m, k, n);
        let kern = kernel("mlp", KernelClass::MatMul, g);
        check(&kern, &inputs_for(&kern.graph, m * n), &Bindings::new());
    }
}

/// The products whose pointwise consumer is computed in the register tiles' store (bias and
/// ReLU, a residual and a cast, the product read twice, a dual product) and those that must not
/// be (the product also returned): sizes 1, odd primes, off the blocking grid, several depth
/// blocks (the narrow backend's blocks are 7 deep), batched.
#[test]
fn gemm_epilogues_in_the_tiles_match_the_interpreter() {
    let cases: [(Option<u64>, (u64, u64, u64)); 6] = [
        (None, (1, 1, 1)),
        (None, (1, 7, 13)),
        (None, (13, 35, 17)),
        (None, (67, 131, 300)),
        (Some(2), (37, 29, 11)),
        (None, (5, 3, 600)),
    ];
    for (batch, (m, n, k)) in cases {
        let batch: &[u64] = &batch.into_iter().collect::<Vec<_>>();
        let mut graphs = gemm_epilogue_graphs(batch, (m, n, k)).unwrap();
        graphs.push(dual_gemm_graph(DType::F32, batch, (m, n, k), false).unwrap());
        graphs.push(gemm_two_outputs_graph(DType::F32, batch, (m, n, k), false).unwrap());
        for g in graphs {
            let kern = kernel(&g.name.clone(), KernelClass::MatMul, g);
            check(&kern, &inputs_for(&kern.graph, m * n + k), &Bindings::new());
        }
    }
}

#[test]
fn integer_bool_and_cast_semantics_match_the_interpreter() {
    // i32 wrapping and division by zero / -1, saturating float -> int casts with NaN, bool logic.
    let mut g = Graph::new("ints");
    let a = g.add_param("a", t(DType::I32, &[3, 37])).unwrap();
    let b = g.add_param("b", t(DType::I32, &[37])).unwrap();
    let x = g.add_param("x", t(DType::F32, &[3, 37])).unwrap();
    let big = g.constant(3e9, DType::F32).unwrap();
    let xs = g.push(Op::Binary(BinaryOp::Mul, x, big)).unwrap();
    let nan = g.constant(f64::NAN, DType::F32).unwrap();
    let zero = g.constant(0.0, DType::F32).unwrap();
    let is_neg = g.push(Op::Compare(CompareOp::Lt, x, zero)).unwrap();
    let xn = g.push(Op::Select { cond: is_neg, on_true: nan, on_false: xs }).unwrap();
    let xi = g.push_typed(Op::Cast(xn), t(DType::I32, &[3, 37])).unwrap();
    let q = g.push(Op::Binary(BinaryOp::Div, a, b)).unwrap();
    let p = g.push(Op::Binary(BinaryOp::Mul, a, xi)).unwrap();
    let s = g.push(Op::Binary(BinaryOp::Add, p, q)).unwrap();
    let ne = g.push(Op::Compare(CompareOp::Ne, x, xn)).unwrap();
    let nb = g.push_typed(Op::Cast(b), t(DType::Bool, &[37])).unwrap();
    let both = g.push(Op::Compare(CompareOp::Gt, ne, nb)).unwrap();
    let f16 = g.push_typed(Op::Cast(s), t(DType::F16, &[3, 37])).unwrap();
    let mx = g.push(Op::Reduce { op: ReduceOp::Max, input: s, axes: vec![1], keepdim: false }).unwrap();
    g.outputs.extend([s, both, f16, xi, mx]);
    let mut inputs = inputs_for(&g, 5);
    inputs[1].data[0] = 0.0;
    inputs[1].data[1] = -1.0;
    inputs[0].data[1] = f64::from(i32::MIN);
    let k = kernel("ints", KernelClass::Generic, g);
    check(&k, &inputs, &Bindings::new());
}

#[test]
fn transcendentals_keep_special_values() {
    let mut g = Graph::new("special");
    let x = g.add_param("x", t(DType::F32, &[40])).unwrap();
    let mut outs = Vec::new();
    // Each op's reciprocal too: a zero of the wrong sign becomes an infinity of the wrong sign
    // (`tanh(-0)` was +0 on every backend until session 21).
    let one = g.constant(1.0, DType::F32).unwrap();
    for op in
        [UnaryOp::Exp, UnaryOp::Log, UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Gelu, UnaryOp::Relu, UnaryOp::Rsqrt]
    {
        let y = g.push(Op::Unary(op, x)).unwrap();
        let reciprocal = g.push(Op::Binary(BinaryOp::Div, one, y)).unwrap();
        outs.extend([y, reciprocal]);
    }
    let h = g.push_typed(Op::Cast(x), t(DType::F16, &[40])).unwrap();
    let bf = g.push_typed(Op::Cast(x), t(DType::BF16, &[40])).unwrap();
    let ax = g.push(Op::Unary(UnaryOp::Abs, x)).unwrap();
    let e = g.constant(1.5, DType::F32).unwrap();
    let p = g.push(Op::Binary(BinaryOp::Pow, ax, e)).unwrap();
    let mx = g.push(Op::Binary(BinaryOp::Max, x, ax)).unwrap();
    let mn = g.push(Op::Binary(BinaryOp::Min, ax, x)).unwrap();
    // At x = -0: max(-0, +0) and min(+0, -0) keep their first operand (contract §5).
    let rmx = g.push(Op::Binary(BinaryOp::Div, one, mx)).unwrap();
    let rmn = g.push(Op::Binary(BinaryOp::Div, one, mn)).unwrap();
    outs.extend([h, bf, p, mx, mn, rmx, rmn]);
    g.outputs = outs;
    let specials = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        1e-40,
        -1e-40,
        88.8,
        89.5,
        -103.0,
        -110.0,
        70000.0,
        65519.0,
        65520.0,
        6e-8,
        3e-8,
        1e-5,
        -0.5,
        0.625,
        20.0,
    ];
    let data: Vec<f64> =
        specials.iter().chain(specials.iter().map(|v| v * 0.37).collect::<Vec<_>>().iter()).copied().collect();
    let inputs = vec![Tensor::new(DType::F32, vec![40], data).unwrap()];
    let k = kernel("special", KernelClass::Pointwise, g);
    check(&k, &inputs, &Bindings::new());
}

#[test]
fn shape_variables_bind_and_unbound_ones_are_reported() {
    let mut g = Graph::new("vars");
    let ty = TensorType { dtype: DType::F32, shape: Shape(vec![Dim::Var("M".into()), Dim::Const(77)]) };
    let x = g.add_param("x", ty).unwrap();
    let m = g.push(Op::Reduce { op: ReduceOp::Max, input: x, axes: vec![1], keepdim: true }).unwrap();
    let y = g.push(Op::Binary(BinaryOp::Sub, x, m)).unwrap();
    g.outputs.push(y);
    let k = kernel("vars", KernelClass::RowReduction, g);
    let err = native().compile(&k, &Bindings::new()).unwrap_err();
    assert!(matches!(&err, CodegenError::UnboundDim(n) if n == "M"), "{err}");
    assert!(!err.is_bug());
    let mut bindings = Bindings::new();
    bindings.insert("M".into(), 9);
    let inputs = random_inputs(&k.graph, &bindings, 3).unwrap();
    check_with(native(), &k, &inputs, &bindings, 2).unwrap();
}

#[test]
fn the_gemm_uses_full_width_vectors_and_register_tiles() {
    let g = matmul_bias_gelu(DType::F32, None, 64, 64, 64);
    let k = kernel("mlp", KernelClass::MatMul, g);
    let lk = native().lower(&k, &Bindings::new()).unwrap();
    let mut tiles = Vec::new();
    for p in &lk.phases {
        for s in &p.body {
            s.for_each_root(&mut |st| {
                if let Stmt::MicroKernel(mk) = st {
                    tiles.push((mk.mr, mk.nr));
                }
            });
        }
    }
    let lanes = native().host().lanes;
    let d = LlvmCpuBackend::default_tiles(lanes);
    assert_eq!(tiles, vec![(d.mr, d.nr)]);
    let asm = native().assembly(&lk).unwrap();
    let fma = if lanes == 16 { "vfmadd231ps\t%zmm" } else { "vfmadd231ps\t%ymm" };
    if native().host().fma && lanes >= 8 {
        assert!(asm.contains(fma) || asm.contains(&fma.replace("231", "213")), "no {fma} in\n{asm}");
    }
    let ir = native().llvm_ir(&lk).unwrap();
    assert!(ir.contains(&format!("<{lanes} x float>")), "{ir}");
}

#[test]
fn older_hosts_get_code_without_the_newer_registers() {
    let g = layernorm(DType::F16, 8, 100);
    let k = kernel("layernorm", KernelClass::RowReduction, g);
    let lk = avx2().lower(&k, &Bindings::new()).unwrap();
    let avx2_asm = avx2().assembly(&lk).unwrap();
    assert!(avx2_asm.contains("%ymm"), "{avx2_asm}");
    assert!(!avx2_asm.contains("%zmm") && !avx2_asm.contains("%k1"), "{avx2_asm}");
    let sse = materializing().assembly(&lk).unwrap();
    assert!(!sse.contains("%ymm") && !sse.contains("vfmadd"), "{sse}");
    if native().host().lanes == 16 {
        let asm = native().assembly(&lk).unwrap();
        assert!(asm.contains("%zmm"), "{asm}");
    }
}

#[test]
fn schedule_tiles_fit_the_registers() {
    for lanes in [4, 8, 16] {
        for (mm, mn) in [(1, 1), (4, 8), (16, 64), (30, 200), (8, 48)] {
            let s = Schedule { micro_m: mm, micro_n: mn, ..Schedule::default_for(Tier::LlvmCpu) };
            let tiles = LlvmCpuBackend::tiles_from_schedule(&s, lanes);
            assert!(tiles.nr.is_multiple_of(lanes) && tiles.nr <= 4 * lanes, "{tiles:?}");
            assert!(tiles.mr >= 1 && tiles.mr * tiles.nr / lanes <= 28, "{tiles:?}");
            assert!(tiles.mc.is_multiple_of(tiles.mr) && tiles.nc.is_multiple_of(tiles.nr), "{tiles:?}");
        }
    }
}

// ---- random programs ----

/// `PROPTEST_CASES` overrides the case counts (for deeper runs by hand).
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn run_case(gp: &tcc_ir::testing::GeneratedProgram, seed: u64, every_backend: bool) -> Result<(), TestCaseError> {
    let inputs = gp.random_inputs(seed).map_err(|e| TestCaseError::reject(e.to_string()))?;
    check_graph(&gp.graph, &inputs, &gp.bindings, every_backend)
        .map_err(|e| TestCaseError::fail(format!("{e}\n{:#?}", gp.graph)))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(48), ..ProptestConfig::default() })]

    #[test]
    fn random_programs_match_the_interpreter(gp in arb_graph(GenConfig { max_ops: 20, max_elements: 6_000, ..GenConfig::default() }), seed in any::<u64>()) {
        run_case(&gp, seed, true)?;
    }

    #[test]
    fn random_pointwise_programs_match_the_interpreter(gp in arb_graph(GenConfig { max_ops: 24, ..GenConfig::pointwise_only() }), seed in any::<u64>()) {
        run_case(&gp, seed, false)?;
    }
}
