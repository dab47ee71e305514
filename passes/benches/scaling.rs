//! Compile time against program size: the optimizer (`tcc compile`'s work) on generated chains of
//! about 100, 1,000 and 10,000 ops for the CPU target, and with explanations (`tcc explain`'s
//! work) up to 1,000 ops. Prints each program's size and e-graph once. BENCHMARKS.md has the table.
//! It runs under the `tcc` binary's allocator (mimalloc), as `tcc compile` and `tcc explain` do.
//!
//! `cargo bench -p tcc-passes --bench scaling`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use tcc_passes::{OptimizeOptions, TargetModel, optimize};

#[path = "../tests/chain.rs"]
mod chain;

use chain::{compute_ops, let_chain};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `let`s giving about 100, 1,000 and 10,000 ops.
const SIZES: [usize; 3] = [50, 500, 5_000];

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("optimize");
    group.sample_size(10).measurement_time(Duration::from_secs(20));
    for lets in SIZES {
        let g = let_chain(lets);
        let ops = compute_ops(&g);
        for explain in [false, true] {
            if explain && ops > 2_000 {
                continue; // egg rebuilds each kernel's terms per proof: quadratic, see tests/scaling.rs
            }
            let opts = OptimizeOptions { explain, ..OptimizeOptions::new(TargetModel::cpu_host()) };
            let first = optimize(&g, &opts).unwrap();
            println!(
                "{ops} ops, explain {explain}: {} kernels, {} e-nodes, {} proof steps, stop: {}",
                first.program.launches.len(),
                first.report.egraph_nodes,
                first.report.proof_steps,
                first.report.stop_reason
            );
            let name = if explain { "explain" } else { "compile" };
            group.bench_with_input(BenchmarkId::new(name, ops), &opts, |b, opts| {
                b.iter(|| optimize(black_box(&g), black_box(opts)))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
