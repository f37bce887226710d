#!/usr/bin/env bash
# Distributed on one GPU, from a bundle of bench/gpu/bundle.sh, in one command that ends by itself
# inside BUDGET seconds (default 170):
#
#   bench/gpu/lent_distributed.sh BUNDLE.tar.xz OUT_DIR [BUDGET]
#
#  1. one process trains 3dgan-25 (examples/3dgan-25-campaign.yaml, TF32, batch 64) on the GPU;
#  2. one master and three workers (downpour, each worker its own process, CUDA context, stream and
#     memory pool on the same GPU; payloads staged through pinned host memory) train the same;
#  3. `mpigan bench master` on this machine's CPU: the master's service time per update of the
#     3dgan-25 payload (3.79 MB), over shared memory and as MPI messages.
# Throughput is taken after the warm-up (cuDNN's algorithm search): samples per second from the first
# metrics row (one process) or update (updates.csv) past a quarter of the run to the last. OUT_DIR gets summary.txt and logs.tar.xz.
# Meant to run before bench/gpu/lent_window.sh in the same window, e.g.
#   bench/gpu/lent_distributed.sh B OUT/dist 170; bench/gpu/lent_window.sh B OUT/window 380 RESUME
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
usage="usage: lent_distributed.sh BUNDLE.tar.xz OUT_DIR [BUDGET_SECONDS]"
bundle=${1:?$usage}
out=${2:?$usage}
budget=${3:-170}
start=$SECONDS
left() { echo $((budget - (SECONDS - start))); }
source "$root/bench/gpu/lent_common.sh"
lent_unpack "$bundle" "$out"
logs="$out/logs"
mkdir -p "$logs"
summary="$out/summary.txt"
{ date -u; nvidia-smi -L; } > "$summary" 2>&1
say() { echo "$*" >> "$summary"; }
work=$(mktemp -d)
cfg="$root/examples/3dgan-25-campaign.yaml"

"$mpigan" simulate --events 6000 --geometry 25x25x25 --energy 10:500 --events-per-file 3000 --seed 11 \
  --threads 12 --out "$work/data" > "$logs/simulate.txt" 2>&1
say "simulate exit $?"
common=(--set "data.train=$work/data/*.h5" --set training.max_samples=0 --set validation.physics.every=0
        --set validation.every=0 --set checkpoint.every=0 --set logging.every=20 --set threads=4)

# samples/s of a run after its warm-up, from metrics.csv's step rows (columns samples, elapsed_s)
rate() {
  awk -F, '$1 == "step" {n++; s[n] = $4; t[n] = $5} END {
    if (n < 2) {print "n/a"; exit}
    a = int(n / 4) + 1; if (a >= n) a = n - 1
    printf "%.1f samples/s (rows %d-%d of %d)", (s[n] - s[a]) / (t[n] - t[a]), a, n, n}' "$1"
}

# the same from a distributed run's updates.csv (time_s, samples of each update)
rate_updates() {
  awk -F, 'NR > 1 {n++; t[n] = $1; s[n] = $7} END {
    if (n < 2) {print "n/a"; exit}
    a = int(n / 4) + 1; if (a >= n) a = n - 1
    for (i = a + 1; i <= n; i++) sum += s[i]
    printf "%.1f samples/s (updates %d-%d of %d)", sum / (t[n] - t[a]), a, n, n}' "$1"
}

# 1. one process
MPIGAN_CUDA_TF32=1 timeout $(($(left) / 3)) "$mpigan" train "$cfg" "${common[@]}" --set training.max_updates=400 \
  --out "$work/single" > "$logs/single.txt" 2>&1
say "one process: exit $? $(rate "$work/single/metrics.csv")"

# 2. one master + three workers sharing the GPU
MPIGAN_CUDA_TF32=1 timeout $(($(left) - 50)) mpiexec.hydra -launcher fork -n 4 "$mpigan" train "$cfg" "${common[@]}" \
  --set algorithm.name=downpour --set training.max_updates=900 --out "$work/dist" > "$logs/dist.txt" 2>&1
say "1 master + 3 workers (downpour): exit $? $(rate_updates "$work/dist/updates.csv")"
[[ -f $work/dist/updates.csv ]] && awk -F, 'NR > 1 {n++; q += $13; w += $14; c += $15} END {
  if (n) printf "  per update, mean: queue at the master %.2f ms, worker wait %.1f ms, compute %.1f ms (%d updates)\n",
    1000 * q / n, 1000 * w / n, 1000 * c / n, n}' "$work/dist/updates.csv" >> "$summary"
nvidia-smi --query-gpu=memory.used,memory.total --format=csv >> "$summary" 2>&1

# 3. the master's service time per update of this payload, on this machine's CPU
for transport in shm mpi; do
  flag=()
  [[ $transport == mpi ]] && flag=(--transport mpi)
  timeout 25 mpiexec.hydra -launcher fork -n 2 "$mpigan" bench master --model 3dgan-25 --rule downpour --updates 2000 \
    "${flag[@]}" > "$logs/bench_master_$transport.txt" 2>&1
  say "bench master ($transport): exit $? $(grep -h 'updates_per_s\|busy' "$logs/bench_master_$transport.txt" | tr '\n' ' ')"
done

cp "$work"/dist/updates.csv "$logs/" 2>/dev/null
tar -cJf "$out/logs.tar.xz" -C "$out" logs env.txt && rm -rf "$logs" "$out/env.txt"
say "elapsed $((SECONDS - start)) s"
rm -rf "$g" "$work"
cat "$summary"
