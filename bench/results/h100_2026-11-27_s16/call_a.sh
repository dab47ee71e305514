#!/bin/bash
# Session 16, call A: attention with a producer warpgroup (cp.async on mbarriers, no block-wide
# barrier per key block). The runtime's GPU attention tests (every schedule of the space, the
# producer ones included), the sweep of the space on the suite's shapes (each schedule checked
# against the default's output and timed), then the suite's eight attention workloads with tcc's
# default and the peers (SDPA, FlexAttention) in the same call.
set -u
C=gpu-carry/s16
for f in tcc rt_tests; do xz -dkf $C/$f.xz && chmod +x $C/$f; done
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit $1"; date -u +%T; } > $OUT/machine.txt
export LD_LIBRARY_PATH=$(dirname "$(find / -name 'libcublas.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)"):${LD_LIBRARY_PATH:-}
export TCC_CACHE_DIR=$(mktemp -d)
W=attn_f16_b8h16s4096d128,attn_causal_f16_b8h16s4096d128,attn_window_f16_b8h16s4096d128,attn_alibi_causal_f16_b8h16s4096d128,attn_softcap_bf16_b8h16s4096d128,attn_gqa_causal_f16_b4h32kv8s4096d128,attn_d64_f16_b16h16s2048d64,attn_decode_f16_b32h32kv8L8192d128
( time timeout 170 $C/rt_tests attention_gpu --test-threads 8 ) > $OUT/tests.log 2>&1
echo "== tests rc=$?"; grep -E "^test .*(ok|FAILED)|test result|panicked" $OUT/tests.log | tail -12
( time timeout 150 $C/rt_tests time_every_schedule_on_the_suite_shapes --ignored --nocapture --test-threads 1 ) > $OUT/sweep.log 2>&1
echo "== sweep rc=$?"; grep -E "SWEEP|panicked" $OUT/sweep.log | head -60
( time timeout 70 $C/tcc bench --workloads bench/workloads.json --suite gpu --target cuda --only $W --out $OUT/attn_tcc.jsonl ) > $OUT/attn_tcc.log 2>&1
( time timeout 150 python3 $C/peers.py --suite gpu --workloads bench/workloads.json --only $W --autotune "" --out $OUT/attn_peers.jsonl ) > $OUT/attn_peers.log 2>&1
date -u +%T >> $OUT/machine.txt
python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
def rows(f):
    try:
        return [json.loads(l) for l in open(os.path.join(out, f)) if l.strip()]
    except OSError:
        return []
for r in rows("attn_tcc.jsonl"):
    print("TCC", r.get("workload") or r.get("name"), r.get("impl"), r.get("median_ms"))
for r in rows("attn_peers.jsonl"):
    print("PEER", r.get("workload") or r.get("name"), r.get("peer") or r.get("impl"), r.get("median_ms"))
PY
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
