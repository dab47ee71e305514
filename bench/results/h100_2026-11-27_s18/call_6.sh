#!/bin/bash
# Session 18, call 6: the attention kernel's tiles interleave the query blocks of four batch groups
# (a persistent block's stride meets every query block in turn), on top of the division and tanh
# of call 5. The GPU attention tests, then the suite's eight attention workloads, tcc and the
# peers in the same call.
set -u
PARTS=tests,suite bash bench/attention_variants.sh gpu-carry/s18 "${1:-unknown}"
