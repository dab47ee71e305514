#!/bin/bash
# Session 20, call 6 (ea27256, the session's final defaults): the whole GEMM shape sweep (issue
# 26) beside the in-process cuBLAS, one run.
set -u
C=gpu-carry/s20
source bench/device_env.sh "$C" "${1:-unknown}"
( time timeout 220 $C/tcc bench --workloads bench/gemm_sweep.json --suite gpu --target cuda --out $OUT/gemm_sweep.jsonl ) > $OUT/gemm_sweep.log 2>&1
echo "== sweep rc=$?"; tail -3 $OUT/gemm_sweep.log
date -u +%T >> $OUT/machine.txt
cd $OUT && tar czf logs.tgz ./*.log && rm -f ./*.log
