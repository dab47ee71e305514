#!/bin/bash
# Session 13, call 5: issue 25's dual products (branch issue25): the runtime's GPU tests of the
# dual kernel, then the decoder layer and its MLP timed with main's tcc and the branch's, in turn.
set -u
C=gpu-carry/s13b
for f in tcc_main tcc_25 rt_tests; do xz -dkf $C/$f.xz && chmod +x $C/$f; done
export TCC_CACHE_DIR=$(mktemp -d)
( cd runtime && time timeout 150 ../$C/rt_tests dual --test-threads 1 ) > $OUT/dual_tests.log 2>&1
( cd runtime && time timeout 120 ../$C/rt_tests wgmma --test-threads 1 ) > $OUT/wgmma_tests.log 2>&1
for round in 1 2; do
  for v in main 25; do
    timeout 60 $C/tcc_$v bench examples/decoder_layer.tc --fn decoder_layer --target cuda --dim S=4096 >> $OUT/layer_$v.log 2>&1
    timeout 40 $C/tcc_$v bench examples/decoder_layer.tc --fn mlp --target cuda --dim S=4096 --dim D=4096 --dim F=14336 >> $OUT/mlp_$v.log 2>&1
    timeout 40 $C/tcc_$v bench examples/decoder_layer.tc --fn mlp --target cuda --dim S=16 --dim D=4096 --dim F=14336 >> $OUT/mlp16_$v.log 2>&1
  done
done
tail -4 $OUT/dual_tests.log $OUT/wgmma_tests.log; grep -h "total\|^fn" $OUT/layer_*.log $OUT/mlp_*.log $OUT/mlp16_*.log
