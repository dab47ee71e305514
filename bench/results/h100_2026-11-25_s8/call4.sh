#!/usr/bin/env bash
# Session 8, call 4 (call 2 again, on the H100 of call 3): every runtime GPU test at the commit in commit2.txt, then the pipeline on the
# GPU with a tuning record: tune a kernel on cuda, then run, explain, bench and compile show the
# same cached schedule.
set -u
here=$(cd "$(dirname "$0")" && pwd)
for b in rt tcc; do xz -dc "$here/$b.xz" > /tmp/$b && chmod +x /tmp/$b; done
cp "$here/commit2.txt" $OUT/
{ nvidia-smi --query-gpu=name,driver_version --format=csv; date -u +%T; } > $OUT/machine.txt
( timeout 400 /tmp/rt --test-threads=2 > $OUT/rt.log 2>&1; echo "rc=$?" >> $OUT/rt.log ) &
export TCC_CACHE_DIR=/tmp/cache_tune
P="examples/mlp_f16.tc --dim M=512"
{
  echo "## tune"; timeout 240 /tmp/tcc tune $P --target cuda --budget 12trials --json; echo "rc=$?"
  echo "## run"; timeout 60 /tmp/tcc run $P --target cuda --json --check; echo "rc=$?"
  echo "## explain"; timeout 60 /tmp/tcc explain $P --target cuda --json; echo "rc=$?"
  echo "## bench"; timeout 60 /tmp/tcc bench $P --target cuda --json; echo "rc=$?"
  echo "## compile"; timeout 60 /tmp/tcc compile $P --target cuda --emit ir -o - | head -1; echo "rc=$?"
  echo "## lock"; timeout 240 /tmp/tcc tune $P --target cuda --budget 12trials --lock /tmp/tcc.lock > /dev/null 2>&1; echo "rc=$?"
  rm -rf /tmp/cache_empty; TCC_CACHE_DIR=/tmp/cache_empty timeout 60 /tmp/tcc bench $P --target cuda --lock /tmp/tcc.lock; echo "rc=$?"
  echo "## cache ls"; timeout 60 /tmp/tcc cache ls --json; echo "rc=$?"
} > $OUT/pipeline.log 2>&1
wait
date -u +%T >> $OUT/machine.txt
cat $OUT/machine.txt
grep -E "^test |test result|panicked|failures|rc=" $OUT/rt.log | grep -Ev "\.\.\. ok$" | head -30
echo "ok: $(grep -c '\.\.\. ok$' $OUT/rt.log)"
cat $OUT/pipeline.log | cut -c1-400
