# Session 6, call 10 (experiment flag TCC_X_GELU=tanh, not kept): cooperative, producer and ping-pong blocks, plain and bias+gelu, with the accurate gelu (two MUFU ops) and with 0.5x(1 + tanh.approx(u)) (one).
source gpu-carry/s6/setup.sh
date -u +%T
for r in 1 2; do
echo "== base"; sw gemm_bias_gelu_f16_4096,gemm_f16_4096 4 128x256w8v64,128x256w12v64,64x256w12v64 | grep -v "default\|cublas median"
echo "== tanh"; TCC_X_GELU=tanh sw gemm_bias_gelu_f16_4096 4 128x256w8v64,128x256w12v64,64x256w12v64 | grep -v "default\|cublas median"
done
date -u +%T
