#!/bin/bash
# Before/after the k-split candidates: the untuned default on few-tile long-K products, and the
# suite's GEMMs (which fill the GPU and should not change). Empty tuning cache, no lockfile.
cd "$(dirname "$0")"
for b in tcc tcc_before; do xz -dkf $b.xz && chmod +x $b; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/machine.txt
export TCC_CACHE_DIR=/tmp/empty-cache
cat > lk.tc <<'TC'
fn mm(a: f16[M, K], b: f16[K, N]) -> f16[M, N] { a @ b }
TC
cat > lknk.tc <<'TC'
fn mm(a: f16[M, K], w: f16[N, K]) -> f16[M, N] { a @ w.t() }
TC
for round in 1 2; do
  for b in tcc_before tcc; do
    for spec in "lknk.tc 256 256 49152" "lk.tc 128 512 32768" "lk.tc 512 512 16384" "lk.tc 256 1024 8192"; do
      set -- $spec
      echo "== $b round $round $1 $2x$3x$4" >> $OUT/files.log
      ./$b bench $1 --target sm_90a --dim M=$2 --dim N=$3 --dim K=$4 >> $OUT/files.log 2>&1
    done
    [ $round = 1 ] && timeout 200 ./$b bench --workloads ../../bench/workloads.json --suite gpu --target sm_90a --only gemm_f16_1024,gemm_f16_4096,gemm_f16_8192,gemm_bf16_4096,gemm_f16_llm_up,gemm_f16_skinny_m16,gemm_bias_gelu_f16_4096,gemm_f16_4096_bt,gemm_f16_ragged,gemm_f32_4096 --out $OUT/suite_${b}_$round.jsonl >> $OUT/suite.log 2>&1
  done
done
