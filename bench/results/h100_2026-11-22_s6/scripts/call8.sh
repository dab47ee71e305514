# Session 6, call 8: tcc bench --suite gpu (cuBLAS rows in process), peers.py, tcc bench again with the report.
source gpu-carry/s6b/setup_b.sh
mkdir -p $OUT/b
date -u +%T
B="/tmp/tcc bench --workloads bench/workloads.json --suite gpu --target cuda"
timeout 200 $B --out $OUT/b/tcc_run1.jsonl > $OUT/b/run1.txt 2>&1; echo "run1 exit $?"
(cd gpu-carry/bench && PYTHONUNBUFFERED=1 timeout 330 python3 peers.py --suite gpu --workloads ../../bench/workloads.json --out $OUT/b/peers.jsonl > $OUT/b/peers.txt 2>&1; echo "peers exit $?")
timeout 200 $B --out $OUT/b/tcc_run2.jsonl --report $OUT/b/report --peers $OUT/b/peers.jsonl > $OUT/b/run2.txt 2>&1; echo "run2 exit $?"
grep -v "^measuring" $OUT/b/run2.txt | head -70
tail -3 $OUT/b/peers.txt
date -u +%T
cd $OUT && tar czf b.tgz b && rm -rf b
