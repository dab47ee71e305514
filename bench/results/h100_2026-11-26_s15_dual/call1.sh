#!/bin/bash
# Session 15, call 1 (issue 25, the dual product): the runtime's GPU tests of the dual kernel
# with the branch's code, then main's tcc (before) and the branch's (after) in turn, twice: the
# gated MLP and the decoder layer at S=4096, and the plain GEMM of the dual product's total shape
# (and of one of its products); then ncu (--set full) of the dual kernel before and after, and
# the dual kernel at other stage counts (a lockfile made by a 4-trial `tcc tune`, edited).
set -u
C=gpu-carry/dual
D=gpu-carry/dual  # (bench/results/h100_2026-11-26_s15_dual/plain.tc, carried)
for f in tcc_before tcc_after rt_tests; do xz -dkf $C/$f.xz && chmod +x $C/$f; done
export CUDA_CACHE_DISABLE=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/device.txt
R=$OUT/r; mkdir -p $R
( cd runtime && time timeout 200 ../$C/rt_tests dual --test-threads 1 ) > $R/dual_tests.log 2>&1
tail -3 $R/dual_tests.log
MLP="examples/decoder_layer.tc --fn mlp --target cuda --dim S=4096 --dim D=4096 --dim F=14336"
for round in 1 2; do
  for v in before after; do
    export TCC_CACHE_DIR=$(mktemp -d)
    timeout 60 $C/tcc_$v bench $MLP >> $R/mlp_$v.log 2>&1
    timeout 90 $C/tcc_$v bench examples/decoder_layer.tc --fn decoder_layer --target cuda --dim S=4096 >> $R/layer_$v.log 2>&1
    for N in 28672 14336; do
      timeout 40 $C/tcc_$v bench $D/plain.tc --target cuda --dim S=4096 --dim D=4096 --dim N=$N >> $R/plain${N}_$v.log 2>&1
    done
  done
done
grep -h "k0\|k1\|total\|^fn" $R/mlp_*.log $R/plain*.log | cut -c1-150
grep -h "total" $R/layer_*.log
for v in before after; do
  export TCC_CACHE_DIR=$(mktemp -d)
  timeout 90 ncu --set full --clock-control none -k regex:sigmoid -c 1 -o $R/ncu_$v $C/tcc_$v run $MLP > $R/ncu_run_$v.log 2>&1
  ncu --import $R/ncu_$v.ncu-rep --page details > $R/ncu_$v.txt 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Stall|Issue Slots Busy|Tensor" $R/ncu_$v.txt | head -20
done
# Other stage counts of the dual kernel: a lockfile from a short tune, its dual entry edited.
export TCC_CACHE_DIR=$(mktemp -d)
timeout 150 $C/tcc_after tune $MLP --budget 4trials --lock $R/tuned.lock > $R/tune.log 2>&1; echo "tune rc=$?"
for st in 3 4 5; do
  python3 - $R/tuned.lock $R/st$st.lock $st <<'PY'
import json, sys
src, dst, st = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = open(src).read().splitlines()
out = [lines[0]]
for l in lines[1:]:
    e = json.loads(l)
    if e["key"]["shapes"].count("[14336,4096]") == 2:
        e["schedule"].update(tile_m=128, tile_n=256, tile_k=64, micro_m=64, micro_n=256, vector_width=64, stages=st, warps=8, split_k=1, swizzle=8)
    out.append(json.dumps(e))
open(dst, "w").write("\n".join(out) + "\n")
PY
  TCC_CACHE_DIR=$(mktemp -d) timeout 60 $C/tcc_after bench $MLP --lock $R/st$st.lock >> $R/mlp_stages.log 2>&1
done
grep -h "k0\|^fn" $R/mlp_stages.log | cut -c1-160
cd $OUT && tar czf r.tgz r && rm -rf r
