#!/bin/bash
# Session 20, call 1 (k splits on the warpgroup GEMM, issue 26): the GPU tests of what changed
# (split warpgroup schedules, the long-k space test, tensor-core GEMMs, wgmma, dual products),
# then the long-k shapes of the sweep with session 19's tcc (before) and this one (after) in
# two interleaved rounds, then warpgroup split schedules beside cuBLAS on three long-k products.
set -u
C=gpu-carry/s20
source bench/device_env.sh "$C" "${1:-unknown}"
( time timeout 330 $C/rt_tests gemm::split gemm::every_schedule_of_the_spaces_is_right_on_a_long_k_product gemm::tensor_core wgmma:: dual_gpu --test-threads 8 ) > $OUT/tests.log 2>&1
echo "== tests rc=$?"; grep -E "^test .*(ok|FAILED)|test result|panicked|WRONG" $OUT/tests.log | head -30
ONLY=longk_f16_512x512x32768,longk_f16_256x256x49152,skinny_f16_m64_4096x14336,longk_f16_1024x1024x16384,longk_f16_128x128x65536,sq_f16_1024
for r in 1 2; do
  timeout 60 $C/tcc_before bench --workloads bench/gemm_sweep.json --suite gpu --target cuda --only $ONLY --out $OUT/before_$r.jsonl > $OUT/before_$r.log 2>&1
  timeout 60 $C/tcc bench --workloads bench/gemm_sweep.json --suite gpu --target cuda --only $ONLY --out $OUT/after_$r.jsonl > $OUT/after_$r.log 2>&1
done
echo "== sweeps done"
export TCC_SWEEP_SHAPES="longk1024,1024,1024,16384,0;longk512,512,512,32768,0;longk256,256,256,49152,0"
export TCC_SWEEP_ONLY=longk1024,longk512,longk256
export TCC_SWEEP_SCHEDULES="128,256,64,64,256,4,2,8,64;128,256,64,64,256,4,4,8,64;128,256,64,64,256,4,8,8,64;128,256,64,64,256,4,16,8,64;128,256,64,64,256,4,8,12,64;128,128,64,64,128,4,8,8,64;64,128,64,64,128,6,4,8,64;64,128,64,64,128,6,16,8,64;64,128,64,64,128,6,8,8,64"
( timeout 150 $C/rt_tests gemm_sweep_against_cublas --ignored --nocapture --test-threads 1 ) > $OUT/alts.log 2>&1
echo "== alts rc=$?"; grep -E "SWEEP|panicked" $OUT/alts.log | head -60
date -u +%T >> $OUT/machine.txt
cd $OUT && tar czf logs.tgz ./*.log && rm -f ./*.log
