# Session 4, call 3: TMA-store epilogue. Correctness of every wgmma variant, then a sweep.
source gpu-carry/s4/setup.sh
date -u +%T
cd runtime
TCC_GPU_CASES=64 timeout 200 /tmp/rt --test-threads=1 wgmma:: > $OUT/wgmma_tests.txt 2>&1; echo "exit $?" >> $OUT/wgmma_tests.txt
grep -E "^test |test result|FAILED|panicked|exit" $OUT/wgmma_tests.txt | head -20
grep -E "failures|\[" $OUT/wgmma_tests.txt | head -20
date -u +%T
export TCC_WG_STAGES=3,4 TCC_WG_ONLY=128x256w12v64,128x256w8v64,128x256w8v8,128x128w12v64,128x128w8v64
TCC_SWEEP_ONLY=gemm_f16_4096,gemm_f16_8192,gemm_f16_llm_up,gemm_f16_4096_bt,gemm_bf16_4096,gemm_bias_gelu_f16_4096,f16_4096x4096x1024 TCC_SWEEP_SHAPES=4096x4096x1024 \
  timeout 300 /tmp/rt --ignored --nocapture --test-threads=1 wgmma_sweep > $OUT/sweep.txt 2>&1; echo "exit $?" >> $OUT/sweep.txt
grep -E "SWEEP|exit|panicked" $OUT/sweep.txt | sed 's/ref_err=\([^ ]*\).*/ref_err=\1/; s/micro=.*warps=/w=/; s/split_k=1 swizzle=8 threads=0//'
date -u +%T
