//! Compile time of the optimizer on a ~200-op transformer block (13 heads with explicit per-head
//! attention), for the CPU and sm_90a targets. Prints the e-graph's size and the kernel count once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use tcc_ir::DType;
use tcc_passes::{OptimizeOptions, TargetModel, optimize};

#[path = "../tests/transformer.rs"]
#[allow(dead_code)]
mod transformer;

use transformer::{Dims, op_count, transformer_block};

fn bench(c: &mut Criterion) {
    let g = transformer_block(Dims { heads: 13, seq: 128, head_dim: 64, ff: 3072, dtype: DType::F16 });
    for target in [TargetModel::sm_90a(), TargetModel::cpu_host()] {
        let opts = OptimizeOptions::new(target.clone());
        let Ok(first) = optimize(&g, &opts) else {
            eprintln!("optimize failed");
            return;
        };
        println!(
            "{} ops on {}: {} kernels, e-graph {} nodes / {} classes, stop: {}",
            op_count(&g),
            target.name(),
            first.program.launches.len(),
            first.report.egraph_nodes,
            first.report.egraph_classes,
            first.report.stop_reason
        );
        for p in &first.report.phases {
            println!("  {}: {} iterations, {} nodes, {}", p.name, p.iterations, p.nodes, p.stop_reason);
        }
        c.bench_function(&format!("optimize transformer block ({})", target.name()), |b| {
            b.iter(|| optimize(black_box(&g), black_box(&opts)))
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
