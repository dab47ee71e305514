#!/bin/bash
# Session 13, call 10: the decoder layer at S=4096 with this session's tcc (606e006's code: dual
# products, long-k splits) beside PyTorch eager, torch.compile and torch.compile with SDPA.
set -u
C=gpu-carry/s13d
xz -dc $C/tcc_s6.xz > $C/tcc && chmod +x $C/tcc
export TCC_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/machine.txt
( time timeout 90 $C/tcc bench examples/decoder_layer.tc --fn decoder_layer --target cuda --dim S=4096 ) > $OUT/layer_tcc.log 2>&1
( time timeout 240 python3 bench/decoder_layer_peers.py --seq 4096 --out $OUT/layer_peers.jsonl ) > $OUT/layer_peers.log 2>&1
( time timeout 60 $C/tcc bench examples/decoder_layer.tc --fn decoder_layer --target cuda --dim S=4096 ) > $OUT/layer_tcc_again.log 2>&1
grep -h total $OUT/layer_tcc*.log; cat $OUT/layer_peers.jsonl
