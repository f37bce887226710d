#!/usr/bin/env bash
# GP against evolution against random on the converging rung, at equal budgets (docs/hpo.md):
# each algorithm searches examples/search-3dgan-5.yaml with the same trials, folds, seed and early
# stopping, one after the other, in OUT/<algorithm>; then scripts/search_compare.py sets them side
# by side at equal CPU-hours. A search already in OUT continues (--resume): stop this script at any
# time (Ctrl-C or SIGTERM: the trials running are recorded as interrupted and run again first) and
# start it again with the same arguments. Then the experiment's own configuration trains on the
# same folds (OUT/baseline/fold-F, side by side), the line the searches have to beat.
#
#   scripts/search_study.sh [OUT (runs/search5)] [ALGORITHMS ("gp evolution random")] [TRIALS (20)]
#
# Environment: EXP (examples/search-3dgan-5.yaml); MPIGAN (build/apps/mpigan); RANKS (3: the
# coordinator and one block of two ranks, the trial's two folds side by side); SET (more --set
# KEY=VALUE for every trial); BUDGETS (CPU-hours at which to compare, "1,2").
# Output: OUT/<algorithm>/ (the searches: trials.jsonl, best.yaml, plots), OUT/baseline/,
# OUT/compare.md and OUT/compare.png.
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,/^set -euo/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=${1:-runs/search5}
algorithms=${2:-gp evolution random}
trials=${3:-20}
for a in $algorithms; do
  case $a in gp|evolution|random) ;; *) echo "search_study.sh: algorithm '$a': expected gp, evolution or random" >&2; exit 2 ;; esac
done
[[ $trials =~ ^[1-9][0-9]*$ ]] || { echo "search_study.sh: TRIALS '$trials': expected a positive integer" >&2; exit 2; }
exp=${EXP:-examples/search-3dgan-5.yaml}
mpigan=${MPIGAN:-build/apps/mpigan}
ranks=${RANKS:-3}
[[ -x $mpigan ]] || { echo "search_study.sh: $mpigan is not built" >&2; exit 3; }
extra=()
for kv in ${SET:-}; do extra+=(--set "$kv"); done
mkdir -p "$out"
# The training data once, before any block reads it (the experiment's data.simulate section).
[[ -n $(ls runs/rung5-data/*.h5 2>/dev/null) ]] || "$mpigan" simulate --events 60000 --geometry 5x5x5 \
  --energy 10:500 --out runs/rung5-data --events-per-file 5000 --seed 5
compare=()
for a in $algorithms; do
  d=$out/$a
  resume=()
  [[ -f $d/trials.jsonl ]] && resume=(--resume)
  echo "search_study.sh: $a -> $d ${resume[*]}"
  OMP_NUM_THREADS=1 mpiexec.mpich -n "$ranks" "$mpigan" optimize "$exp" --block-size $((ranks - 1)) \
    --algorithm "$a" --trials "$trials" --out "$d" "${resume[@]}" "${extra[@]}" >> "$out/$a.log" 2>&1
  compare+=("$a=$d")
done
# The experiment's own configuration on the same folds, trained as a trial is: the line a search has
# to beat by more than the spread over the folds.
set -- $algorithms
folds=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["folds"])' "$out/$1/search.json")
base=$out/baseline
mkdir -p "$base"
for ((f = 0; f < folds; f++)); do
  d=$base/fold-$f
  [[ -f $d/DONE ]] && continue
  rm -rf "$d"
  echo "search_study.sh: the experiment's own configuration, fold $f -> $d"
  (OMP_NUM_THREADS=1 "$mpigan" train "$exp" --set "data.cross_validation.folds=$folds" \
    --set "data.cross_validation.fold=$f" "${extra[@]}" --out "$d" > "$base/fold-$f.log" 2>&1 && touch "$d/DONE") &
done
wait
/usr/bin/python3 scripts/search_compare.py "${compare[@]}" --baseline "$base" --budgets "${BUDGETS:-1,2}" \
  --out "$out/compare"
