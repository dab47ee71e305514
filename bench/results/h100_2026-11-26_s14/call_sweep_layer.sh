#!/bin/bash
# Session 14: the GEMM sweep (untuned defaults, cuBLAS in the same process) with this session's
# tcc, then the decoder layer at S=4096 beside its PyTorch peers (eager, torch.compile,
# torch.compile with SDPA), then the layer again.
set -u
C=gpu-carry/s14f
xz -dkf $C/tcc.xz && chmod +x $C/tcc
export TCC_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/machine.txt; date -u +%T >> $OUT/machine.txt
( time timeout 200 $C/tcc bench --workloads bench/gemm_sweep.json --suite gpu --target cuda --out $OUT/sweep.jsonl ) > $OUT/sweep.log 2>&1
( time timeout 90 $C/tcc bench examples/decoder_layer.tc --fn decoder_layer --target cuda --dim S=4096 ) > $OUT/layer_tcc.log 2>&1
( time timeout 200 python3 bench/decoder_layer_peers.py --seq 4096 --out $OUT/layer_peers.jsonl ) > $OUT/layer_peers.log 2>&1
( time timeout 60 $C/tcc bench examples/decoder_layer.tc --fn decoder_layer --target cuda --dim S=4096 ) > $OUT/layer_tcc_again.log 2>&1
date -u +%T >> $OUT/machine.txt
tail -4 $OUT/sweep.log; grep -h total $OUT/layer_tcc*.log; cat $OUT/layer_peers.jsonl
