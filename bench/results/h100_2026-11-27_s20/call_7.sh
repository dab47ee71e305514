#!/bin/bash
# Session 20, call 7 (the session's final code): the GPU tests of random programs, the examples,
# the decoder layer at small sizes and tensor-core GEMMs under the new untuned defaults, then the
# decoder layer at S=64 (now 11 kernels by the optimizer's choice, 9 before) with session 19's
# tcc and this one, two interleaved rounds.
set -u
C=gpu-carry/s20
source bench/device_env.sh "$C" "${1:-unknown}"
( time timeout 240 $C/rt_tests cuda::gpu gemm::tensor_core --test-threads 8 ) > $OUT/tests.log 2>&1
echo "== tests rc=$?"; grep -E "^test .*(ok|FAILED)|test result|panicked|^real" $OUT/tests.log | head -20
for r in 1 2; do
  ( timeout 60 $C/tcc_before bench examples/decoder_layer.tc --fn decoder_layer --target cuda --dim S=64 ) > $OUT/layer64_before_$r.log 2>&1
  ( timeout 60 $C/tcc bench examples/decoder_layer.tc --fn decoder_layer --target cuda --dim S=64 ) > $OUT/layer64_after_$r.log 2>&1
done
grep -H -E "^total" $OUT/layer64_*.log
date -u +%T >> $OUT/machine.txt
cd $OUT && tar czf logs.tgz ./*.log && rm -f ./*.log
