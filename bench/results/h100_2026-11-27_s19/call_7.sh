#!/bin/bash
# Session 19, call 7: joined products on mma.sync (the GPU tests of joined products, whose
# default schedule now reads each weight in place, and of the small decoder layer, joined at
# every size), then the decoder layer at a decode step (16 tokens: 10 kernels) beside PyTorch.
set -u
C=gpu-carry/s19
source bench/device_env.sh "$C" "${1:-unknown}"
( time timeout 120 $C/rt_tests gemm::joined cuda::gpu::the_decoder_layer --test-threads 2 ) > $OUT/tests.log 2>&1
echo "== tests rc=$?"; grep -E "^test .*(ok|FAILED)|test result|panicked|decoder layer S=" $OUT/tests.log | tail -8
( timeout 40 $C/tcc bench examples/decoder_layer.tc --fn decoder_layer --target cuda --dim S=16 ) > $OUT/layer16_tcc.log 2>&1
( timeout 90 python3 bench/decoder_layer_peers.py --seq 16 --out $OUT/layer16_peers.jsonl ) > $OUT/layer16_peers.log 2>&1
date -u +%T >> $OUT/machine.txt
grep -E "^fn|^  k|^total" $OUT/layer16_tcc.log; cat $OUT/layer16_peers.jsonl
cd $OUT && tar czf logs.tgz ./*.log && rm -f ./*.log
