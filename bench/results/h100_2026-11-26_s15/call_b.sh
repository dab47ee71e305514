#!/bin/bash
# Session 15, call B: the attention kernel on warpgroup MMAs with the softmax overlapping the
# output product (FlashAttention-3's intra-warpgroup overlap), merged with the session's V view
# and dual-product changes. The runtime's GPU attention tests, the suite's eight attention
# workloads with tcc's default and the peers (SDPA, FlexAttention) in the same call, the sweep of
# the space on the suite's shapes, and the decoder layer at S=4096 beside its PyTorch peers.
set -u
C=gpu-carry/s15
for f in tcc rt_tests; do xz -dkf $C/$f.xz && chmod +x $C/$f; done
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit $1"; date -u +%T; } > $OUT/machine.txt
export LD_LIBRARY_PATH=$(dirname "$(find / -name 'libcublas.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)"):${LD_LIBRARY_PATH:-}
export TCC_CACHE_DIR=$(mktemp -d)
W=attn_f16_b8h16s4096d128,attn_causal_f16_b8h16s4096d128,attn_window_f16_b8h16s4096d128,attn_alibi_causal_f16_b8h16s4096d128,attn_softcap_bf16_b8h16s4096d128,attn_gqa_causal_f16_b4h32kv8s4096d128,attn_d64_f16_b16h16s2048d64,attn_decode_f16_b32h32kv8L8192d128
( time timeout 150 $C/rt_tests attention_gpu --test-threads 8 ) > $OUT/tests.log 2>&1
echo "== tests rc=$?"; grep -E "^test .*(ok|FAILED)|test result|panicked" $OUT/tests.log | tail -12
( time timeout 120 $C/tcc bench --workloads bench/workloads.json --suite gpu --target cuda --only $W --out $OUT/attn_tcc.jsonl ) > $OUT/attn_tcc.log 2>&1
( time timeout 150 python3 $C/peers.py --suite gpu --workloads bench/workloads.json --only $W --autotune "" --out $OUT/attn_peers.jsonl ) > $OUT/attn_peers.log 2>&1
( time timeout 100 $C/rt_tests time_every_schedule_on_the_suite_shapes --ignored --nocapture --test-threads 1 ) > $OUT/sweep.log 2>&1
( time timeout 45 $C/tcc bench examples/decoder_layer.tc --fn decoder_layer --target cuda --dim S=4096 ) > $OUT/layer_tcc.log 2>&1
( time timeout 100 python3 bench/decoder_layer_peers.py --seq 4096 --out $OUT/layer_peers.jsonl ) > $OUT/layer_peers.log 2>&1
( time timeout 30 $C/tcc bench examples/decoder_layer.tc --fn decoder_layer --target cuda --dim S=4096 ) > $OUT/layer_tcc_again.log 2>&1
date -u +%T >> $OUT/machine.txt
grep -E "tcc:" $OUT/attn_tcc.log
python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
for f in ("attn_peers.jsonl", "layer_peers.jsonl"):
    try:
        for l in open(os.path.join(out, f)):
            r = json.loads(l)
            print("PEER", r.get("workload") or r.get("name"), r.get("peer") or r.get("impl"), r.get("median_ms"))
    except OSError:
        pass
PY
grep SWEEP $OUT/sweep.log | sed 's/GpuAttentionSchedule //' | head -60; grep -hE "total|attention " $OUT/layer_tcc*.log
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
