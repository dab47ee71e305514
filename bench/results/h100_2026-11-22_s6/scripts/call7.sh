# Session 6, call 7: SM clock and power during sustained runs (4000 repetitions, L2 flushed before each) of tcc's plain and bias+gelu GEMMs and of cuBLAS / cuBLASLt's fused epilogue.
source gpu-carry/s6/setup.sh
date -u +%T
nvidia-smi --query-gpu=clocks.max.sm,power.limit --format=csv
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active --format=csv,noheader,nounits -lms 20 > /tmp/smi.csv &
SMI=$!
sleep 1
for r in 1 2; do
TCC_SWEEP_REPS=4000 TCC_SWEEP_ONLY=gemm_f16_4096,gemm_bias_gelu_f16_4096 TCC_WG_STAGES=4 TCC_WG_ONLY=128x256w8v64,128x256w12v64 timeout 120 /tmp/rt --ignored --nocapture --test-threads=1 wgmma_sweep 2>&1 | grep SWEEP | grep -v "mma.sync default" | sed 's/ micro=64x256 vec=64//; s/ split_k=1 swizzle=8 threads=0//; s/ tflops=[0-9.]*//; s/ ref_err=.*//' | tee -a /tmp/windows.txt
done
timeout 120 python3 gpu-carry/s6/lt_clocks.py | tee -a /tmp/windows.txt
kill $SMI; sleep 0.5
echo "== samples: $(wc -l < /tmp/smi.csv)"; head -2 /tmp/smi.csv; date +%s.%N; date
python3 gpu-carry/s6/clocks.py /tmp/smi.csv < /tmp/windows.txt
date -u +%T
