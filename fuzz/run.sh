#!/usr/bin/env bash
# Runs each fuzz target of fuzz/ for the given number of seconds (default 60), one after another,
# in one process (one core), starting from the checked-in seed corpus (fuzz/corpus/<target>/). New inputs go to
# fuzz/target/corpus/<target>/ (git-ignored); crashes to fuzz/artifacts/<target>/.
#   fuzz/run.sh 600            # 10 minutes per target
#   fuzz/run.sh 600 ir_text    # one target
# Needs cargo-fuzz (`cargo install cargo-fuzz`); on a stable toolchain RUSTC_BOOTSTRAP=1 lets it
# use the nightly flags it needs. Safe Rust only is fuzzed, so no sanitizer (-s none) is used:
# libFuzzer still finds panics, aborts, stack overflows and timeouts.
set -euo pipefail
seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=(frontend ir_text cache_record); fi
cd "$(dirname "$0")/.."
export RUSTC_BOOTSTRAP=1
status=0
for t in "${targets[@]}"; do
  mkdir -p "fuzz/target/corpus/$t"
  echo "== fuzzing $t for ${seconds}s"
  # The seed corpus is read-only input: new inputs are written to the first (git-ignored) directory.
  if ! cargo fuzz run -s none "$t" "fuzz/target/corpus/$t" "fuzz/corpus/$t" -- \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -print_final_stats=1; then
    echo "== $t: FAILED (see fuzz/artifacts/$t/)"
    status=1
  fi
done
exit $status
