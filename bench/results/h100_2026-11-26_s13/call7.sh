#!/bin/bash
# Session 13, call 7: six stages for the one-consumer wgmma tile over a long k (issue 26): the
# long-k shapes of the sweep and a control, main's tcc (the long-k splits) and the changed one,
# in turn, two rounds.
set -u
C=gpu-carry/s13d
for f in tcc_main tcc_s6; do xz -dkf $C/$f.xz && chmod +x $C/$f; done
export TCC_CACHE_DIR=$(mktemp -d)
ONLY=longk_f16_256x256x49152,longk_f16_128x128x65536,longk_f16_512x512x32768,longk_f16_64x64x131072,longk_f16_1024x1024x16384,longk_f16_96x160x40000,sq_f16_1024,sq_f16_2048
for round in 1 2; do
  for v in main s6; do
    timeout 100 $C/tcc_$v bench --workloads bench/gemm_sweep.json --suite gpu --target cuda --only $ONLY --out $OUT/r${round}_$v.jsonl > /dev/null 2>&1
  done
done
grep -h '"tcc' $OUT/*.jsonl | sort
