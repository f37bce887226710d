#!/usr/bin/env bash
# Framework efficiency: total samples/s of N workers under one master against N independent
# single-process trainers running at the same time on the same machine (same experiment, one
# thread each), for N = 1 .. the core count and for each update rule asked.
#
#   bench/efficiency.sh [--workers "1 2"] [--rules "sync gem"] [--steps S] [--batch B]
#                       [--repeat R] [--model M] [--build DIR] [--mpiexec CMD]
#
# Both sides run `mpigan train bench/efficiency.yaml` (simulated 3dgan-25 showers, batch B,
# no validation or checkpoints in the timed window) and report their steady-state samples/s
# (each process's or worker's rate from the end of its first step to the end of its last, summed):
#   independent: N copies of `mpiexec -n 1 mpigan train ...`, each S steps; their rates summed;
#   framework:   `mpiexec -n N+1 mpigan train ... --set algorithm.name=RULE`, each worker S steps;
#                each worker's rate between its first and last update at the master (updates.csv),
#                summed. (The master's own steady-state figure, one window across all workers,
#                gains or loses up to a step of work at each edge when workers are out of phase.)
# Each measurement is repeated R times, independent and framework runs alternating (a shared
# machine's speed drifts), and the medians are compared: efficiency = framework / independent.
# The loss splits in two, from the framework run's updates.csv (each worker's first update left
# out): the workers' compute bound, the samples/s the workers' compute times alone allow (sync:
# samples over the sum of each round's slowest compute time; asynchronous rules: the sum of each
# worker's samples over its compute time), against independent shows what the workers lost while
# computing (the slower worker of each round, contention); framework / bound shows what the
# exchanges cost (the master, the protocol, waiting for replies).
# Prints a table; LOG_DIR=dir keeps every output.
# Defaults: workers 1..nproc, rules "sync gem", steps 8, batch 16, repeat 3, model 3dgan-25,
# build `build`, mpiexec `mpiexec.mpich` (or `mpiexec`).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
workers=$(seq -s ' ' 1 "$(nproc)")
rules="sync gem"
steps=8
batch=16
repeat=3
model=3dgan-25
build=build
mpiexec=$(command -v mpiexec.mpich || command -v mpiexec || true)

usage() { sed -n '2,27p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
die() { echo "efficiency.sh: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --workers) workers=${2:?}; shift 2 ;;
    --rules) rules=${2:?}; shift 2 ;;
    --steps) steps=${2:?}; shift 2 ;;
    --batch) batch=${2:?}; shift 2 ;;
    --repeat) repeat=${2:?}; shift 2 ;;
    --model) model=${2:?}; shift 2 ;;
    --build) build=${2:?}; shift 2 ;;
    --mpiexec) mpiexec=${2:?}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
mpigan=$build/apps/mpigan
[[ $build = /* ]] || mpigan=$root/$mpigan
[[ -x $mpigan ]] || die "$mpigan is not built (cmake --build $build)"
[[ -n $mpiexec ]] || die "no mpiexec found (install mpich)"

work=${LOG_DIR:-$(mktemp -d)}
mkdir -p "$work"
[[ -n ${LOG_DIR:-} ]] || trap 'rm -rf "$work"' EXIT
cd "$work"
exp=$root/bench/efficiency.yaml
common=(--set "model.name=$model" --set "training.batch=$batch" --set "data.train=$work/data/*.h5"
        --set "data.simulate.dir=$work/data")

steady() {  # the steady-state rate from a summary line "... (steady state X)."
  sed -n 's/.*steady state \([0-9.]*\)).*/\1/p' "$1" | tail -1
}

# Simulate the data once (the first run would do it; doing it here keeps it out of every timing).
"$mpiexec" -n 1 "$mpigan" train "$exp" "${common[@]}" --out "$work/warm" --set training.max_updates=1 \
  >"$work/warm.log" 2>&1 || { cat "$work/warm.log"; die "the warm-up run failed"; }

# The workers' compute bound of a framework run (see the header) from its updates.csv.
worker_rates() {  # UPDATES_CSV: the sum over workers of each one's samples/s between its first and last update
  awk -F, '
    NR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next }
    $col["verdict"] !~ /^applied/ { next }
    { w = $col["worker"]; t = $col["time_s"]
      if (!(w in t0)) { t0[w] = t; next }
      n[w] += $col["samples"]; t1[w] = t }
    END { r = 0; for (w in n) if (t1[w] > t0[w]) r += n[w] / (t1[w] - t0[w]); print r }' "$1"
}

compute_bound() {  # UPDATES_CSV SYNC(0|1)
  awk -F, -v sync="$2" '
    NR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next }
    $col["verdict"] !~ /^applied/ { next }
    { w = $col["worker"]; if (!(w in seen)) { seen[w] = 1; next }
      c = $col["compute_s"]; n = $col["samples"]
      if (sync) { r = $col["step"]; rs[r] += n; if (c > rm[r]) rm[r] = c }
      else { ws[w] += n; wc[w] += c } }
    END { b = 0
      if (sync) { for (r in rs) { s += rs[r]; t += rm[r] } if (t > 0) b = s / t }
      else { for (w in ws) if (wc[w] > 0) b += ws[w] / wc[w] }
      print b }' "$1"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

independent_run() {  # N TAG: N single-process trainers at once; prints the sum of their rates
  local n=$1 tag=$2 pids=() i total=0 r
  for i in $(seq 1 "$n"); do
    "$mpiexec" -n 1 "$mpigan" train "$exp" "${common[@]}" --out "$work/single-$tag-$i" \
      --set "training.max_updates=$steps" >"$work/single-$tag-$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || die "an independent trainer failed (see $work)"; done
  for i in $(seq 1 "$n"); do
    r=$(steady "$work/single-$tag-$i.log")
    [[ -n $r ]] || die "no steady-state rate in $work/single-$tag-$i.log"
    total=$(awk -v a="$total" -v b="$r" 'BEGIN { print a + b }')
  done
  echo "$total"
}

framework_run() {  # N RULE TAG: prints the master's steady-state rate and the workers' compute bound
  local n=$1 rule=$2 tag=$3 updates=$steps log
  # sync: one update per round of n gradients; asynchronous rules: one per worker step.
  [[ $rule == sync ]] || updates=$((steps * n))
  log=$work/$rule-$tag.log
  # gem's plain SGD proposals run away on the 3DGAN without a clip (docs/algorithms.md).
  local extra=()
  [[ $rule == gem ]] && extra=(--set algorithm.clip_norm=500)
  "$mpiexec" -n $((n + 1)) "$mpigan" train "$exp" "${common[@]}" --out "$work/$rule-$tag" \
    --set "algorithm.name=$rule" "${extra[@]}" --set "training.max_updates=$updates" >"$log" 2>&1 ||
    die "the $rule run with $n worker(s) failed (see $log)"
  [[ -n $(steady "$log") ]] || die "no steady-state rate in $log"
  echo "$(worker_rates "$work/$rule-$tag/updates.csv") $(compute_bound "$work/$rule-$tag/updates.csv" "$([[ $rule == sync ]] && echo 1 || echo 0)")"
}

printf '%-8s %-6s %10s %12s %10s %10s %10s   %s\n' workers rule framework independent efficiency bound fw/bound \
  "(medians of $repeat runs; fw/bound: of the runs' ratios)"
for n in $workers; do
  declare -A got=() bnd=() fwb=()
  ind=()
  for k in $(seq 1 "$repeat"); do
    ind+=("$(independent_run "$n" "$n-$k")")
    for rule in $rules; do
      read -r r b < <(framework_run "$n" "$rule" "$n-$k")
      got[$rule]+="$r "
      bnd[$rule]+="$b "
      fwb[$rule]+="$(awk -v a="$r" -v b="$b" 'BEGIN { print (b > 0 ? a / b : 0) }') "
    done
  done
  independent=$(printf '%s\n' "${ind[@]}" | median)
  for rule in $rules; do
    framework=$(printf '%s\n' ${got[$rule]} | median)
    bound=$(printf '%s\n' ${bnd[$rule]} | median)
    printf '%-8s %-6s %10.2f %12.2f %10.3f %10.2f %10.3f   framework %s| independent %s| bound %s\n' "$n" "$rule" \
      "$framework" "$independent" "$(awk -v a="$framework" -v b="$independent" 'BEGIN { print a / b }')" \
      "$bound" "$(printf '%s\n' ${fwb[$rule]} | median)" \
      "${got[$rule]}" "${ind[*]} " "${bnd[$rule]}"
  done
  unset got bnd fwb
done
