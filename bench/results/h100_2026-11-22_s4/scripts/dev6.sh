# Session 4, call 6: epilogue warps (producer warpgroup's warps 1-3 finish each tile).
source gpu-carry/s4d/setup.sh
date -u +%T
cd runtime
TCC_GPU_CASES=64 timeout 100 /tmp/rt --test-threads=1 wgmma::epilogue_warps > $OUT/epi_tests.txt 2>&1; echo "exit $?" >> $OUT/epi_tests.txt
grep -E "^test |test result|FAILED|panicked|exit|differ|: " $OUT/epi_tests.txt | head -30
date -u +%T
export TCC_WG_STAGES=3,4 TCC_WG_ONLY=128x256w8v64,128x256w12v64
TCC_SWEEP_ONLY=gemm_f16_4096,gemm_bias_gelu_f16_4096 timeout 100 /tmp/rt --ignored --nocapture --test-threads=1 wgmma_sweep > $OUT/sweep.txt 2>&1; echo "exit $?" >> $OUT/sweep.txt
grep -E "SWEEP|exit|panicked" $OUT/sweep.txt | grep -v mma.sync | sed 's/ref_err=\([^ ]*\).*/ref_err=\1/; s/micro=[^ ]* //; s/split_k=1 swizzle=8 threads=0//'
date -u +%T
