#!/bin/bash
# Session 20, call 5 (2989bae, the session's last defaults): the whole GEMM shape sweep (issue 26)
# with session 19's tcc (before, 26955c6) and this one (after), each beside the in-process cuBLAS.
set -u
C=gpu-carry/s20
source bench/device_env.sh "$C" "${1:-unknown}"
( time timeout 220 $C/tcc bench --workloads bench/gemm_sweep.json --suite gpu --target cuda --out $OUT/gemm_sweep.jsonl ) > $OUT/gemm_sweep.log 2>&1
echo "== after rc=$?"; tail -3 $OUT/gemm_sweep.log
( time timeout 220 $C/tcc_before bench --workloads bench/gemm_sweep.json --suite gpu --target cuda --out $OUT/gemm_sweep_before.jsonl ) > $OUT/gemm_sweep_before.log 2>&1
echo "== before rc=$?"; tail -3 $OUT/gemm_sweep_before.log
date -u +%T >> $OUT/machine.txt
cd $OUT && tar czf logs.tgz ./*.log && rm -f ./*.log
