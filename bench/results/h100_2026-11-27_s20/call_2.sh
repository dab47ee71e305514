#!/bin/bash
# Session 20, call 2 (128x192 warpgroup tiles and the split default, issue 26): the GPU tests of
# what changed (every wgmma variant incl. 192-wide ones in both B layouts, joined products, split
# schedules, the odd and long bf16 products' whole spaces, dual products), 192-wide tiles beside
# 128 x 128 / 128 x 256 on 1536^3, 3072^3 and 5120^3 beside cuBLAS, then the whole GEMM sweep
# with this tcc and, on the shapes it changes, with session 19's.
set -u
C=gpu-carry/s20
source bench/device_env.sh "$C" "${1:-unknown}"
( time timeout 300 $C/rt_tests wgmma:: gemm::joined gemm::split gemm::every_schedule_of_the_spaces_is_right_on_an_odd_product gemm::every_schedule_of_the_spaces_is_right_on_a_long_bf16 dual_gpu --test-threads 8 ) > $OUT/tests.log 2>&1
echo "== tests rc=$?"; grep -E "^test .*(ok|FAILED)|test result|panicked|WRONG" $OUT/tests.log | head -30
export TCC_SWEEP_SHAPES="sq1536,1536,1536,1536,0;sq3072,3072,3072,3072,0;sq5120,5120,5120,5120,0"
export TCC_SWEEP_ONLY=sq1536,sq3072,sq5120
export TCC_SWEEP_SCHEDULES="128,192,64,64,192,4,1,8,64;128,192,64,64,192,3,1,8,64;128,192,64,64,192,4,1,12,64;128,128,64,64,128,4,1,8,64;128,256,64,64,256,4,1,8,64;128,256,64,64,256,3,1,8,64"
( timeout 100 $C/rt_tests gemm_sweep_against_cublas --ignored --nocapture --test-threads 1 ) > $OUT/alts.log 2>&1
echo "== alts rc=$?"; grep -E "SWEEP|panicked" $OUT/alts.log | sed 's/micro=[0-9x]* //; s/ threads=0//' | head -30
( time timeout 200 $C/tcc bench --workloads bench/gemm_sweep.json --suite gpu --target cuda --out $OUT/gemm_sweep.jsonl ) > $OUT/gemm_sweep.log 2>&1
echo "== sweep rc=$?"; tail -3 $OUT/gemm_sweep.log
ONLY=sq_f16_1536,sq_f16_3072,longk_f16_1024x1024x16384,longk_f16_512x512x32768,longk_f16_256x256x49152,skinny_f16_m64_4096x14336
timeout 60 $C/tcc_before bench --workloads bench/gemm_sweep.json --suite gpu --target cuda --only $ONLY --out $OUT/before.jsonl > $OUT/before.log 2>&1
timeout 60 $C/tcc bench --workloads bench/gemm_sweep.json --suite gpu --target cuda --only $ONLY --out $OUT/after.jsonl > $OUT/after.log 2>&1
echo "== before/after rc=$?"
date -u +%T >> $OUT/machine.txt
cd $OUT && tar czf logs.tgz ./*.log && rm -f ./*.log
