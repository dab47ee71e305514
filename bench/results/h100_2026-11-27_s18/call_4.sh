#!/bin/bash
# Session 18, call 4: the soft-capped attention's score function taken apart
# (bench/softcap_cost.tc: the suite's form, the division as a product, the division without tanh,
# the scale alone), each one attention kernel on the default schedule, twice in turn.
set -u
C=gpu-carry/s18
source bench/device_env.sh "$C" "${1:-unknown}"
for round in 1 2; do
    for f in softcap softcap_mul divide_only plain; do
        echo "== $f round $round"
        timeout 40 $C/tcc bench bench/softcap_cost.tc --fn $f --target cuda --dim H=128 --dim S=4096 2>&1 | grep -E "attention|total"
    done
done
date -u +%T >> $OUT/machine.txt
