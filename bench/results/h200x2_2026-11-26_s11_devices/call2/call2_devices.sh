#!/bin/bash
# Session 11, 2-GPU call 2: the decoder-layer plan (two sequence lengths, 24 kernels) tuned with
# one GPU, then with two (`--devices 0` then `--devices 0,1`), each with a fresh cache and a
# budget of 96 trials for the whole plan; then each run's lockfile, to compare the winners.
set -u
C=gpu-carry/s11b
xz -dkf $C/tcc.xz && chmod +x $C/tcc
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; date -u +%T; } > $OUT/machine.txt
cat > /tmp/plan.jsonl <<PLAN
{"file": "$PWD/$C/decoder_layer.tc", "fn": "decoder_layer", "dims": {"S": 512}, "target": "cuda"}
{"file": "$PWD/$C/decoder_layer.tc", "fn": "decoder_layer", "dims": {"S": 1024}, "target": "cuda"}
PLAN
for run in "1:0" "2:0,1"; do
  n=${run%%:*}; devices=${run#*:}
  export TCC_CACHE_DIR=$(mktemp -d)
  start=$(date +%s%N)
  timeout 170 $C/tcc tune --plan /tmp/plan.jsonl --devices $devices --budget 96trials --json > $OUT/tune_${n}gpu.jsonl 2> $OUT/tune_${n}gpu.err
  rc=$?
  echo "rc=$rc wall_ms=$(( ($(date +%s%N) - start) / 1000000 ))" > $OUT/tune_${n}gpu.time
  $C/tcc lock --plan /tmp/plan.jsonl -o $OUT/lock_${n}gpu.lock > $OUT/lock_${n}gpu.log 2>&1
done
date -u +%T >> $OUT/machine.txt
cat $OUT/machine.txt $OUT/tune_*gpu.time; tail -n 1 $OUT/tune_1gpu.jsonl $OUT/tune_2gpu.jsonl; tail -n 3 $OUT/tune_2gpu.err
