# Session 5, call A: every GPU test (runtime, kernel-user), a GPU soak, and the SASS check of the
# default sm_90a GEMMs (plain and bias+gelu) assembled by the device's ptxas.
source gpu-carry/s5/setup.sh
mkdir -p $OUT/a
date -u +%T
(cd runtime && TCC_GPU_CASES=64 timeout 260 /tmp/rt --test-threads=2 > $OUT/a/rt.txt 2>&1; echo "rt exit $?" >> $OUT/a/rt.txt) &
timeout 150 /tmp/soak --backends cuda --programs 200 --start-seed 7000 --seconds 140 --report $OUT/a/soak.md > $OUT/a/soak.log 2>&1 &
wait
(cd examples/kernel-user && timeout 60 /tmp/ku --test-threads 1 > $OUT/a/ku.txt 2>&1; echo "ku exit $?" >> $OUT/a/ku.txt)
grep -E "^test result|FAILED|panicked|exit" $OUT/a/rt.txt | head; tail -2 $OUT/a/ku.txt; tail -4 $OUT/a/soak.log
date -u +%T
mkdir -p $OUT/a/sass
for w in plain bias_gelu; do
  /tmp/tcc compile --target sm_90a --emit ptx gpu-carry/s5/$w.tc -o $OUT/a/sass/$w.ptx
  ptxas -arch=sm_90a -v $OUT/a/sass/$w.ptx -o $OUT/a/sass/$w.cubin > $OUT/a/sass/$w.ptxas.txt 2>&1
  cuobjdump --dump-sass $OUT/a/sass/$w.cubin > $OUT/a/sass/$w.sass 2>&1
  S=$OUT/a/sass/$w.sass
  echo "$w: HGMMA $(grep -c HGMMA $S) HMMA $(grep -c 'HMMA' $S) UTMALDG $(grep -c UTMALDG $S) UTMASTG $(grep -c UTMASTG $S) STG $(grep -c ' STG' $S) serialization warnings $(grep -ci serializ $OUT/a/sass/$w.ptxas.txt)"
  grep -E "registers|spill|C75" $OUT/a/sass/$w.ptxas.txt
done
gzip -9 $OUT/a/sass/*.sass
date -u +%T
cd $OUT && tar czf a.tgz a && rm -rf a
