#!/usr/bin/env bash
# Nodes as containers: one MPICH job across three containers of the image of ./Containerfile, each
# a "node" with its own hostname and address on a network this test makes (internal: no route out,
# no traffic to any address the test did not create). Hydra starts the ranks over ssh between the
# containers with a key made here. The job is a tree: the top master on node0 and one sub-master per
# node, each serving the two workers of its own node, so payloads go between nodes as MPI messages
# and within a node through shared memory. The test then kills one worker rank on node2, checks that
# the watchdog (rank 0's monitor, reached over the network) names that rank and its node and ends
# the job with the last complete checkpoint intact, and resumes the job from it to the end.
#
#   tests/container/test_nodes.sh           (root, podman; builds the image first: ~15 min)
#
# Environment: KEEP=1 keeps the work folder, containers and network; MPIGAN_IMAGE as for
# scripts/container.sh. Exit 77 (skipped) without root or where podman cannot be installed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[[ $(id -u) -eq 0 ]] || { echo "SKIPPED: needs root (podman networks and containers)"; exit 77; }
if ! command -v podman >/dev/null || ! command -v runc >/dev/null || ! command -v debootstrap >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends podman runc debootstrap \
    containernetworking-plugins >/dev/null 2>&1 || { echo "SKIPPED: podman could not be installed"; exit 77; }
fi
export CONTAINERS_CONF=$root/container/containers.conf
image=${MPIGAN_IMAGE:-localhost/mpigan}:latest
tag=mpigan-nodes-$$
work=$(mktemp -d /tmp/$tag.XXXX)
nodes=(node0 node1 node2)
cleanup() {
  [[ -n ${KEEP:-} ]] && { echo "kept $work, containers $tag-*, network $tag"; return; }
  for n in "${nodes[@]}"; do podman rm -f -t 0 "$tag-$n" >/dev/null 2>&1; done
  podman network rm -f "$tag" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  [[ -f ${log:-} ]] && tail -n 30 "$log"
  exit 1
}
pass() { echo "ok: $*"; }
on() { podman exec "$tag-$1" "${@:2}"; }

echo "== building the image (scripts/container.sh build; cached layers are reused)"
"$root/scripts/container.sh" build >"$work/build.log" 2>&1 || { log=$work/build.log; fail "the image did not build"; }
pass "image $image built"

# A private network: a /24 in 10.0.0.0/8 that no other network here uses.
for _ in $(seq 20); do
  subnet=10.$((RANDOM % 200 + 30)).$((RANDOM % 250)).0/24
  podman network ls --format '{{.Subnets}}' 2>/dev/null | grep -qF "${subnet%/24}" || break
done
podman network create --internal --subnet "$subnet" "$tag" >/dev/null || fail "could not create network $subnet"
prefix=${subnet%.0/24}
hosts=()
for i in "${!nodes[@]}"; do hosts+=(--add-host "${nodes[$i]}:$prefix.$((10 + i))"); done

# The job's ssh key (made in the image, so the host needs no ssh) and the shared run folder /w.
mkdir -p "$work/ssh"
podman run --rm --network none -v "$work/ssh:/k" "$image" ssh-keygen -q -t ed25519 -N '' -C mpigan-test -f /k/id_ed25519 ||
  fail "ssh-keygen in the image failed"
cp "$work/ssh/id_ed25519.pub" "$work/ssh/authorized_keys"
chmod 700 "$work/ssh" && chmod 600 "$work/ssh/"*
for i in "${!nodes[@]}"; do
  podman run -d --name "$tag-${nodes[$i]}" --hostname "${nodes[$i]}" --network "$tag" --ip "$prefix.$((10 + i))" \
    "${hosts[@]}" --shm-size 512m -v "$work:/w" -v "$work/ssh:/root/.ssh" "$image" mpigan-sshd >/dev/null ||
    fail "could not start ${nodes[$i]}"
done
for n in "${nodes[@]}"; do
  for _ in $(seq 50); do on node0 ssh "$n" true 2>/dev/null && break; sleep 0.2; done
  on node0 ssh "$n" true || fail "node0 cannot ssh to $n"
done
[[ $(on node1 hostname) == node1 && $(on node1 ssh node2 hostname) == node2 ]] || fail "hostnames"
pass "3 nodes on $subnet (internal), ssh between them with the job's key"

# Real showers (HDF5, the 5x5x5 rung's calorimeter) on the shared folder.
on node0 mpigan simulate --events 3072 --geometry 5x5x5 --energy 10:500 --events-per-file 1024 --seed 4 \
  --out /w/data >"$work/simulate.log" 2>&1 || { log=$work/simulate.log; fail "simulate"; }
cat >"$work/exp.yaml" <<'YAML'
name: nodes
seed: 5
threads: 1
model: {name: 3dgan-5}
data: {train: /w/data/*.h5}
training: {batch: 16, epochs: 1000, max_updates: 100000}
validation: {enabled: false}
checkpoint: {every: 40, keep: 3}
logging: {level: info, every: 20}
algorithm: {name: downpour}
topology: {masters: 4, rank_timeout: 30}
YAML

# Ranks: 0 the top master, 1-3 sub-masters, 4-9 workers; worker group g (rank 4+g) is served by
# sub-master 1 + g mod 3. Hydra places them round-robin over the nodes (-ppn 1: rank r on node
# r mod 3), which puts every sub-master on the node of its two workers: with N nodes,
# topology.masters = N + 1 does that for any number of workers. (Naming a host twice in -hosts to
# place ranks by hand would start two Hydra proxies there, and MPICH would take them for two nodes.)
run_job() { # run_job LOG ARGS...: the job, launched from node0, in the background ($job)
  log=$1
  shift
  podman exec "$tag-node0" mpiexec.mpich -launcher ssh -hosts node0,node1,node2 -ppn 1 -n 10 \
    mpigan train /w/exp.yaml "$@" >"$log" 2>&1 &
  job=$!
}
run_job "$work/run.log" --out /w/run
for _ in $(seq 900); do
  [[ -f $work/run/checkpoints/latest ]] && [[ $(sed -E 's/.*step-0*([0-9]+)\.h5/\1/' "$work/run/checkpoints/latest") -ge 80 ]] && break
  kill -0 "$job" 2>/dev/null || fail "the job ended before its second checkpoint"
  sleep 0.2
done
[[ -f $work/run/checkpoints/latest ]] || fail "no checkpoint after 3 min"
grep -q "rank 0 master] .* 1 of 3 children exchange payloads through shared memory" "$log" ||
  fail "the top master should share memory with sub-master 3 only: $(grep 'shared memory' "$log")"
[[ $(grep -c "2 of 2 children exchange payloads through shared memory" "$log") -eq 3 ]] ||
  fail "each sub-master should share memory with its 2 workers: $(grep 'shared memory' "$log")"
for n in "${nodes[@]}"; do
  [[ $(on "$n" pgrep -c -f "mpigan train") -ge 3 ]] || fail "$n runs fewer than 3 ranks"
done
grep -q "rank 5 worker 1 (pid [0-9]* on node2)" "$log" || fail "rank 5 is not on node2: $(grep 'rank 5 worker' "$log")"
pass "a tree across 3 nodes trains: a sub-master and its 2 workers on each node, the top master on node0"

# Kill worker rank 5 (node2) outright, found by the rank Hydra gave it (PMI_RANK).
victim=""
for pid in $(on node2 pgrep -f "mpigan train"); do
  on node2 cat "/proc/$pid/environ" 2>/dev/null | tr '\0' '\n' | grep -qx "PMI_RANK=5" && victim=$pid
done
[[ -n $victim ]] || fail "rank 5 not found on node2"
before=$(cat "$work/run/checkpoints/latest")
on node2 kill -9 "$victim"
for _ in $(seq 600); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
kill -0 "$job" 2>/dev/null && fail "the job still runs 60 s after rank 5 was killed"
wait "$job"
rc=$?
job=
[[ $rc -ne 0 ]] || fail "the job ended with status 0 after a rank was killed"
[[ -f $work/run/FAILED ]] || fail "no FAILED after rank 5 was killed"
grep -q "rank 5" "$work/run/FAILED" || fail "FAILED does not name rank 5: $(cat "$work/run/FAILED")"
grep -q "node2" "$work/run/FAILED" || fail "FAILED does not name node2: $(cat "$work/run/FAILED")"
latest=$(cat "$work/run/checkpoints/latest")
step=$(sed -E 's/.*step-0*([0-9]+)\.h5/\1/' <<<"$latest")
[[ -f $work/run/checkpoints/$latest ]] || fail "latest names $latest, which is missing"
for w in 0 1 2 3 4 5; do
  [[ -f $work/run/checkpoints/step-$(printf %08d "$step").worker-$w.h5 ]] || fail "worker $w's part of $latest missing"
done
pass "rank 5 killed on node2: exit $rc, FAILED says: $(head -c 300 "$work/run/FAILED" | tr '\n' ' ')"
pass "the last complete checkpoint ($latest; $before when killed) has all 6 workers' parts"

run_job "$work/resume.log" --resume /w/run --set training.max_updates=$((step + 60))
# The job's own work ends with rank 0's summary; then every rank calls MPI_Finalize. Over UCX's
# TCP transport (Debian 12's MPICH 4.0.2 with UCX 1.13, the only way between these containers)
# MPI_Finalize can hang after large messages: a 30-line MPI program that exchanges 600 KB messages
# hangs there too (docs/deployment.md). The test waits 60 s for the job to exit, then ends it.
for _ in $(seq 1800); do
  grep -q "^Results in /w/run/" "$log" && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.2
done
grep -q "resumed from .*step-0*$step.h5 at version $step" "$log" || fail "did not resume at $step"
grep -q "Trained $((step + 60)) updates" "$log" || fail "the resumed job did not reach $((step + 60)) updates"
for _ in $(seq 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.2; done
if kill -0 "$job" 2>/dev/null; then
  echo "WARN: the resumed job finished its work but did not exit within 60 s (MPI_Finalize over UCX TCP); ending it"
  for n in "${nodes[@]}"; do on "$n" pkill -9 -f "mpigan train|mpiexec|hydra_pmi" 2>/dev/null; done
  wait "$job"
else
  wait "$job"
  rc=$?
  [[ $rc -eq 0 ]] || fail "the resumed job failed (status $rc)"
fi
job=
[[ -f $work/run/FAILED.previous && ! -f $work/run/FAILED ]] || fail "FAILED not kept as FAILED.previous"
[[ $(cat "$work/run/checkpoints/latest") == "step-$(printf %08d $((step + 60))).h5" ]] ||
  fail "the resumed job's last checkpoint is $(cat "$work/run/checkpoints/latest")"
pass "resumed across the 3 nodes from update $step to $((step + 60)), its final checkpoint complete"
