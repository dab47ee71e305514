# Session 5, call 3 (probe + experiment flags, not kept): MUFU throughput, gelu accuracy on all f16, gelu variants.
source gpu-carry/s5/setup.sh
date -u +%T
(cd gpu-carry/s5/mufu && nvcc -O3 -arch=sm_90a -o /tmp/mufu mufu.cu 2>&1 | tail -3 && /tmp/mufu)
sw() { TCC_SWEEP_ONLY=$1 TCC_WG_STAGES=$2 TCC_WG_ONLY=$3 timeout 60 /tmp/rt --ignored --nocapture --test-threads=1 wgmma_sweep 2>&1 | grep SWEEP | grep -v "mma.sync default\| cublas median" | grep -v "wgmma default" | sed 's/ micro=64x256 vec=64//; s/ split_k=1 swizzle=8 threads=0//'; }
for v in base h16 tanh base h16 tanh; do echo "== $v"; TCC_X_GELU=$v sw gemm_bias_gelu_f16_4096 4 128x256w8v64; done
echo "== plain"; sw gemm_f16_4096 4 128x256w8v64
date -u +%T
