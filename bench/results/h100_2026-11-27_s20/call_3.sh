#!/bin/bash
# Session 20, call 3 (warpgroup k splits of any count, 16 k-tiles per untuned split): the GPU
# tests of joined products (TMA schedules at four stages) and of split schedules (129 k-tiles
# split unevenly among them), then the four sweep shapes whose default this changes with call 2's
# tcc (before) and this one (after), two interleaved rounds.
set -u
C=gpu-carry/s20
source bench/device_env.sh "$C" "${1:-unknown}"
( time timeout 300 $C/rt_tests gemm::joined gemm::split --test-threads 8 ) > $OUT/tests.log 2>&1
echo "== tests rc=$?"; grep -E "^test .*(ok|FAILED)|test result|panicked|WRONG|^real" $OUT/tests.log | head -30
ONLY=odd_f16_127x4099x2053,longk_f16_96x160x40000,skinny_f16_m64_4096x4096,longk_f16_128x128x65536
for r in 1 2; do
  timeout 60 $C/tcc_before bench --workloads bench/gemm_sweep.json --suite gpu --target cuda --only $ONLY --out $OUT/before_$r.jsonl > $OUT/before_$r.log 2>&1
  timeout 60 $C/tcc bench --workloads bench/gemm_sweep.json --suite gpu --target cuda --only $ONLY --out $OUT/after_$r.jsonl > $OUT/after_$r.log 2>&1
done
echo "== before/after done"
date -u +%T >> $OUT/machine.txt
cd $OUT && tar czf logs.tgz ./*.log && rm -f ./*.log
