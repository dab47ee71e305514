#!/bin/bash
# Session 19, call 3 (same binaries as call 2): the decoder layer at S=4096 three times beside
# torch.compile with SDPA twice, interleaved (call 2's two tcc runs differed by 8%); then what an
# epilogue reading an M x N tensor costs (bench/epilogue_cost.tc: the down projection with and
# without its residual, and the plain product of the dual product's shape), two rounds.
set -u
C=gpu-carry/s19
source bench/device_env.sh "$C" "${1:-unknown}"
L="examples/decoder_layer.tc --fn decoder_layer --target cuda --dim S=4096"
for r in 1 2; do
  ( timeout 60 $C/tcc bench $L ) > $OUT/layer_tcc_$r.log 2>&1
  ( timeout 150 python3 bench/decoder_layer_peers.py --seq 4096 --out $OUT/layer_peers_$r.jsonl ) > $OUT/layer_peers_$r.log 2>&1
done
( timeout 60 $C/tcc bench $L ) > $OUT/layer_tcc_3.log 2>&1
E=bench/epilogue_cost.tc
for r in 1 2; do
  ( timeout 40 $C/tcc bench $E --fn plain --target cuda --dim S=4096 --dim F=14336 --dim D=4096 ) > $OUT/plain_$r.log 2>&1
  ( timeout 40 $C/tcc bench $E --fn residual --target cuda --dim S=4096 --dim F=14336 --dim D=4096 ) > $OUT/residual_$r.log 2>&1
  ( timeout 40 $C/tcc bench $E --fn plain --target cuda --dim S=4096 --dim F=4096 --dim D=28672 ) > $OUT/plain_dual_shape_$r.log 2>&1
done
date -u +%T >> $OUT/machine.txt
for f in layer_tcc_1 layer_tcc_2 layer_tcc_3; do echo "== $f"; grep -E "^total|^  k" $OUT/$f.log | awk '{print $1, $(NF-5), $(NF-4), $(NF-3)}' | head -12; done
for f in plain_1 residual_1 plain_dual_shape_1 plain_2 residual_2 plain_dual_shape_2; do echo "== $f"; grep -E "^  k|^total" $OUT/$f.log; done
grep -h sdpa $OUT/layer_peers_*.jsonl
cd $OUT && tar czf logs.tgz ./*.log && rm -f ./*.log
