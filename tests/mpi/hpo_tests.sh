#!/usr/bin/env bash
# Whole-program tests of `mpigan optimize` under mpiexec (MPICH), on tiny-8's synthetic showers:
#   1. 1 + 2 blocks x 2 ranks, K = 2 folds: every trial trains both folds on their own held-out
#      part, the trial's value is the mean of the folds' objectives recomputed here from their
#      metrics.csv, both blocks work, best.yaml is the best trial's experiment;
#   1b. the given points (search.points) run first, the experiment's own values filling them in;
#   2. blocks of 2 ranks without folds: each trial is a distributed job (master + worker); a
#      leftover rank is named and idles;
#   3. a diverging trial is recorded as failed with the trainer's reason, the search goes on;
#   4. the median rule prunes a poor trial while it runs; ASHA's rungs end at the budget / eta;
#   5. a search killed with SIGKILL resumes: the cut-off trial is closed as interrupted and its
#      point runs again, nothing recorded is lost, the trial count is honoured, and its points are
#      those of the same search never stopped;
#   6. bad input: every problem named before any trial; a resume of a changed search is refused.
# Usage: hpo_tests.sh PATH/TO/mpigan PATH/TO/mpiexec
set -uo pipefail
mpigan=${1:?mpigan binary}
mpiexec=${2:?mpiexec}
work=$(mktemp -d)
trap '[[ -n ${KEEP:-} ]] || rm -rf "$work"; [[ -n ${job:-} ]] && kill -9 "$job" 2>/dev/null' EXIT
fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "ok: $*"; }
py=/usr/bin/python3

base() {  # base NAME EVENTS EPOCHS
  cat <<YAML
name: $1
seed: 3
threads: 1
model: {name: tiny-8}
data:
  synthetic: {events: $2, validation_events: 64}
optimizer: {name: rmsprop, lr: 0.001}
training: {batch: 16, epochs: $3}
validation: {batches: 2, every: 8}
checkpoint: {every: 0}
logging: {level: warn, every: 1000}
YAML
}

# 1. Folds: 5 ranks = coordinator + 2 blocks of 2, each block 2 single-rank folds.
{ base folds 512 1; cat <<YAML
search:
  dimensions:
    - {key: optimizer.lr, type: log-real, low: 1.0e-4, high: 1.0e-2}
    - {key: training.label_flip, type: real, low: 0.0, high: 0.2}
    - {key: optimizer.name, type: categorical, choices: [rmsprop, adam]}
  objective: {metric: val_g_loss, at: mean, last: 2}
  trials: 5
  gp: {initial: 3}
YAML
} >"$work/folds.yaml"
"$mpiexec" -n 5 "$mpigan" optimize "$work/folds.yaml" --block-size 2 --folds 2 --out "$work/s-folds" --no-plots \
  >"$work/folds.log" 2>&1 || fail "folds search: exit $? $(tail -20 "$work/folds.log")"
$py - "$work/s-folds" <<'PY' || fail "folds search results"
import json, sys, statistics
d = sys.argv[1]
ends = [json.loads(l) for l in open(f"{d}/trials.jsonl") if '"event":"end"' in l]
assert len(ends) == 5, f"{len(ends)} trials ended, expected 5"
blocks = set()
for t in ends:
    assert t["status"] == "done", t
    blocks.add(t["block"])
    vals = []
    for f in t["folds"]:
        rows = [l.rstrip("\n").split(",") for l in open(f"{f['run_dir']}/metrics.csv")]
        col = rows[0].index("g_loss")
        curve, last = [], -1
        for r in rows[1:]:
            if r[0] == "validation" and int(r[3]) > last:
                curve.append(float(r[col])); last = int(r[3])
        want = statistics.mean(curve[-2:])
        assert abs(f["value"] - want) < 1e-9 * abs(want), (f, want)
        cfg = open(f"{f['run_dir']}/config.yaml").read()
        assert f"fold: {f['fold']}" in cfg and "folds: 2" in cfg, cfg
        vals.append(f["value"])
    assert abs(t["value"] - statistics.mean(vals)) < 1e-9 * abs(t["value"]), t
    assert abs(t["spread"] - statistics.stdev(vals)) < 1e-9 * max(1, t["spread"]), t
assert blocks == {0, 1}, f"blocks used: {blocks}"
best = min(ends, key=lambda t: t["value"])
text = open(f"{d}/best.yaml").read()
assert f"The best trial ({best['trial']})" in text, text[:200]
assert "search:" not in text
lr = best["overrides"][0].split("=")[1]
assert f"lr: {lr}" in text, (lr, text)
PY
pass "1 + 2 blocks x 2 ranks, 2 folds: 5 trials, fold values recomputed, both blocks used, best.yaml"

# 1b. Given points first: the experiment as written, then one with a learning rate of its own (its
# other dimension at the experiment's value), then the algorithm's.
{ base points 256 1; cat <<YAML
search:
  dimensions:
    - {key: optimizer.lr, type: log-real, low: 1.0e-4, high: 1.0e-2}
    - {key: optimizer.name, type: categorical, choices: [rmsprop, adam]}
  objective: {metric: val_g_loss}
  trials: 3
  gp: {initial: 2}
  points: [{}, {optimizer.lr: 5.0e-4}]
YAML
} >"$work/points.yaml"
"$mpiexec" -n 2 "$mpigan" optimize "$work/points.yaml" --block-size 1 --out "$work/s-points" --no-plots \
  >"$work/points.log" 2>&1 || fail "points search: exit $? $(tail -20 "$work/points.log")"
$py - "$work/s-points" <<'PY' || fail "points search results"
import json, sys
ends = {}
for l in open(f"{sys.argv[1]}/trials.jsonl"):
    r = json.loads(l)
    if r["event"] == "end": ends[r["trial"]] = r
assert sorted(ends) == [0, 1, 2] and all(t["status"] == "done" for t in ends.values()), ends
assert ends[0]["overrides"] == ["optimizer.lr=0.001", "optimizer.name=rmsprop"], ends[0]["overrides"]
assert ends[1]["overrides"] == ["optimizer.lr=0.0005", "optimizer.name=rmsprop"], ends[1]["overrides"]
assert ends[2]["overrides"] not in (ends[0]["overrides"], ends[1]["overrides"]), ends[2]["overrides"]
PY
pass "given points first: the experiment as written, then a point of its own, then the algorithm's"

# 2. Blocks of 2 without folds: every trial is a master + worker job. 6 ranks: rank 5 is left
# over, named and idle.
sed 's/^  trials: 5/  trials: 3/; s/^  gp: {initial: 3}/  algorithm: random/' "$work/folds.yaml" >"$work/dist.yaml"
"$mpiexec" -n 6 "$mpigan" optimize "$work/dist.yaml" --block-size 2 --out "$work/s-dist" --no-plots \
  >"$work/dist.log" 2>&1 || fail "distributed trials: exit $? $(tail -20 "$work/dist.log")"
n=$(grep -c '"status":"done"' "$work/s-dist/trials.jsonl")
[[ $n -eq 3 ]] || fail "distributed trials: $n done, expected 3"
for t in 0 1 2; do
  [[ -s $work/s-dist/trial-000$t/updates.csv ]] || fail "trial $t did not run as a distributed job (no updates.csv)"
done
grep -q "rank 5 is left over" "$work/dist.log" || fail "the leftover rank is not named: $(grep -i left "$work/dist.log")"
pass "blocks of 2 ranks: 3 trials, each a master + worker job; the leftover rank named"

# 3. A trial that diverges is recorded as failed; the search goes on and ends cleanly.
{ base fail 512 1; cat <<YAML
search:
  dimensions:
    - {key: optimizer.lr, type: categorical, choices: [0.001, 900]}
  objective: {metric: val_g_loss}
  algorithm: random
  trials: 4
YAML
} >"$work/fail.yaml"
timeout 300 "$mpiexec" -n 2 "$mpigan" optimize "$work/fail.yaml" --block-size 1 --out "$work/s-fail" --no-plots \
  >"$work/fail.log" 2>&1 || fail "failing trials: exit $? $(tail -20 "$work/fail.log")"
$py - "$work/s-fail" <<'PY' || fail "failed trials not recorded as such"
import json, sys
ends = [json.loads(l) for l in open(f"{sys.argv[1]}/trials.jsonl") if '"event":"end"' in l]
assert len(ends) == 4
bad = [t for t in ends if t["overrides"] == ["optimizer.lr=900"]]
good = [t for t in ends if t["overrides"] == ["optimizer.lr=0.001"]]
assert bad and good, [t["overrides"] for t in ends]
for t in bad:
    assert t["status"] == "failed" and t["value"] is None and "diverged" in t["message"], t
for t in good:
    assert t["status"] == "done" and t["value"] is not None, t
PY
grep -q "failed" "$work/fail.log" || fail "the log does not say a trial failed"
pass "diverging trials recorded as failed with the trainer's reason; the others done"

# 4. The median rule stops a poor trial (lr 0.2) while it runs. With this seed the trials run
# 0.2, 0.0005, 0.0005, 0.0005, 0.2 one after another on one block. Each trial has 32 validations
# over ~4 s on an idle machine; the coordinator reads the curves every 0.25 s.
{ base prune 512 8; cat <<YAML
search:
  dimensions:
    - {key: optimizer.lr, type: categorical, choices: [0.0005, 0.2]}
  objective: {metric: val_g_loss}
  algorithm: random
  seed: 4
  trials: 5
  early_stopping: {rule: median, min_trials: 2}
YAML
} >"$work/prune.yaml"
"$mpiexec" -n 2 "$mpigan" optimize "$work/prune.yaml" --block-size 1 --out "$work/s-prune" --no-plots \
  >"$work/prune.log" 2>&1 || fail "pruning search: exit $? $(tail -20 "$work/prune.log")"
$py - "$work/s-prune" <<'PY' || fail "pruning"
import json, sys
d = sys.argv[1]
ends = {json.loads(l)["trial"]: json.loads(l) for l in open(f"{d}/trials.jsonl") if '"event":"end"' in l}
order = [ends[i]["overrides"][0] for i in range(5)]
assert order == ["optimizer.lr=0.2"] + ["optimizer.lr=0.0005"] * 3 + ["optimizer.lr=0.2"], order
assert all(ends[i]["status"] == "done" for i in range(4)), [ends[i]["status"] for i in range(5)]
t = ends[4]
assert t["status"] == "pruned" and "median" in t["message"], t
full = sum(1 for l in open(f"{d}/trial-0003/metrics.csv") if l.startswith("validation"))
cut = sum(1 for l in open(f"{d}/trial-0004/metrics.csv") if l.startswith("validation"))
assert cut < full, (cut, full)
PY
pass "median rule: the poor trial pruned while it ran"

# 4b. ASHA's budget is the trials' training.max_samples: rungs up to it / eta (512 of 2 048 at eta
# 3, not 1 536), recorded in search.json and the log; a budget leaving no rung is refused at once.
asha_search() {  # asha_search NAME MAX_SAMPLES
  { base "$1" 512 8; cat <<YAML
search:
  dimensions:
    - {key: optimizer.lr, type: log-real, low: 1.0e-4, high: 1.0e-3}
  objective: {metric: val_g_loss}
  algorithm: random
  trials: 1
  early_stopping: {rule: asha, eta: 3, min_samples: 512}
YAML
  } >"$work/$1.yaml"
  "$mpiexec" -n 2 "$mpigan" optimize "$work/$1.yaml" --block-size 1 --out "$work/s-$1" --no-plots \
    --set training.max_samples="$2" --set logging.level=info >"$work/$1.log" 2>&1
}
asha_search asha 2048 || fail "asha search: exit $? $(tail -20 "$work/asha.log")"
grep -q "early stopping by asha: eta 3, rungs at 512 steps" "$work/asha.log" ||
  fail "the log does not name asha's one rung: $(grep -i asha "$work/asha.log")"
$py -c 'import json,sys; r=json.load(open(sys.argv[1]))["rungs"]; assert r == [512], r' "$work/s-asha/search.json" ||
  fail "search.json's rungs"
if asha_search asha-short 1500; then fail "a budget of 1 500 samples (below 512 * 3) was accepted"; fi
grep -q "asha's budget, training.max_samples 1500, leaves no rung: it must be at least min_samples \* eta = 512 \* 3" \
  "$work/asha-short.log" || fail "the short budget's message: $(tail -5 "$work/asha-short.log")"
# a search started with other rungs (an older rule) is not resumed under these
$py -c 'import json,sys; p=sys.argv[1]; h=json.load(open(p)); h["rungs"]=[512,1536]; json.dump(h,open(p,"w"))' \
  "$work/s-asha/search.json"
if "$mpiexec" -n 2 "$mpigan" optimize "$work/asha.yaml" --block-size 1 --out "$work/s-asha" --no-plots \
  --set training.max_samples=2048 --set logging.level=info --resume >"$work/asha-resume.log" 2>&1; then
  fail "a search started with other rungs was resumed"
fi
grep -q "ASHA's rungs were at \[512, 1536\] samples when the search started and are at \[512\]" \
  "$work/asha-resume.log" || fail "the rungs' refusal: $(tail -5 "$work/asha-resume.log")"
pass "asha: rungs up to the trials' budget / eta, a budget without a rung refused, other rungs not resumed"

# 5. SIGKILL the whole search in its third trial; --resume closes it as interrupted and runs its point again.
{ base resume 512 4; cat <<YAML
search:
  dimensions:
    - {key: optimizer.lr, type: log-real, low: 1.0e-4, high: 1.0e-2}
  objective: {metric: val_g_loss}
  algorithm: evolution
  evolution: {population: 2}
  trials: 4
YAML
} >"$work/resume.yaml"
dir=$work/s-resume
"$mpiexec" -n 2 "$mpigan" optimize "$work/resume.yaml" --block-size 1 --out "$dir" --no-plots >"$work/resume1.log" 2>&1 &
job=$!
# The block's rank (rank 1) runs every trial: found while the first trial runs, so that the kill
# below follows the third trial's start at once (a trial takes about a second here; looking the
# process up under load took long enough for the third trial to finish first).
source "$(dirname "${BASH_SOURCE[0]}")/job_processes.sh"
victim=
for _ in $(seq 1 1200); do
  [[ -s $dir/trials.jsonl ]] && victim=$(rank_pid "$job" 1 optimize)
  [[ -n $victim ]] && break
  kill -0 "$job" 2>/dev/null || fail "the search ended before its first trial: $(tail -20 "$work/resume1.log")"
  sleep 0.1
done
[[ -n $victim ]] || fail "could not find rank 1's process"
while [[ $(grep -c '"event":"start"' "$dir/trials.jsonl" 2>/dev/null) -lt 3 ]]; do
  kill -0 "$job" 2>/dev/null || fail "the search ended before its third trial: $(tail -20 "$work/resume1.log")"
  sleep 0.05
done
# SIGKILL the block's rank as soon as the third trial has started: the search's watchdog names it,
# in SEARCH/FAILED too, and the search ends at once.
kill -9 "$victim"
for _ in $(seq 1 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
kill -0 "$job" 2>/dev/null && fail "the search still runs 30 s after rank 1 was killed"
wait "$job" 2>/dev/null 3>&-; rc=$?; job=
[[ $rc -ne 0 ]] || fail "the search exited with status 0 after rank 1 was killed"
grep -q "rank 1 block 0 (pid $victim on .*) died" "$work/resume1.log" ||
  fail "no message naming rank 1 (pid $victim): $(tail -20 "$work/resume1.log")"
grep -q "rank 1 block 0 (pid $victim" "$dir/FAILED" || fail "SEARCH/FAILED does not name rank 1: $(cat "$dir/FAILED" 2>&1)"
pass "SIGKILL of a block's rank: the search ended with status $rc, its watchdog named the rank"
sleep 1
before=$(grep -c '"event":"end"' "$dir/trials.jsonl")
[[ $before -eq 2 ]] || fail "expected 2 trials ended before the kill, found $before"
"$mpiexec" -n 2 "$mpigan" optimize "$work/resume.yaml" --block-size 1 --out "$dir" --resume --no-plots \
  >"$work/resume2.log" 2>&1 || fail "resume: exit $? $(tail -20 "$work/resume2.log")"
# The same search never stopped: the resumed one draws its points (trial 4, the one after the re-run,
# is the uninterrupted search's trial 3).
"$mpiexec" -n 2 "$mpigan" optimize "$work/resume.yaml" --block-size 1 --out "$work/s-straight" --no-plots \
  >"$work/straight.log" 2>&1 || fail "the uninterrupted search: exit $? $(tail -20 "$work/straight.log")"
$py - "$dir" "$work/s-straight" <<'PY' || fail "resumed search"
import json, sys
d = sys.argv[1]
def trials(d):
    last = {}
    for l in open(f"{d}/trials.jsonl"):
        r = json.loads(l); last[r["trial"]] = r
    return last
last, straight = trials(d), trials(sys.argv[2])
assert [last[i]["x"] for i in (0, 1, 2, 4)] == [straight[i]["x"] for i in (0, 1, 2, 3)], (last, straight)
assert last[2]["status"] == "interrupted", last[2]
rerun = [t for t in last.values() if t["rerun_of"] == 2]
assert len(rerun) == 1 and rerun[0]["x"] == last[2]["x"] and rerun[0]["status"] == "done", rerun
counted = [t for t in last.values() if t["status"] != "interrupted"]
assert len(counted) == 4 and all(t["status"] == "done" for t in counted), [t["status"] for t in last.values()]
assert sorted(last) == list(range(5)), sorted(last)
# The re-run is the same configuration as the interrupted trial (its hash), the others differ.
assert rerun[0]["config_hash"] == last[2]["config_hash"] != "", rerun
assert len({t["config_hash"] for t in counted}) == 4
PY
grep -q "interrupted" "$work/resume2.log" || fail "the resumed search does not say a trial was interrupted"
pass "SIGKILL in trial 2, --resume: trial 2 interrupted and run again, 4 trials counted, nothing lost, the points of a search never stopped"

# 6. Bad input, all problems at once, before anything runs.
out=$("$mpiexec" -n 4 "$mpigan" optimize "$work/folds.yaml" --block-size 2 --folds 2 --out "$work/s-folds" 2>&1)
rc=$?
[[ $rc -ne 0 ]] || fail "a search into a used directory exited 0"
grep -q "already holds a search" <<<"$out" || fail "used search directory not named: $out"
sed 's/optimizer.name, type: categorical/optimizer.nme, type: categorical/; s/high: 0.2}/hgh: 0.2}/' \
  "$work/folds.yaml" >"$work/bad.yaml"
out=$("$mpiexec" -n 4 "$mpigan" optimize "$work/bad.yaml" --block-size 3 --folds 2 --out "$work/s-bad" \
  --set search.objective.metric=fpd_hlf 2>&1)
rc=$?
[[ $rc -ne 0 ]] || fail "a bad search exited 0"
grep -q "bad.yaml:16:.*optimizer.nme" <<<"$out" || fail "unknown key path not named with its line: $out"
grep -q "hgh" <<<"$out" || fail "the typo 'hgh' not named: $out"
grep -q "block-size 3 must be a multiple of the folds (2)" <<<"$out" || fail "block/folds not named: $out"
grep -q "metric fpd_hlf is scored by validation.physics, which the experiment does not enable" <<<"$out" ||
  fail "a physics objective without validation.physics not named: $out"
[[ ! -e $work/s-bad ]] || fail "a search directory was created for a bad search"
out=$("$mpiexec" -n 2 "$mpigan" optimize "$work/resume.yaml" --block-size 1 --out "$dir" --resume --set seed=9 2>&1)
[[ $? -ne 0 ]] || fail "a resume of a changed search exited 0"
grep -q "changed since the search started" <<<"$out" || fail "changed search not named: $out"
pass "bad searches: every problem named with its line, nothing created; a changed search is not resumed"
