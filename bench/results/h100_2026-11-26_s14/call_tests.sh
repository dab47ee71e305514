#!/bin/bash
# Session 14, final call A: the runtime's GPU tests at the merged main (COMMIT): the attention
# kernels (flash-decoding included), the examples and random programs (the SIMT matmul's two
# buffers), every schedule of the GEMM spaces on long-k, odd and tiny products (k splits of 64
# and 128 included), the wgmma variants; then the decode workload once more.
set -u
C=gpu-carry/s14f
for f in tcc rt_tests; do xz -dkf $C/$f.xz && chmod +x $C/$f; done
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit $1"; date -u +%T; } > $OUT/machine.txt
export LD_LIBRARY_PATH=$(dirname "$(find / -name 'libcublas.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)"):${LD_LIBRARY_PATH:-}
export TCC_CACHE_DIR=$(mktemp -d)
t() { local name=$1 limit=$2; shift 2; ( time timeout $limit $C/rt_tests "$@" ) > $OUT/$name.log 2>&1; echo "== $name rc=$?"; grep -E "^test .*(ok|FAILED)|test result|panicked" $OUT/$name.log | tail -12; }
t attention 150 attention_gpu --test-threads 8
t examples 100 cuda::gpu --test-threads 4
t space 180 gemm::every_schedule_of_the_spaces --test-threads 1
t wgmma 90 wgmma::wgmma_gemms_match_the_interpreter --test-threads 1
( time timeout 60 $C/tcc bench --workloads bench/workloads.json --suite gpu --target cuda --only attn_decode_f16_b32h32kv8L8192d128 --out $OUT/decode.jsonl ) > $OUT/decode.log 2>&1
cat $OUT/decode.jsonl
date -u +%T >> $OUT/machine.txt
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
