# Unpacks the carried binaries to /tmp and makes the repo reachable at its build-time path.
set +e
for f in tcc rt ku soak; do [ -f gpu-carry/s6/$f.xz ] && xz -dc gpu-carry/s6/$f.xz > /tmp/$f && chmod +x /tmp/$f; done
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
TL=$(python3 -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib"))' 2>/dev/null)
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64:$TL"
export PATH="$PATH:/usr/local/cuda/bin"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
sw() { TCC_SWEEP_ONLY=$1 TCC_WG_STAGES=$2 TCC_WG_ONLY=$3 timeout 90 /tmp/rt --ignored --nocapture --test-threads=1 wgmma_sweep 2>&1 | grep SWEEP | grep -v "mma.sync default" | sed 's/ micro=64x256 vec=64//; s/ split_k=1 swizzle=8 threads=0//; s/ tflops=[0-9.]*//; s/ ref_err=.*//'; }
