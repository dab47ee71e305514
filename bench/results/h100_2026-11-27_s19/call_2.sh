#!/bin/bash
# Session 19, call 2: the Q, K and V projections as one product (their weights joined along the
# columns, each read in place by its own TMA map) and the dual product's ping-pong default.
# GPU tests: joined products against the interpreter (every TMA warpgroup schedule), the decoder
# layer at small sizes (1024 tokens: the joined product, V read from its columns), the dual
# products; then the decoder layer at S=4096 (9 kernels) beside torch.compile with SDPA, tcc
# before and after; the gated MLP at 4096 and 16 tokens beside eager and torch.compile.
set -u
C=gpu-carry/s19
source bench/device_env.sh "$C" "${1:-unknown}"
( time timeout 200 $C/rt_tests gemm::joined dual_gpu cuda::gpu::the_decoder_layer --test-threads 4 ) > $OUT/tests.log 2>&1
echo "== tests rc=$?"; grep -E "^test .*(ok|FAILED)|test result|panicked|decoder layer S=" $OUT/tests.log | tail -14
( time timeout 60 $C/tcc bench examples/decoder_layer.tc --fn decoder_layer --target cuda --dim S=4096 ) > $OUT/layer_tcc.log 2>&1
( time timeout 150 python3 bench/decoder_layer_peers.py --seq 4096 --out $OUT/layer_peers.jsonl ) > $OUT/layer_peers.log 2>&1
( time timeout 40 $C/tcc bench examples/decoder_layer.tc --fn decoder_layer --target cuda --dim S=4096 ) > $OUT/layer_tcc_again.log 2>&1
( time timeout 40 $C/tcc bench examples/decoder_layer.tc --fn mlp --target cuda --dim S=4096 --dim D=4096 --dim F=14336 ) > $OUT/mlp_tcc.log 2>&1
( time timeout 120 python3 bench/decoder_layer_peers.py --part mlp --seq 4096 --out $OUT/mlp_peers.jsonl ) > $OUT/mlp_peers.log 2>&1
( time timeout 40 $C/tcc bench examples/decoder_layer.tc --fn mlp --target cuda --dim S=16 --dim D=4096 --dim F=14336 ) > $OUT/mlp16_tcc.log 2>&1
( time timeout 120 python3 bench/decoder_layer_peers.py --part mlp --seq 16 --out $OUT/mlp16_peers.jsonl ) > $OUT/mlp16_peers.log 2>&1
date -u +%T >> $OUT/machine.txt
for f in layer_tcc layer_tcc_again mlp_tcc mlp16_tcc; do echo "== $f"; grep -vE "^\s*$" $OUT/$f.log | grep -vE "^(real|user|sys)" | tail -14; done
cat $OUT/layer_peers.jsonl $OUT/mlp_peers.jsonl $OUT/mlp16_peers.jsonl 2>/dev/null
tail -2 $OUT/layer_peers.log $OUT/mlp_peers.log $OUT/mlp16_peers.log
cd $OUT && tar czf logs.tgz ./*.log && rm -f ./*.log
