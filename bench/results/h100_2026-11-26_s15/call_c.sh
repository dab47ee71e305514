#!/bin/bash
# Session 15, call C: correctness first, side by side (the GPU is shared by tests only): issue
# 26's space tests (every schedule of the mma.sync and wgmma spaces on long-k, odd and tiny
# products, four tests), the attention tests and the examples and random programs (tanh now
# divides by the refined approximate reciprocal); then, alone on the GPU, the attention workloads
# whose default or score function changed (d64: 64 x 64 on one warpgroup; soft cap) with their
# peers in the same call.
set -u
C=gpu-carry/s15
for f in tcc rt_tests; do xz -dkf $C/$f.xz && chmod +x $C/$f; done
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit $1"; date -u +%T; } > $OUT/machine.txt
export LD_LIBRARY_PATH=$(dirname "$(find / -name 'libcublas.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)"):${LD_LIBRARY_PATH:-}
export TCC_CACHE_DIR=$(mktemp -d)
( time timeout 330 $C/rt_tests gemm::every_schedule_of_the_spaces --test-threads 4 ) > $OUT/space.log 2>&1 &
( time timeout 150 $C/rt_tests attention_gpu --test-threads 4 ) > $OUT/attn_tests.log 2>&1 &
( time timeout 150 $C/rt_tests cuda::gpu --test-threads 4 ) > $OUT/examples.log 2>&1 &
wait
for t in space attn_tests examples; do echo "== $t"; grep -E "^test .*(ok|FAILED)|test result|panicked|WRONG|wrong" $OUT/$t.log | tail -14; done
W=attn_f16_b8h16s4096d128,attn_softcap_bf16_b8h16s4096d128,attn_d64_f16_b16h16s2048d64
( time timeout 60 $C/tcc bench --workloads bench/workloads.json --suite gpu --target cuda --only $W --out $OUT/attn_tcc.jsonl ) > $OUT/attn_tcc.log 2>&1
( time timeout 100 python3 $C/peers.py --suite gpu --workloads bench/workloads.json --only $W --autotune "" --out $OUT/attn_peers.jsonl ) > $OUT/attn_peers.log 2>&1
date -u +%T >> $OUT/machine.txt
grep -E "tcc:" $OUT/attn_tcc.log
python3 -c "
import json,sys
for l in open('$OUT/attn_peers.jsonl'):
    r=json.loads(l); print('PEER', r.get('workload') or r.get('name'), r.get('peer') or r.get('impl'), r.get('median_ms'))
"
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
