# Session 6, call 6: column vectors (the bias) staged in shared memory by a bulk copy with each tile's first k-tile.
source gpu-carry/s6/setup.sh
date -u +%T
timeout 200 /tmp/rt --test-threads=1 wgmma:: 2>&1 | grep -E "^test |test result|panicked|failures|differ|nk=|error" | head -40
date -u +%T
for r in 1 2; do
sw gemm_bias_gelu_f16_4096,gemm_f16_4096 3,4 128x256w8v64,128x256w12v64 | grep -v "cublas median"
done
date -u +%T
