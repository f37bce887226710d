#!/usr/bin/env bash
# Whole-program tests of distributed runs under mpiexec (MPICH):
#   1. bad experiments fail before any MPI traffic, with every problem named, exit status 1;
#   2. a worker or the master killed with SIGKILL ends the whole job within seconds with a message
#      naming the rank; the last checkpoint stays intact, and --resume continues from it;
#   3. a diverged run (every update non-finite) stops with status 1, says so, writes FAILED;
#   4. the research sandbox runs a tree of sub-masters, and refuses one it cannot build;
#   and `mpigan report` draws a run's history, a new run into a run's directory is refused.
# Usage: cli_tests.sh PATH/TO/mpigan PATH/TO/mpiexec
set -uo pipefail
mpigan=${1:?mpigan binary}
mpiexec=${2:?mpiexec}
work=$(mktemp -d)
trap '[[ -n ${KEEP:-} ]] || rm -rf "$work"; [[ -n ${job:-} ]] && kill -9 "$job" 2>/dev/null' EXIT
fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "ok: $*"; }

cat >"$work/exp.yaml" <<YAML
name: cli
seed: 2
threads: 1
model: {name: tiny-8}
data:
  synthetic: {events: 4096, validation_events: 64}
training: {batch: 8, epochs: 100}
checkpoint: {every: 25, keep: 2}
logging: {level: info, every: 50}
algorithm: {name: downpour}
YAML

# 1. Bad input: all problems at once, before anything runs; the exit status says so.
out=$("$mpiexec" -n 4 "$mpigan" train "$work/exp.yaml" --out "$work/bad" --set topology.group_size=2 \
      --set training.batch=9 --set model.dropout=7 2>&1)
rc=$?
[[ $rc -ne 0 ]] || fail "a bad experiment exited with status 0"
grep -q "3 worker ranks (4 ranks - 1 masters) do not form groups of 2" <<<"$out" || fail "topology problem not named: $out"
grep -q "training.batch 9 is not divisible by group_size 2" <<<"$out" || fail "batch problem not named: $out"
grep -q "model.dropout: value 7 is out of range" <<<"$out" || fail "dropout problem not named: $out"
[[ ! -e $work/bad/checkpoints ]] || fail "a run directory was created for a bad experiment"
pass "bad experiment: exit $rc, every problem named"

# 2. SIGKILL a rank in the middle of a run. Hydra kills every other rank within milliseconds;
# the report comes from rank 0's watchdog monitor, a separate process (worker/watchdog.hpp).
source "$(dirname "${BASH_SOURCE[0]}")/job_processes.sh"

# kill_rank DIR RANK LABEL [late]: start a run in DIR, kill RANK after its first checkpoint, check
# that the job ends within seconds, non-zero, and that the output and DIR/FAILED name "LABEL (pid P".
# late: the watchdog monitor is stopped before the kill and continued 1 s later, when the launcher
# has ended every rank (a loaded node: it wakes to find all the ranks gone at once).
kill_rank() {
  local dir=$1 rank=$2 label=$3 late=${4:-}
  "$mpiexec" -n 4 "$mpigan" train "$work/exp.yaml" --out "$dir" >"$dir.log" 2>&1 &
  job=$!
  for _ in $(seq 1 600); do
    [[ -s $dir/checkpoints/latest ]] && break
    kill -0 "$job" 2>/dev/null || fail "the run ended before its first checkpoint: $(tail -20 "$dir.log")"
    sleep 0.2
  done
  [[ -s $dir/checkpoints/latest ]] || fail "no checkpoint after 120 s"
  # Only this job's processes: the descendants of our own mpiexec (its Hydra proxy's children),
  # never a rank of another job running beside this test (ctest -j2, the Slurm test).
  victim=$(rank_pid "$job" "$rank")
  [[ -n $victim ]] || fail "could not find rank $rank's process"
  latest_before=$(cat "$dir/checkpoints/latest")
  local monitor=
  if [[ -n $late ]]; then
    monitor=$(pgrep -P "$(rank_pid "$job" 0)" -f watchdog-monitor)
    [[ -n $monitor ]] || fail "could not find the watchdog monitor below rank 0"
    kill -STOP "$monitor"
  fi
  kill -9 "$victim"
  if [[ -n $monitor ]]; then
    sleep 1
    kill -CONT "$monitor"
  fi
  local t0; t0=$(date +%s)
  for _ in $(seq 1 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$job" 2>/dev/null && fail "the job still runs 30 s after rank $rank was killed"
  wait "$job"; local rc=$?; job=""
  local elapsed=$(( $(date +%s) - t0 ))
  [[ $rc -ne 0 ]] || fail "the job exited with status 0 after rank $rank was killed"
  # MPICH's launcher only says "Killed (signal 9)"; mpigan's watchdog names the rank, and the run
  # directory records it in FAILED.
  grep -q "$label (pid $victim on .*) died" "$dir.log" ||
    fail "no message naming rank $rank (pid $victim): $(tail -30 "$dir.log")"
  grep -q "$label (pid $victim" "$dir/FAILED" || fail "FAILED does not name rank $rank"
  pass "killed rank $rank (pid $victim): the job ended in ${elapsed} s with status $rc and said which rank died"
}
kill_rank "$work/master" 0 "rank 0 master"
kill_rank "$work/master-late" 0 "rank 0 master" late
# Strangers connect to the watchdog first (a test hook in rank 0: one claims rank 1 without the
# job's secret, one says nothing, one hangs up half-way): all three are refused, and rank 2 is
# still watched and named when it dies.
MPIGAN_WATCHDOG_STRANGERS=1 kill_rank "$work/run" 2 "rank 2 worker 1"
for why in "does not know the job's secret" "sent no complete hello within 5 s" "closed after 4 of the hello's 20 bytes"; do
  grep -q "watchdog: refused a connection from 127.0.0.1:[0-9]*: it $why" "$work/run.log" ||
    fail "the watchdog did not refuse the stranger that $why: $(grep -i watchdog "$work/run.log" | head)"
done
pass "three strangers refused by the watchdog; the job ran and was watched"

ls "$work/run/checkpoints" >&2
# The latest checkpoint is intact and complete; --resume continues from it.
latest=$(cat "$work/run/checkpoints/latest")
[[ -f $work/run/checkpoints/$latest ]] || fail "latest names a missing file"
# The newest checkpoint whose every part is on disk: --resume takes it even where the job ended
# after the last part was written but before 'latest' moved (docs/distributed.md, faults).
for f in $(ls "$work/run/checkpoints" | grep -E '^step-[0-9]+\.h5$' | sort -r); do
  all=1
  for w in 0 1 2; do [[ -f $work/run/checkpoints/${f%.h5}.worker-$w.h5 ]] || all=0; done
  ((all)) && { latest=$f; break; }
done
step=${latest#step-}; step=$((10#${step%.h5}))
out=$("$mpiexec" -n 4 "$mpigan" train "$work/exp.yaml" --resume "$work/run" --set training.max_updates=$((step + 20)) 2>&1)
rc=$?
[[ $rc -eq 0 ]] || fail "resume failed (status $rc): $(grep -vE "^  |^#|^[a-z_]*:" <<<"$out" | tail -15)"
grep -q "resumed from .*$latest at version $step" <<<"$out" || fail "the master did not resume from $latest: $out"
grep -q "Trained $((step + 20)) updates" <<<"$out" || fail "the resumed run did not reach $((step + 20)) updates: $out"
grep -q "the previous attempt of this run failed: .*rank 2 worker 1 (pid $victim" <<<"$out" ||
  fail "the resumed run did not recall why the previous attempt failed: $out"
[[ -f $work/run/FAILED.previous && ! -e $work/run/FAILED ]] || fail "FAILED was not kept as FAILED.previous"
pass "resumed from $latest (was $latest_before when killed) to $((step + 20)) updates"

# 2b. Fast simulation from the distributed run's checkpoint (its concatenated BN state).
out=$("$mpigan" generate "$work/run" --events 20 --energy 50:100 --batch 8 --out "$work/generated.h5" 2>&1) ||
  fail "generate from a distributed run failed: $out"
grep -q "^20 showers in" <<<"$out" && [[ -s $work/generated.h5 ]] || fail "generate wrote nothing: $out"
pass "generated 20 showers from the distributed run's latest checkpoint"

# 2c. The distributed run's history drawn; and what is not a run's history is named. A new run
# into the run's directory is refused, the run left as it was.
out=$("$mpigan" report "$work/run" --out "$work/report.png" 2>&1) || fail "report of a distributed run failed: $out"
[[ -s $work/report.png ]] || fail "report drew nothing: $out"
mkdir -p "$work/notrun" && echo "a,b" >"$work/notrun/metrics.csv"
out=$("$mpigan" report "$work/notrun" 2>&1) && fail "a foreign metrics.csv was drawn"
grep -q "is not a metrics.csv of mpigan: its first line should be the header 'kind,epoch,step,...', it is 'a,b'" \
  <<<"$out" || fail "the foreign metrics.csv not named: $out"
out=$("$mpigan" report "$work/run" --out "$work/nodir/report.png" 2>&1) && fail "a report into a missing directory"
grep -q "the directory '$work/nodir' does not exist" <<<"$out" || fail "the missing directory not named: $out"
cp "$work/run/config.yaml" "$work/config.before"
# Rank 0 refuses; every rank leaves with status 1 (no abort), and the message reaches the terminal.
out=$("$mpiexec" -n 3 "$mpigan" train "$work/exp.yaml" --out "$work/run" 2>&1)
rc=$?
[[ $rc -eq 1 ]] || fail "a new run over a run exited with status $rc, expected 1: $(tail -5 <<<"$out")"
grep -q "'$work/run' already holds a run" <<<"$out" || fail "the existing run not named: $(tail -5 <<<"$out")"
cmp -s "$work/run/config.yaml" "$work/config.before" || fail "the refused run changed config.yaml"
pass "report drawn; a foreign metrics.csv, a missing directory and a new run over a run refused"

# 3. Divergence: from their 3rd exchange on, the workers send only NaNs. The run must end (not
# loop forever re-sending weights), exit 1, say why and where, keep finite weights checkpointed.
out=$(MPIGAN_FAULT='nan_update@all:3+' timeout 120 "$mpiexec" -n 3 "$mpigan" train "$work/exp.yaml" --out "$work/nan" \
      --set training.max_nonfinite=4 --set training.max_updates=1000 2>&1)
rc=$?
[[ $rc -eq 1 ]] || fail "a diverged run exited with status $rc, expected 1: $(tail -5 <<<"$out")"
# Each worker applies two finite updates, but a slow worker's may come after the other's NaN run
# has reached the limit: the run diverges at version 2, 3 or 4, and that version is checkpointed.
diverged=$(grep -o "mpigan: error: training diverged: 4 non-finite updates in a row .* at version [234]; .* ($work/nan/FAILED)" <<<"$out" |
           grep -o "at version [234];" | grep -o "[234]")
[[ -n $diverged ]] || fail "the divergence was not reported: $(tail -5 <<<"$out")"
grep -q "training diverged" "$work/nan/FAILED" || fail "FAILED does not record the divergence"
[[ $(cat "$work/nan/checkpoints/latest") == "step-0000000$diverged.h5" ]] ||
  fail "the last finite weights (version $diverged) were not checkpointed: latest is $(cat "$work/nan/checkpoints/latest")"
pass "diverged run: exit 1, reported, version $diverged checkpointed"

# 4. The research sandbox's command: 4 virtual workers under 2 sub-masters (topology.masters 3),
# and a tree it cannot build named before anything runs.
out=$("$mpigan" sandbox "$work/exp.yaml" --workers 4 --out "$work/sandbox" --set topology.masters=3 \
      --set training.max_updates=20 2>&1)
rc=$?
[[ $rc -eq 0 ]] || fail "the sandbox under sub-masters exited with status $rc: $(tail -5 <<<"$out")"
grep -q "Sandbox: 20 updates from 4 virtual workers under 2 sub-masters" <<<"$out" || fail "no tree summary: $out"
grep -q "at the sub-masters (their changes at the top: mean" <<<"$out" || fail "no staleness at the top: $out"
grep -q '"masters": 3' "$work/sandbox/sandbox.json" || fail "sandbox.json does not record the tree"
out=$("$mpigan" sandbox "$work/exp.yaml" --workers 2 --out "$work/sandbox-bad" --set topology.masters=4 2>&1)
rc=$?
[[ $rc -eq 1 ]] || fail "2 virtual workers for 3 sub-masters exited with status $rc, expected 1"
grep -q "topology: 2 worker groups for 3 sub-masters: each sub-master needs at least one group" <<<"$out" ||
  fail "the impossible tree was not named: $out"
pass "sandbox: a tree of 2 sub-masters; an impossible tree refused with its reason"
