#!/usr/bin/env bash
# A/B benchmark of two mpigan binaries (e.g. before and after a refactoring), interleaved on this
# machine so both sides see the same load:
#
#   bench/ab_compare.sh BIN_A BIN_B [--repeat N] [--updates U] [--rules "sync downpour ..."]
#                       [--model M] [--batch B] [--steps S]
#
# For each repeat and each rule it runs, A then B,
#   mpiexec.mpich -n 2 BIN bench master --model M --rule R --updates U      (updates_per_s)
# and then, A then B,
#   BIN bench step --model M --batch B --steps S                            (samples_per_s)
# and prints, per benchmark, the median of each side, the ratio B/A, and each side's min..max.
# Defaults: 5 repeats, 2000 updates, rules sync downpour easgd gem dc_asgd, model 3dgan-25,
# batch 16, 5 steps. Environment: MPIEXEC (default mpiexec.mpich), LOG_DIR (keep the raw output).
set -euo pipefail

[[ $# -ge 2 ]] || { sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2; }
a=$1 b=$2
shift 2
repeat=5 updates=2000 model=3dgan-25 batch=16 steps=5
rules="sync downpour easgd gem dc_asgd"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --repeat) repeat=$2; shift 2 ;;
    --updates) updates=$2; shift 2 ;;
    --rules) rules=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) echo "ab_compare.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
mpiexec=${MPIEXEC:-mpiexec.mpich}
log=${LOG_DIR:-$(mktemp -d)}
mkdir -p "$log"
results="$log/results.tsv"
: > "$results"

value() { grep -o "^$1=[0-9.e+-]*" | tail -1 | cut -d= -f2; }

for ((r = 1; r <= repeat; r++)); do
  for rule in $rules; do
    for side in A B; do
      bin=$a; [[ $side == B ]] && bin=$b
      out="$log/master-$rule-$side-$r.txt"
      OMP_NUM_THREADS=1 "$mpiexec" -n 2 "$bin" bench master --model "$model" --rule "$rule" --updates "$updates" > "$out" 2>&1
      printf 'master %s\t%s\t%s\n' "$rule" "$side" "$(value updates_per_s < "$out")" >> "$results"
    done
  done
  for side in A B; do
    bin=$a; [[ $side == B ]] && bin=$b
    out="$log/step-$side-$r.txt"
    "$bin" bench step --model "$model" --batch "$batch" --steps "$steps" > "$out" 2>&1
    printf 'step b%s\t%s\t%s\n' "$batch" "$side" "$(value samples_per_s < "$out")" >> "$results"
  done
done

python3 - "$results" "$repeat" <<'PY'
import sys, statistics, collections
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    name, side, v = line.rstrip("\n").split("\t")
    if v:
        rows[name][side].append(float(v))
print(f"{'benchmark':<22}{'A median':>12}{'B median':>12}{'B/A':>8}   {'A min..max':<22}{'B min..max':<22}")
for name, s in rows.items():
    a, b = s.get("A", []), s.get("B", [])
    if not a or not b:
        print(f"{name:<22} missing values (see the logs)"); continue
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"{name:<22}{ma:>12.1f}{mb:>12.1f}{mb / ma:>8.3f}   {min(a):.1f}..{max(a):<14.1f}{min(b):.1f}..{max(b):.1f}")
print(f"({sys.argv[2]} interleaved repeats; master: updates_per_s of `bench master`, step: samples_per_s of `bench step`)")
PY
echo "raw output: $log"
