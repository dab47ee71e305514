#!/usr/bin/env bash
# Regenerates a benchmark report in one command: the peers (peers.py), then tcc on the same suite
# with the device's ceilings measured in the same run, into OUT (JSONL rows, report.md, charts).
#
#   bench/report.sh cpu OUT [TCC] [extra tcc bench args...]   # numpy on this CPU, cpu target
#   bench/report.sh gpu OUT [TCC] [extra tcc bench args...]   # PyTorch on the GPU, cuda target
#
# TCC defaults to target/release/tcc (the GPU needs a build with `--features llvm`). peers.py is
# taken from $PEERS, else ../shared/bench/peers.py. Extra args go to `tcc bench` (e.g. --only W).
set -euo pipefail
suite=${1:?usage: bench/report.sh cpu|gpu OUT [TCC] [args...]}
out=${2:?usage: bench/report.sh cpu|gpu OUT [TCC] [args...]}
tcc=${3:-target/release/tcc}
shift $(( $# < 3 ? $# : 3 ))
here=$(cd "$(dirname "$0")" && pwd)
peers=${PEERS:-$here/../../shared/bench/peers.py}
case "$suite" in
    cpu) target=cpu ;;
    gpu) target=cuda ;;
    *) echo "suite must be cpu or gpu, not $suite" >&2; exit 1 ;;
esac
only=()
for ((i = 1; i <= $#; i++)); do
    if [[ ${!i} == --only ]]; then j=$((i + 1)); only=(--only "${!j}"); fi
done
mkdir -p "$out"
# numpy's OpenBLAS must not be told about another machine's cores (see BENCHMARKS.md).
(unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
 python3 "$peers" --suite "$suite" --workloads "$here/workloads.json" "${only[@]}" --out "$out/peers.jsonl")
peer_files=(--peers "$out/peers.jsonl")
# PyTorch on the CPU (eager and torch.compile) where the Python in $TORCH_PYTHON (default python3)
# has it: `pip install torch`.
torch_python=${TORCH_PYTHON:-python3}
if [[ $suite == cpu ]] && "$torch_python" -c 'import torch' 2>/dev/null; then
    "$torch_python" "$here/cpu_torch_peers.py" --workloads "$here/workloads.json" \
        ${only[1]:+--only "${only[1]}"} --out "$out/peers_torch.jsonl"
    peer_files+=(--peers "$out/peers_torch.jsonl")
elif [[ $suite == cpu ]]; then
    echo "no PyTorch in $torch_python: the CPU report has numpy as its only peer (pip install torch)" >&2
fi
"$tcc" bench --workloads "$here/workloads.json" --suite "$suite" --target "$target" \
    --out "$out/tcc.jsonl" --report "$out" "${peer_files[@]}" "$@"
