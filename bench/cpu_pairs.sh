#!/bin/bash
# Paired CPU comparisons for a machine whose speed drifts (a shared host): numpy (peers.py) and
# one tcc tier alternate on one workload at a time, PAIRS times (default 7), and the summary is
# the median of the per-pair ratios numpy/tcc with its range, which drift between pairs does not
# bias the way medians of separate rounds are biased. Rows go to OUT (JSONL per run), the summary
# to OUT/pairs.md.
#
#   bench/cpu_pairs.sh OUT_DIR [TCC] [--tier llvm|cranelift] [--only W1,W2]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: bench/cpu_pairs.sh OUT_DIR [TCC] [--tier T] [--only W]}
TCC=${2:-target/llvm/release/tcc}
shift $(( $# < 2 ? $# : 2 ))
TIER=llvm
ONLY=cpu_gemm_f32_1024,cpu_gemm_bias_relu_f32_512
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tier) TIER=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 1 ;;
  esac
done
PAIRS=${PAIRS:-7}
PEERS=${PEERS:-../shared/bench/peers.py}
mkdir -p "$OUT"
uptime > "$OUT/uptime.txt"
for w in ${ONLY//,/ }; do
  for p in $(seq 1 "$PAIRS"); do
    (unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
     python3 "$PEERS" --suite cpu --workloads bench/workloads.json --only "$w" --out "$OUT/numpy_${w}_p$p.jsonl") > /dev/null 2>&1
    "$TCC" bench --workloads bench/workloads.json --suite cpu --target "cpu:$TIER" --only "$w" \
      --out "$OUT/tcc_${TIER}_${w}_p$p.jsonl" > /dev/null 2>&1
  done
done
uptime >> "$OUT/uptime.txt"
python3 - "$OUT" "$TIER" "$ONLY" <<'EOF' | tee "$OUT/pairs.md"
import json, statistics, sys
out, tier, only = sys.argv[1], sys.argv[2], sys.argv[3].split(',')
def ms(path):
    return json.loads(open(path).readline())['median_ms']
print(f'| workload | pairs | numpy ms (median) | tcc cpu:{tier} ms (median) | numpy/tcc per pair: median (min-max) |')
print('| --- | ---: | ---: | ---: | ---: |')
for w in only:
    pairs, p = [], 1
    while True:
        try:
            pairs.append((ms(f'{out}/numpy_{w}_p{p}.jsonl'), ms(f'{out}/tcc_{tier}_{w}_p{p}.jsonl')))
        except FileNotFoundError:
            break
        p += 1
    ratios = [a / b for a, b in pairs]
    print(f'| {w} | {len(pairs)} | {statistics.median(a for a, _ in pairs):.3f} | '
          f'{statistics.median(b for _, b in pairs):.3f} | {statistics.median(ratios):.2f} '
          f'({min(ratios):.2f}-{max(ratios):.2f}) |')
EOF
