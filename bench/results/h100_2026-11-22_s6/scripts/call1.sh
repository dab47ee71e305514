# Session 6, call 1 (experiment flag TCC_X_DEFER=parts,gap): the deferred TMA-store epilogue.
source gpu-carry/s6/setup.sh
date -u +%T
TCC_X_DEFER=4,1 timeout 200 /tmp/rt --test-threads=1 wgmma:: 2>&1 | grep -E "^test |test result|panicked|failures|differ|nk=|error" | head -40
date -u +%T
for v in off 4,1 2,1 8,1 4,2 off 4,1; do echo "== $v"; TCC_X_DEFER=$v sw gemm_bias_gelu_f16_4096,gemm_f16_4096 4 128x256w8v64; date -u +%T; done
