#!/bin/bash
# Session 14, 2-GPU call 1: the decoder-layer plan (S = 512 and 1024, 24 kernels) tuned with one
# GPU and with two, each run with a fresh tuning cache and the driver's JIT cache off
# (CUDA_CACHE_DISABLE=1, so a later run gains nothing from an earlier one):
#   A: --budget 96trials (split among the kernels before tuning, the same on 1 and 2 GPUs);
#   B: --space 8 and no budget: every kernel measures its whole thinned space (2 GPUs first).
# Then each run's lockfile, to compare the winners. Everything comes back in one archive.
set -u
C=gpu-carry/s14
xz -dkf $C/tcc.xz && chmod +x $C/tcc
export CUDA_CACHE_DISABLE=1
R=/tmp/r; mkdir -p $R
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; nproc; date -u +%T; } > $R/machine.txt
cat > /tmp/plan.jsonl <<PLAN
{"file": "$PWD/$C/decoder_layer.tc", "fn": "decoder_layer", "dims": {"S": 512}, "target": "cuda"}
{"file": "$PWD/$C/decoder_layer.tc", "fn": "decoder_layer", "dims": {"S": 1024}, "target": "cuda"}
PLAN
run() { # name devices limit args...
  local name=$1 devices=$2 limit=$3; shift 3
  export TCC_CACHE_DIR=$(mktemp -d)
  local start=$(date +%s%N)
  timeout $limit $C/tcc tune --plan /tmp/plan.jsonl --devices $devices --json "$@" > $R/$name.jsonl 2> $R/$name.err
  local rc=$?
  echo "$name rc=$rc wall_ms=$(( ($(date +%s%N) - start) / 1000000 ))" | tee -a $R/times.txt
  $C/tcc lock --plan /tmp/plan.jsonl -o $R/$name.lock > $R/$name.lock.log 2>&1
}
run A_1gpu 0 150 --budget 96trials
run A_2gpu 0,1 150 --budget 96trials
run B_2gpu 0,1 160 --space 8
run B_1gpu 0 200 --space 8
date -u +%T >> $R/machine.txt
cp $0 $R/
tar -C /tmp -cJf $OUT/call1.tar.xz r
cat $R/machine.txt $R/times.txt
for f in $R/*.jsonl; do echo "== $f"; tail -n 1 $f; done
tail -n 3 $R/*.err
