# Session 4, call 1: correctness of every wgmma variant (cp.async and TMA), then a timing sweep.
source gpu-carry/s4/setup.sh
date -u +%T
cd runtime
TCC_GPU_CASES=64 timeout 200 /tmp/rt --test-threads=1 wgmma:: > $OUT/wgmma_tests.txt 2>&1; echo "exit $?" >> $OUT/wgmma_tests.txt
grep -E "^test |test result|FAILED|panicked|exit" $OUT/wgmma_tests.txt | head -20
date -u +%T
TCC_SWEEP_ONLY=${SWEEP:-gemm_f16_4096,gemm_bias_gelu_f16_4096,gemm_f16_8192} TCC_WG_STAGES=3,4 timeout ${SWEEP_S:-300} /tmp/rt --ignored --nocapture --test-threads=1 wgmma_sweep > $OUT/sweep.txt 2>&1; echo "exit $?" >> $OUT/sweep.txt
grep -E "SWEEP|exit|panicked" $OUT/sweep.txt | sed 's/ref_err.*//'
date -u +%T
