# Session 5, review call: the GPU tests that launch TMA kernels (wgmma, GEMM, faults) after the tensor-map error refactor.
source gpu-carry/s5/setup.sh
date -u +%T
timeout 250 /tmp/rt --test-threads=2 2>&1 | grep -E "^test .*(FAILED|ok)$|test result|panicked" | grep -E "wgmma|fault|result|FAILED|panicked"
date -u +%T
