#!/bin/bash
# Session 13, call 8: the tuner's study of the sweep's worst shapes after the long-k changes.
set -u
C=gpu-carry/s13d
xz -dc $C/tcc_s6.xz > $C/tcc && chmod +x $C/tcc
export TCC_CACHE_DIR=$(mktemp -d)
( time timeout 420 $C/tcc tune --study --target cuda --workloads bench/gemm_sweep.json \
    --workload sq_f16_768,sq_f16_1536,longk_f16_512x512x32768 --space 128 --out $OUT/study ) > $OUT/study.log 2>&1
tail -3 $OUT/study.log; cat $OUT/study/study.md | head -30
