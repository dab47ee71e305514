#!/bin/bash
# Session 19, call 6 (9fa487f, after the review fixes): the GPU tests of what changed (attention
# with token-major outputs permuted by a 3-cycle, joined products, the small decoder layer, dual
# products, random programs), then the decoder layer at S=4096 once more beside its peer.
set -u
C=gpu-carry/s19
source bench/device_env.sh "$C" "${1:-unknown}"
( time timeout 220 $C/rt_tests attention_gpu gemm::joined dual_gpu cuda::gpu --test-threads 8 ) > $OUT/tests.log 2>&1
echo "== tests rc=$?"; grep -E "^test .*(ok|FAILED)|test result|panicked|decoder layer S=" $OUT/tests.log | tail -24
( timeout 60 $C/tcc bench examples/decoder_layer.tc --fn decoder_layer --target cuda --dim S=4096 ) > $OUT/layer_tcc.log 2>&1
( timeout 150 python3 bench/decoder_layer_peers.py --seq 4096 --out $OUT/layer_peers.jsonl ) > $OUT/layer_peers.log 2>&1
date -u +%T >> $OUT/machine.txt
grep -E "^fn|^total" $OUT/layer_tcc.log; grep sdpa $OUT/layer_peers.jsonl
cd $OUT && tar czf logs.tgz ./*.log && rm -f ./*.log
