# Session 4, call 2: where the per-tile time goes. K scaling at 4096x4096 (tcc TMA variants and
# cuBLAS), then Nsight Compute on the TMA producer kernel and cuBLAS at 4096^3.
source gpu-carry/s4/setup.sh
date -u +%T
cd runtime
export TCC_WG_STAGES=4 TCC_WG_ONLY=128x256w12v64,128x256w8v64
TCC_SWEEP_ONLY=f16_4096x4096x1024,f16_4096x4096x2048,f16_4096x4096x4096,f16_4096x4096x8192,f16_4096x4096x16384 \
TCC_SWEEP_SHAPES=4096x4096x1024,4096x4096x2048,4096x4096x4096,4096x4096x8192,4096x4096x16384 \
  timeout 200 /tmp/rt --ignored --nocapture --test-threads=1 wgmma_sweep > $OUT/kscale.txt 2>&1; echo "exit $?" >> $OUT/kscale.txt
grep -E "SWEEP|exit|panicked" $OUT/kscale.txt | sed 's/ref_err.*//; s/micro=.*warps=/w=/'
date -u +%T
S="--section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section LaunchStats --section SchedulerStats"
export TCC_SWEEP_ONLY=gemm_f16_4096 TCC_WG_ONLY=128x256w12v64
timeout 120 ncu --clock-control none -k 'regex:_mma$' --launch-skip 40 --launch-count 1 $S /tmp/rt wgmma_sweep --ignored --nocapture --test-threads=1 > $OUT/ncu_tcc.txt 2>&1; echo "tcc exit $?"
timeout 100 ncu --clock-control none -k 'regex:xmma|cutlass|sm90' --launch-skip 5 --launch-count 1 $S /tmp/rt wgmma_sweep --ignored --nocapture --test-threads=1 > $OUT/ncu_cublas.txt 2>&1; echo "cublas exit $?"
for f in $OUT/ncu_tcc.txt $OUT/ncu_cublas.txt; do echo "== $f"; grep -E '^  [a-zA-Z_0-9]+.*\(|Duration|Throughput|Registers Per|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc A|Block Limit|Grid Size|Block Size|Dynamic Shared|L2 Hit|Stall|Eligible|Active Warps' $f | cut -c1-150 | head -45; done
date -u +%T
