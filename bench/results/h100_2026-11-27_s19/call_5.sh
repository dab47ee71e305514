#!/bin/bash
# Session 19, call 5 (call 2's binaries): every attention schedule of the space and its producer
# variants timed on the suite's three shapes (d64's two-consumer producer, TMA and ping-pong
# variants were never timed: issue 24), then the GEMM shape sweep with tcc's untuned defaults
# beside the in-process cuBLAS (issue 26).
set -u
C=gpu-carry/s19
source bench/device_env.sh "$C" "${1:-unknown}"
( time timeout 300 $C/rt_tests time_every_schedule_on_the_suite_shapes --ignored --nocapture --test-threads 1 ) > $OUT/sweep.log 2>&1
echo "== sweep rc=$?"; grep -E "SWEEP d64|panicked" $OUT/sweep.log | sed 's/GpuAttentionSchedule //; s/splits: 0, //' | head -60
( time timeout 200 $C/tcc bench --workloads bench/gemm_sweep.json --suite gpu --target cuda --out $OUT/gemm_sweep.jsonl ) > $OUT/gemm_sweep.log 2>&1
echo "== gemm sweep rc=$?"; tail -3 $OUT/gemm_sweep.log
date -u +%T >> $OUT/machine.txt
cd $OUT && tar czf logs.tgz ./*.log && rm -f ./*.log
