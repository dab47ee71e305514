#!/bin/bash
# Long-K products: tune on the GPU and keep every trial's verdict (issue 26: wrong results inside the space).
set -u
cd "$(dirname "$0")"
xz -dkf tcc.xz && chmod +x tcc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/machine.txt
export TCC_CACHE_DIR=/tmp/tcc-cache
cat > lk.tc <<'TC'
fn mm(a: f16[M, K], b: f16[K, N]) -> f16[M, N] { a @ b }
TC
cat > lknk.tc <<'TC'
fn mm(a: f16[M, K], w: f16[N, K]) -> f16[M, N] { a @ w.t() }
TC
for spec in "lk.tc 256 256 49152" "lk.tc 128 512 32768" "lknk.tc 256 256 49152"; do
  set -- $spec
  tag="$1_$2x$3x$4"
  timeout 170 ./tcc tune $1 --target sm_90a --dim M=$2 --dim N=$3 --dim K=$4 --budget 150s,600trials --retune > $OUT/tune_$tag.log 2>&1
  echo "$tag exit $?" >> $OUT/summary.txt
  grep -ci "wrong" $OUT/tune_$tag.log >> $OUT/summary.txt
done
