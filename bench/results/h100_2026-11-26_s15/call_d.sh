#!/bin/bash
# Session 15, call D: issue 26's space tests on the two long-k products (every schedule that sums
# all of k in one block and every fourth of the others, mma.sync and wgmma spaces), each test now
# checking its schedules on eight threads.
set -u
C=gpu-carry/s15
xz -dkf $C/rt_tests.xz && chmod +x $C/rt_tests
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit $1"; date -u +%T; } > $OUT/machine.txt
export TCC_CACHE_DIR=$(mktemp -d)
( time timeout 520 $C/rt_tests gemm::every_schedule_of_the_spaces_is_right_on_a_long --test-threads 2 --nocapture ) > $OUT/space_long.log 2>&1
date -u +%T >> $OUT/machine.txt
grep -E "^test |test result|schedules checked|WRONG|panicked|real" $OUT/space_long.log | tail -20
