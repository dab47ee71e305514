#!/bin/bash
# Session 19, call 4 (call 2's binaries): what the dual product's epilogue costs
# (bench/dual_epilogue_cost.tc: silu in f32, the sigmoid dropped, the bare product), beside the
# plain product of both weights side by side (bench/epilogue_cost.tc), two rounds.
set -u
C=gpu-carry/s19
source bench/device_env.sh "$C" "${1:-unknown}"
D="--target cuda --dim S=4096 --dim D=4096 --dim F=14336"
for r in 1 2; do
  for f in silu square product; do
    ( timeout 40 $C/tcc bench bench/dual_epilogue_cost.tc --fn $f $D ) > $OUT/${f}_$r.log 2>&1
  done
  ( timeout 40 $C/tcc bench bench/epilogue_cost.tc --fn plain --target cuda --dim S=4096 --dim F=4096 --dim D=28672 ) > $OUT/plain_dual_shape_$r.log 2>&1
done
date -u +%T >> $OUT/machine.txt
for r in 1 2; do for f in silu square product plain_dual_shape; do echo "== ${f}_$r"; grep -E "^  k" $OUT/${f}_$r.log; done; done
cd $OUT && tar czf logs.tgz ./*.log && rm -f ./*.log
