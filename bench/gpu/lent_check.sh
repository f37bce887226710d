#!/usr/bin/env bash
# The GPU check for a machine that has the CUDA stack but cannot build mpigan (no oneDNN, HDF5,
# MPICH ... and no network): runs a bundle made by bench/gpu/bundle.sh elsewhere.
#
#   bench/gpu/lent_check.sh BUNDLE.tar.xz OUT_DIR [TRAIN_SECONDS]
#
#  1. bench/gpu/run_all.sh --skip-build --no-bench: every op of the cuda backend against the
#     reference (fp32, TF32, heuristic + deterministic convolutions) and the whole core suite;
#  2. the engine's training step on cuda side by side with the PyTorch peer (bench/compare_step.sh),
#     3dgan-25 at batch 64 and 128;
#  3. a training of 3dgan-25 on the GPU (one process, backend cuda, batch 64) on GFlash showers
#     simulated there, stopped by SIGTERM after TRAIN_SECONDS (default 120; it checkpoints), then
#     `mpigan validate` of its generator against the held-out showers: the physics figure of merit;
#  4. one master and two workers as MPI ranks on the GPU (downpour, 60 updates).
# Everything lands in OUT_DIR; summary.txt says what passed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bundle=${1:?usage: lent_check.sh BUNDLE.tar.xz OUT_DIR [TRAIN_SECONDS]}
out=${2:?usage: lent_check.sh BUNDLE.tar.xz OUT_DIR [TRAIN_SECONDS]}
train_s=${3:-120}
source "$root/bench/gpu/lent_common.sh"
lent_unpack "$bundle" "$out"
export PYTHON=${PYTHON:-python3} OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
summary="$out/summary.txt"
{ date -u; nvidia-smi -L; uname -r; ldd --version | head -1; } > "$summary" 2>&1

timeout 300 "$root/bench/gpu/run_all.sh" --skip-build --build "$g/build" --out "$out/tests" --no-bench \
  > "$out/run_all.txt" 2>&1
echo "run_all.sh exit $?" >> "$summary"
cat "$out/tests/summary.txt" >> "$summary" 2>/dev/null

for batch in 64 128; do
  LOG_DIR="$out/bench_b$batch" timeout 120 "$root/bench/compare_step.sh" --device cuda --build "$g/build" \
    --model 3dgan-25 --batch "$batch" --steps 30 --threads 8 > "$out/bench_b$batch.txt" 2>&1
  echo "compare_step batch $batch exit $?" >> "$summary"
  tail -n 6 "$out/bench_b$batch.txt" >> "$summary"
done

run="$out/train"
timeout 120 "$mpigan" simulate --events 12000 --geometry 25x25x25 --energy 10:500 --out "$out/sim" \
  --events-per-file 2000 --seed 7 --threads 16 > "$out/simulate.txt" 2>&1
echo "simulate exit $?" >> "$summary"
timeout -s TERM "$train_s" "$mpigan" train "$root/examples/3dgan-25-quick.yaml" --set backend=cuda \
  --set "data.train=$out/sim/*.h5" --set data.validation_fraction=0.17 --set training.batch=64 \
  --set training.epochs=1000 --set training.max_updates=0 --set threads=8 --set validation.every=200 \
  --set validation.physics.every=200 --set checkpoint.every=500 --set "output.dir=$run" > "$out/train.txt" 2>&1
echo "train exit $? (124/75: stopped by the timeout's SIGTERM, as planned)" >> "$summary"
tail -n 4 "$run/metrics.csv" | cut -d, -f1-12 >> "$summary" 2>/dev/null
held_out=$(ls "$out"/sim/*.h5 | tail -n 1)
timeout 120 "$mpigan" validate "$run" --reference "$held_out" --out "$run/validation" > "$out/validate.txt" 2>&1
echo "validate exit $?" >> "$summary"
grep -iE "figure of merit|fpd|sampling fraction|verdict" "$out/validate.txt" | head -12 >> "$summary"
# Master and two workers as MPI ranks on the one GPU (downpour, 60 updates): the pinned staging of
# payloads between device and MPI.
timeout 90 mpiexec.hydra -launcher fork -n 3 "$mpigan" train "$root/examples/3dgan-25-quick.yaml" --set backend=cuda \
  --set "data.train=$out/sim/*.h5" --set data.validation_fraction=0.17 --set training.batch=64 \
  --set algorithm.name=downpour --set training.max_updates=60 --set threads=4 \
  --set "output.dir=$out/train-mpi" > "$out/train_mpi.txt" 2>&1
echo "mpiexec -n 3 train exit $?" >> "$summary"
tail -n 2 "$out/train-mpi/metrics.csv" | cut -d, -f1-12 >> "$summary" 2>/dev/null
rm -rf "$out/sim" "$g"
cat "$summary"
