#!/bin/bash
# Session 14 (decode helper): the GPU attention tests, the decode schedule sweep, then the decode
# workload (and the grouped-query causal prefill as a check) with tcc, and the decode workload's
# peers (SDPA, FlexAttention, torch.compile) with the copy ceiling, on this one machine.
# Usage: bash call.sh COMMIT
set -u
C=gpu-carry/s14_decode
xz -dkf $C/rt_tests.xz && chmod +x $C/rt_tests
xz -dkf $C/tcc.xz && chmod +x $C/tcc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/machine.txt
echo "commit $1" >> $OUT/machine.txt
export TCC_CACHE_DIR=$(mktemp -d)
( time timeout 170 $C/rt_tests attention_gpu --test-threads 8 ) > $OUT/gpu_tests.log 2>&1
grep -E "^test |test result|failures" $OUT/gpu_tests.log | tail -12
( timeout 90 $C/rt_tests attention_gpu::time_every_decode --ignored --nocapture ) > $OUT/sweep.log 2>&1
grep -E "SWEEP|panicked|result" $OUT/sweep.log
ONLY=attn_decode_f16_b32h32kv8L8192d128,attn_gqa_causal_f16_b4h32kv8s4096d128
( time timeout 100 $C/tcc bench --workloads $C/workloads.json --suite gpu --target cuda --only $ONLY --out $OUT/attn_tcc.jsonl ) > $OUT/attn_tcc.log 2>&1
cat $OUT/attn_tcc.jsonl
( time timeout 120 python3 $C/peers.py --suite gpu --workloads $C/workloads.json --only attn_decode_f16_b32h32kv8L8192d128 --autotune "" --out $OUT/attn_peers.jsonl ) > $OUT/attn_peers.log 2>&1
python3 $C/compare.py $OUT/attn_tcc.jsonl $OUT/attn_peers.jsonl > $OUT/attn_compare.txt 2>&1; cat $OUT/attn_compare.txt
grep -h "ceiling\|real" $OUT/attn_peers.log
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
