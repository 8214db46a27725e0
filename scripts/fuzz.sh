#!/usr/bin/env bash
# A longer run of the check-path fuzzer that `cargo test` runs briefly
# (driver/tests/fuzz_check.rs): generated and mutated job files through job parsing, graph
# building and planning, failing on any panic, abort, stack overflow, hang or memory blow-up.
#
#   bash scripts/fuzz.sh                 # 10 minutes from seed 1
#   SECONDS_PER_SEED=60 SEEDS="1 2 3" bash scripts/fuzz.sh
#   CASES=100000 SEEDS=7 bash scripts/fuzz.sh
#
# Each seed is deterministic: a failure prints its case and seed and reproduces with
# NUMS_FUZZ_SEED=<seed> cargo test -p nums-cloud --test fuzz_check. A case that aborted the
# process (which no test can catch) is left in target/tmp/fuzz-current-case.toml.
# Release mode by default (many more cases per second; the stack bound is then looser
# than in the debug run of `cargo test`): PROFILE=dev for debug.
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=${SEEDS:-1}
PROFILE=${PROFILE:-release}
for seed in $SEEDS; do
  if [ -n "${CASES:-}" ]; then
    export NUMS_FUZZ_CASES=$CASES
    unset NUMS_FUZZ_SECONDS
  else
    export NUMS_FUZZ_SECONDS=${SECONDS_PER_SEED:-600}
  fi
  echo "== seed $seed"
  NUMS_FUZZ_SEED=$seed cargo test -p nums-cloud --profile "$PROFILE" --test fuzz_check \
    -- --nocapture check_never_panics_hangs_or_explodes
done
