//! Lowering to the loop IR: which nodes get buffers, when rows may run on several threads, and
//! that every kernel compiles with cranelift.

use tcc_codegen::loops::{BufKind, Expr, Extent, Index, LoopKernel, Stmt, VarId, lower_graph, split_rows};
use tcc_codegen::{Backend, CodegenError, CraneliftBackend, LowerOptions};
use tcc_ir::{
    BinaryOp, Bindings, DType, Dim, Graph, Kernel, KernelClass, Op, ReduceOp, Schedule, Shape, TensorType, Tier,
    UnaryOp,
};

fn ty(dtype: DType, dims: &[u64]) -> TensorType {
    TensorType { dtype, shape: Shape::from_consts(dims) }
}

fn kernel(graph: Graph, class: KernelClass) -> Kernel {
    Kernel { name: "k".into(), class, graph, schedule: Schedule::default_for(Tier::Cranelift) }
}

fn scratch_count(k: &LoopKernel) -> usize {
    k.bufs.iter().filter(|b| b.kind == BufKind::Scratch).count()
}

fn softmax(rows: u64, cols: u64) -> Graph {
    let mut g = Graph::new("softmax");
    let x = g.add_param("x", ty(DType::F32, &[rows, cols])).unwrap();
    let m = g.push(Op::Reduce { op: ReduceOp::Max, input: x, axes: vec![1], keepdim: true }).unwrap();
    let d = g.push(Op::Binary(BinaryOp::Sub, x, m)).unwrap();
    let e = g.push(Op::Unary(UnaryOp::Exp, d)).unwrap();
    let s = g.push(Op::Reduce { op: ReduceOp::Sum, input: e, axes: vec![1], keepdim: true }).unwrap();
    let y = g.push(Op::Binary(BinaryOp::Div, e, s)).unwrap();
    g.outputs.push(y);
    g
}

#[test]
fn a_pointwise_chain_is_one_nest_without_temporaries() {
    let mut g = Graph::new("chain");
    let x = g.add_param("x", ty(DType::F32, &[3, 5])).unwrap();
    let b = g.add_param("b", ty(DType::F32, &[5])).unwrap();
    let s = g.push(Op::Binary(BinaryOp::Add, x, b)).unwrap();
    let e = g.push(Op::Unary(UnaryOp::Exp, s)).unwrap();
    let y = g.push(Op::Binary(BinaryOp::Mul, e, e)).unwrap();
    g.outputs.push(y);
    let k = lower_graph("chain", &g, &Bindings::new(), &LowerOptions::default()).unwrap();
    assert_eq!(scratch_count(&k), 0);
    assert_eq!(k.phases.len(), 1);
    let all =
        lower_graph("chain", &g, &Bindings::new(), &LowerOptions { materialize_all: true, ..LowerOptions::default() })
            .unwrap();
    assert_eq!(scratch_count(&all), 2);
    assert_eq!(all.phases.len(), 3);
}

#[test]
fn softmax_rows_are_fused_into_one_parallel_row_loop() {
    let mut k = lower_graph("softmax", &softmax(8, 100), &Bindings::new(), &LowerOptions::default()).unwrap();
    assert_eq!(k.phases.len(), 4, "max, exp into the output, sum and output nests");
    split_rows(&mut k, 4096);
    assert_eq!(k.phases.len(), 1, "{:#?}", k.phases);
    assert_eq!(k.phases[0].rows, 8);
    assert!(k.phases[0].row_var.is_some());
    assert!(k.phases[0].body.iter().all(|s| !matches!(s, Stmt::Loop { extent: Extent::Const(8), .. })));
    // The division by the row's sum is one reciprocal per row and a multiply per element: every
    // division left divides a constant.
    let divisions: Vec<_> = k.exprs.iter().filter(|e| matches!(e, Expr::Binary { op: BinaryOp::Div, .. })).collect();
    assert!(!divisions.is_empty());
    for d in divisions {
        let Expr::Binary { lhs, .. } = d else { unreachable!() };
        assert!(matches!(k.expr(*lhs), Some(Expr::Const { .. })), "{:?}", k.expr(*lhs));
    }
}

#[test]
fn a_row_reading_another_rows_result_starts_a_new_phase() {
    // y[i, j] = x[i, j] - colmax[j]: the reduction runs over rows, so rows depend on each other.
    let mut g = Graph::new("colnorm");
    let x = g.add_param("x", ty(DType::F32, &[6, 6])).unwrap();
    let m = g.push(Op::Reduce { op: ReduceOp::Max, input: x, axes: vec![0], keepdim: true }).unwrap();
    let y = g.push(Op::Binary(BinaryOp::Sub, x, m)).unwrap();
    g.outputs.push(y);
    let mut k = lower_graph("colnorm", &g, &Bindings::new(), &LowerOptions::default()).unwrap();
    split_rows(&mut k, 4096);
    // Column maxima in parallel over columns, then the subtraction in parallel over rows.
    assert_eq!(k.phases.len(), 2, "{:#?}", k.phases);
    assert!(k.phases.iter().all(|p| p.rows == 6 && p.row_var.is_some()));
}

#[test]
fn long_flat_loops_are_strip_mined() {
    let mut g = Graph::new("flat");
    let x = g.add_param("x", ty(DType::F32, &[10_000])).unwrap();
    let y = g.push(Op::Unary(UnaryOp::Relu, x)).unwrap();
    g.outputs.push(y);
    let mut k = lower_graph("flat", &g, &Bindings::new(), &LowerOptions::default()).unwrap();
    split_rows(&mut k, 4096);
    assert_eq!(k.phases[0].rows, 3);
    let Some(Stmt::Loop { extent: Extent::Tail { total: 10_000, block: 4096, .. }, .. }) = k.phases[0].body.first()
    else {
        panic!("expected a strip loop, got {:?}", k.phases);
    };
}

#[test]
fn repeated_outputs_and_returned_inputs_are_copied() {
    let mut g = Graph::new("copies");
    let x = g.add_param("x", ty(DType::I32, &[4])).unwrap();
    let y = g.push(Op::Unary(UnaryOp::Neg, x)).unwrap();
    g.outputs.extend([y, y, x]);
    let k = lower_graph("copies", &g, &Bindings::new(), &LowerOptions::default()).unwrap();
    assert_eq!(k.bufs.iter().filter(|b| matches!(b.kind, BufKind::Output(_))).count(), 3);
    assert_eq!(k.phases.len(), 3);
}

#[test]
fn matmuls_become_register_tiles_split_by_row_blocks() {
    let mut g = Graph::new("mm");
    let a = g.add_param("a", ty(DType::F16, &[130, 70])).unwrap();
    let b = g.add_param("b", ty(DType::F16, &[70, 33])).unwrap();
    let y = g.push(Op::MatMul(a, b)).unwrap();
    g.outputs.push(y);
    let backend = CraneliftBackend::new().unwrap();
    let lk = backend.lower(&kernel(g, KernelClass::MatMul), &Bindings::new()).unwrap();
    let mut tiles = 0;
    for p in &lk.phases {
        for s in &p.body {
            s.for_each_root(&mut |st| tiles += usize::from(matches!(st, Stmt::MicroKernel(_))));
        }
    }
    // The depth blocks' tile adding to C, and the last block's writing the tile buffer.
    assert_eq!(tiles, 2);
    // B is packed once into scratch by a phase of its own (rows: groups of panels of 8 columns); A's
    // panel and the tile buffer are call-local; the f16 result is rounded tile by tile from
    // the tile buffer plus the f32 partial sums of the earlier depth blocks.
    assert_eq!(lk.bufs.iter().filter(|b| b.kind == BufKind::Local).count(), 2);
    assert_eq!(lk.bufs.iter().filter(|b| b.kind == BufKind::Scratch).count(), 2);
    assert_eq!(lk.phases.len(), 2);
    assert_eq!(lk.phases[0].rows, 3, "33 columns in 5 panels of 8, packed two at a time");
    assert_eq!(lk.phases[1].rows, 3, "130 rows in blocks of 64");
    assert!(backend.compile_loops(&lk).is_ok());
}

/// The cranelift tier's register tile is an assembled kernel where the host has AVX and FMA, on
/// 256-bit registers where its columns are whole `ymm` vectors; a schedule's tile that does not
/// fit the registers is rounded to one that does.
#[test]
fn register_tiles_are_assembled_at_the_widest_width_that_holds_them() {
    let backend = CraneliftBackend::new().unwrap();
    let cases = [((6, 16), "tcc_tile_6x16_ymm"), ((4, 12), "tcc_tile_4x12"), ((3, 32), "tcc_tile_2x32_ymm")];
    for ((mr, nr), symbol) in cases {
        let mut g = Graph::new("mm");
        let a = g.add_param("a", ty(DType::F32, &[50, 70])).unwrap();
        let b = g.add_param("b", ty(DType::F32, &[70, 100])).unwrap();
        let y = g.push(Op::MatMul(a, b)).unwrap();
        g.outputs.push(y);
        let mut k = kernel(g, KernelClass::MatMul);
        (k.schedule.micro_m, k.schedule.micro_n) = (mr, nr);
        let lk = backend.lower(&k, &Bindings::new()).unwrap();
        let text = backend.disassemble(&lk).unwrap();
        if backend.caps().assembled_tiles() {
            assert!(text.contains(&format!("; {symbol}: ")), "{mr}x{nr}: no {symbol} in\n{text}");
        } else {
            assert!(!text.contains("tcc_tile_"), "{mr}x{nr}: a tile kernel without AVX and FMA");
        }
    }
}

#[test]
fn a_pointwise_consumer_of_a_matmul_is_computed_in_its_tiles() {
    let backend = CraneliftBackend::new().unwrap();
    let graphs = tcc_ir::testing::gemm_epilogue_graphs(&[], (130, 33, 70)).unwrap();
    for (g, fused) in graphs.into_iter().zip([true, true, true, false]) {
        let lk = backend.lower(&kernel(g, KernelClass::MatMul), &Bindings::new()).unwrap();
        // Packing B, then the row blocks of tiles; the output is stored next to the tiles, in
        // their row-parallel phase, unless the product is an output too (then a nest of its own).
        let outputs: Vec<_> =
            lk.bufs.iter().enumerate().filter(|(_, b)| matches!(b.kind, BufKind::Output(_))).map(|(i, _)| i).collect();
        let tile_phase = lk.phases.iter().position(|p| {
            p.body.iter().any(|s| {
                let mut tile = false;
                s.for_each_root(&mut |st| tile |= matches!(st, Stmt::MicroKernel(_)));
                tile
            })
        });
        let phase = &lk.phases[tile_phase.unwrap()];
        let mut stored = Vec::new();
        for s in &phase.body {
            s.for_each_root(&mut |st| {
                if let Stmt::Store { buf, .. } = st {
                    stored.push(buf.0 as usize);
                }
            });
        }
        assert_eq!(lk.phases.len(), if fused { 2 } else { 3 }, "{:#?}", lk.phases);
        assert_eq!(phase.rows, 3, "130 rows in blocks of 64");
        assert_eq!(stored.iter().any(|b| outputs.contains(b)), fused);
        assert!(backend.compile_loops(&lk).is_ok());
    }
}

#[test]
fn batched_b_is_packed_once_per_batch_entry_and_a_broadcast_one_once() {
    for (b_batch, packs) in [(2u64, 2u64), (1, 1)] {
        let mut g = Graph::new("bmm");
        let a = g.add_param("a", ty(DType::F32, &[2, 9, 20])).unwrap();
        let b = g.add_param("b", ty(DType::F32, &[b_batch, 20, 12])).unwrap();
        let y = g.push(Op::MatMul(a, b)).unwrap();
        g.outputs.push(y);
        let backend = CraneliftBackend::new().unwrap();
        let lk = backend.lower(&kernel(g, KernelClass::MatMul), &Bindings::new()).unwrap();
        // 12 columns: two panels of 8 (the second zero-padded), 20 deep, per packed B.
        let packed: Vec<u64> = lk.bufs.iter().filter(|b| b.kind == BufKind::Scratch).map(|b| b.len).collect();
        assert_eq!(packed, vec![packs * 2 * 20 * 8]);
        // With a B per batch entry, each row (batch entry) packs its own B and multiplies: one
        // phase. A shared B is packed first by a phase of its own (rows: its two panels).
        let rows: Vec<u64> = lk.phases.iter().map(|p| p.rows).collect();
        assert_eq!(rows, if packs == 2 { vec![2] } else { vec![2, 2] });
        assert!(backend.compile_loops(&lk).is_ok());
    }
}

#[test]
fn unbound_shape_variables_are_reported() {
    let mut g = Graph::new("v");
    let x = g.add_param("x", TensorType { dtype: DType::F32, shape: Shape(vec![Dim::Var("N".into())]) }).unwrap();
    g.outputs.push(x);
    let err = CraneliftBackend::new().unwrap().compile(&kernel(g, KernelClass::Generic), &Bindings::new()).unwrap_err();
    assert!(matches!(&err, CodegenError::UnboundDim(n) if n == "N"), "{err}");
    assert!(!err.is_bug());
}

#[test]
fn every_dtype_of_a_mixed_kernel_compiles_and_the_clif_is_printable() {
    let mut g = Graph::new("mixed");
    let mut outs = Vec::new();
    for dtype in DType::ALL {
        let x = g.add_param(format!("x_{dtype}"), ty(dtype, &[2, 9])).unwrap();
        let c = g.push_typed(Op::Cast(x), ty(DType::F32, &[2, 9])).unwrap();
        let back = g.push_typed(Op::Cast(c), ty(dtype, &[2, 9])).unwrap();
        let p = g.push(Op::Permute { input: back, perm: vec![1, 0] }).unwrap();
        outs.push(p);
    }
    g.outputs = outs;
    let backend = CraneliftBackend::new().unwrap();
    let k = kernel(g, KernelClass::Generic);
    let lk = backend.lower(&k, &Bindings::new()).unwrap();
    let text = backend.clif_text(&lk).unwrap();
    assert!(text.contains("function"), "{text}");
    let artifact = backend.compile(&k, &Bindings::new()).unwrap();
    assert_eq!(artifact.buffers().len(), 10);
}

#[test]
fn affine_indices_normalize() {
    let (a, b) = (VarId(0), VarId(1));
    let i = Index::var(a).scale(3).add(&Index::var(b)).add(&Index::var(a).scale(-3));
    assert_eq!(i, Index::var(b));
    let j = Index::flatten(&[Index::var(a), Index::constant(2)], &[4, 5]);
    assert_eq!(j.coef(a), 5);
    assert_eq!(j.offset, 2);
    assert_eq!(j.substitute(a, &Index::var(b).add_const(1)), Index { offset: 7, terms: vec![(b, 5)] });
}
