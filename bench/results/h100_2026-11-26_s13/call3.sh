#!/bin/bash
# Session 13, call 3: tcc's candle_cuda tests again, with the output-ownership test.
set -u
C=gpu-carry/s13
xz -dkf $C/tcc_tests.xz && chmod +x $C/tcc_tests
export LD_LIBRARY_PATH=$(dirname "$(find / -name 'libcublas.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)"):${LD_LIBRARY_PATH:-}
export TCC_CACHE_DIR=$(mktemp -d)
( cd tcc && time timeout 150 ../$C/tcc_tests candle_cuda --test-threads 1 ) > $OUT/tests.log 2>&1
tail -15 $OUT/tests.log
