#!/bin/bash
# Session 15, call 2 (issue 25, the dual product): the runtime's GPU tests of the dual kernel
# (producer and ping-pong variants added), main's tcc (before) and the branch's (after) in turn,
# twice (gated MLP, decoder layer, the plain GEMM of the dual product's total shape), then the
# dual kernel under other warpgroup schedules: a lockfile made by a 2-trial `tcc tune`, its dual
# entry edited per schedule.
set -u
C=gpu-carry/dual
D=gpu-carry/dual  # (bench/results/h100_2026-11-26_s15_dual/plain.tc, carried)
for f in tcc_before tcc_after rt_tests; do xz -dkf $C/$f.xz && chmod +x $C/$f; done
export CUDA_CACHE_DISABLE=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/device.txt
R=$OUT/r; mkdir -p $R
( cd runtime && time timeout 240 ../$C/rt_tests dual --test-threads 1 ) > $R/dual_tests.log 2>&1
grep -E "^test |test result" $R/dual_tests.log
MLP="examples/decoder_layer.tc --fn mlp --target cuda --dim S=4096 --dim D=4096 --dim F=14336"
# Dual-kernel schedules: tile_m tile_n stages warps (12 warps: a producer; tile_m 64 with 12: ping-pong).
export TCC_CACHE_DIR=$(mktemp -d)
TCC_TUNE_WORKER=$PWD/$C/tcc_after timeout 150 $C/tcc_after tune $MLP --budget 2trials --lock $R/tuned.lock > $R/tune.log 2>&1; echo "tune rc=$?"
VARIANTS="128:256:4:8 128:256:3:12 128:256:4:12 64:256:3:12 64:256:4:12 128:128:4:12"
for v in $VARIANTS; do
  python3 - $R/tuned.lock $R/v_$v.lock $v <<'PY'
import json, sys
src, dst, v = sys.argv[1], sys.argv[2], sys.argv[3]
tm, tn, st, w = map(int, v.split(":"))
lines = open(src).read().splitlines()
out = [lines[0]]
for l in lines[1:]:
    e = json.loads(l)
    if e["key"]["shapes"].count("[14336,4096]") == 2:
        e["schedule"].update(tile_m=tm, tile_n=tn, tile_k=64, micro_m=64, micro_n=tn, vector_width=64, stages=st, warps=w, split_k=1, swizzle=8)
    out.append(json.dumps(e))
open(dst, "w").write("\n".join(out) + "\n")
PY
done
for round in 1 2; do
  for v in before after; do
    export TCC_CACHE_DIR=$(mktemp -d)
    timeout 60 $C/tcc_$v bench $MLP >> $R/mlp_$v.log 2>&1
    timeout 90 $C/tcc_$v bench examples/decoder_layer.tc --fn decoder_layer --target cuda --dim S=4096 >> $R/layer_$v.log 2>&1
    timeout 40 $C/tcc_$v bench $D/plain.tc --target cuda --dim S=4096 --dim D=4096 --dim N=28672 >> $R/plain28672_$v.log 2>&1
  done
  for v in $VARIANTS; do
    [ -f $R/v_$v.lock ] && TCC_CACHE_DIR=$(mktemp -d) timeout 60 $C/tcc_after bench $MLP --lock $R/v_$v.lock >> $R/mlp_variants.log 2>&1
  done
done
grep -h "k0\|total\|^fn" $R/mlp_*.log $R/plain*.log | cut -c1-170
grep -h "k11\|total" $R/layer_*.log | cut -c1-170
cd $OUT && tar czf r.tgz r && rm -rf r
