//! Dual products (feature `llvm`): `silu(a @ g) * (a @ u)` as one `mma.sync` kernel (both
//! products' columns side by side in each block tile, the epilogue reading both): every variant
//! and every schedule the dual kernel runs assembles for sm_80 and sm_90a without spills, and the
//! emulator's runs (its `mma.sync`, `ldmatrix` and `cp.async`) match the interpreter.

use tcc_codegen::ptx::{self, BLayout, GpuArch, MatmulProblem};
use tcc_ir::testing::{compare_outputs, dual_gemm_graph, gemm_graph, random_inputs};
use tcc_ir::{Bindings, DType, Graph, Kernel, KernelClass, Schedule, TensorType};

use super::{check_kernel, lowerings, sim, sim_tolerance};

fn kernel(g: Graph, schedule: Option<Schedule>) -> Kernel {
    Kernel {
        name: g.name.clone(),
        class: KernelClass::MatMul,
        graph: g,
        schedule: schedule.unwrap_or_else(|| Schedule::default_for(tcc_ir::Tier::Ptx)),
    }
}

/// The dual kernel's schedules of a product of `2 n` columns: the `mma.sync` space without k
/// splits ([`tcc_ir::dual::runs_schedule`]).
fn dual_space(dtype: DType, m: u64, n: u64, k: u64, arch: GpuArch) -> Vec<Schedule> {
    let p = MatmulProblem { m, n: 2 * n, k, batch: 1, dtype, b_layout: BLayout::NK };
    ptx::matmul_schedule_space(&p, arch).into_iter().filter(tcc_ir::dual::runs_schedule).collect()
}

/// Emulates `k` compiled for sm_80 (tensor cores) and compares with the interpreter.
fn emulate(k: &Kernel, seed: u64) -> Result<Vec<&'static str>, String> {
    let bindings = Bindings::new();
    let inputs = random_inputs(&k.graph, &bindings, seed).map_err(|e| e.to_string())?;
    let expected = tcc_ir::interp::run_graph(&k.graph, &inputs).map_err(|e| e.to_string())?;
    let ir = ptx::emit_llvm_ir(k, &bindings, GpuArch::Sm80).map_err(|e| e.to_string())?;
    let types: Vec<TensorType> = k.graph.outputs.iter().map(|o| k.graph.nodes[o.index()].ty.clone()).collect();
    let actual = sim::run(&ir, &inputs, &types, &bindings, 2);
    let l: Vec<&'static str> = ir.steps.iter().map(|s| s.lowering).collect();
    compare_outputs(&expected, &actual, &sim_tolerance()).map_err(|m| format!("{} ({l:?}): {m}", k.name))?;
    Ok(l)
}

/// A batch and an `(m, n, k)`.
type Case = (&'static [u64], (u64, u64, u64));

#[test]
fn dual_products_are_one_mma_kernel_and_assemble_without_spills() {
    for dtype in [DType::F16, DType::BF16] {
        for (batch, (m, n, k)) in
            [(&[][..], (256, 256, 256)), (&[], (77, 50, 33)), (&[], (1, 1, 1)), (&[2][..], (40, 24, 64))]
        {
            for nk in [false, true] {
                let g = dual_gemm_graph(dtype, batch, (m, n, k), nk).unwrap();
                for c in check_kernel(&kernel(g, None), &Bindings::new()) {
                    let l = lowerings(&c);
                    let mma: Vec<_> = l.iter().filter(|s| **s != "matmul-pack").collect();
                    assert_eq!(mma, [&"matmul-mma"], "{m}x{n}x{k} nk={nk}: {l:?}");
                    let aligned = k % 8 == 0 && (nk || n % 8 == 0);
                    assert_eq!(l.contains(&"matmul-pack"), !aligned, "{m}x{n}x{k} nk={nk}: {l:?}");
                }
            }
        }
    }
}

#[test]
fn every_schedule_of_the_dual_space_assembles_and_others_fall_back() {
    for arch in GpuArch::ALL {
        let space = dual_space(DType::BF16, 512, 512, 512, arch);
        assert!(space.len() >= 50, "{}", space.len());
        let mut picks: Vec<Schedule> =
            space.iter().filter(|s| s.micro_m * s.micro_n >= 64 * 64).take(2).copied().collect();
        picks.extend(space.iter().step_by(space.len() / 6).copied());
        // A k split and a warpgroup schedule: the dual kernel runs its default instead.
        let p = MatmulProblem { m: 512, n: 1024, k: 512, batch: 1, dtype: DType::BF16, b_layout: BLayout::NK };
        picks.push(Schedule { split_k: 4, ..ptx::default_matmul_schedule(&p, arch) });
        for s in picks {
            for nk in [false, true] {
                let g = dual_gemm_graph(DType::BF16, &[], (512, 512, 512), nk).unwrap();
                for c in check_kernel(&kernel(g, Some(s)), &Bindings::new()) {
                    assert_eq!(lowerings(&c), ["matmul-mma"], "{s:?}");
                }
            }
        }
    }
}

#[test]
fn emulated_tensor_core_products_match_the_interpreter() {
    // The emulator's tensor-core path on single products first.
    for (m, n, k, nk) in [(33, 20, 40, false), (16, 24, 64, true), (1, 1, 1, true)] {
        let g = gemm_graph(DType::F16, &[], (m, n, k), nk, true).unwrap();
        let l = emulate(&kernel(g, None), 5).unwrap();
        assert!(l.contains(&"matmul-mma"), "{l:?}");
    }
}

#[test]
fn emulated_dual_products_match_the_interpreter() {
    let shapes: [Case; 5] =
        [(&[], (1, 1, 1)), (&[], (33, 20, 40)), (&[], (70, 72, 48)), (&[], (16, 136, 24)), (&[2], (17, 16, 32))];
    for dtype in [DType::F16, DType::BF16] {
        for (batch, (m, n, k)) in shapes {
            for nk in [false, true] {
                let g = dual_gemm_graph(dtype, batch, (m, n, k), nk).unwrap();
                let l = emulate(&kernel(g, None), m ^ n ^ k).unwrap();
                // One tensor-core kernel for both products (after packs), no elementwise stage.
                assert_eq!(l.iter().filter(|s| **s != "matmul-pack").collect::<Vec<_>>(), [&"matmul-mma"]);
            }
        }
    }
    // Schedules of the dual space: small and large tiles, several warps, ragged edges.
    for s in dual_space(DType::BF16, 70, 72, 48, GpuArch::Sm80).into_iter().step_by(37).take(6) {
        let g = dual_gemm_graph(DType::BF16, &[], (70, 72, 48), true).unwrap();
        emulate(&kernel(g, Some(s)), 11).unwrap_or_else(|e| panic!("{s:?}: {e}"));
    }
}

/// Assembles `k`'s sm_90a kernel and checks that ptxas neither spills nor serializes the wgmmas
/// (C7514/C7515).
fn assemble_sm90a_strictly(k: &Kernel, compiled: &ptx::PtxKernel) {
    let report = ptx::assemble(super::ptxas(), &compiled.ptx, GpuArch::Sm90a).unwrap();
    assert_eq!(report.spill_bytes(), 0, "{}: {}", k.name, report.output);
    assert!(!["C7514", "C7515"].iter().any(|c| report.output.contains(c)), "{}: {}", k.name, report.output);
}

#[test]
fn warpgroup_dual_products_load_both_bs_by_tma_and_assemble() {
    use tcc_ir::WgmmaSchedule;
    for (bn, consumers) in [(256, 2), (128, 2), (128, 1), (64, 1)] {
        let w = WgmmaSchedule {
            consumers,
            producer: false,
            pingpong: false,
            bn,
            stages: 4,
            swizzle: 8,
            tma: true,
            splits: 1,
        };
        let s = Schedule { threads: 0, ..w.encode() };
        assert!(tcc_ir::dual::runs_schedule(&s));
        for (m, n, k) in [(512, 512, 512), (300, 200, 136), (128, 64, 64)] {
            let g = dual_gemm_graph(DType::BF16, &[], (m, n, k), true).unwrap();
            let kern = kernel(g, Some(s));
            let compiled = check_kernel(&kern, &Bindings::new());
            // sm_80 has no wgmma: the dual mma.sync kernel; sm_90a the warpgroup one, with A's
            // and both Bs' tensor maps, and the output's where the blocks are persistent and
            // store by TMA (64-column subtiles of output, at least as many k-tiles as the
            // copies run ahead).
            assert_eq!(lowerings(&compiled[0]), ["matmul-mma"]);
            assert_eq!(lowerings(&compiled[1]), ["matmul-wgmma"]);
            let stored = bn >= 128 && k.div_ceil(64) >= 3;
            assert_eq!(compiled[1].ir.steps[0].tensor_maps.len(), if stored { 4 } else { 3 }, "{bn} {m}x{n}x{k}");
            assemble_sm90a_strictly(&kern, &compiled[1]);
        }
    }
    // A producer warpgroup (beside two consumers sharing the tile, or taking alternate tiles):
    // the warpgroup kernel, storing by TMA where the output columns of a tile are whole 64-column
    // subtiles, else the same tile without the producer. cp.async copies or a `[k, n]` B: the
    // dual mma.sync kernel instead.
    let producer = WgmmaSchedule {
        consumers: 2,
        producer: true,
        pingpong: false,
        bn: 128,
        stages: 4,
        swizzle: 8,
        tma: true,
        splits: 1,
    };
    let pingpong = WgmmaSchedule { pingpong: true, bn: 256, ..producer };
    for w in [producer, pingpong, WgmmaSchedule { bn: 64, ..producer }] {
        let s = Schedule { threads: 0, ..w.encode() };
        assert!(tcc_ir::dual::runs_schedule(&s));
        let g = dual_gemm_graph(DType::F16, &[], (256, 256, 128), true).unwrap();
        let kern = kernel(g, Some(s));
        let compiled = check_kernel(&kern, &Bindings::new());
        assert_eq!(lowerings(&compiled[1]), ["matmul-wgmma"], "{w:?}");
        let launch = &compiled[1].ir.steps[0].launch;
        assert_eq!(launch.block_threads, if w.bn == 64 { 256 } else { 384 }, "{w:?}");
        assemble_sm90a_strictly(&kern, &compiled[1]);
    }
    let cp_async = WgmmaSchedule { producer: false, tma: false, ..producer };
    for (w, nk) in [(cp_async, true), (WgmmaSchedule { producer: false, ..producer }, false)] {
        let g = dual_gemm_graph(DType::F16, &[], (256, 256, 128), nk).unwrap();
        let compiled = check_kernel(&kernel(g, Some(Schedule { threads: 0, ..w.encode() })), &Bindings::new());
        assert_eq!(lowerings(&compiled[1]), ["matmul-mma"], "{w:?} nk={nk}");
    }
}

/// Every warpgroup schedule of the dual kernel's space for the gated MLP of a Llama-3-8B layer
/// (4096 x 14336 x 4096 twice; the space of the product of both products' columns) assembles for
/// sm_90a without spills or serialized wgmmas, each distinct kernel once (the swizzle changes
/// only the tile order).
#[test]
fn every_warpgroup_schedule_of_the_dual_space_assembles_strictly() {
    let p = MatmulProblem { m: 4096, n: 2 * 14336, k: 4096, batch: 1, dtype: DType::BF16, b_layout: BLayout::NK };
    let space: Vec<Schedule> = tcc_codegen::ptx::wgmma::wgmma_schedule_space(&p, GpuArch::Sm90a)
        .into_iter()
        .filter(|s| tcc_ir::dual::runs_schedule(s) && s.swizzle == 8)
        .collect();
    assert!(space.len() >= 8, "{space:?}");
    for s in space {
        let g = dual_gemm_graph(DType::BF16, &[], (4096, 14336, 4096), true).unwrap();
        let kern = kernel(g, Some(s));
        let compiled = ptx::compile_kernel(&kern, &Bindings::new(), GpuArch::Sm90a).unwrap();
        assert_eq!(lowerings(&compiled), ["matmul-wgmma"], "{s}");
        assemble_sm90a_strictly(&kern, &compiled);
    }
}

#[test]
fn emulated_dual_products_of_one_shared_and_one_batched_b_match_the_interpreter() {
    use tcc_ir::{BinaryOp, Op, UnaryOp};
    let t = |dims: &[u64]| super::t(DType::F16, dims);
    let mut g = Graph::new("mixed");
    let a = g.add_param("a", t(&[2, 24, 40])).unwrap();
    let gate = g.add_param("g", t(&[40, 16])).unwrap();
    let up = g.add_param("u", t(&[2, 40, 16])).unwrap();
    let p = g.push(Op::MatMul(a, gate)).unwrap();
    let q = g.push(Op::MatMul(a, up)).unwrap();
    let s = g.push(Op::Unary(UnaryOp::Sigmoid, p)).unwrap();
    let y = g.push(Op::Binary(BinaryOp::Mul, s, q)).unwrap();
    g.outputs.push(y);
    assert!(tcc_ir::DualProduct::find(&g).is_some());
    let l = emulate(&kernel(g.clone(), None), 9).unwrap();
    assert_eq!(l, ["matmul-pack", "matmul-pack", "matmul-mma"]);
    check_kernel(&kernel(g, None), &Bindings::new());
}

#[test]
fn emulated_joined_products_read_each_weight_in_place_chunk_by_chunk() {
    // A joined product's B (weights side by side along the columns, each read as its transpose)
    // on mma.sync tiles: every chunk from the weight holding its row, so tiles may straddle two
    // weights (parts of 24, 40 and 8 columns under 32- and 64-wide tiles), rows off the tiles, one
    // row, and the skinny tiles whose warps split k. No pack entry.
    let cases: [(u64, u64, &[u64]); 4] =
        [(33, 40, &[24, 40, 8]), (1, 16, &[8, 8]), (16, 128, &[32, 64]), (70, 24, &[64, 16])];
    let mut failures = Vec::new();
    for (i, (m, k, parts)) in cases.into_iter().enumerate() {
        let dtype = if i % 2 == 0 { DType::F16 } else { DType::BF16 };
        let g = tcc_ir::testing::joined_gemm_graph(dtype, (m, k), parts).unwrap();
        let n: u64 = parts.iter().sum();
        let p = MatmulProblem { m, n, k, batch: 1, dtype, b_layout: BLayout::NK };
        let mut schedules = vec![None, Some(ptx::default_matmul_schedule(&p, GpuArch::Sm80))];
        let space = ptx::matmul_schedule_space(&p, GpuArch::Sm80);
        schedules.extend(space.iter().step_by(space.len().div_ceil(4).max(1)).map(|s| Some(*s)));
        for (j, s) in schedules.into_iter().enumerate() {
            match emulate(&kernel(g.clone(), s), 60 + (4 * i + j) as u64) {
                Ok(l) if l == ["matmul-mma"] || l == ["matmul-mma", "matmul-reduce"] => {}
                Ok(l) => failures.push(format!("{m}x{n}x{k} {parts:?} [{s:?}]: lowered as {l:?}")),
                Err(e) => failures.push(format!("{m}x{n}x{k} {parts:?} [{s:?}]: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
