#!/usr/bin/env bash
# The GPU suite with two tcc builds in one device call, alternating, on empty tuning caches:
# `bench/gpu_before_after.sh BEFORE AFTER WORKLOADS OUT [ROUNDS] [ONLY]`, with BEFORE and AFTER
# two `tcc` binaries (built with --features llvm), WORKLOADS the suite file and OUT the folder for
# the rows, logs and a summary (`summary.txt`: each workload's medians and after/before, the
# faster run of each). ONLY defaults to the suite's 14 workloads that `tcc bench` knows (no
# attention kind yet).
set -u
before=$1 after=$2 workloads=$3 out=$4 rounds=${5:-2}
only=${6:-gemm_f16_1024,gemm_f16_4096,gemm_f16_8192,gemm_bf16_4096,gemm_f16_llm_up,gemm_f16_skinny_m16,gemm_bias_gelu_f16_4096,gemm_f16_4096_bt,gemm_f16_ragged,gemm_f32_4096,axpb_relu_f32_64M,softmax_f16_8192x8192,layernorm_f16_16384x4096,rowsum_f32_16384x16384}
mkdir -p "$out"
for run in $(seq 1 "$rounds"); do
  for which in before after; do
    bin=$before; [ "$which" = after ] && bin=$after
    cache=$(mktemp -d)
    TCC_CACHE_DIR=$cache timeout 300 "$bin" bench --workloads "$workloads" --suite gpu --target cuda --only "$only" \
      --out "$out/${which}_$run.jsonl" > "$out/${which}_$run.log" 2>&1
    echo "$which run $run rc=$? $(date -u +%T)"
    rm -rf "$cache"
  done
done
python3 - "$out" <<'PY' | tee "$out/summary.txt"
import glob, json, sys
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(out + "/*_[0-9]*.jsonl")):
    which = f.split("/")[-1].rsplit("_", 1)[0]
    for line in open(f):
        r = json.loads(line)
        if r["impl"].startswith("tcc"):
            rows.setdefault(r["workload"], {}).setdefault(which, []).append(r["median_ms"])
for w, d in rows.items():
    b, a = d.get("before", []), d.get("after", [])
    ratio = min(a) / min(b) if a and b else float("nan")
    print(f"{w:28} before {b} after {a} after/before {ratio:.3f}")
PY
