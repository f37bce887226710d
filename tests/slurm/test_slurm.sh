#!/usr/bin/env bash
# Integration test against a real single-node Slurm (Debian's slurm-wlm and munge): starts munged,
# slurmctld and slurmd on localhost (slurm/local-slurm.sh), submits slurm/generic.sbatch with a small
# experiment of 1 master + 3 workers through sbatch --wait, and checks the job's exit code and
# output; checks that the Piz Daint and Titan scripts parse and are accepted by sbatch --test-only
# (their GPU constraints replaced, as no GPU exists here); scancels a running job and resumes it
# (a clean stop with a checkpoint on SIGTERM). Exit 77 (skipped) without Slurm or root.
# Usage: test_slurm.sh REPO_ROOT PATH/TO/mpigan
set -uo pipefail
root=${1:?repo root}
mpigan=${2:?mpigan binary}
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  echo "SKIPPED: Slurm is not installed (scripts/setup.sh --with-slurm installs slurm-wlm and munge)"
  exit 77
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "SKIPPED: starting the Slurm daemons needs root"
  exit 77
fi
work=$(mktemp -d)
cleanup() { "$root/slurm/local-slurm.sh" stop "$work/slurm" >/dev/null 2>&1; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; [[ -f $work/job.out ]] && tail -30 "$work/job.out"; exit 1; }

eval "$("$root/slurm/local-slurm.sh" start "$work/slurm")" || fail "could not start a local Slurm"
echo "ok: local Slurm up ($SLURM_CONF)"

cat >"$work/exp.yaml" <<YAML
name: slurm
seed: 4
model: {name: tiny-8}
data: {synthetic: {events: 1024, validation_events: 64}}
training: {batch: 16, epochs: 1}
algorithm: {name: sync}
logging: {level: info, every: 20}
output: {dir: $work/run}
YAML

cd "$work"
MPIGAN=$mpigan timeout 300 sbatch --wait --ntasks=4 --cpus-per-task=1 --output="$work/job.out" \
  "$root/slurm/generic.sbatch" "$work/exp.yaml" >"$work/sbatch.out" 2>&1
rc=$?
[[ $rc -eq 0 ]] || fail "sbatch --wait: status $rc ($(cat "$work/sbatch.out"))"
grep -q "4 ranks: 1 master(s), 3 worker group(s) of 1" "$work/job.out" || fail "the job did not start 1 master + 3 workers"
grep -q "Trained 21 updates from 3 worker group(s)" "$work/job.out" || fail "the job did not finish training"
[[ -s $work/run/checkpoints/latest ]] || fail "no checkpoint in the run directory"
echo "ok: sbatch slurm/generic.sbatch ran 1 master + 3 workers under srun --mpi=pmi2 and finished"

# scancel of a running job (what a user, or a time limit, does): Slurm sends SIGTERM to the job's
# tasks; the run stops after a complete checkpoint, records RUN_DIR/STOPPED, and a second job
# resumes from it to the end.
cat >"$work/long.yaml" <<YAML
name: slurm-cancel
seed: 5
threads: 1
model: {name: tiny-8}
data: {synthetic: {events: 4096, validation_events: 64}}
training: {batch: 8, epochs: 100, max_updates: 20000}
validation: {enabled: false}
checkpoint: {every: 1000, keep: 2}
algorithm: {name: downpour}
logging: {level: info, every: 50}
output: {dir: $work/cancel}
YAML
job=$(MPIGAN=$mpigan sbatch --parsable --ntasks=3 --cpus-per-task=1 --output="$work/cancel.out" \
  "$root/slurm/generic.sbatch" "$work/long.yaml") || fail "sbatch of the long job failed"
for _ in $(seq 600); do
  [[ -f $work/cancel/updates.csv && $(wc -l <"$work/cancel/updates.csv") -gt 200 ]] && break
  sleep 0.1
done
[[ -f $work/cancel/updates.csv ]] || fail "the long job did not start training ($(cat "$work/cancel.out" 2>&1 | tail -5))"
scancel "$job"
for _ in $(seq 600); do squeue -h -j "$job" 2>/dev/null | grep -q . || break; sleep 0.1; done
squeue -h -j "$job" 2>/dev/null | grep -q . && fail "job $job still queued 60 s after scancel"
grep -q "Stopped by SIGTERM at update" "$work/cancel/STOPPED" 2>/dev/null ||
  fail "scancel: no RUN_DIR/STOPPED ($(tail -5 "$work/cancel.out"))"
[[ -s $work/cancel/checkpoints/latest ]] || fail "scancel: no complete checkpoint"
step=$(sed -E 's/.*step-0*([0-9]+)\.h5/\1/' "$work/cancel/checkpoints/latest")
((step > 0 && step % 1000 != 0)) || fail "scancel: the checkpoint ($step) is not the one at the stop"
echo "ok: scancel: the job stopped with a complete checkpoint at update $step and RUN_DIR/STOPPED"
MPIGAN=$mpigan timeout 300 sbatch --wait --ntasks=3 --cpus-per-task=1 --output="$work/resume.out" \
  "$root/slurm/generic.sbatch" "$work/long.yaml" --resume "$work/cancel" --set training.max_updates=$((step + 50)) \
  >/dev/null 2>&1 || fail "the resumed job failed ($(tail -5 "$work/resume.out"))"
grep -q "Trained $((step + 50)) updates" "$work/resume.out" || fail "the resumed job did not reach $((step + 50))"
echo "ok: scancel: a second job resumed from update $step to $((step + 50))"

# The sandbox's script: SIGUSR1 (what --signal=USR1@180 sends before the time limit) stops the
# study after the event in hand with its state saved; the job requeues itself and the second run
# continues from the state to the budget, every update logged once.
cat >"$work/sandbox.yaml" <<YAML
name: slurm-sandbox
seed: 5
threads: 1
model: {name: tiny-8}
data: {synthetic: {events: 4096, validation_events: 64}}
training: {batch: 8, epochs: 100, max_updates: 3000}
validation: {enabled: false}
logging: {level: info, every: 500}
YAML
job=$(MPIGAN=$mpigan sbatch --parsable --cpus-per-task=1 --output="$work/sandbox.out" \
  "$root/slurm/sandbox.sbatch" "$work/study" "$work/sandbox.yaml" --workers 3) || fail "sbatch of the sandbox failed"
for _ in $(seq 600); do
  [[ -f $work/study/updates.csv && $(wc -l <"$work/study/updates.csv") -gt 100 ]] && break
  sleep 0.1
done
[[ -f $work/study/updates.csv ]] || fail "the sandbox did not start ($(tail -5 "$work/sandbox.out" 2>&1))"
scancel --signal=USR1 "$job"
# Slurm holds a requeued job back for about two minutes (Reason=BeginTime; seen: requeued at :09,
# eligible at +121 s, started at the next scheduling pass, +174 s) - on a cluster the delay does
# not matter, here it would make the test slow and flaky: once requeued, and once its first run has
# left the node (node idle: released earlier, the restart raced the old run's teardown and failed
# to launch, seen once), the job is let go at once.
for _ in $(seq 600); do
  info=$(scontrol show job "$job" 2>/dev/null)
  if grep -q "Restarts=1" <<<"$info" && grep -q "JobState=PENDING" <<<"$info" &&
    [[ $(sinfo -h -N -o %T 2>/dev/null) == idle ]]; then
    sleep 1
    scontrol update JobId="$job" StartTime=now || fail "scontrol update StartTime=now of the requeued job $job"
    break
  fi
  sleep 0.1
done
# Until the restarted job has ended, by scontrol's JobState (squeue's empty answer also comes when
# the controller is busy: "Zero Bytes were transmitted" in its log, seen once here).
ended=0
for _ in $(seq 3000); do
  info=$(scontrol show job "$job" 2>/dev/null) || { sleep 0.1; continue; }
  if grep -qE "Restarts=[1-9]" <<<"$info" &&
    grep -qE "JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY)" <<<"$info"; then
    ended=1
    break
  fi
  sleep 0.1
done
jobinfo() { scontrol show job "$job" 2>&1 | grep -E 'JobState|Reason|BeginTime|Restarts|ExitCode' | tr -s ' \n' ' '; }
((ended)) || fail "sandbox job $job not ended 300 s after SIGUSR1: $(jobinfo)
$(tail -n 15 "$work/sandbox.out" 2>&1)"
grep -q "requeueing job $job" "$work/sandbox.out" || fail "the sandbox job did not requeue ($(tail -5 "$work/sandbox.out"))"
grep -q -- "--resume $work/study" "$work/sandbox.out" || fail "the requeued job did not resume"
grep -q "Sandbox: 3000 updates" "$work/sandbox.out" || fail "the resumed study did not reach 3000 updates: $(jobinfo)
$(tail -n 15 "$work/sandbox.out" 2>&1)"
steps=$(cut -d, -f2 "$work/study/updates.csv" | tail -n +2)
[[ $(sort -n <<<"$steps" | uniq | wc -l) -eq 3000 && $(wc -l <<<"$steps") -eq 3000 ]] ||
  fail "updates.csv does not log updates 1..3000 once each"
stopped=$(grep -o "resumed from .* at version [0-9]*" "$work/sandbox.out" | grep -o "[0-9]*$" || true)
echo "ok: slurm/sandbox.sbatch: SIGUSR1 stopped the study at version ${stopped:-?}, the job requeued and finished 3000"

# The machine-specific scripts ask for GPU nodes with 12/16 cores; here their GPU constraint is
# lifted and the cores reduced to what the local node has.
for spec in "daint.sbatch --constraint=" "titan.sbatch --gres=none"; do
  read -r script override <<<"$spec"
  bash -n "$root/slurm/$script" || fail "$script does not parse"
  out=$(sbatch --test-only "$override" --cpus-per-task=2 --nodes=1 "$root/slurm/$script" "$work/exp.yaml" 2>&1) ||
    fail "sbatch --test-only refused $script: $out"
  echo "ok: $script accepted by sbatch --test-only ($out)"
done
