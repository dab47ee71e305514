# Session 5, call 6: every wgmma variant (small tiles too) on 1024^3 and 2048^3, against cuBLAS and the mma.sync default.
source gpu-carry/s5/setup.sh
date -u +%T
TCC_SWEEP_SHAPES=1024x1024x1024,2048x2048x2048 TCC_SWEEP_ONLY=f16_1024x1024x1024,f16_2048x2048x2048 TCC_WG_STAGES=4 TCC_WG_MIN_TILE=1 timeout 240 /tmp/rt --ignored --nocapture --test-threads=1 wgmma_sweep 2>&1 | grep SWEEP | sed 's/ split_k=1//; s/ threads=0//; s/ tflops=[0-9.]*//; s/ ref_err=.*//'
date -u +%T
