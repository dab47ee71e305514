//! Warpgroup GEMMs (feature `llvm`): every wgmma variant (both B layouts, f16 and bf16, one or
//! two consumer warpgroups, with and without a producer warpgroup, aligned and ragged shapes,
//! fused epilogues) compiles for sm_90a and assembles with ptxas without spills and without
//! wgmma serialization; the same kernels keep `mma.sync` on sm_80; schedule validation.
//!
//! Known: with a fused epilogue (bias + gelu) evaluated pair by pair from the accumulators in a
//! tile loop around the k loop (the cp.async producer variants, or persistent all-thread blocks),
//! ptxas 12.9 reports C7514 (wgmmas serialized because non-wgmma instructions read the
//! accumulators inside a pipeline stage) although every read in the PTX follows
//! `wgmma.wait_group 0` (bisected on the PTX: removing the tile loop's back edge removes it;
//! barriers, fences or resetting the ring there do not). Such producer cases are assembled but
//! not held to the serialization check, and cp.async all-thread blocks are persistent only for
//! plain stores. TMA variants, which store their tiles through the TMA-store epilogue, are held
//! to it with and without arithmetic.

use tcc_codegen::ptx::wgmma::{
    default_wgmma_schedule, is_wgmma_schedule, validate_wgmma_schedule, wgmma_schedule_space,
};
use tcc_codegen::ptx::{self, BLayout, GpuArch, MatmulProblem};
use tcc_ir::testing::{compare_outputs, random_inputs};
use tcc_ir::{Bindings, DType, Kernel, KernelClass, Schedule, TensorType, Tier};

use super::gemm::gemm_graph;
use super::{check_kernel, lowerings, ptxas, sim, sim_tolerance};

fn problem(dtype: DType, m: u64, n: u64, k: u64, nk: bool) -> MatmulProblem {
    MatmulProblem { m, n, k, batch: 1, dtype, b_layout: if nk { BLayout::NK } else { BLayout::KN } }
}

fn kernel(name: String, g: tcc_ir::Graph, s: Schedule) -> Kernel {
    Kernel { name, class: KernelClass::MatMul, graph: g, schedule: s }
}

/// Compiles for sm_90a and assembles; checks the lowering, spills and (when `strict`) that
/// ptxas does not serialize the wgmmas (C7514/C7515) or ignore `setmaxnreg` (C7508).
fn check_sm90a(k: &Kernel, strict: bool) -> ptx::PtxasReport {
    let compiled = ptx::compile_kernel(k, &Bindings::new(), GpuArch::Sm90a).unwrap();
    if let Some(dir) = std::env::var_os("TCC_DUMP_PTX") {
        let base = std::path::Path::new(&dir).join(format!("{}_sm_90a", k.name));
        std::fs::write(base.with_extension("ptx"), &compiled.ptx).unwrap();
        std::fs::write(base.with_extension("ll"), &compiled.ir.llvm_ir).unwrap();
    }
    assert!(lowerings(&compiled).contains(&"matmul-wgmma"), "{}: {:?}", k.name, lowerings(&compiled));
    let report = ptx::assemble(ptxas(), &compiled.ptx, GpuArch::Sm90a).unwrap_or_else(|e| panic!("{}: {e}", k.name));
    assert_eq!(report.spill_bytes(), 0, "{}: {}", k.name, report.output);
    let warned = ["C7514", "C7515", "C7510", "C7511", "C7508"].iter().any(|c| report.output.contains(c));
    assert!(!(strict && warned), "{}: {}", k.name, report.output);
    report
}

/// One schedule per (consumers, tile_n, producer, copy engine) of the space and of the space's
/// `cp.async` twins (`vector_width` 8, valid but not listed).
fn variants(p: &MatmulProblem) -> Vec<Schedule> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    let listed = wgmma_schedule_space(p, GpuArch::Sm90a);
    assert!(listed.iter().all(|s| s.vector_width == 64), "sm_90a lists TMA variants only");
    let twins = listed.iter().map(|s| Schedule { vector_width: 8, ..*s });
    let twins = twins.filter(|s| validate_wgmma_schedule(p, s, GpuArch::Sm90a).is_ok());
    let all: Vec<Schedule> = listed.iter().copied().chain(twins).collect();
    for s in all {
        let key = (s.tile_m, s.tile_n, s.warps, s.vector_width);
        if !seen.contains(&key) && s.stages == 4 {
            seen.push(key);
            out.push(s);
        }
    }
    out
}

#[test]
fn every_variant_assembles_for_sm90a_without_spills_or_serialization() {
    let p = problem(DType::F16, 4096, 4096, 4096, false);
    let vs = variants(&p);
    assert!(vs.len() >= 16, "{vs:?}");
    assert!(vs.iter().any(|s| s.vector_width == 64), "TMA variants: {vs:?}");
    for s in vs {
        // A fused epilogue after a producer's consumers sometimes makes ptxas serialize the
        // wgmmas (C7514; see the module doc): strict only where it never does.
        let producer = s.warps > 4 * (s.tile_m / 64);
        for (dtype, nk, epilogue) in [(DType::F16, false, true), (DType::BF16, true, false), (DType::F16, false, false)]
        {
            let g = gemm_graph(dtype, &[], 4096, 4096, 4096, nk, epilogue);
            let name = format!(
                "wg_{}x{}_w{}_v{}_{dtype}_{}_{epilogue}",
                s.tile_m,
                s.tile_n,
                s.warps,
                s.vector_width,
                if nk { "nk" } else { "kn" }
            );
            let r = check_sm90a(&kernel(name, g, s), !(producer && epilogue));
            assert!(r.entries.iter().all(|e| e.registers <= 255));
        }
    }
}

#[test]
fn ragged_batched_and_packed_products_use_wgmma_on_sm90a_and_mma_sync_on_sm80() {
    let s = default_wgmma_schedule(&problem(DType::F16, 4096, 4096, 4096, false), GpuArch::Sm90a).unwrap();
    let producer = Schedule { warps: s.warps + 4, ..s };
    let tma = Schedule { vector_width: 64, ..s };
    let tma_producer = Schedule { vector_width: 64, ..producer };
    validate_wgmma_schedule(&problem(DType::F16, 77, 50, 33, false), &producer, GpuArch::Sm90a).unwrap();
    for (m, n, k) in [(77, 50, 33), (129, 257, 31), (200, 136, 520), (1, 1, 1)] {
        for nk in [false, true] {
            for sched in [s, producer, tma, tma_producer] {
                let g = gemm_graph(DType::BF16, &[], m, n, k, nk, true);
                let name = format!("wg_ragged_{m}x{n}x{k}_{nk}_{}_{}", sched.warps, sched.vector_width);
                let kern = kernel(name, g, sched);
                check_sm90a(&kern, sched.warps == s.warps);
                // Both targets assemble; sm_80 falls back to mma.sync (the schedule is not its).
                let both = check_kernel(&kern, &Bindings::new());
                assert!(lowerings(&both[0]).contains(&"matmul-mma"), "{:?}", lowerings(&both[0]));
                assert!(lowerings(&both[1]).contains(&"matmul-wgmma"), "{:?}", lowerings(&both[1]));
                let aligned = k % 8 == 0 && (nk || n % 8 == 0);
                assert_eq!(lowerings(&both[1]).contains(&"matmul-pack"), !aligned);
            }
        }
    }
    for sched in [s, tma] {
        let g = gemm_graph(DType::F16, &[3], 40, 24, 64, true, true);
        check_sm90a(&kernel(format!("wg_batched_{}", sched.vector_width), g, sched), true);
    }
}

#[test]
fn tma_variants_take_their_tensor_maps_by_value_and_copy_boxes_into_the_swizzled_stages() {
    let s = default_wgmma_schedule(&problem(DType::F16, 4096, 4096, 4096, false), GpuArch::Sm90a).unwrap();
    for sched in [Schedule { vector_width: 64, ..s }, Schedule { vector_width: 64, warps: s.warps + 4, ..s }] {
        for nk in [false, true] {
            // A batched product with a fused epilogue: 3 products of 200 x 136 x 520.
            let g = gemm_graph(DType::BF16, &[3], 200, 136, 520, nk, true);
            let k = kernel(format!("wg_tma_maps_{nk}_{}", sched.warps), g, sched);
            let compiled = ptx::compile_kernel(&k, &Bindings::new(), GpuArch::Sm90a).unwrap();
            let step = compiled.ir.steps.iter().find(|st| st.lowering == "matmul-wgmma").unwrap();
            // The blocks are persistent (9 k-tiles, more than the copies run ahead) and store
            // the tile by TMA too.
            let maps = &step.tensor_maps;
            assert_eq!(maps.len(), 3, "{maps:?}");
            let (a, b) = (&maps[0], &maps[1]);
            if let Some(c) = maps.get(2) {
                // The output, [3][200][136] bf16, in boxes of 64 x 64.
                assert_eq!(c.buffer, ptx::TmaBuffer::Output(0));
                assert_eq!((c.dims.as_slice(), c.strides.as_slice()), (&[136, 200, 3][..], &[272, 272 * 200][..]));
                assert_eq!(c.box_dims, [64, 64, 1]);
            }
            // A: [3][200][520] bf16, k innermost; one box of 64 k x 128 rows per copy.
            assert_eq!(a.buffer, ptx::TmaBuffer::Input(0));
            assert_eq!((a.dims.as_slice(), a.strides.as_slice()), (&[520, 200, 3][..], &[1040, 1040 * 200][..]));
            assert_eq!(a.box_dims, [64, 128, 1]);
            if nk {
                assert_eq!((b.dims.as_slice(), b.box_dims.as_slice()), (&[520, 136, 3][..], &[64, 256, 1][..]));
            } else {
                assert_eq!((b.dims.as_slice(), b.box_dims.as_slice()), (&[136, 520, 3][..], &[64, 64, 1][..]));
            }
            assert_eq!(a.box_bytes() + b.box_bytes() * if nk { 1 } else { 4 }, (128 + 256) * 64 * 2);
            // The maps are 128-byte parameters read in place (cvta.param), never copied to local memory.
            let ptx = &compiled.ptx;
            assert_eq!(ptx.matches(".param .align 64 .b8").count(), maps.len(), "{ptx}");
            assert!(ptx.contains("cp.async.bulk.tensor.3d.global.shared::cta"), "{ptx}");
            assert!(ptx.contains("cvta.param.u64"), "{ptx}");
            assert!(ptx.contains("cp.async.bulk.tensor.3d"), "{ptx}");
            assert!(!ptx.contains(".local"), "{ptx}");
            check_sm90a(&k, sched.warps == s.warps);
        }
    }
}

#[test]
fn wgmma_and_mma_sync_schedules_never_overlap() {
    for (m, n, k) in [(4096, 4096, 4096), (512, 512, 512), (77, 50, 33)] {
        let p = problem(DType::F16, m, n, k, false);
        let wg = wgmma_schedule_space(&p, GpuArch::Sm90a);
        assert!(!wg.is_empty());
        for s in &wg {
            assert!(is_wgmma_schedule(s));
            validate_wgmma_schedule(&p, s, GpuArch::Sm90a).unwrap();
            assert!(ptx::validate_matmul_schedule(&p, s, GpuArch::Sm90a).is_err(), "{s}");
            assert!(validate_wgmma_schedule(&p, s, GpuArch::Sm80).is_err());
        }
        for s in ptx::matmul_schedule_space(&p, GpuArch::Sm90a) {
            assert!(validate_wgmma_schedule(&p, &s, GpuArch::Sm90a).is_err(), "{s}");
        }
        assert!(wgmma_schedule_space(&p, GpuArch::Sm80).is_empty());
    }
    assert!(wgmma_schedule_space(&problem(DType::F32, 4096, 4096, 4096, false), GpuArch::Sm90a).is_empty());
    // Too small to fill the GPU: no default.
    assert!(default_wgmma_schedule(&problem(DType::F16, 256, 256, 4096, false), GpuArch::Sm90a).is_none());
}

#[test]
fn invalid_wgmma_schedules_name_the_reason() {
    let p = problem(DType::F16, 4096, 4096, 4096, false);
    let good = default_wgmma_schedule(&p, GpuArch::Sm90a).unwrap();
    let cases = [
        (Schedule { tile_k: 32, ..good }, "k-tile"),
        (Schedule { tile_m: 256, ..good }, "tile_m"),
        (Schedule { tile_n: 96, micro_n: 96, ..good }, "tile_n"),
        (Schedule { warps: 16, ..Schedule { tile_m: 64, ..good } }, "warps"),
        (Schedule { stages: 2, ..good }, "stages"),
        (Schedule { stages: 8, ..good }, "shared memory"),
        (Schedule { split_k: 65, ..good }, "split_k"),
        (Schedule { micro_m: 32, ..good }, "micro_m"),
    ];
    for (s, why) in cases {
        let e = validate_wgmma_schedule(&p, &s, GpuArch::Sm90a).unwrap_err();
        assert!(e.to_string().contains(why), "{s}: {e}");
    }
    // A schedule outside the encoding compiles with mma.sync on sm_90a too.
    let plain = Schedule { ..Schedule::default_for(Tier::Ptx) };
    assert!(!is_wgmma_schedule(&plain) || validate_wgmma_schedule(&p, &plain, GpuArch::Sm90a).is_err());
}

#[test]
fn defaults_of_the_benchmark_shapes_assemble_into_persistent_blocks_that_load_and_store_by_tma() {
    // (m, n, k, block tile, stages): fewer tiles take smaller blocks (64 x 128 with a producer).
    let shapes = [
        (4096u64, 4096u64, 4096u64, (128u32, 256u32), 4u32),
        (8192, 8192, 8192, (128, 256), 3),
        (8192, 14336, 4096, (128, 256), 3),
        (2048, 2048, 2048, (128, 256), 4),
        (1536, 1536, 512, (128, 192), 4),
        (1024, 1024, 1024, (64, 128), 6),
        (768, 768, 768, (64, 128), 6),
    ];
    for (m, n, k, (bm, bn), stages) in shapes {
        let s = default_wgmma_schedule(&problem(DType::F16, m, n, k, false), GpuArch::Sm90a).unwrap();
        assert_eq!((s.tile_m, s.tile_n, s.warps, s.stages, s.vector_width), (bm, bn, 8, stages, 64), "{m}x{n}x{k}");
        for epilogue in [false, true] {
            let g = gemm_graph(DType::F16, &[], m, n, k, false, epilogue);
            let kern = kernel(format!("wg_default_{m}x{n}x{k}_{epilogue}"), g, s);
            // Strict: even with arithmetic in the epilogue, the wgmmas are not serialized.
            check_sm90a(&kern, true);
            let compiled = ptx::compile_kernel(&kern, &Bindings::new(), GpuArch::Sm90a).unwrap();
            let step = compiled.ir.steps.iter().find(|st| st.lowering == "matmul-wgmma").unwrap();
            // One block per SM whose copies run on into its next tile, storing by TMA.
            assert_eq!(step.launch.blocks_per_sm, 1, "{m}x{n}x{k} epilogue={epilogue}");
            assert_eq!(step.tensor_maps.len(), 3);
            assert!(compiled.ptx.contains("cp.async.bulk.tensor.2d.global.shared::cta"), "{m}x{n}x{k}");
            assert!(!compiled.ptx.contains("st.global"), "{m}x{n}x{k}: stores outside the TMA epilogue");
        }
    }
    // Fewer k-tiles than the copies run ahead: a block per tile.
    let s = default_wgmma_schedule(&problem(DType::F16, 4096, 4096, 4096, false), GpuArch::Sm90a).unwrap();
    let compiled = ptx::compile_kernel(
        &kernel("wg_shallow".into(), gemm_graph(DType::F16, &[], 4096, 4096, 128, false, false), s),
        &Bindings::new(),
        GpuArch::Sm90a,
    )
    .unwrap();
    let step = compiled.ir.steps.iter().find(|st| st.lowering == "matmul-wgmma").unwrap();
    assert!(step.launch.blocks_per_sm > 1);
}

/// Runs `kern` (a product `k` deep) on the emulator with two SMs on random inputs of `seed`: its
/// entries' lowerings, and whether it matches the interpreter within the emulator's tolerance
/// plus the accumulation allowance of its depth.
fn emulate(kern: &Kernel, k: u64, seed: u64) -> (Vec<&'static str>, Result<(), String>) {
    let bindings = Bindings::new();
    let inputs = random_inputs(&kern.graph, &bindings, seed).unwrap();
    let expected = tcc_ir::interp::run_graph(&kern.graph, &inputs).unwrap();
    let ir = ptx::emit_llvm_ir(kern, &bindings, GpuArch::Sm90a).unwrap();
    let lowered: Vec<&'static str> = ir.steps.iter().map(|st| st.lowering).collect();
    let types: Vec<TensorType> = kern.graph.outputs.iter().map(|o| kern.graph.nodes[o.index()].ty.clone()).collect();
    let actual = sim::run(&ir, &inputs, &types, &bindings, 2);
    let tol = sim_tolerance().with_accumulation(k);
    (lowered, compare_outputs(&expected, &actual, &tol).map_err(|e| e.to_string()))
}

/// Every `cp.async` variant (all threads copying, or a producer warpgroup on mbarriers beside one
/// or two consumers, the ping-pong one included) runs on the emulator and matches the
/// interpreter: ragged products, both B layouts, bf16 with the fused epilogue and f16 without,
/// more tiles than the two emulated SMs' blocks (the persistent loops run several tiles).
#[test]
fn emulated_cp_async_warpgroup_gemms_match_the_interpreter() {
    // The twins of either B layout (192-wide tiles copy a `[k, n]` B only by TMA).
    let mut twins: Vec<Schedule> = Vec::new();
    for nk in [false, true] {
        for s in variants(&problem(DType::F16, 4096, 4096, 4096, nk)) {
            if s.vector_width == 8 && !twins.contains(&s) {
                twins.push(s);
            }
        }
    }
    assert!(twins.iter().any(|s| s.warps > 4 * (s.tile_m / 64)), "a producer variant: {twins:?}");
    assert!(twins.iter().any(|s| s.tile_n == 192), "a 192-wide variant: {twins:?}");
    let mut failures = Vec::new();
    for (j, s) in twins.iter().enumerate() {
        for (dtype, (m, n, k), nk, epilogue) in
            [(DType::BF16, (130, 300, 72), false, true), (DType::F16, (77, 136, 40), true, false)]
        {
            if validate_wgmma_schedule(&problem(dtype, m, n, k, nk), s, GpuArch::Sm90a).is_err() {
                continue;
            }
            let g = gemm_graph(dtype, &[], m, n, k, nk, epilogue);
            let kern = kernel(format!("wg_sim_{j}"), g, *s);
            let (lowered, outcome) = emulate(&kern, k, j as u64);
            assert!(lowered.contains(&"matmul-wgmma"), "{s:?}: {lowered:?}");
            if let Err(e) = outcome {
                failures.push(format!("{s:?} {dtype} {m}x{n}x{k} nk={nk}: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn joined_products_read_each_weight_by_its_own_tensor_map() {
    // A decoder layer's Q, K and V projections as one product: `x @ [wq; wk; wv].t()`, 300 rows
    // (off the tiles). Every TMA schedule of the space whose tiles never straddle two weights
    // reads each weight in place through its own map (no pack entry) and assembles; a tile of
    // 512 columns would straddle (none is offered).
    let parts = [512u64, 256, 256];
    let g = tcc_ir::testing::joined_gemm_graph(DType::BF16, (300, 512), &parts).unwrap();
    let p = problem(DType::BF16, 300, 1024, 512, true);
    let space = wgmma_schedule_space(&p, GpuArch::Sm90a);
    assert!(!space.is_empty());
    // Tiles that never straddle two weights (a 192-wide one would: it packs the joined B).
    let in_place = |s: &&Schedule| parts.iter().all(|&p| p.is_multiple_of(u64::from(s.tile_n)));
    for (i, s) in space.iter().filter(|s| s.stages == 4 && s.split_k == 1).filter(in_place).enumerate() {
        let k = kernel(format!("wg_joined_{i}"), g.clone(), *s);
        let compiled = ptx::compile_kernel(&k, &Bindings::new(), GpuArch::Sm90a).unwrap();
        assert_eq!(lowerings(&compiled), ["matmul-wgmma"], "{s:?}");
        let step = &compiled.ir.steps[0];
        // A, then one map per weight: [k, its rows] in boxes of 64 k by the tile's columns.
        let weights: Vec<_> = step.tensor_maps.iter().filter(|m| m.dims.first() == Some(&512)).skip(1).collect();
        assert_eq!(weights.len(), 3, "{s:?}: {:?}", step.tensor_maps);
        for (m, (&n, input)) in weights.iter().zip(parts.iter().zip(1..)) {
            assert_eq!(m.buffer, ptx::TmaBuffer::Input(input));
            assert_eq!((m.dims.as_slice(), m.box_dims.as_slice()), (&[512, n][..], &[64, s.tile_n][..]), "{s:?}");
        }
        check_sm90a(&k, true);
    }
    // The default (mma.sync) reads each weight in place too, chunk by chunk; a warpgroup tiling
    // copying by cp.async packs the joined B first.
    let default = kernel("wg_joined_default".into(), g.clone(), Schedule::default_for(Tier::Ptx));
    let compiled = ptx::compile_kernel(&default, &Bindings::new(), GpuArch::Sm90a).unwrap();
    assert_eq!(lowerings(&compiled), ["matmul-mma"]);
    let cp_async = Schedule { vector_width: 8, ..space[0] };
    assert!(validate_wgmma_schedule(&p, &cp_async, GpuArch::Sm90a).is_ok());
    let packed = kernel("wg_joined_cp_async".into(), g, cp_async);
    let compiled = ptx::compile_kernel(&packed, &Bindings::new(), GpuArch::Sm90a).unwrap();
    assert_eq!(lowerings(&compiled), ["matmul-pack", "matmul-wgmma"]);
}

/// k splits on the warpgroup kernel (issue 26): every `cp.async` variant split in two and three
/// (each split at least as long as the ring's prefetch: the persistent loops) and in four
/// (shorter: a block per work item) runs on the emulator, its blocks' f32 partial sums added up
/// by the reduce entry that then evaluates the fused epilogue, and matches the interpreter;
/// ragged rows, columns and a ragged last k-tile, both B layouts; three splits of eight k-tiles
/// take three each, the last one's third read past the end (as zeros).
#[test]
fn emulated_split_warpgroup_gemms_match_the_interpreter() {
    // Every kind of block (one or two consumers, a producer, ping-pong) at its narrowest tile.
    let twins: Vec<Schedule> = variants(&problem(DType::F16, 4096, 4096, 4096, false))
        .into_iter()
        .filter(|s| s.vector_width == 8 && s.tile_n == 64)
        .collect();
    assert!(twins.len() >= 4, "{twins:?}");
    let mut failures = Vec::new();
    for (j, s) in twins.iter().enumerate() {
        for (split_k, dtype, nk, epilogue) in
            [(2u32, DType::BF16, false, true), (4, DType::F16, true, false), (3, DType::F16, false, false)]
        {
            let (m, n, k) = (130, 72, 504);
            let s = Schedule { split_k, ..*s };
            let p = problem(dtype, m, n, k, nk);
            validate_wgmma_schedule(&p, &s, GpuArch::Sm90a).unwrap_or_else(|e| panic!("{s}: {e}"));
            let g = gemm_graph(dtype, &[], m, n, k, nk, epilogue);
            let kern = kernel(format!("wg_split_sim_{j}_{split_k}"), g, s);
            let (lowered, outcome) = emulate(&kern, k, 70 + j as u64);
            assert_eq!(lowered, ["matmul-wgmma", "matmul-reduce"], "{s}");
            if let Err(e) = outcome {
                failures.push(format!("{s} {dtype} {m}x{n}x{k} nk={nk}: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// The split TMA variants a long-k product's space lists (one per tiling) assemble without
/// spills or serialized wgmmas, as a warpgroup entry writing partial sums and a reduce entry
/// that stores the output; splits that would leave one without a k-tile are refused with the
/// reason.
#[test]
fn split_warpgroup_variants_assemble_with_a_reduce_entry() {
    let p = problem(DType::F16, 512, 512, 32768, true);
    let space = wgmma_schedule_space(&p, GpuArch::Sm90a);
    let mut seen = Vec::new();
    for s in space.iter().filter(|s| s.split_k > 1 && s.stages == 4) {
        let key = (s.tile_m, s.tile_n, s.warps);
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let g = gemm_graph(DType::F16, &[], 512, 512, 32768, true, true);
        let k = kernel(format!("wg_split_{}x{}_w{}_s{}", s.tile_m, s.tile_n, s.warps, s.split_k), g, *s);
        let compiled = ptx::compile_kernel(&k, &Bindings::new(), GpuArch::Sm90a).unwrap();
        assert_eq!(lowerings(&compiled), ["matmul-wgmma", "matmul-reduce"], "{s}");
        check_sm90a(&k, true);
    }
    assert!(seen.len() >= 4, "{seen:?}");
    let default = default_wgmma_schedule(&p, GpuArch::Sm90a).expect("a split default");
    assert!(default.split_k > 1, "{default}");
    // Five k-tiles in four splits of two would leave the last one none.
    let empty = Schedule { split_k: 4, ..default };
    let err = validate_wgmma_schedule(&problem(DType::F16, 512, 512, 320, true), &empty, GpuArch::Sm90a).unwrap_err();
    assert!(err.to_string().contains("a k-tile (of 64) of its own"), "{err}");
}
