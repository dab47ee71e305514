# Session 4, call 4: fused bias+gelu vs plain, cooperative vs ping-pong (both TMA, TMA-store epilogue).
source gpu-carry/s4/setup.sh
date -u +%T
cd runtime
export TCC_WG_STAGES=3,4 TCC_WG_ONLY=64x256w12v64,128x256w12v64,128x256w8v64,128x128w8v64,64x128w12v64
TCC_SWEEP_ONLY=gemm_f16_4096,gemm_bias_gelu_f16_4096 timeout 200 /tmp/rt --ignored --nocapture --test-threads=1 wgmma_sweep > $OUT/sweep.txt 2>&1; echo "exit $?" >> $OUT/sweep.txt
grep -E "SWEEP|exit|panicked" $OUT/sweep.txt | sed 's/ref_err=\([^ ]*\).*/ref_err=\1/; s/micro=[^ ]* //; s/split_k=1 swizzle=8 threads=0//'
date -u +%T
