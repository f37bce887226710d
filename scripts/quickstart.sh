#!/usr/bin/env bash
# The quick start, from nothing: installs what is missing, builds, simulates a data set of the 5x5x5
# rung, trains the rung's recipe without the profile terms (examples/3dgan-5-mmd-concat.yaml) for a
# third of its budget on the CPU, validates its generator against the held-out Monte Carlo (report,
# targets, tables and plots), plots its history, then validates the rung's best generator shipped
# with mpigan (the recipe with the depth and transverse profiles' discrepancies,
# examples/3dgan-5-mmd-lateral.yaml, at its full budget: 3dgan-5-mmd-lateral) against the same Monte
# Carlo, which is of another seed than its training data.
#
#   scripts/quickstart.sh [--set key.path=value ...]     (extra options go to mpigan train)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
scripts/setup.sh --target mpigan
# mpigan refuses a new run into a directory that holds one: the quick start starts over its own.
if [[ -e runs/quickstart/checkpoints/latest ]]; then
  echo "== quickstart: removing the previous quick start run (runs/quickstart)"
  rm -rf runs/quickstart
fi
build/apps/mpigan train examples/quickstart.yaml "$@"
echo
echo "== quickstart: metrics (last lines of runs/quickstart/metrics.csv):"
tail -n 3 runs/quickstart/metrics.csv | cut -d, -f1-10
# validation_fraction holds out the last file of the data set: 5 000 showers.
held_out=$(printf '%s\n' runs/quickstart-data/*.h5 | tail -n 1)
echo
echo "== quickstart: physics of the generator trained here against the held-out Monte Carlo"
build/apps/mpigan validate runs/quickstart --reference "$held_out" --out runs/quickstart/validation
/usr/bin/python3 scripts/rung_targets.py runs/quickstart/validation
echo
echo "== quickstart: the run's losses and figure of merit against samples seen"
build/apps/mpigan report runs/quickstart
echo
echo "== quickstart: the rung's best shipped generator, 3dgan-5-mmd-lateral (the recipe with the depth and transverse profiles' discrepancies, 800 000 samples; mpigan generate --list), against the same Monte Carlo"
build/apps/mpigan validate 3dgan-5-mmd-lateral --reference "$held_out" --out runs/quickstart/validation-shipped
/usr/bin/python3 scripts/rung_targets.py runs/quickstart/validation-shipped
echo
echo "Plots: runs/quickstart/validation{,-shipped}/*.png (sampling fraction,"
echo "       response, profiles, spectrum, moments, observables); runs/quickstart/report.png (losses, figure of merit)"
echo "256 000 samples are a third of the recipe's budget; docs/physics.md has the converged runs over seeds."
