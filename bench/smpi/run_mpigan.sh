#!/bin/bash
# run_mpigan.sh RULE WORKERS MASTERS EVERY [STEP_SPEC]: one SMPI simulation of mpigan itself (the
# SMPI build, -DMPIGAN_SMPI=ON, in $BUILD or ../../build-smpi): the real master (MASTERS > 1: a
# top master and MASTERS - 1 sub-masters exchanging every EVERY updates) and WORKERS virtual
# workers on a Piz Daint-like platform (gen_platform.py), about 10 updates per worker. Prints one CSV
# row (header: run_mpigan.sh --header).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = "--header" ]; then
  echo "rule,workers,masters,every,ranks,step,mean_step_s,updates,sim_s,samples,mid_samples_per_s,ideal_samples_per_s,efficiency,speedup,real_s,rss_mb"
  exit 0
fi
if [ "${1:-}" = "--help" ] || [ $# -lt 4 ]; then
  sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'
  echo "example: run_mpigan.sh gem 1024 33 4 lognormal:1.64,0.05"
  [ "${1:-}" = "--help" ] && exit 0 || exit 2
fi
RULE=$1 N=$2 M=$3 E=$4 STEP=${5:-lognormal:1.64,0.05}
for v in "$N" "$M" "$E"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "run_mpigan.sh: WORKERS, MASTERS and EVERY must be positive integers, got '$v'" >&2; exit 2; }
done
BIN=${BUILD:-$HERE/../../build-smpi}/apps/mpigan
[ -e "$BIN" ] || { echo "run_mpigan.sh: no SMPI build at $BIN: cmake --preset smpi && cmake --build --preset smpi" >&2; exit 2; }
RANKS=$((N + M))
UPDATES=$((10 * N))
[ "$M" -gt 1 ] && UPDATES=$((10 * N / E))  # a tree's versions: one per sub-master exchange of E updates
[ "$RULE" = sync ] && UPDATES=10            # sync: versions are rounds of every worker
WORK=${WORK:-/tmp/mpigan-smpi}
mkdir -p "$WORK"
cd "$WORK"
[ -f daint-$RANKS.xml ] || python3 "$HERE/gen_platform.py" $RANKS > /dev/null
OUT=$WORK/run-$RULE-$N-$M-$E
rm -rf "$OUT"
LOG=$OUT.log
/usr/bin/time -f "REAL %e RSS_KB %M" -o $OUT.time \
  smpirun -np $RANKS -platform daint-$RANKS.xml -hostfile hosts-$RANKS.txt \
    --cfg=smpi/privatization:no --cfg=smpi/host-speed:1Tf --cfg=smpi/test:0 --cfg=smpi/grow-injected-times:no --log=root.thres:critical \
    "$BIN" train "$HERE/mpigan-3dgan25.yaml" --out "$OUT" \
    --set algorithm.name=$RULE --set topology.masters=$M --set topology.submaster_every=$E \
    --set topology.virtual_compute=$STEP --set training.max_updates=$UPDATES \
    > $LOG 2>&1 || { echo "FAILED $RULE $N $M $E: $(tail -3 $LOG | tr '\n' ' ')" >&2; exit 1; }
python3 - "$LOG" "$OUT.time" "$OUT/updates.csv" <<PY
# Throughput in the middle half of the run (between 25 % and 75 % of the samples the masters
# counted): no start-up (the initial weights reach every worker one after the other) and no tail.
import csv, math, re, sys
log = open(sys.argv[1]).read()
t = re.search(r"Trained (\d+) updates .*?: (\d+) samples in ([\d.]+) s", log)
tm = re.search(r"REAL ([\d.]+) RSS_KB (\d+)", open(sys.argv[2]).read())
rows = [r for r in csv.DictReader(open(sys.argv[3])) if r["verdict"].startswith("applied")]
total = sum(int(r["samples"]) for r in rows)
acc, t25, s25, t75, s75 = 0, None, 0, None, 0
for r in rows:
    acc += int(r["samples"])
    if t25 is None and acc >= 0.25 * total: t25, s25 = float(r["time_s"]), acc
    if t75 is None and acc >= 0.75 * total: t75, s75 = float(r["time_s"]), acc
mid = (s75 - s25) / (t75 - t25)
kind, _, args = "$STEP".partition(":")
a = [float(x) for x in args.split(",")]
mean = a[0] * math.exp(a[1] ** 2 / 2) if kind == "lognormal" else a[0] if kind == "constant" else a[0] + a[1]
ideal = $N * 64 / mean
print(f"$RULE,$N,$M,$E,$RANKS,\"$STEP\",{mean:.4f},{t[1]},{t[3]},{t[2]},{mid:.1f},{ideal:.1f},{mid / ideal:.4f},"
      f"{$N * mid / ideal:.1f},{tm[1]},{int(tm[2]) // 1024}")
PY
