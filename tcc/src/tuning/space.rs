//! The search space of one kernel on the CPU tier: the optimizer's proposals first, then
//! variations of the knobs the cranelift tier obeys.
//!
//! - matmul kernels: the register tile (`micro_m x micro_n`, only shapes the emitter builds without
//!   rounding: `micro_n` of 4, 8, 12 or 16 and at most 12 f32x4 accumulators), the cache blocks
//!   (`tile_m`, `tile_n`, `tile_k`, none much larger than the matrix) and the thread count;
//! - every other class: the thread count (the cranelift tier ignores the vector width, tiles and
//!   GPU knobs there, so varying them would only measure noise).
//!
//! Every candidate is variant 0: a kernel's cache key fixes its ops, so alternatives of the
//! optimizer that fuse differently are different kernels; the alternatives' schedules for this
//! same kernel join the proposals.

use tcc_autotune::search::HardwareLimits;
use tcc_autotune::{Candidate, SearchSpace};
use tcc_ir::{Bindings, Kernel, KernelClass, Op, Schedule};

/// Register tiles (`micro_m`, `micro_n`) tried for matmul kernels.
pub const MICRO_TILES: [(u32, u32); 6] = [(4, 8), (2, 16), (3, 16), (4, 12), (6, 8), (8, 4)];
/// Cache-block rows tried (at most the next power of two of the matrix's rows).
pub const TILE_M: [u32; 4] = [16, 32, 64, 128];
/// Cache-block columns tried.
pub const TILE_N: [u32; 5] = [16, 32, 64, 128, 256];
/// Cache-block depths tried.
pub const TILE_K: [u32; 4] = [32, 64, 128, 256];

/// Thread counts worth trying on a host with `host_threads` cores: 1, the powers of two below
/// it, and all of them.
pub fn thread_choices(host_threads: u32) -> Vec<u32> {
    let host = host_threads.max(1);
    let mut out: Vec<u32> = std::iter::successors(Some(1u32), |t| t.checked_mul(2)).take_while(|&t| t < host).collect();
    out.push(host);
    out
}

/// The `(m, n, k)` of a kernel's matmul under `bindings`, if it has one with bound sizes.
pub fn matmul_dims(kernel: &Kernel, bindings: &Bindings) -> Option<(u64, u64, u64)> {
    let g = &kernel.graph;
    g.nodes.iter().find_map(|node| match node.op {
        Op::MatMul(a, b) => {
            let (a, b) = (g.ty(a)?.shape.resolve(bindings)?, g.ty(b)?.shape.resolve(bindings)?);
            let (m, k) = (*a.get(a.len().checked_sub(2)?)?, *a.last()?);
            let n = *b.last()?;
            Some((m as u64, n as u64, k as u64))
        }
        _ => None,
    })
}

/// Values of `choices` up to the next power of two of `size` (at least the smallest choice).
fn up_to(choices: &[u32], size: u64) -> Vec<u32> {
    let cap = size.max(1).next_power_of_two();
    let mut kept: Vec<u32> = choices.iter().copied().filter(|&c| u64::from(c) <= cap).collect();
    if kept.is_empty() {
        kept.extend(choices.iter().copied().min());
    }
    kept
}

/// The knob variations of `base` for `kernel` on the CPU tier.
pub fn variations(kernel: &Kernel, base: &Schedule, bindings: &Bindings, host_threads: u32) -> Vec<Schedule> {
    let threads = thread_choices(host_threads);
    let mut out = Vec::new();
    match (kernel.class, matmul_dims(kernel, bindings)) {
        (KernelClass::MatMul, Some((m, n, k))) => {
            for &(micro_m, micro_n) in &MICRO_TILES {
                for &tile_m in &up_to(&TILE_M, m) {
                    for &tile_n in &up_to(&TILE_N, n) {
                        for &tile_k in &up_to(&TILE_K, k) {
                            for &t in &threads {
                                out.push(Schedule { micro_m, micro_n, tile_m, tile_n, tile_k, threads: t, ..*base });
                            }
                        }
                    }
                }
            }
        }
        _ => out.extend(threads.iter().map(|&t| Schedule { threads: t, ..*base })),
    }
    out
}

/// The search space of `kernel`: `proposals` (the optimizer's schedules for it, best first) come
/// first; variations of the first proposal follow, cheaper the fewer knobs they change. Schedules
/// outside the autotuner's bounds or the host's thread count are dropped.
pub fn cpu_space(kernel: &Kernel, proposals: &[Schedule], bindings: &Bindings, host_threads: u32) -> SearchSpace {
    let limits = HardwareLimits {
        max_threads_per_block: 0,
        max_shared_bytes: 0,
        element_bytes: 4,
        max_host_threads: host_threads.max(1),
    };
    let base = proposals.first().copied().unwrap_or(kernel.schedule);
    let mut candidates: Vec<Candidate> = Vec::new();
    for (i, s) in proposals.iter().enumerate() {
        candidates.push(Candidate { variant: 0, schedule: *s, cost: i as f64 * 1e-3 });
    }
    for (i, s) in variations(kernel, &base, bindings, host_threads).into_iter().enumerate() {
        let changed = knobs_changed(&base, &s);
        candidates.push(Candidate { variant: 0, schedule: s, cost: f64::from(changed) + i as f64 * 1e-6 });
    }
    candidates.retain(|c| limits.admits(&c.schedule));
    SearchSpace::new(candidates)
}

fn knobs_changed(a: &Schedule, b: &Schedule) -> u32 {
    let pairs = [
        (a.tile_m, b.tile_m),
        (a.tile_n, b.tile_n),
        (a.tile_k, b.tile_k),
        (a.micro_m, b.micro_m),
        (a.micro_n, b.micro_n),
        (a.vector_width, b.vector_width),
        (a.threads, b.threads),
    ];
    pairs.iter().map(|(x, y)| u32::from(x != y)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcc_ir::{DType, Graph, Shape, TensorType, Tier};

    fn matmul_kernel() -> Kernel {
        let mut g = Graph::new("k");
        let t = |dims: &[u64]| TensorType { dtype: DType::F32, shape: Shape::from_consts(dims) };
        let a = g.add_param("a", t(&[8, 64])).unwrap();
        let b = g.add_param("b", t(&[64, 256])).unwrap();
        let c = g.push(Op::MatMul(a, b)).unwrap();
        g.outputs = vec![c];
        Kernel {
            name: "k0".into(),
            class: KernelClass::MatMul,
            graph: g,
            schedule: Schedule::default_for(Tier::Cranelift),
        }
    }

    #[test]
    fn threads() {
        assert_eq!(thread_choices(1), vec![1]);
        assert_eq!(thread_choices(2), vec![1, 2]);
        assert_eq!(thread_choices(6), vec![1, 2, 4, 6]);
    }

    #[test]
    fn matmul_space_starts_with_the_proposal_and_stays_in_bounds() {
        let k = matmul_kernel();
        assert_eq!(matmul_dims(&k, &Bindings::new()), Some((8, 256, 64)));
        let proposal = Schedule { tile_m: 32, ..k.schedule };
        let space = cpu_space(&k, &[proposal], &Bindings::new(), 2);
        assert_eq!(space.candidates()[0].schedule, proposal);
        // 8 rows: only 16-row blocks; 64 deep: 32 and 64; 256 wide: all five widths.
        assert_eq!(space.len(), 1 + MICRO_TILES.len() * 5 * 2 * 2);
        for c in space.candidates() {
            let s = c.schedule;
            assert!(s.micro_m * s.micro_n <= 48 && s.micro_n % 4 == 0, "{s}");
            assert!(s.threads <= 2);
        }
    }
}
