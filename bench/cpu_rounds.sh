#!/bin/bash
# Three interleaved rounds of numpy vs tcc (cranelift default build), then one cpu:llvm run.
set -e
cd "$(dirname "$0")/.."
OUT=${1:?usage: bench/cpu_rounds.sh OUT_DIR}
mkdir -p $OUT
uptime > $OUT/uptime.txt
for r in 1 2 3; do
  (unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE; python3 "${PEERS:-../shared/bench/peers.py}" --suite cpu --out $OUT/peers_r$r.jsonl) > $OUT/peers_r$r.txt 2>&1
  target/release/tcc bench --workloads bench/workloads.json --suite cpu --target cpu:cranelift --out $OUT/tcc_cranelift_r$r.jsonl > $OUT/cranelift_r$r.txt 2>&1
  uptime >> $OUT/uptime.txt
done
target/llvm/release/tcc bench --workloads bench/workloads.json --suite cpu --target cpu:llvm --out $OUT/tcc_llvm.jsonl > $OUT/llvm.txt 2>&1
uptime >> $OUT/uptime.txt
echo done
