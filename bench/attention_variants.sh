#!/bin/bash
# On a GPU machine (a device call): the attention kernel's correctness tests (every schedule of
# the space and its producer, ping-pong and TMA variants against the interpreter), then the sweep
# of the same schedules on the suite's shapes (each checked against the default's output and
# timed), then the suite's eight attention workloads with tcc's default and the peers (SDPA,
# FlexAttention) in the same call. CARRY holds tcc.xz, rt_tests.xz (the runtime's gpu-tests
# binary) and peers.py; results go to $OUT. PARTS picks what runs (default all three; one device
# call is 600 s at most, so `tests,sweep` and `suite` may need a call each).
#
#   PARTS=tests,sweep,suite bash bench/attention_variants.sh CARRY COMMIT
set -u
C=${1:?usage: bench/attention_variants.sh CARRY COMMIT}
PARTS=${PARTS:-tests,sweep,suite}
source "$(dirname "$0")/device_env.sh" "$C" "${2:-unknown}"
part() { [[ ",$PARTS," == *",$1,"* ]]; }
W=attn_f16_b8h16s4096d128,attn_causal_f16_b8h16s4096d128,attn_window_f16_b8h16s4096d128,attn_alibi_causal_f16_b8h16s4096d128,attn_softcap_bf16_b8h16s4096d128,attn_gqa_causal_f16_b4h32kv8s4096d128,attn_d64_f16_b16h16s2048d64,attn_decode_f16_b32h32kv8L8192d128
if part tests; then
    ( time timeout 240 "$C/rt_tests" attention_gpu --test-threads 8 ) > "$OUT/tests.log" 2>&1
    echo "== tests rc=$?"; grep -E "^test .*(ok|FAILED)|test result|panicked" "$OUT/tests.log" | tail -12
fi
if part sweep; then
    ( time timeout 300 "$C/rt_tests" time_every_schedule_on_the_suite_shapes --ignored --nocapture --test-threads 1 ) > "$OUT/sweep.log" 2>&1
    echo "== sweep rc=$?"; grep -E "SWEEP|panicked" "$OUT/sweep.log" | head -80
fi
if part suite; then
    ( time timeout 70 "$C/tcc" bench --workloads bench/workloads.json --suite gpu --target cuda --only $W --out "$OUT/attn_tcc.jsonl" ) > "$OUT/attn_tcc.log" 2>&1
    ( time timeout 150 python3 "$C/peers.py" --suite gpu --workloads bench/workloads.json --only $W --autotune "" --out "$OUT/attn_peers.jsonl" ) > "$OUT/attn_peers.log" 2>&1
fi
date -u +%T >> "$OUT/machine.txt"
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
for f, tag in (("attn_tcc.jsonl", "TCC"), ("attn_peers.jsonl", "PEER")):
    try:
        rows = [json.loads(l) for l in open(os.path.join(out, f)) if l.strip()]
    except OSError:
        rows = []
    for r in rows:
        print(tag, r.get("workload") or r.get("name"), r.get("impl") or r.get("peer"), r.get("median_ms"))
PY
(cd "$OUT" && tar czf logs.tgz ./*.log && rm -f ./*.log)
