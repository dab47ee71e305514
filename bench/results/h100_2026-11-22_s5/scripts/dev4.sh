# Session 5, call 4 (experiment flags, not kept): epilogue warps taking every tile (EW_ALL), with and without math.
source gpu-carry/s5/setup.sh
date -u +%T
sw() { TCC_SWEEP_ONLY=$1 TCC_WG_STAGES=$2 TCC_WG_ONLY=$3 timeout 60 /tmp/rt --ignored --nocapture --test-threads=1 wgmma_sweep 2>&1 | grep SWEEP | grep -v "mma.sync default\| cublas median" | grep -v "wgmma default" | sed 's/ micro=64x256 vec=64//; s/ split_k=1 swizzle=8 threads=0//'; }
echo "== EW_ALL tests"; TCC_X_EW_ALL=1 timeout 60 /tmp/rt --test-threads=1 epilogue_warps 2>&1 | grep -E "^test |test result|nk=|differ" | head
for r in 1 2; do
echo "== plain"; sw gemm_f16_4096 3,4 128x256w8v64,128x256w12v64
echo "== EW nomath"; TCC_X_EW_NOMATH=1 sw gemm_bias_gelu_f16_4096 3 128x256w12v64
echo "== EW_ALL nomath"; TCC_X_EW_ALL=1 TCC_X_EW_NOMATH=1 sw gemm_bias_gelu_f16_4096 3 128x256w12v64
echo "== EW_ALL base"; TCC_X_EW_ALL=1 sw gemm_bias_gelu_f16_4096 3 128x256w12v64
echo "== EW_ALL tanh"; TCC_X_EW_ALL=1 TCC_X_GELU=tanh sw gemm_bias_gelu_f16_4096 3 128x256w12v64
echo "== tanh"; TCC_X_GELU=tanh sw gemm_bias_gelu_f16_4096 3,4 128x256w8v64,128x256w12v64
done
date -u +%T
