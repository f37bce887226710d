#!/usr/bin/env bash
# The quick start, from nothing: installs what is missing, builds, simulates a small data set,
# trains the 25x25x25 3DGAN for a few minutes on the CPU, validates its generator against the
# held-out Monte Carlo (report, tables and plots), plots its history, and says where all of it is.
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
echo
echo "== quickstart: physics of the trained generator against the held-out Monte Carlo"
# validation_fraction holds out the last file of the data set.
held_out=$(ls runs/quickstart-data/*.h5 | tail -n 1)
build/apps/mpigan validate runs/quickstart --reference "$held_out" --out runs/quickstart/validation
echo
echo "== quickstart: the run's losses and figure of merit against samples seen"
build/apps/mpigan report runs/quickstart
echo
echo "Plots: runs/quickstart/validation/*.png (sampling fraction, profiles, spectrum, moments, observables)"
echo "       runs/quickstart/report.png (losses and figure of merit)"
echo "60 CPU steps are far from a trained 3DGAN: expect the figure of merit off the scale (docs/physics.md)."
