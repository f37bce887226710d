#!/usr/bin/env bash
# The 5x5x5 rung over seeds, mpigan beside its PyTorch peer with the same recipe, data and batch:
# each run one process on one core, JOBS runs at a time; a run whose output is complete is skipped,
# so the script continues where it stopped. Then every PyTorch snapshot is scored by
# `mpigan validate` against the same 2 000 held-out showers that mpigan scores in training, and
# the convergence plot is drawn.
#
#   scripts/rung_study.sh [OUT_DIR (runs/rung5)] [SEEDS ("1 2 3")] [JOBS (2)]
#
# Environment: PYTORCH_STOP=S stops the PyTorch runs after S samples (their learning-rate schedule
# still spans the experiment's max_samples, so they are the first part of full-length runs and
# compare with mpigan's runs at equal samples); MPIGAN: the mpigan binary (build/apps/mpigan);
# EXP: the experiment (examples/3dgan-5.yaml).
#
# Output: OUT/mpigan-seedN/ (run directories), OUT/pytorch-seedN/ (gen-S.h5 snapshots, scores.csv),
# OUT/convergence.png and OUT/convergence.csv (median and range over seeds at the last common count).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=${1:-runs/rung5}
seeds=${2:-1 2 3}
jobs=${3:-2}
mpigan=${MPIGAN:-build/apps/mpigan}
exp=${EXP:-examples/3dgan-5.yaml}
ref=runs/rung5-data/EleEscan5_011.h5
mkdir -p "$out"
[[ -f $ref ]] || "$mpigan" simulate --events 60000 --geometry 5x5x5 --energy 10:500 --out runs/rung5-data \
  --events-per-file 5000 --seed 5
pt_last=${PYTORCH_STOP:-400000}
snapshots=$(seq -s, 32000 32000 "$pt_last")
tasks=()
for s in $seeds; do
  [[ -f $out/mpigan-seed$s/checkpoints/best.h5 && $(tail -n1 "$out/mpigan-seed$s/metrics.csv" | cut -d, -f4) -ge 400000 ]] ||
    tasks+=("rm -rf $out/mpigan-seed$s && OMP_NUM_THREADS=1 $mpigan train $exp --set seed=$s --set threads=1 --out $out/mpigan-seed$s > $out/mpigan-seed$s.log 2>&1")
  [[ -f $out/pytorch-seed$s/gen-$pt_last.h5 ]] ||
    tasks+=("/usr/bin/python3 bench/pytorch/train_rung.py --config $exp --seed $s --threads 1 --events 2000 --snapshots $snapshots --stop-after $pt_last --out $out/pytorch-seed$s > $out/pytorch-seed$s.log 2>&1")
done
if ((${#tasks[@]})); then
  printf '%s\0' "${tasks[@]}" | xargs -0 -P "$jobs" -I{} bash -c '{}'
fi
for s in $seeds; do
  MPIGAN=$mpigan scripts/score_snapshots.sh "$out/pytorch-seed$s" "$ref" 2000
done
mp=$(for s in $seeds; do printf '%s,' "$out/mpigan-seed$s"; done)
pt=$(for s in $seeds; do printf '%s,' "$out/pytorch-seed$s/scores.csv"; done)
/usr/bin/python3 scripts/plot_seeds.py "$out/convergence.png" "mpigan=${mp%,}" "PyTorch=${pt%,}" --csv "$out/convergence.csv"
