#!/bin/bash
# Session 18, call 3: the decoder layer at S=4096 (12 kernels, the attention on the new default:
# producer warpgroup, TMA, ping-pong) beside its PyTorch peers, then tcc again; then the layer's
# gated MLP alone beside eager and torch.compile (issue 25).
set -u
C=gpu-carry/s18
source bench/device_env.sh "$C" "${1:-unknown}"
( time timeout 60 $C/tcc bench examples/decoder_layer.tc --fn decoder_layer --target cuda --dim S=4096 ) > $OUT/layer_tcc.log 2>&1
( time timeout 150 python3 bench/decoder_layer_peers.py --seq 4096 --out $OUT/layer_peers.jsonl ) > $OUT/layer_peers.log 2>&1
( time timeout 40 $C/tcc bench examples/decoder_layer.tc --fn decoder_layer --target cuda --dim S=4096 ) > $OUT/layer_tcc_again.log 2>&1
( time timeout 40 $C/tcc bench examples/decoder_layer.tc --fn mlp --target cuda --dim S=4096 --dim D=4096 --dim F=14336 ) > $OUT/mlp_tcc.log 2>&1
( time timeout 120 python3 bench/decoder_layer_peers.py --part mlp --seq 4096 --out $OUT/mlp_peers.jsonl ) > $OUT/mlp_peers.log 2>&1
date -u +%T >> $OUT/machine.txt
for f in layer_tcc layer_tcc_again mlp_tcc; do echo "== $f"; grep -vE "^\s*$" $OUT/$f.log | tail -22; done
cat $OUT/layer_peers.jsonl $OUT/mlp_peers.jsonl 2>/dev/null
tail -3 $OUT/layer_peers.log $OUT/mlp_peers.log
cd $OUT && tar czf logs.tgz ./*.log && rm -f ./*.log
