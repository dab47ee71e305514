#!/usr/bin/env bash
# Makes a CUDA folder to build candle-core's `cuda` feature (and so tcc's `candle-cuda` and this
# example's `cuda`) on a machine without a CUDA toolkit, from NVIDIA's pip wheels:
#
#   examples/candle-block/cuda_root.sh DIR [VERSION]      # VERSION: the driver's CUDA, 13.0 by default
#   export CUDA_ROOT=DIR PATH=DIR/bin:$PATH CUDA_COMPUTE_CAP=90
#
# DIR/venv holds the wheels; DIR/bin, DIR/include and DIR/nvvm point into them; DIR/lib64 holds
# unversioned links to the libraries candle links against (cuBLAS, cuBLASLt, cuRAND, NVRTC) and a
# stub `libcuda.so` (soname libcuda.so.1) defining the driver functions cudarc declares, to link
# against: at run time the driver's own libcuda.so.1 is loaded. Every wheel is pinned to VERSION,
# nvvm and crt included, since candle's PTX must not be newer than the driver that loads it.
# The machine that runs the result needs the same libraries (the pip wheels, or a CUDA install).
set -euo pipefail
dir=${1:?usage: cuda_root.sh DIR [VERSION]}
version=${2:-13.0}
major=${version%%.*}
mkdir -p "$dir/lib64"
dir=$(cd "$dir" && pwd)
python3 -m venv "$dir/venv"
"$dir/venv/bin/pip" install -q "nvidia-cuda-nvcc==$version.*" "nvidia-nvvm==$version.*" "nvidia-cuda-crt==$version.*" \
    "nvidia-cuda-runtime==$version.*" "nvidia-cuda-nvrtc==$version.*" "nvidia-cuda-cccl==$version.*" \
    "nvidia-cublas==$version.*" nvidia-curand
cuda=$(echo "$dir"/venv/lib/python3*/site-packages/nvidia/cu"$major")
ln -sfn "$cuda/bin" "$dir/bin"
ln -sfn "$cuda/include" "$dir/include"
ln -sfn "$cuda/nvvm" "$dir/nvvm"
for lib in cublas cublasLt nvrtc cudart; do
    ln -sf "$cuda/lib/lib$lib.so.$major" "$dir/lib64/lib$lib.so"
done
ln -sf "$(ls "$cuda"/lib/libcurand.so.* | head -1)" "$dir/lib64/libcurand.so"
# The stub driver: every function cudarc's driver bindings name, doing nothing.
cudarc=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cudarc-0.19.* | tail -1)
grep -o '^            fn cu[A-Za-z0-9_]*(' "$cudarc/src/driver/sys/mod.rs" | sed 's/ *fn //; s/(//' | sort -u |
    sed 's/.*/void &(void) {}/' > "$dir/libcuda_stub.c"
cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$dir/lib64/libcuda.so" "$dir/libcuda_stub.c"
echo "export CUDA_ROOT=$dir PATH=$dir/bin:\$PATH CUDA_COMPUTE_CAP=\${CUDA_COMPUTE_CAP:-90}"
