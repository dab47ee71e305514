#!/bin/bash
# Session 20, call 4 (this session's tcc, 26d36c1): warpgroup alternatives beside cuBLAS on the
# sweep's low small and odd shapes (512^3, 1000^3, 511x513x1025, 257x263x4099, m64 4096x4096,
# 127x4099x2053), to find what their untuned defaults should be.
set -u
C=gpu-carry/s20
source bench/device_env.sh "$C" "${1:-unknown}"
export TCC_SWEEP_SHAPES="s512,512,512,512,0;s1000,1000,1000,1000,0;o511,511,513,1025,0;o257,257,263,4099,0;m64,64,4096,4096,0;o127,127,4099,2053,0"
export TCC_SWEEP_ONLY=s512,s1000,o511,o257,m64,o127
export TCC_SWEEP_SCHEDULES="64,64,64,64,64,4,1,4,64;64,64,64,64,64,4,2,4,64;64,128,64,64,128,4,2,8,64;64,128,64,64,128,6,4,8,64;128,128,64,64,128,4,2,8,64;64,64,64,64,64,4,4,8,64;128,64,64,64,64,4,1,8,64;64,128,64,64,128,6,1,8,64"
( timeout 150 $C/rt_tests gemm_sweep_against_cublas --ignored --nocapture --test-threads 1 ) > $OUT/alts.log 2>&1
echo "== alts rc=$?"; grep -E "SWEEP|panicked" $OUT/alts.log | sed 's/micro=[0-9x]* //; s/ threads=0//; s/ref_err=.*//' | head -70
date -u +%T >> $OUT/machine.txt
cd $OUT && tar czf logs.tgz ./*.log && rm -f ./*.log
