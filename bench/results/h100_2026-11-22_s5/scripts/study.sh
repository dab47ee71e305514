# Usage: bash gpu-carry/s5b/study.sh SECONDS WORKLOAD...
set +e
xz -dc gpu-carry/s5b/tcc.xz > /tmp/tcc && chmod +x /tmp/tcc
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
TL=$(python3 -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib"))' 2>/dev/null)
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64:$TL"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
LIMIT=$1; shift
mkdir -p $OUT/s
for w in "$@"; do
  date -u +%T
  TCC_CACHE_DIR=/tmp/c timeout $LIMIT /tmp/tcc tune --study --target cuda --suite gpu --workloads bench/workloads.json --workload $w --space 200 --out $OUT/s/study_$w > $OUT/s/study_$w.txt 2>&1; echo "study $w exit $?"
  cat $OUT/s/study_$w/study.md 2>/dev/null || tail -c 1500 $OUT/s/study_$w.txt
done
date -u +%T
cd $OUT && tar czf study.tgz s && rm -rf s
