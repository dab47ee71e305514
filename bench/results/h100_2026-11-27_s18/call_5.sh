#!/bin/bash
# Session 18, call 5: division by a constant (the reciprocal and Markstein's correction) and the
# cheaper tanh (ex2 of the product rounded once, rcp without a Newton step). The GPU tests that run
# them against the interpreter (random programs, rows, examples, attention), the score function
# taken apart again (bench/softcap_cost.tc), and the suite's soft-capped and plain attention with
# their peers in the same call.
set -u
C=gpu-carry/s18
source bench/device_env.sh "$C" "${1:-unknown}"
( time timeout 300 $C/rt_tests cuda::gpu cuda_rows::gpu attention_gpu --test-threads 8 ) > $OUT/tests.log 2>&1
echo "== tests rc=$?"; grep -E "^test .*(ok|FAILED)|test result|panicked" $OUT/tests.log | tail -22
for f in softcap softcap_mul divide_only plain; do
    echo "== $f"
    timeout 40 $C/tcc bench bench/softcap_cost.tc --fn $f --target cuda --dim H=128 --dim S=4096 2>&1 | grep -E "attention"
done
W=attn_softcap_bf16_b8h16s4096d128,attn_f16_b8h16s4096d128
timeout 60 $C/tcc bench --workloads bench/workloads.json --suite gpu --target cuda --only $W --out $OUT/attn_tcc.jsonl > $OUT/attn_tcc.log 2>&1
timeout 120 python3 $C/peers.py --suite gpu --workloads bench/workloads.json --only $W --autotune "" --out $OUT/attn_peers.jsonl > $OUT/attn_peers.log 2>&1
cat $OUT/attn_tcc.jsonl $OUT/attn_peers.jsonl | cut -c1-160
date -u +%T >> $OUT/machine.txt
cd $OUT && tar czf logs.tgz ./*.log && rm -f ./*.log
