#!/usr/bin/env bash
# The quick start, from nothing: installs what is missing, builds, simulates a small data set,
# trains the 25x25x25 3DGAN for a few minutes on the CPU, and says where the results are.
#
#   scripts/quickstart.sh [--set key.path=value ...]     (extra options go to mpigan train)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
scripts/setup.sh --target mpigan
build/apps/mpigan train examples/quickstart.yaml "$@"
echo
echo "== quickstart: metrics (last lines of runs/quickstart/metrics.csv):"
tail -n 3 runs/quickstart/metrics.csv | cut -d, -f1-10
