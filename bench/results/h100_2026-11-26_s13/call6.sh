#!/bin/bash
# Session 13, call 6: issue 26's long-k default (k split up to one wave, a 64x64x64 tile in five
# stages first): the GEMM sweep with main's tcc and the changed one, in turn, on one machine.
set -u
C=gpu-carry/s13c
for f in tcc_main tcc_k; do xz -dkf $C/$f.xz && chmod +x $C/$f; done
export TCC_CACHE_DIR=$(mktemp -d)
for v in k main; do
  ( time timeout 250 $C/tcc_$v bench --workloads bench/gemm_sweep.json --suite gpu --target cuda --out $OUT/sweep_$v.jsonl ) > $OUT/sweep_$v.log 2>&1
done
grep -h "longk\|skinny_f16_m64" $OUT/sweep_*.log | sort | head -40
