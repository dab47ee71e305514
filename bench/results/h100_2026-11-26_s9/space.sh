#!/bin/bash
cd "$(dirname "$0")"
xz -dkf rt.xz && chmod +x rt && xz -dkf tcc.xz && chmod +x tcc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/machine.txt
start=$(date +%s)
timeout 420 ./rt --nocapture every_schedule_of_the_spaces > $OUT/space.log 2>&1
echo "space test exit $? in $(( $(date +%s) - start )) s" >> $OUT/space.log
export TCC_CACHE_DIR=/tmp/tcc-cache
cat > lknk.tc <<'TC'
fn mm(a: f16[M, K], w: f16[N, K]) -> f16[M, N] { a @ w.t() }
TC
timeout 150 ./tcc tune lknk.tc --target sm_90a --dim M=256 --dim N=256 --dim K=49152 --budget 120s,600trials --retune > $OUT/tune_lknk.log 2>&1
echo "tune exit $?" >> $OUT/tune_lknk.log
