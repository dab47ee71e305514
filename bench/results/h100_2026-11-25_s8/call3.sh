#!/usr/bin/env bash
# Session 8, call 3 (issue 19, asked for on an H100; call 1 ran on an H200): the GPU suite's 14 non-attention workloads with tcc
# before (built at 6179cf4: the GPU code of b481a44) and after (the commit in commit.txt), twice
# each, alternating, empty tuning caches; then `tcc bench FILE` on the GPU, and the commands'
# agreement and one-module PTX on cuda.
set -u
here=$(cd "$(dirname "$0")" && pwd)
for b in tcc_before tcc; do xz -dc "$here/$b.xz" > /tmp/$b && chmod +x /tmp/$b; done
cp "$here/commit2.txt" $OUT/commit.txt
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u +%T; } > $OUT/machine.txt
W="$here/../bench/workloads.json"
ONLY=gemm_f16_1024,gemm_f16_4096,gemm_f16_8192,gemm_bf16_4096,gemm_f16_llm_up,gemm_f16_skinny_m16,gemm_bias_gelu_f16_4096,gemm_f16_4096_bt,gemm_f16_ragged,gemm_f32_4096,axpb_relu_f32_64M,softmax_f16_8192x8192,layernorm_f16_16384x4096,rowsum_f32_16384x16384
for run in 1 2; do
  for b in tcc_before tcc; do
    rm -rf /tmp/cache_$b; export TCC_CACHE_DIR=/tmp/cache_$b
    timeout 200 /tmp/$b bench --workloads "$W" --suite gpu --target cuda --only $ONLY --out $OUT/${b}_$run.jsonl > $OUT/${b}_$run.log 2>&1
    echo "$b run $run rc=$? $(date -u +%T)" >> $OUT/machine.txt
  done
done
export TCC_CACHE_DIR=/tmp/cache_files
{
  for spec in "examples/softmax.tc --dim N=8192 --dim D=8192" "examples/mlp_f16.tc --dim M=4096" "examples/layernorm.tc --dim N=16384 --dim D=4096" "examples/attention_scores.tc --fn attention_scores --dim S=4096 --dim T=4096" "examples/mlp.tc --dim M=8192"; do
    echo "## bench $spec"; timeout 60 /tmp/tcc bench $spec --target cuda; echo "rc=$?"
    timeout 60 /tmp/tcc bench $spec --target cuda --json; echo "rc=$?"
  done
  echo "## run/explain/compile on cuda"
  timeout 60 /tmp/tcc run examples/mlp_f16.tc --dim M=100 --target cuda --json --check; echo "rc=$?"
  timeout 60 /tmp/tcc explain examples/mlp_f16.tc --dim M=100 --target cuda --json; echo "rc=$?"
  timeout 60 /tmp/tcc compile examples/mlp_f16.tc --dim M=100 --target cuda --emit ir -o -; echo "rc=$?"
  timeout 60 /tmp/tcc compile examples/attention_scores.tc --fn attention_scores --dim S=1000 --dim T=999 --target cuda --emit ptx -o /tmp/a.ptx; echo "rc=$?"
  grep -c "\.entry" /tmp/a.ptx; ptxas -arch=sm_90a /tmp/a.ptx -o /tmp/a.cubin; echo "ptxas rc=$?"
  timeout 60 /tmp/tcc run examples/attention_scores.tc --fn attention_scores --dim S=1000 --dim T=999 --target sm_90a --check; echo "rc=$?"
  timeout 60 /tmp/tcc run examples/mlp.tc --dim M=8 --target sm_80; echo "rc=$? (sm_80 on an H100: refused, exit 2)"
} > $OUT/files.log 2>&1
date -u +%T >> $OUT/machine.txt
cat $OUT/machine.txt
python3 - "$OUT" <<'PY' | tee $OUT/summary.txt
import json, sys, glob, statistics
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(out + "/*_[12].jsonl")):
    b = f.split("/")[-1].rsplit("_", 1)[0]
    for line in open(f):
        r = json.loads(line)
        if r["impl"].startswith("tcc"):
            rows.setdefault(r["workload"], {}).setdefault(b, []).append(r["median_ms"])
for w, d in rows.items():
    before, after = d.get("tcc_before", []), d.get("tcc", [])
    print(f"{w:28} before {before} after {after} ratio {min(after)/min(before) if before and after else float('nan'):.3f}")
PY
tail -40 $OUT/files.log | head -60
cd $OUT && mkdir -p all && mv *.jsonl *.log all/ && tar czf all.tgz all && rm -rf all
