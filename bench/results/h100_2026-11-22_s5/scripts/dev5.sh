# Session 5, call 5: cuBLASLt's fused bias+gelu epilogue against its plain GEMM (torch).
source gpu-carry/s5/setup.sh
date -u +%T
timeout 120 python3 gpu-carry/s5/lt/lt.py 2>&1 | tail -6
date -u +%T
