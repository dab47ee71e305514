#!/bin/bash
# Interleaved rounds on this CPU: numpy (peers.py), PyTorch eager and torch.compile where the
# Python in $TORCH_PYTHON has torch, then tcc's LLVM and cranelift tiers, ROUNDS times (default 3),
# with the load average between them. TCC is a `--features llvm` build (both tiers).
#
#   bench/cpu_rounds.sh OUT_DIR [TCC] [--only W1,W2]
set -e
cd "$(dirname "$0")/.."
OUT=${1:?usage: bench/cpu_rounds.sh OUT_DIR [TCC] [--only W]}
TCC=${2:-target/llvm/release/tcc}
shift $(( $# < 2 ? $# : 2 ))
ROUNDS=${ROUNDS:-3}
PEERS=${PEERS:-../shared/bench/peers.py}
TORCH_PYTHON=${TORCH_PYTHON:-python3}
mkdir -p "$OUT"
uptime > "$OUT/uptime.txt"
for r in $(seq 1 "$ROUNDS"); do
  (unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
   python3 "$PEERS" --suite cpu --workloads bench/workloads.json "$@" --out "$OUT/numpy_r$r.jsonl") > "$OUT/numpy_r$r.txt" 2>&1
  if "$TORCH_PYTHON" -c 'import torch' 2>/dev/null; then
    "$TORCH_PYTHON" bench/cpu_torch_peers.py --workloads bench/workloads.json "$@" --out "$OUT/torch_r$r.jsonl" > "$OUT/torch_r$r.txt" 2>&1
  fi
  for tier in llvm cranelift; do
    "$TCC" bench --workloads bench/workloads.json --suite cpu --target cpu:$tier "$@" --out "$OUT/tcc_${tier}_r$r.jsonl" > "$OUT/tcc_${tier}_r$r.txt" 2>&1
  done
  uptime >> "$OUT/uptime.txt"
done
echo done
