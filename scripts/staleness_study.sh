#!/usr/bin/env bash
# Fidelity against the number of workers at convergence: the converging rung (examples/3dgan-5-cond.yaml)
# trained in the sandbox by each update rule with N virtual workers, over seeds, to the same sample
# budget as one worker (training.max_samples); each final generator (the run's last checkpoint) is
# scored against 10 000 fresh Monte Carlo showers (seed 77, never trained on) and by the rung's
# targets. Each run is one process on one core, JOBS at a time. A run that is scored is skipped, one
# stopped on the way continues from its state (--resume), so the script continues where it stopped.
#
#   scripts/staleness_study.sh [OUT (runs/staleness)] [RULES ("downpour sync")] [WORKERS ("16")]
#                              [SEEDS ("1 2 3")] [JOBS (2)]
#
# Environment: EXP (examples/3dgan-5-cond.yaml); MPIGAN (build/apps/mpigan); COMPUTE (the sandbox's
# clock, constant:0.25: it orders the arrivals, it does not change what is computed); SET (more
# --set KEY=VALUE arguments for every run, e.g. "training.max_samples=200000"); FRESH (the Monte Carlo
# file the final generators are scored on: runs/rung5-fresh/EleEscan5_001.h5, 10 000 showers of seed
# 77, simulated when missing; another path must exist); VALIDATE (more `mpigan validate` arguments, e.g.
# "--classifier-events 10000 --classifier-repeats 10").
# Rule 'single' is one worker (the baseline every rule shares): it runs once per seed, N ignored.
# Rule 'real:RULE' is RULE as a real MPI job (`mpiexec.mpich -n N+1 mpigan train`, one master and
# N worker processes on this machine) in OUT/real_RULE-N-seedS: the check of the sandbox against
# reality at convergence. It stops and continues (--resume) as a sandbox run does.
#
# Output: OUT/RULE-N-seedS/ (the sandbox run, val-fresh/ its validation, targets.json), then
# OUT/study.csv and OUT/study.md (scripts/staleness_table.py: per rule and N, the median and range
# over seeds of fpd_hlf, the classifier AUC, the worst sampling-fraction and resolution errors).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=${1:-runs/staleness}
rules=${2:-downpour sync}
workers=${3:-16}
seeds=${4:-1 2 3}
jobs=${5:-2}
mpigan=${MPIGAN:-build/apps/mpigan}
exp=${EXP:-examples/3dgan-5-cond.yaml}
compute=${COMPUTE:-constant:0.25}
fresh=${FRESH:-runs/rung5-fresh/EleEscan5_001.h5}
mkdir -p "$out"
if [[ -n ${FRESH:-} && ! -f $fresh ]]; then
  echo "staleness_study.sh: FRESH=$fresh: no such file (expected an HDF5 file of fresh Monte Carlo showers)" >&2
  exit 2
fi
[[ -f $fresh ]] || "$mpigan" simulate --events 10000 --geometry 5x5x5 --energy 10:500 --out runs/rung5-fresh \
  --events-per-file 10000 --seed 77
# The training data (the experiment's data.simulate section makes it when missing): once, before
# the runs start side by side.
[[ -n $(ls runs/rung5-data/*.h5 2>/dev/null) ]] || "$mpigan" simulate --events 60000 --geometry 5x5x5 \
  --energy 10:500 --out runs/rung5-data --events-per-file 5000 --seed 5
extra=()
for kv in ${SET:-}; do extra+=(--set "$kv"); done

tasks=()
for rule in $rules; do
  ns=$workers
  [[ $rule == single ]] && ns=1
  for n in $ns; do
    for s in $seeds; do
      alg=${rule#real:}
      [[ $rule == single ]] && alg=downpour  # one worker: staleness 0, no warm-up, the plain optimizer
      if [[ $rule == real:* ]]; then
        d=$out/real_$alg-$n-seed$s
        cmd="mpiexec.mpich -n $((n + 1)) $mpigan train $exp"
        state=$d/checkpoints/latest  # what a run stopped on the way leaves, to --resume from
      else
        d=$out/$rule-$n-seed$s
        cmd="$mpigan sandbox $exp --workers $n --compute $compute"
        state=$d/sandbox-state.h5
      fi
      [[ -f $d/val-fresh/report.json ]] && continue
      run="OMP_NUM_THREADS=1 $cmd --set algorithm.name=$alg --set seed=$s --set threads=1 ${extra[*]:-}"
      if [[ -e $state ]]; then run+=" --resume $d"; else run+=" --out $d"; fi
      score="OMP_NUM_THREADS=1 $mpigan validate $d --reference $fresh --no-plots ${VALIDATE:-} --out $d/val-fresh > $d/validate.log 2>&1"
      score+=" && /usr/bin/python3 scripts/rung_targets.py $d/val-fresh --json $d/targets.json > $d/targets.txt"
      # trained: the run reached its budget (a run stopped by a signal exits 75 and continues later)
      [[ -f $d/trained ]] && run=true || run+=" >> $d.log 2>&1 && touch $d/trained"
      # a run stopped before it saved its state starts again from nothing
      [[ -e $state || -f $d/trained ]] || run="rm -rf $d && mkdir -p $d && $run"
      tasks+=("mkdir -p $d && $run && $score")
    done
  done
done
if ((${#tasks[@]})); then
  printf '%s\0' "${tasks[@]}" | xargs -0 -P "$jobs" -I{} bash -c '{}'
fi
/usr/bin/python3 scripts/staleness_table.py "$out"
