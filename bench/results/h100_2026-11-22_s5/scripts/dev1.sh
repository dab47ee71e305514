# Session 5, call 1: wgmma GPU tests (epilogue warps included), then plain vs bias+gelu sweeps.
source gpu-carry/s5/setup.sh
date -u +%T
timeout 150 /tmp/rt --test-threads=1 wgmma:: 2>&1 | grep -E "^test |test result|panicked|failures|differ|nk=" | head -40
date -u +%T
for i in 1 2; do
TCC_SWEEP_ONLY=gemm_f16_4096,gemm_bias_gelu_f16_4096 TCC_WG_STAGES=3,4 TCC_WG_ONLY=128x256w8v64,128x256w12v64 timeout 100 /tmp/rt --ignored --nocapture --test-threads=1 wgmma_sweep 2>&1 | grep SWEEP
done
date -u +%T
