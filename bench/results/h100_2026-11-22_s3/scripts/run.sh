# One call: GPU tests, SASS of the default sm_90a GEMMs, then tcc bench / peers.py / tcc bench --report.
source gpu-carry/s3g/setup.sh
mkdir -p $OUT/c
date -u +%T
(cd runtime && TCC_GPU_CASES=64 timeout 200 /tmp/rt --test-threads=2 > $OUT/c/rt.txt 2>&1; echo "rt exit $?" >> $OUT/c/rt.txt)
grep -E "^test result|FAILED|panicked|exit" $OUT/c/rt.txt | head
mkdir -p $OUT/c/sass
for w in plain bias_gelu; do
  /tmp/tcc compile --target sm_90a --emit ptx gpu-carry/s3g/$w.tc -o $OUT/c/sass/$w.ptx
  ptxas -arch=sm_90a -v $OUT/c/sass/$w.ptx -o $OUT/c/sass/$w.cubin > $OUT/c/sass/$w.ptxas.txt 2>&1
  cuobjdump --dump-sass $OUT/c/sass/$w.cubin > $OUT/c/sass/$w.sass 2>&1
  echo "$w: HGMMA $(grep -c HGMMA $OUT/c/sass/$w.sass) HMMA $(grep -c 'HMMA' $OUT/c/sass/$w.sass) STG.128 $(grep -c 'STG.E.128' $OUT/c/sass/$w.sass) serialization warnings $(grep -ci serializ $OUT/c/sass/$w.ptxas.txt)"
  grep -E "registers|spill" $OUT/c/sass/$w.ptxas.txt
done
gzip -9 $OUT/c/sass/*.sass
date -u +%T
B="/tmp/tcc bench --workloads bench/workloads.json --suite gpu --target cuda"
timeout 200 $B --out $OUT/c/tcc_run1.jsonl > $OUT/c/run1.txt 2>&1; echo "run1 exit $?"
(cd gpu-carry/bench && PYTHONUNBUFFERED=1 timeout 330 python3 peers.py --suite gpu --workloads ../../bench/workloads.json --out $OUT/c/peers.jsonl > $OUT/c/peers.txt 2>&1; echo "peers exit $?")
timeout 200 $B --out $OUT/c/tcc_run2.jsonl --report $OUT/c/report --peers $OUT/c/peers.jsonl > $OUT/c/run2.txt 2>&1; echo "run2 exit $?"
grep -E "tcc:|cublas " $OUT/c/run2.txt | grep -v "^  " | head -40
date -u +%T
cd $OUT && tar czf c.tgz c && rm -rf c
