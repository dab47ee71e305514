# Unpacks the carried binaries to /tmp and makes the repo reachable at its build-time path.
set +e
for f in tcc rt ku soak; do [ -f gpu-carry/s5/$f.xz ] && xz -dc gpu-carry/s5/$f.xz > /tmp/$f && chmod +x /tmp/$f; done
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
TL=$(python3 -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib"))' 2>/dev/null)
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64:$TL"
export PATH="$PATH:/usr/local/cuda/bin"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
