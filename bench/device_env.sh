#!/bin/bash
# Sourced first by a device call's script (bench/results/*/call_*.sh): unpacks the carried
# binaries (CARRY/*.xz), records the machine and the commit in $OUT/machine.txt, puts cuBLAS on
# the library path and gives the run a fresh tuning cache.
#
#   source bench/device_env.sh CARRY_DIR COMMIT
C=${1:?usage: source bench/device_env.sh CARRY_DIR COMMIT}
for f in "$C"/*.xz; do
    xz -dkf "$f" && chmod +x "${f%.xz}"
done
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit ${2:-unknown}"; date -u +%T; } > "$OUT/machine.txt"
cublas=$(find / -name 'libcublas.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)
export LD_LIBRARY_PATH=${cublas:+$(dirname "$cublas"):}${LD_LIBRARY_PATH:-}
TCC_CACHE_DIR=$(mktemp -d)
export TCC_CACHE_DIR
