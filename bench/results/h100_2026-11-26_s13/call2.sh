#!/bin/bash
# Session 13, call 1: candle on CUDA (issue 28): tcc's candle_cuda tests, and the candle-block
# example on candle's GPU (tcc kernels against candle's ops), bf16 and f32.
set -u
C=gpu-carry/s13   # the binaries: tcc_tests (cargo test -p tcc --features candle-cuda,llvm --no-run), candle_block (release, feature cuda)
for f in tcc_tests candle_block; do xz -dkf $C/$f.xz && chmod +x $C/$f; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/machine.txt
LIB=$(dirname "$(find / -name 'libcublas.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)")
echo "cuda libraries from $LIB" >> $OUT/machine.txt
export LD_LIBRARY_PATH=$LIB:${LD_LIBRARY_PATH:-}
export TCC_CACHE_DIR=$(mktemp -d)
ldd $C/tcc_tests | grep -E "cuda|cublas|curand|nvrtc|not found" >> $OUT/machine.txt
( cd tcc && time timeout 150 ../$C/tcc_tests candle_cuda --test-threads 1 ) > $OUT/tests.log 2>&1
B=$C/candle_block
( time timeout 80 $B --device cuda --dtype bf16 --tokens 2048 --hidden 2048 --heads 32 --kv-heads 8 --mlp 5632 --reps 20 ) > $OUT/block_2048_bf16.log 2>&1
( time timeout 50 $B --device cuda --dtype bf16 --tokens 512 --hidden 2048 --heads 32 --kv-heads 8 --mlp 5632 --reps 20 ) > $OUT/block_512_bf16.log 2>&1
( time timeout 50 $B --device cuda --dtype f32 --tokens 512 --hidden 2048 --heads 32 --kv-heads 8 --mlp 5632 --reps 20 ) > $OUT/block_512_f32.log 2>&1
ls -la $OUT
