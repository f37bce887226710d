#!/usr/bin/env bash
# The suite's stability: runs ctest COUNT times in a row in BUILD_DIR and records,
# per run, whether it passed, how long it took, the 1-minute load average before and after, and the
# failed tests. Does not stop at a failure; exits non-zero when any run failed.
#
#   scripts/repeat_tests.sh BUILD_DIR COUNT OUT.csv [ctest arguments; default: -j2 -LE 'scale|container']
#
# Each failing run's ctest output is kept beside OUT.csv (OUT.csv.run-K.log).
set -uo pipefail
build=${1:?build directory}
count=${2:?number of runs}
out=${3:?output csv}
shift 3
(($#)) || set -- -j2 -LE 'scale|container'
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
load() { cut -d' ' -f1 /proc/loadavg; }
echo "run,passed,seconds,load_before,load_after,failed_tests" >"$out"
failures=0
for ((k = 1; k <= count; k++)); do
  before=$(load)
  t0=$SECONDS
  log=$(mktemp)
  if ctest --test-dir "$build" --output-on-failure --timeout 1500 "$@" >"$log" 2>&1; then
    passed=yes
    failed=
  else
    passed=no
    failures=$((failures + 1))
    failed=$(sed -n '/tests FAILED:/,$ s/^[[:space:]]*[0-9]* - \([^ ]*\) .*/\1/p' "$log" | tr '\n' ' ')
    cp "$log" "$out.run-$k.log"
  fi
  rm -f "$log"
  echo "$k,$passed,$((SECONDS - t0)),$before,$(load),${failed% }" >>"$out"
  echo "run $k of $count: $passed in $((SECONDS - t0)) s (load $before)"
done
echo "$((count - failures)) of $count runs passed"
((failures == 0))
