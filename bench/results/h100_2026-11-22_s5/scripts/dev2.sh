# Session 5, call 2 (experiment flags, not kept): gelu variants and epilogue warps without math.
source gpu-carry/s5/setup.sh
date -u +%T
sw() { TCC_SWEEP_ONLY=$1 TCC_WG_STAGES=$2 TCC_WG_ONLY=$3 timeout 60 /tmp/rt --ignored --nocapture --test-threads=1 wgmma_sweep 2>&1 | grep SWEEP | grep -v "mma.sync default\| cublas median" | sed 's/ micro=64x256 vec=64//; s/ split_k=1 swizzle=8 threads=0//'; }
echo "== plain"; sw gemm_f16_4096 3,4 128x256w8v64,128x256w12v64
echo "== base"; sw gemm_bias_gelu_f16_4096 3,4 128x256w8v64,128x256w12v64
echo "== nomath"; TCC_X_EW_NOMATH=1 sw gemm_bias_gelu_f16_4096 3 128x256w12v64
echo "== fold"; TCC_X_LG=2 TCC_X_GELU=fold sw gemm_bias_gelu_f16_4096 3,4 128x256w8v64,128x256w12v64
echo "== tanh"; TCC_X_GELU=tanh sw gemm_bias_gelu_f16_4096 3,4 128x256w8v64,128x256w12v64
echo "== base again"; sw gemm_bias_gelu_f16_4096 3 128x256w12v64
echo "== plain again"; sw gemm_f16_4096 3,4 128x256w8v64,128x256w12v64
date -u +%T
