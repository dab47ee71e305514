#!/bin/bash
# Session 11, call 3 (H100), tcc at commit $1: the GPU attention tests, the schedule sweep, then
# the attention workloads (tcc, then SDPA / FlexAttention / torch.compile) and the decoder layer
# (tcc, then its PyTorch peers), all on this one machine.
set -u
C=gpu-carry/s11a
xz -dkf $C/rt_tests.xz && chmod +x $C/rt_tests
xz -dkf $C/tcc.xz && chmod +x $C/tcc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/machine.txt
echo "commit $1" >> $OUT/machine.txt
export TCC_CACHE_DIR=$(mktemp -d)
( time timeout 150 $C/rt_tests attention_gpu --test-threads 8 ) > $OUT/tests.log 2>&1
tail -4 $OUT/tests.log
( timeout 120 $C/rt_tests attention_gpu::time_every --ignored --nocapture ) > $OUT/sweep.log 2>&1
grep -E "SWEEP|panicked|result" $OUT/sweep.log
ONLY=attn_f16_b8h16s4096d128,attn_causal_f16_b8h16s4096d128,attn_window_f16_b8h16s4096d128,attn_alibi_causal_f16_b8h16s4096d128,attn_softcap_bf16_b8h16s4096d128,attn_gqa_causal_f16_b4h32kv8s4096d128,attn_d64_f16_b16h16s2048d64,attn_decode_f16_b32h32kv8L8192d128
( time timeout 150 $C/tcc bench --workloads $C/workloads.json --suite gpu --target cuda --only $ONLY --out $OUT/attn_tcc.jsonl ) > $OUT/attn_tcc.log 2>&1
( time timeout 200 python3 $C/peers.py --suite gpu --workloads $C/workloads.json --only $ONLY --autotune "" --out $OUT/attn_peers.jsonl ) > $OUT/attn_peers.log 2>&1
python3 $C/compare.py $OUT/attn_tcc.jsonl $OUT/attn_peers.jsonl > $OUT/attn_compare.txt 2>&1; cat $OUT/attn_compare.txt
( time timeout 60 $C/tcc bench $C/decoder_layer.tc --fn decoder_layer --target cuda --dim S=4096 --json > $OUT/layer_tcc.jsonl ) > $OUT/layer_tcc.log 2>&1
( time timeout 120 python3 $C/decoder_layer_peers.py --seq 4096 --out $OUT/layer_peers.jsonl ) > $OUT/layer_peers.log 2>&1
tail -1 $OUT/layer_tcc.jsonl; cat $OUT/layer_peers.jsonl
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
