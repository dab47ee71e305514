#!/bin/bash
# Session 14, final call C: issue 26's space test alone (every schedule of the mma.sync and wgmma
# spaces, k splits of 64 and 128 included, on long-k, odd and tiny products against the f64
# interpreter), which did not finish within call A's 180 s.
set -u
C=gpu-carry/s14f
xz -dkf $C/rt_tests.xz && chmod +x $C/rt_tests
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit $1"; date -u +%T; } > $OUT/machine.txt
export TCC_CACHE_DIR=$(mktemp -d)
( time timeout 540 $C/rt_tests gemm::every_schedule_of_the_spaces --test-threads 1 --nocapture ) > $OUT/space.log 2>&1
echo "rc=$?" >> $OUT/space.log
date -u +%T >> $OUT/machine.txt
tail -8 $OUT/space.log
