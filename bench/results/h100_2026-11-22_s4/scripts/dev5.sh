# Session 4, call 5: deferred epilogues (bias+gelu evaluated in the next tile's main loop).
source gpu-carry/s4d/setup.sh
date -u +%T
cd runtime
TCC_GPU_CASES=64 timeout 200 /tmp/rt --test-threads=1 wgmma:: > $OUT/wgmma_tests.txt 2>&1; echo "exit $?" >> $OUT/wgmma_tests.txt
grep -E "^test |test result|FAILED|panicked|exit|differ|: " $OUT/wgmma_tests.txt | head -30
date -u +%T
export TCC_WG_STAGES=3,4 TCC_WG_ONLY=128x256w8v64,128x256w12v64
TCC_SWEEP_ONLY=gemm_f16_4096,gemm_bias_gelu_f16_4096 timeout 200 /tmp/rt --ignored --nocapture --test-threads=1 wgmma_sweep > $OUT/sweep.txt 2>&1; echo "exit $?" >> $OUT/sweep.txt
grep -E "SWEEP|exit|panicked" $OUT/sweep.txt | sed 's/ref_err=\([^ ]*\).*/ref_err=\1/; s/micro=[^ ]* //; s/split_k=1 swizzle=8 threads=0//'
date -u +%T
