#!/bin/bash
# Session 13, call 4: the tuner's study of issue 26's long-k products (what wins among the
# mma.sync space, thinned to 256 candidates along the cost model's order, and the guided search).
set -u
C=gpu-carry/s13
xz -dkf $C/tcc.xz && chmod +x $C/tcc
export TCC_CACHE_DIR=$(mktemp -d)
( time timeout 500 $C/tcc tune --study --target cuda --workloads bench/gemm_sweep.json \
    --workload longk_f16_64x64x131072,longk_f16_128x128x65536,longk_f16_1024x1024x16384 \
    --space 128 --out $OUT/study ) > $OUT/study.log 2>&1
tail -5 $OUT/study.log; cat $OUT/study/study.md | head -60
