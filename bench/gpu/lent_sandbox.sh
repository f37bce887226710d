#!/usr/bin/env bash
# The sandbox's long fidelity runs (docs/sandbox.md, "Still open") on a GPU, from a bundle of
# bench/gpu/bundle.sh: every virtual worker's gradient computed by the cuda backend, so a 3dgan-25
# run of 20 480 samples takes minutes instead of hours on one CPU core.
#
#   bench/gpu/lent_sandbox.sh BUNDLE.tar.xz OUT_DIR [RULE:WORKERS:SAMPLES ...]
#
# Default runs: downpour:64:20480 (its CPU run is in docs/algorithms.md's table: the check that
# the GPU sandbox lands within the run-to-run spread of the CPU one), then gem:64:20480 and
# downpour:64:102400. Each run is stopped by SIGTERM after 150 s if not done: it ends cleanly with
# its metrics, but its saved state stays in the temporary work directory, removed at the end (64
# workers' weights are too large to come back from a lent machine), so a later call starts it
# over. OUT_DIR gets each run's metrics.csv, sandbox.json and log, and
# summary.txt with the physics rows. MPIGAN_SANDBOX_BACKEND=cpu runs the same on the CPU (a dry run).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bundle=${1:?usage: lent_sandbox.sh BUNDLE.tar.xz OUT_DIR [RULE:WORKERS:SAMPLES ...]}
out=${2:?usage: lent_sandbox.sh BUNDLE.tar.xz OUT_DIR [RULE:WORKERS:SAMPLES ...]}
shift 2
runs=("$@")
((${#runs[@]})) || runs=(downpour:64:20480 gem:64:20480 downpour:64:102400)
source "$root/bench/gpu/lent_common.sh"
lent_unpack "$bundle" "$out"
summary="$out/summary.txt"
nvidia-smi -L > "$summary" 2>&1
work=$(mktemp -d)
cd "$work" || exit 3
for r in "${runs[@]}"; do
  IFS=: read -r rule workers samples <<< "$r"
  name="$rule-$workers-$samples"
  timeout -s TERM 150 "$mpigan" sandbox "$root/examples/scan-3dgan-25.yaml" --workers "$workers" \
    --compute constant:0.25 --set "backend=${MPIGAN_SANDBOX_BACKEND:-cuda}" --set training.batch=16 --set threads=4 \
    --set validation.every=128 --set validation.physics.every=128 --set "training.max_samples=$samples" \
    --set "algorithm.name=$rule" --set checkpoint.every=256 --out "runs/$name" > "$out/$name.log" 2>&1
  echo "$name: exit $? (124: stopped at 150 s, state saved)" >> "$summary"
  mkdir -p "$out/$name"
  cp "runs/$name/metrics.csv" "runs/$name/sandbox.json" "$out/$name/" 2>/dev/null
  grep '^physics' "runs/$name/metrics.csv" 2>/dev/null | cut -d, -f3,4,20-27 | tail -n 4 >> "$summary"
done
rm -rf "$g" "$work"
cat "$summary"
