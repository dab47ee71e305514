#!/usr/bin/env bash
# usage: ab.sh ROUNDS ONLY TARGETS BINS...  ; prints per-run medians, appends to /tmp/s14cpu/ab.log
rounds=$1; only=$2; targets=$3; shift 3
for r in $(seq $rounds); do
  for tgt in $targets; do
    for b in "$@"; do
      $PIN /tmp/s14cpu/tcc-$b bench --workloads /tmp/s14cpu/workloads.json --suite cpu --target $tgt --only $only --out /tmp/s14cpu/ab.jsonl >/dev/null 2>&1
      python3 - "$b" "$tgt" "$r" <<'PY'
import json,sys,os
b,t,r=sys.argv[1:4]
la=os.getloadavg()[0]
for l in open('/tmp/s14cpu/ab.jsonl'):
    x=json.loads(l); line=f"{b} {t} r{r} {x['workload']} {x['median_ms']:.3f} load{la:.2f}"
    print(line); open('/tmp/s14cpu/ab.log','a').write(line+"\n")
PY
    done
  done
done
