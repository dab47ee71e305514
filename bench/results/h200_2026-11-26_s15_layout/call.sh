#!/bin/bash
# Session 15, helper "layout" (issue 25 item 3): the runtime's attention GPU tests (token-major K
# and V read in place through reshape/permute views included), then the decoder layer at S=4096
# (kernel count and times), twice; the small decoder layer against the interpreter first.
# Binaries built on the CPU machine at COMMIT ($1), carried with this script in gpu-carry/layout
# of the session's checkout (run as `bash gpu-carry/layout/call.sh eff2af4`).
set -u
C=gpu-carry/layout
for f in tcc rt_tests; do xz -dkf $C/$f.xz && chmod +x $C/$f; done
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit $1"; date -u +%T; } > $OUT/machine.txt
export TCC_CACHE_DIR=$(mktemp -d)
( time timeout 100 $C/rt_tests attention_gpu --test-threads 8 ) > $OUT/attention.log 2>&1
echo "== attention rc=$?"; grep -E "^test .*(ok|FAILED)|test result|panicked" $OUT/attention.log | tail -14
( time timeout 60 $C/rt_tests the_decoder_layer_at_small_sizes --nocapture ) > $OUT/layer_test.log 2>&1
echo "== layer test rc=$?"; grep -E "^test .*(ok|FAILED)|test result|panicked|decoder layer S=" $OUT/layer_test.log | tail -6
( time timeout 40 $C/tcc bench examples/decoder_layer.tc --fn decoder_layer --target cuda --dim S=4096 ) > $OUT/layer_tcc.log 2>&1
( time timeout 30 $C/tcc bench examples/decoder_layer.tc --fn decoder_layer --target cuda --dim S=4096 ) > $OUT/layer_tcc_again.log 2>&1
date -u +%T >> $OUT/machine.txt
cat $OUT/layer_tcc.log; grep -h total $OUT/layer_tcc_again.log
