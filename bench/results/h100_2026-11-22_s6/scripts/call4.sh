# Session 6, call 4 (experiment flag TCC_X_DEFER=parts,gap): the deferred epilogue with one rotating copy of the chunk code.
source gpu-carry/s6/setup.sh
date -u +%T
TCC_X_DEFER=4,1 timeout 200 /tmp/rt --test-threads=1 wgmma:: 2>&1 | grep -E "^test |test result|panicked|failures|differ|nk=|error" | head -40
date -u +%T
for v in off 8,1 4,1 2,1 1,1 8,2 4,2 off 8,1; do echo "== $v"; TCC_X_DEFER=$v sw gemm_bias_gelu_f16_4096,gemm_f16_4096 4 128x256w8v64 | grep -v "default\|cublas median"; done
date -u +%T
