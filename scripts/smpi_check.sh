#!/usr/bin/env bash
# The SMPI check of CI (docs/sandbox.md, "Scale"): builds mpigan against
# SimGrid's SMPI (the smpi preset, build-smpi/; installs libsimgrid-dev and time when missing) and simulates
# the real master with 16 virtual workers, and a tree of 2 sub-masters with 16 more, on the Piz
# Daint-like platform of bench/smpi. Checks what the simulation must show whatever the machine:
# every update counted, every worker served, and simulated (not real) time of about 10 steps.
#
#   scripts/smpi_check.sh
#
# Environment: MPIGAN_JOBS (parallel build jobs; default: number of cores).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=${MPIGAN_JOBS:-$(nproc)}
# SimGrid, and Debian's `time` (bench/smpi/run_mpigan.sh measures each simulation with /usr/bin/time;
# a minimal Debian root has none).
missing=()
for p in libsimgrid-dev time; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  echo "== smpi: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
t0=$SECONDS
cmake --preset smpi -DMPIGAN_WERROR=ON -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 >/dev/null
cmake --build --preset smpi -j "$jobs"
echo "== smpi: build took $((SECONDS - t0)) s"

export WORK=$(mktemp -d /tmp/mpigan-smpi-check.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail=0
check() {  # RULE WORKERS MASTERS EVERY: one simulation; its CSV row and the checks
  local row
  row=$(BUILD="$root/build-smpi" bench/smpi/run_mpigan.sh "$@" constant:1.0) || { fail=1; return; }
  echo "$row"
  python3 - "$row" "$WORK/run-$1-$2-$3-$4/updates.csv" <<'PY' || fail=1
import csv, sys
f = sys.argv[1].split(",")
rule, n, masters, every = f[0], int(f[1]), int(f[2]), int(f[3])
updates, sim_s, samples = int(f[7]), float(f[8]), int(f[9])
rows = [r for r in csv.DictReader(open(sys.argv[2])) if r["verdict"].startswith("applied")]
want = 10 * n // every if masters > 1 else 10 * n
problems = []
if updates != want: problems.append(f"{updates} versions, expected {want}")
if samples < 10 * n * 64: problems.append(f"{samples} samples, expected at least {10 * n * 64}")
children = n if masters == 1 else masters - 1
if len({r["worker"] for r in rows}) != children: problems.append(f"not every one of {children} children served")
# About 10 steps of exactly 1 s each, plus the exchanges: simulated time, whatever the machine's
# load (a tree's workers may take one more step while the stop travels down through its sub-masters).
limit = 11.5 if masters == 1 else 13.0
if not 10.0 <= sim_s < limit: problems.append(f"{sim_s} s simulated, expected 10-{limit} (10 steps of 1 s)")
print(f"== smpi: {rule} {n} workers, {masters} master(s): " + ("; ".join(problems) or "ok"))
sys.exit(1 if problems else 0)
PY
}
check downpour 16 1 1
check gem 16 3 2
exit $fail
