//! Tensor-core GEMMs (feature `llvm`): every variant the tests generate (both B layouts, f16 and
//! bf16, aligned and ragged shapes, batches, fused epilogues, k splits, sampled schedules of the
//! space) compiles for sm_80 and sm_90a and assembles with ptxas without spills; and schedule
//! validation.

use tcc_codegen::ptx::{self, BLayout, GpuArch, MatmulProblem};
use tcc_ir::{Bindings, DType, Graph, Kernel, KernelClass, Schedule};

use super::{check_kernel, lowerings};

/// `gelu(a @ b + bias)` (or the plain product) with B stored `[k, n]` or `[n, k]`
/// ([`tcc_ir::testing::gemm_graph`]).
pub(super) fn gemm_graph(dtype: DType, batch: &[u64], m: u64, n: u64, k: u64, nk: bool, epilogue: bool) -> Graph {
    tcc_ir::testing::gemm_graph(dtype, batch, (m, n, k), nk, epilogue).unwrap()
}

/// Two outputs of one product ([`tcc_ir::testing::gemm_two_outputs_graph`]).
pub(super) fn gemm_two_outputs_graph(dtype: DType, batch: &[u64], m: u64, n: u64, k: u64, nk: bool) -> Graph {
    tcc_ir::testing::gemm_two_outputs_graph(dtype, batch, (m, n, k), nk).unwrap()
}

fn gemm_kernel(g: Graph, schedule: Option<Schedule>) -> Kernel {
    let mut k = Kernel {
        name: g.name.clone(),
        class: KernelClass::MatMul,
        graph: g,
        schedule: Schedule::default_for(tcc_ir::Tier::Ptx),
    };
    if let Some(s) = schedule {
        k.schedule = s;
    }
    k
}

fn problem(dtype: DType, m: u64, n: u64, k: u64, nk: bool) -> MatmulProblem {
    MatmulProblem { m, n, k, batch: 1, dtype, b_layout: if nk { BLayout::NK } else { BLayout::KN } }
}

#[test]
fn gemm_variants_use_tensor_cores_and_assemble_without_spills() {
    let shapes: [(u64, u64, u64); 4] = [(256, 256, 256), (77, 50, 33), (1, 1, 1), (16, 512, 1024)];
    for dtype in [DType::F16, DType::BF16] {
        for (m, n, k) in shapes {
            for nk in [false, true] {
                for epilogue in [false, true] {
                    let g = gemm_graph(dtype, &[], m, n, k, nk, epilogue);
                    let s = ptx::default_matmul_schedule(&problem(dtype, m, n, k, nk), GpuArch::Sm90a);
                    for c in check_kernel(&gemm_kernel(g, Some(s)), &Bindings::new()) {
                        let l = lowerings(&c);
                        assert!(l.contains(&"matmul-mma"), "{l:?}");
                        let aligned = k % 8 == 0 && (nk || n % 8 == 0);
                        assert_eq!(l.contains(&"matmul-pack"), !aligned, "{m}x{n}x{k} nk={nk}: {l:?}");
                        assert_eq!(l.contains(&"matmul-reduce"), s.split_k > 1, "{l:?}");
                    }
                }
            }
        }
    }
}

#[test]
fn batched_gemms_and_broadcast_operands_assemble() {
    for nk in [false, true] {
        let g = gemm_graph(DType::F16, &[3], 40, 24, 64, nk, true);
        for c in check_kernel(&gemm_kernel(g, None), &Bindings::new()) {
            assert!(lowerings(&c).contains(&"matmul-mma"));
        }
    }
}

#[test]
fn sampled_schedules_of_the_space_assemble_without_spills() {
    for arch in GpuArch::ALL {
        let p = problem(DType::F16, 512, 512, 512, false);
        let space = ptx::matmul_schedule_space(&p, arch);
        assert!(space.len() >= 200, "{}", space.len());
        // The largest warp tiles (most registers) and a spread of the rest.
        let mut picks: Vec<Schedule> =
            space.iter().filter(|s| s.micro_m * s.micro_n >= 64 * 64).take(2).copied().collect();
        picks.extend(space.iter().step_by(space.len() / 4).copied());
        for s in picks {
            for nk in [false, true] {
                let g = gemm_graph(DType::F16, &[], 512, 512, 512, nk, true);
                check_kernel(&gemm_kernel(g, Some(s)), &Bindings::new());
            }
        }
    }
}

#[test]
fn split_k_schedules_add_a_reduce_entry() {
    let p = problem(DType::BF16, 16, 256, 2048, true);
    let s = Schedule { split_k: 8, ..ptx::default_matmul_schedule(&p, GpuArch::Sm80) };
    ptx::validate_matmul_schedule(&p, &s, GpuArch::Sm80).unwrap();
    let g = gemm_graph(DType::BF16, &[], 16, 256, 2048, true, true);
    for c in check_kernel(&gemm_kernel(g, Some(s)), &Bindings::new()) {
        assert_eq!(lowerings(&c), ["matmul-mma", "matmul-reduce"]);
        assert!(c.ir.scratch_bytes >= 8 * 16 * 256 * 4);
    }
}

#[test]
fn invalid_schedules_fall_back_to_the_default_and_validation_names_the_reason() {
    let p = problem(DType::F16, 128, 128, 128, false);
    let bad = Schedule { tile_m: 96, ..ptx::default_matmul_schedule(&p, GpuArch::Sm90a) };
    let e = ptx::validate_matmul_schedule(&p, &bad, GpuArch::Sm90a).unwrap_err();
    assert!(e.to_string().contains("powers of two"), "{e}");
    let g = gemm_graph(DType::F16, &[], 128, 128, 128, false, false);
    for c in check_kernel(&gemm_kernel(g, Some(bad)), &Bindings::new()) {
        assert_eq!(lowerings(&c), ["matmul-mma"]);
    }
    let f32p = problem(DType::F32, 128, 128, 128, false);
    assert!(ptx::matmul_schedule_space(&f32p, GpuArch::Sm90a).is_empty());
}

#[test]
fn benchmark_shapes_assemble_with_their_default_schedules() {
    for (m, n, k, nk, epilogue) in
        [(4096, 4096, 4096, false, true), (4096, 4096, 4096, true, false), (16, 4096, 4096, false, false)]
    {
        let p = problem(DType::F16, m, n, k, nk);
        let s = ptx::default_matmul_schedule(&p, GpuArch::Sm90a);
        let g = gemm_graph(DType::F16, &[], m, n, k, nk, epilogue);
        let mut kern = gemm_kernel(g, Some(s));
        kern.name =
            format!("bench_{m}x{n}x{k}_{}{}", if nk { "nk" } else { "kn" }, if epilogue { "_gelu" } else { "" });
        check_kernel(&kern, &Bindings::new());
    }
}

#[test]
fn k_split_inside_the_block_assembles_for_skinny_products() {
    // (m, n, k, nk, epilogue): on and off the tile grid, both layouts.
    let cases: [(u64, u64, u64, bool, bool); 5] = [
        (16, 4096, 4096, false, false),
        (7, 1000, 1000, false, true),
        (1, 136, 520, true, false),
        (32, 200, 333, true, true),
        (16, 512, 1024, false, true),
    ];
    for (m, n, k, nk, epilogue) in cases {
        let p = problem(DType::F16, m, n, k, nk);
        let space = ptx::matmul_schedule_space(&p, GpuArch::Sm80);
        let sliced: Vec<Schedule> =
            space.iter().filter(|s| s.tile_m == s.micro_m && s.tile_n == s.micro_n && s.warps > 1).copied().collect();
        assert!(!sliced.is_empty(), "{m}x{n}x{k}");
        // The default, the widest tiles (most registers) and a spread of the rest, one with a k split.
        let mut picks = vec![ptx::default_matmul_schedule(&p, GpuArch::Sm80)];
        picks.extend(sliced.iter().filter(|s| s.tile_n * s.tile_k >= 128 * 64).take(2).copied());
        picks.extend(sliced.iter().step_by(sliced.len().div_ceil(3)).copied());
        picks.extend(sliced.iter().find(|s| s.split_k > 1).copied());
        for (i, s) in picks.into_iter().enumerate() {
            let g = gemm_graph(DType::F16, &[], m, n, k, nk, epilogue);
            let mut kern = gemm_kernel(g, Some(s));
            kern.name = format!("sliced_{m}x{n}x{k}_{i}");
            for c in check_kernel(&kern, &Bindings::new()) {
                let l = lowerings(&c);
                assert!(l.contains(&"matmul-mma"), "{l:?}");
                assert_eq!(l.contains(&"matmul-reduce"), s.split_k > 1, "{s}: {l:?}");
            }
        }
    }
}

#[test]
fn staged_epilogues_with_a_residual_a_cast_and_two_outputs_assemble() {
    // n a multiple of 8, 4, 2 and odd (store vectors of 8, 4, 2, 1), a batch, a k split.
    let cases: [(&[u64], u64, u64, u64); 5] =
        [(&[], 128, 256, 64), (&[], 64, 132, 64), (&[], 33, 18, 16), (&[], 77, 51, 40), (&[2], 40, 24, 64)];
    for (i, (batch, m, n, k)) in cases.into_iter().enumerate() {
        let nk = i % 2 == 1;
        let g = gemm_two_outputs_graph(DType::F16, batch, m, n, k, nk);
        let mut kern = gemm_kernel(g, None);
        kern.name = format!("two_outputs_{i}");
        for c in check_kernel(&kern, &Bindings::new()) {
            assert!(lowerings(&c).contains(&"matmul-mma"), "{:?}", lowerings(&c));
        }
    }
    let p = problem(DType::BF16, 16, 256, 2048, false);
    let s = Schedule { split_k: 4, ..ptx::default_matmul_schedule(&p, GpuArch::Sm80) };
    let mut kern = gemm_kernel(gemm_two_outputs_graph(DType::BF16, &[], 16, 256, 2048, false), Some(s));
    kern.name = "two_outputs_split".into();
    for c in check_kernel(&kern, &Bindings::new()) {
        assert_eq!(lowerings(&c), ["matmul-mma", "matmul-reduce"]);
    }
}

/// The SIMT matmul (operands other than f16/bf16) on the tiles the tuner's f32 space names and
/// the fallback, emulated on products off every tile grid (1, odd primes, a batch, a fused
/// epilogue), matches the interpreter: its shared-memory staging holds across slices, the tiles
/// of a grid-stride loop and the last, partial slice.
#[test]
fn emulated_simt_products_of_every_tile_match_the_interpreter() {
    use tcc_ir::testing::{compare_outputs, random_inputs};
    let tiles: [(u32, u32, u32, u32, u32); 5] =
        [(128, 64, 8, 8, 4), (128, 128, 8, 8, 8), (64, 128, 8, 4, 8), (64, 64, 16, 4, 4), (32, 32, 8, 2, 2)];
    let shapes: [(&[u64], u64, u64, u64, bool); 4] =
        [(&[], 1, 1, 1, false), (&[], 37, 45, 29, true), (&[2], 130, 67, 19, false), (&[], 3, 131, 70, true)];
    let bindings = Bindings::new();
    for (bm, bn, bk, tm, tn) in tiles {
        let s = Schedule {
            tile_m: bm,
            tile_n: bn,
            tile_k: bk,
            micro_m: tm,
            micro_n: tn,
            ..Schedule::default_for(tcc_ir::Tier::Ptx)
        };
        assert!(ptx::simt_schedule_runs(&s, GpuArch::Sm90a), "{s:?} falls back");
        for (i, (batch, m, n, k, epilogue)) in shapes.into_iter().enumerate() {
            let g = gemm_graph(DType::F32, batch, m, n, k, i % 2 == 1, epilogue);
            let kern = gemm_kernel(g, Some(s));
            let inputs = random_inputs(&kern.graph, &bindings, 40 + i as u64).unwrap();
            let expected = tcc_ir::interp::run_graph(&kern.graph, &inputs).unwrap();
            let ir = ptx::emit_llvm_ir(&kern, &bindings, GpuArch::Sm90a).unwrap();
            let types: Vec<tcc_ir::TensorType> =
                kern.graph.outputs.iter().map(|o| kern.graph.nodes[o.index()].ty.clone()).collect();
            let actual = super::sim::run(&ir, &inputs, &types, &bindings, 2);
            compare_outputs(&expected, &actual, &super::sim_tolerance())
                .unwrap_or_else(|e| panic!("{bm}x{bn}x{bk} {tm}x{tn} on {batch:?} {m}x{n}x{k}: {e}"));
        }
    }
}
