# Session 6, call 5 (probe/experiment flags, not kept): what the immediate epilogue's bias loads cost. TCC_X_PROBE=noload: loads replaced by an opaque constant; TCC_X_PF=1: the tile's epilogue loads prefetched into L1 before its main loop.
source gpu-carry/s6/setup.sh
date -u +%T
TCC_X_PF=1 timeout 200 /tmp/rt --test-threads=1 wgmma::wgmma_gemms 2>&1 | grep -E "^test |test result|panicked|failures|differ|nk=|error" | head -10
for r in 1 2; do
echo "== off"; sw gemm_bias_gelu_f16_4096,gemm_f16_4096 4 128x256w8v64 | grep -v "default\|cublas median"
echo "== noload"; TCC_X_PROBE=noload sw gemm_bias_gelu_f16_4096 4 128x256w8v64 | grep -v "default\|cublas median"
echo "== pf"; TCC_X_PF=1 sw gemm_bias_gelu_f16_4096 4 128x256w8v64 | grep -v "default\|cublas median"
done
date -u +%T
