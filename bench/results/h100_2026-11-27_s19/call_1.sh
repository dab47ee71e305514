#!/bin/bash
# Session 19, call 1: the attention kernel's layout tail (the output stored token-major) on the
# GPU: the runtime's GPU attention tests (the new token-major output cases included) and the GPU
# program tests; then the decoder layer at S=4096 (11 kernels: no permute kernel between the
# attention and the output projection) beside torch.compile with SDPA, tcc before and after.
set -u
C=gpu-carry/s19
source bench/device_env.sh "$C" "${1:-unknown}"
( time timeout 200 $C/rt_tests attention_gpu --test-threads 8 ) > $OUT/tests.log 2>&1
echo "== attention tests rc=$?"; grep -E "^test .*(ok|FAILED)|test result|panicked" $OUT/tests.log | tail -12
( time timeout 120 $C/rt_tests cuda::gpu cuda_rows::gpu --test-threads 8 ) > $OUT/tests_gpu.log 2>&1
echo "== gpu tests rc=$?"; grep -E "test result|panicked|FAILED" $OUT/tests_gpu.log | tail -6
( time timeout 60 $C/tcc bench examples/decoder_layer.tc --fn decoder_layer --target cuda --dim S=4096 ) > $OUT/layer_tcc.log 2>&1
( time timeout 150 python3 bench/decoder_layer_peers.py --seq 4096 --out $OUT/layer_peers.jsonl ) > $OUT/layer_peers.log 2>&1
( time timeout 40 $C/tcc bench examples/decoder_layer.tc --fn decoder_layer --target cuda --dim S=4096 ) > $OUT/layer_tcc_again.log 2>&1
date -u +%T >> $OUT/machine.txt
for f in layer_tcc layer_tcc_again; do echo "== $f"; grep -vE "^\s*$" $OUT/$f.log | tail -20; done
cat $OUT/layer_peers.jsonl 2>/dev/null
tail -3 $OUT/layer_peers.log
cd $OUT && tar czf logs.tgz ./*.log && rm -f ./*.log
