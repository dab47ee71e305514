//! The rows stage with rows held in registers: which rows it takes, that it reads each row once
//! and assembles without spills, and emulated against the interpreter on rows of awkward lengths
//! (1, primes, lengths off the vector width, rows longer than a warp's or a block's share).

use super::*;

fn rows_kernel(g: Graph) -> Kernel {
    kernel(&g.name.clone(), KernelClass::RowReduction, g)
}

fn bindings(m: u64) -> Bindings {
    [("M".to_string(), m)].into_iter().collect()
}

/// `sum(x, -1)` and `x / sum(x, -1)` of `[M, n]`: a plain reduction next to a row output.
fn normalize(dtype: DType, n: u64) -> Graph {
    let mut g = Graph::new("normalize");
    let x = g.add_param("x", TensorType { dtype, shape: Shape(vec![Dim::Var("M".into()), Dim::Const(n)]) }).unwrap();
    let s = g.push(Op::Reduce { op: ReduceOp::Sum, input: x, axes: vec![1], keepdim: true }).unwrap();
    let y = g.push(Op::Binary(BinaryOp::Div, x, s)).unwrap();
    g.outputs.push(y);
    g.outputs.push(s);
    g
}

/// Loads of parameter 0 (the row) in the LLVM IR.
fn row_loads(k: &PtxKernel) -> usize {
    k.ir.llvm_ir.lines().filter(|l| l.contains("%in0,") && l.contains("getelementptr")).count()
}

#[test]
fn benchmark_rows_are_held_in_registers_read_once_and_do_not_spill() {
    for (name, g, m) in [
        ("softmax", softmax(DType::F16, 8192), 8192),
        ("layernorm", layernorm(DType::F16, 4096), 64),
        ("softmax", softmax(DType::F32, 1024), 4096),
        ("rmsnorm", rmsnorm(DType::BF16, 4096), 32),
    ] {
        let mut g = g;
        g.name = format!("{name}_{}", g.nodes[0].ty.dtype);
        for k in check_kernel(&rows_kernel(g), &bindings(m)) {
            assert_eq!(lowerings(&k), ["rows"], "{name}");
            let loops = k.ir.llvm_ir.lines().filter(|l| l.starts_with("head")).count();
            assert_eq!(loops, 1, "{name}: only the loop over rows\n{}", k.ir.llvm_ir);
            assert!(k.ptx.contains("shfl.sync.bfly"), "{name}: no warp shuffle");
            // One vector load per vector a lane holds, never a second pass over the row.
            let loads = row_loads(&k);
            assert!((1..=8).contains(&loads), "{name}: {loads} loads of the row");
        }
    }
}

#[test]
fn rows_without_a_row_output_or_too_long_for_registers_stream() {
    let mut g = Graph::new("rowsum");
    let x = g.add_param("x", t(DType::F32, &[16, 4096])).unwrap();
    let s = g.push(Op::Reduce { op: ReduceOp::Sum, input: x, axes: vec![1], keepdim: false }).unwrap();
    g.outputs.push(s);
    for k in check_kernel(&rows_kernel(g), &Bindings::new()) {
        let loops = k.ir.llvm_ir.lines().filter(|l| l.starts_with("head")).count();
        assert_eq!(loops, 3, "rowsum: the loop over rows, the streaming pass, the store");
    }
    // 40000 f32 do not fit in the registers of 1024 threads (at most 32 each).
    for k in check_kernel(&rows_kernel(softmax(DType::F32, 40_000)), &bindings(3)) {
        let loops = k.ir.llvm_ir.lines().filter(|l| l.starts_with("head")).count();
        assert_eq!(loops, 3, "long softmax: rows, the online pass, the output");
    }
}

#[test]
fn emulated_rows_of_awkward_lengths_match_the_interpreter() {
    // Lengths: 1, primes, off the vector width, a warp's share exactly and past it, masked
    // vectors of a block, and one past what a block holds in registers (streaming).
    let lengths: &[(DType, u64)] = &[
        (DType::F32, 1),
        (DType::F16, 1),
        (DType::F32, 2),
        (DType::F16, 3),
        (DType::BF16, 7),
        (DType::F32, 31),
        (DType::F16, 97),
        (DType::F32, 128),
        (DType::F16, 257),
        (DType::BF16, 1021),
        (DType::F32, 1030),
        (DType::F16, 2048),
        (DType::F16, 4099),
        (DType::F32, 8200),
    ];
    for &(dtype, n) in lengths {
        for m in [1u64, 5] {
            let b = bindings(m);
            for g in [softmax(dtype, n), normalize(dtype, n)] {
                let inputs = random_inputs(&g, &b, n ^ m).unwrap();
                sim_check(&rows_kernel(g.clone()), &inputs, &b, 2)
                    .unwrap_or_else(|e| panic!("{} {dtype} [{m}, {n}]: {e}", g.name));
            }
        }
        for g in [layernorm(dtype, n), rmsnorm(dtype, n)] {
            let inputs = random_inputs(&g, &Bindings::new(), n).unwrap();
            sim_check(&rows_kernel(g.clone()), &inputs, &Bindings::new(), 3)
                .unwrap_or_else(|e| panic!("{} {dtype} n={n}: {e}", g.name));
        }
    }
}

#[test]
fn emulated_resident_rows_keep_the_interpreters_special_values() {
    let (ninf, inf, nan) = (f64::NEG_INFINITY, f64::INFINITY, f64::NAN);
    for n in [40u64, 300] {
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
        for dtype in [DType::F32, DType::F16] {
            let x = Tensor::new(dtype, vec![5, n as usize], data.clone()).unwrap();
            sim_check(&rows_kernel(softmax(dtype, n)), &[x], &bindings(5), 1)
                .unwrap_or_else(|e| panic!("softmax {dtype} n={n}: {e}"));
        }
    }
    // The f16 layernorm whose rounded mean doubles the variance, held in registers.
    let g = layernorm(DType::F16, 96);
    let mut inputs = random_inputs(&g, &Bindings::new(), 5).unwrap();
    for (i, v) in inputs[0].data.iter_mut().enumerate() {
        *v = 500.0 + 0.25 * (i % 2) as f64;
    }
    sim_check(&rows_kernel(g), &inputs, &Bindings::new(), 1).unwrap();
}
