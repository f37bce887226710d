#!/usr/bin/env bash
# Score a PyTorch peer run's snapshots the way mpigan scores its own runs during training: every
# DIR/gen-N.h5 by `mpigan validate` against the first EVENTS showers of REF, written to DIR/val-N/
# (skipped where DIR/val-N/report.json exists, so the script continues where it stopped), and the
# figures of merit gathered in DIR/scores.csv (samples, fpd_hlf, its errors, auc, its error), the
# input of scripts/plot_seeds.py.
#
#   scripts/score_snapshots.sh DIR [REF (runs/rung5-data/EleEscan5_011.h5)] [EVENTS (2000)]
#
# Environment: MPIGAN, the mpigan binary (build/apps/mpigan).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,/^set /p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
dir=${1:?usage: scripts/score_snapshots.sh DIR [REF] [EVENTS]}
ref=${2:-$root/runs/rung5-data/EleEscan5_011.h5}
events=${3:-2000}
mpigan=${MPIGAN:-$root/build/apps/mpigan}
shopt -s nullglob
gens=("$dir"/gen-*.h5)
((${#gens[@]})) || { echo "score_snapshots.sh: no gen-N.h5 in $dir" >&2; exit 1; }
counts=$(for g in "${gens[@]}"; do n=${g##*/gen-}; echo "${n%.h5}"; done | sort -n)
for n in $counts; do
  [[ -f $dir/val-$n/report.json ]] ||
    OMP_NUM_THREADS=1 "$mpigan" validate --generated "$dir/gen-$n.h5" --reference "$ref" --events "$events" \
      --no-plots --out "$dir/val-$n" > /dev/null
done
# shellcheck disable=SC2086 # the counts, one argument each
/usr/bin/python3 - "$dir" $counts > "$dir/scores.csv" <<'PY'
import json, os, sys
print("samples,fpd_hlf,fpd_hlf_error,fpd_hlf_bootstrap_error,auc,auc_error")
for n in sys.argv[2:]:
    r = json.load(open(os.path.join(sys.argv[1], f"val-{n}", "report.json")))
    f, c = r["figure_of_merit"], r.get("classifier", {})
    print(n, f["value"], f["error"], f.get("bootstrap_error", ""), c.get("auc", ""), c.get("auc_error", ""), sep=",")
PY
echo "$dir/scores.csv: $(($(wc -l < "$dir/scores.csv") - 1)) snapshots scored against $ref"
