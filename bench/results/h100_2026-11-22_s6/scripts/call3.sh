# Session 6, call 3 (probe flags, not kept): what makes small deferred chunks slow. TCC_X_PROBE: noload (epilogue loads replaced by an opaque constant), late (chunks after the TMA issue), elect (stores issued by warp 3).
source gpu-carry/s6/setup.sh
date -u +%T
echo "== off"; TCC_X_DEFER=off sw gemm_bias_gelu_f16_4096,gemm_f16_4096 4 128x256w8v64 | grep -v default
for v in 8,1 4,1; do for p in none noload late elect; do echo "== $v $p"; TCC_X_PROBE=$p TCC_X_DEFER=$v sw gemm_bias_gelu_f16_4096 4 128x256w8v64 | grep -v "default\|cublas median"; done; done
echo "== 2,1 none"; TCC_X_DEFER=2,1 sw gemm_bias_gelu_f16_4096,gemm_f16_4096 4 128x256w8v64 | grep -v "default\|cublas median"
date -u +%T
