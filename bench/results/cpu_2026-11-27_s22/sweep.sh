#!/bin/bash
# The cranelift tier's 1024^3 GEMM by register tile and cache blocks, two threads, interleaved
# rounds (each line: TILES, median wall ms and GFLOP/s of REPS runs). Run from the repo root with
# the release example built: cargo build --release -p tcc-codegen --example cranelift_gemm_bench
B=target/release/examples/cranelift_gemm_bench
for r in 1 2 3; do
  for t in 4x12x128x128x512 6x16x132x128x512 6x16x132x128x256 6x16x264x128x256 4x24x128x128x512 4x24x128x128x256 4x24x256x128x256; do
    echo "round $r $t $(TILES=$t THREADS=2 REPS=9 $B | grep -o '[0-9.]* ms, [0-9.]* GFLOP/s')"
  done
  uptime
done
