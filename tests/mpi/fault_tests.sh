#!/usr/bin/env bash
# Faults a cluster throws at a job, each on this test's own processes only.
# 1-2. SIGTERM / SIGINT stop a run cleanly (core/stop_signal.hpp), one process and
# distributed under mpiexec: the run writes a complete checkpoint at the step it has reached, says
# "Stopped by SIGTERM", exits with status 75, and --resume continues from that checkpoint to the
# end (a second signal ending the process at once is tested in tests/unit/core). Signals go to this
# test's own launcher pid only.
# A worker's exception reaches FAILED with its message. 3. A hung worker (SIGSTOP) is named by its
# master after topology.rank_timeout; the job ends with FAILED and a checkpoint of the version it
# reached, asynchronous and synchronous, and --resume continues from it.
# Usage: fault_tests.sh PATH/TO/mpigan PATH/TO/mpiexec
set -uo pipefail
mpigan=${1:?mpigan binary}
mpiexec=${2:?mpiexec}
work=$(mktemp -d)
trap '[[ -n ${stopped:-} ]] && kill -9 $stopped 2>/dev/null; [[ -n ${KEEP:-} ]] || rm -rf "$work"; [[ -n ${job:-} ]] && kill -9 "$job" 2>/dev/null' EXIT
fail() { echo "FAIL: $*"; [[ -f ${log:-} ]] && tail -n 30 "$log"; exit 1; }
pass() { echo "ok: $*"; }

cat >"$work/exp.yaml" <<YAML
name: signals
seed: 3
threads: 1
model: {name: tiny-8}
data:
  synthetic: {events: 4096, validation_events: 64}
training: {batch: 8, epochs: 100, max_updates: 3000}
validation: {enabled: false}
checkpoint: {every: 1000, keep: 3}
logging: {level: info, every: 20}
algorithm: {name: downpour}
YAML

# Waits until FILE has more than N lines (the run is training), at most 60 s.
wait_lines() {
  for _ in $(seq 600); do
    [[ -f $1 && $(wc -l <"$1") -gt $2 ]] && return 0
    kill -0 "$job" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

latest_step() { sed -E 's/.*step-0*([0-9]+)\.h5/\1/' "$1/checkpoints/latest"; }

# 1. One process, SIGTERM.
log=$work/single.log
"$mpigan" train "$work/exp.yaml" --set seed=11 --set 'training.fake_energy=[0.1, 5]' --out "$work/single" >"$log" 2>&1 &
job=$!
wait_lines "$work/single/metrics.csv" 30 || fail "the one-process run did not start training"
kill -TERM "$job"
wait "$job"
rc=$?
job=
[[ $rc -eq 75 ]] || fail "one process: exit status $rc after SIGTERM (expected 75)"
grep -q "Stopped by SIGTERM at step" "$log" || fail "one process: no 'Stopped by SIGTERM' summary"
[[ -f $work/single/STOPPED ]] || fail "one process: no RUN_DIR/STOPPED"
step=$(latest_step "$work/single")
[[ $step -ge 30 && $step -lt 3000 ]] || fail "one process: latest checkpoint at step $step"
pass "one process: SIGTERM -> status 75, checkpoint at step $step"
# The command it prints repeats the overrides; without them (another seed) a resume is refused.
grep -qF "mpigan train $work/exp.yaml --set seed=11 --set 'training.fake_energy=[0.1, 5]' --resume $work/single" "$log" ||
  fail "one process: the resume command printed lacks the run's --set overrides: $(tail -3 "$log")"
config_before=$(cat "$work/single/config.yaml")
"$mpigan" train "$work/exp.yaml" --resume "$work/single" >"$log" 2>&1 && fail "one process: a resume with another seed ran"
grep -qF "seed differs from the run's ($work/single/config.yaml: 11, now:" "$log" ||
  fail "one process: a resume with another seed did not name it: $(grep error "$log")"
[[ $(cat "$work/single/config.yaml") == "$config_before" ]] || fail "one process: a refused resume changed config.yaml"
pass "one process: the printed resume command repeats the overrides; another seed is refused"
"$mpigan" train "$work/exp.yaml" --set seed=11 --resume "$work/single" --set training.max_updates=$((step + 20)) \
  >"$log" 2>&1 || fail "one process: --resume after SIGTERM failed"
grep -q "resumed from .*step-0*$step.h5 at step $step" "$log" || fail "one process: did not resume at step $step"
[[ $(latest_step "$work/single") -eq $((step + 20)) ]] || fail "one process: resumed run did not reach step $((step + 20))"
[[ ! -e $work/single/STOPPED ]] || fail "one process: STOPPED still there after the resumed run"
pass "one process: --resume continues from step $step"

# 2. Distributed, 1 master + 2 workers: SIGTERM to mpiexec, which forwards it to every rank.
log=$work/dist.log
"$mpiexec" -n 3 "$mpigan" train "$work/exp.yaml" --out "$work/dist" >"$log" 2>&1 &
job=$!
wait_lines "$work/dist/updates.csv" 40 || fail "the distributed run did not start training"
kill -TERM "$job"
wait "$job"
rc=$?
job=
# Hydra's own exit status after it forwarded a signal is 0 or the ranks' 75 at random (a shell
# script as ranks shows it too): the run's STOPPED file is what counts.
[[ $rc -eq 75 || $rc -eq 0 ]] || fail "distributed: exit status $rc after SIGTERM (expected 75, or 0 from Hydra)"
grep -q "Stopped by SIGTERM at update" "$log" || fail "distributed: no 'Stopped by SIGTERM' summary"
grep -q "Stopped by SIGTERM at update" "$work/dist/STOPPED" || fail "distributed: no RUN_DIR/STOPPED"
step=$(latest_step "$work/dist")
[[ $step -ge 40 && $step -lt 3000 ]] || fail "distributed: latest checkpoint at update $step"
for w in 0 1; do
  [[ -f $work/dist/checkpoints/step-$(printf %08d "$step").worker-$w.h5 ]] || fail "distributed: worker $w's part missing"
done
[[ ! -e $work/dist/FAILED ]] || fail "distributed: FAILED written: $(cat "$work/dist/FAILED")"
pass "distributed: SIGTERM -> status 75, complete checkpoint at update $step"
"$mpiexec" -n 3 "$mpigan" train "$work/exp.yaml" --resume "$work/dist" --set training.max_updates=$((step + 20)) \
  >"$log" 2>&1 || fail "distributed: --resume after SIGTERM failed"
[[ $(latest_step "$work/dist") -eq $((step + 20)) ]] || fail "distributed: resumed run did not reach $((step + 20))"
pass "distributed: --resume continues from update $step"
# A job that ended after every rank wrote its parts of a checkpoint, before 'latest' moved: the
# resume takes that newer complete checkpoint. Simulated by pointing 'latest' back at the older one.
newer=$((step + 20))
echo "step-$(printf %08d "$step").h5" >"$work/dist/checkpoints/latest"
"$mpiexec" -n 3 "$mpigan" train "$work/exp.yaml" --resume "$work/dist" --set training.max_updates=$((newer + 20)) \
  >"$log" 2>&1 || fail "distributed: --resume with a newer complete checkpoint failed"
grep -q "has all its parts although 'latest' names step $step" "$log" || fail "distributed: the newer complete checkpoint was not taken"
grep -q "resumed from .*step-0*$newer.h5 at version $newer" "$log" || fail "distributed: did not resume at $newer"
pass "distributed: a complete checkpoint newer than 'latest' is resumed from"

# A worker's real error reaches FAILED with its message, not only as "died".
log=$work/throw.log
MPIGAN_FAULT='throw@1:30' timeout 120 "$mpiexec" -n 3 "$mpigan" train "$work/exp.yaml" --out "$work/throw" >"$log" 2>&1
rc=$?
[[ $rc -ne 0 ]] || fail "throw: exit status 0"
grep -q "worker group 1 fails at its exchange 30" "$work/throw/FAILED" || fail "throw: FAILED lacks the error: $(cat "$work/throw/FAILED" 2>&1)"
pass "a worker's error: exit $rc, FAILED quotes it"

# 2b. Two SIGTERMs to one worker (a user who insists): the first is recorded, the second ends the
# rank at once. The watchdog reports it as stopped by SIGTERM, not as a death.
source "$(dirname "${BASH_SOURCE[0]}")/job_processes.sh"
log=$work/twice.log
"$mpiexec" -n 3 "$mpigan" train "$work/exp.yaml" --out "$work/twice" >"$log" 2>&1 &
job=$!
wait_lines "$work/twice/updates.csv" 40 || fail "twice: the run did not start training"
victim=$(rank_pid "$job" 2)
[[ -n $victim ]] || fail "twice: could not find rank 2's process"
kill -TERM "$victim"
sleep 0.5
kill -TERM "$victim"
for _ in $(seq 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
kill -0 "$job" 2>/dev/null && fail "twice: the job still runs 30 s after the second SIGTERM"
wait "$job"
job=
grep -q "rank 2 worker 1 (pid $victim on .*) was stopped by SIGTERM" "$work/twice/FAILED" ||
  fail "twice: FAILED does not say rank 2 was stopped by SIGTERM: $(cat "$work/twice/FAILED" 2>&1)"
grep -q "died" "$work/twice/FAILED" && fail "twice: FAILED says a rank died: $(cat "$work/twice/FAILED")"
pass "two SIGTERMs to a worker: the watchdog says it was stopped by SIGTERM, not that it died"

# 3. A hung worker: SIGSTOP rank 2 (found below our own mpiexec), timeout 3 s. The master names it,
# ends the job with a checkpoint of the version reached (writing the hung worker's part itself from
# its last update), and --resume continues from it. Asynchronous (downpour: the other worker goes on
# until the limit) and synchronous (sync: the round can never close; its held worker is stopped).
# 4. Both workers hung at once (downpour): the second is found silent while the job ends; the master
# writes both parts, FAILED names both ranks, and --resume continues.
source "$(dirname "${BASH_SOURCE[0]}")/job_processes.sh"
# hung_worker RULE RANKS...: stop RANKS of a 3-rank job under RULE.
hung_worker() {
  local rule=$1 name=$1
  shift
  local ranks=("$@")
  ((${#ranks[@]} > 1)) && name=$rule-${#ranks[@]}
  local dir=$work/hung-$name what="hung $name (ranks ${ranks[*]})"
  log=$work/hung-$name.log
  "$mpiexec" -n 3 "$mpigan" train "$work/exp.yaml" --out "$dir" --set checkpoint.every=20 \
    --set algorithm.name="$rule" --set topology.rank_timeout=3 >"$log" 2>&1 &
  job=$!
  for _ in $(seq 600); do [[ -s $dir/checkpoints/latest ]] && break; sleep 0.1; done
  [[ -s $dir/checkpoints/latest ]] || fail "$what: no checkpoint"
  local r pid pids=()
  for r in "${ranks[@]}"; do
    pid=$(rank_pid "$job" "$r")
    [[ -n $pid ]] || fail "$what: rank $r not found among this job's processes"
    pids+=("$pid")
  done
  stopped="${pids[*]}"
  kill -STOP ${pids[@]}
  local before t0=$SECONDS
  before=$(latest_step "$dir")
  for _ in $(seq 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$job" 2>/dev/null && fail "$what: the job still runs 30 s after the ranks were stopped"
  wait "$job"
  local rc=$?
  job=
  kill -9 ${pids[@]} 2>/dev/null
  stopped=
  [[ $rc -ne 0 ]] || fail "$what: exit status 0"
  # FAILED is the record: the rank's own stderr line may be cut off by the launcher's abort.
  for r in "${ranks[@]}"; do
    grep -q "rank $r (child $((r - 1)) of this master) has sent nothing for" "$dir/FAILED" ||
      fail "$what: FAILED does not name rank $r: $(cat "$dir/FAILED" 2>&1)"
  done
  local step
  step=$(latest_step "$dir")
  # The checkpoint is the one taken at the hang (it may coincide with a periodic one: sync makes no
  # progress once a worker stops).
  grep -q "The last complete checkpoint is step $step: .* (taken at the hang" "$dir/FAILED" ||
    fail "$what: the checkpoint at the hang is not 'latest' (latest $step, periodic one before: $before)"
  pass "$what: named after $((SECONDS - t0)) s, exit $rc, checkpoint $step (periodic one before: $before)"
  local own=0  # the checkpoint holds a hung rank's own part (read before --resume clears FAILED)
  grep -q "own part.*, written before it stopped" "$dir/FAILED" && own=1
  "$mpiexec" -n 3 "$mpigan" train "$work/exp.yaml" --resume "$dir" --set algorithm.name="$rule" \
    --set training.max_updates=$((step + 20)) >"$log" 2>&1 || fail "$what: --resume failed"
  # The master writes the hung groups' parts, unless the checkpoint of the hang's version was
  # already complete with their own parts (written for a periodic checkpoint before they stopped).
  if ((!own)); then
    grep -q "written by the master for a hung group" "$log" || fail "$what: the hung group's part was not used"
  fi
  [[ $(latest_step "$dir") -eq $((step + 20)) ]] || fail "$what: resumed run did not reach $((step + 20))"
  pass "$what: --resume continues from step $step"
}
hung_worker downpour 2
hung_worker sync 2
hung_worker downpour 1 2
echo "all fault tests passed"
