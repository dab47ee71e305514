# Session 6, call 9: every runtime GPU test at 2084635 (the new several-tiles test on the kept code).
source gpu-carry/s6/setup.sh
date -u +%T
timeout 400 /tmp/rt --test-threads=2 2>&1 | grep -E "^test |test result|panicked|failures" | grep -Ev "\.\.\. ok$" | head -30
timeout 5 /tmp/rt --list 2>/dev/null | grep -c ": test$"
date -u +%T
