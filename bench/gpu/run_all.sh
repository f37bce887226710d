#!/usr/bin/env bash
# Everything a person with an NVIDIA GPU runs for the CUDA backend, in one command:
#
#   bench/gpu/run_all.sh [--build DIR] [--out DIR] [--arch ARCHS] [--jobs N] [--skip-build]
#                        [--sanitize] [--no-bench]
#
#  1. records the machine (nvidia-smi, driver, toolkit, cuDNN/NCCL versions, git commit);
#  2. configures and builds with CUDA in build-gpu/ (-DMPIGAN_CUDA=ON, Release, architectures
#     "native" = the GPUs of this machine; --arch "80;90" to override);
#  3. runs the GPU tests of mpigan_test_core (doctest suite "cuda", the backend's own tests, and
#     the cuda instances "...<cuda>" of test_ops.cpp's backend-templated cases, i.e. every op
#     against the reference backend) in strict fp32, the convolutions and inner products again
#     with MPIGAN_CUDA_TF32=1, the convolutions again with cuDNN's heuristics and deterministic
#     algorithms only and with every weight gradient as a forward convolution (MPIGAN_CUDA_WGRAD=forward,
#     fp32 and TF32), the whole core suite, then `ctest -L gpu` if such tests exist; with
#     --sanitize also under compute-sanitizer memcheck (slow);
#  4. runs the benchmarks (hooks below: `mpigan bench step` on cuda and its PyTorch peer);
#  5. writes all logs and a summary.txt to the results directory (default runs/gpu-HOST-DATE/,
#     which git ignores), and prints the summary.
# Exit status: 0 when every test passed, 1 when a test failed or no GPU was seen, 2 on usage errors,
# 3 when the build failed. Benchmarks that cannot run yet are reported as "not available", not errors.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

build="build-gpu"
out=""
arch=native
jobs=$(nproc)
skip_build=0
sanitize=0
bench=1

usage() { sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
die() { echo "run_all.sh: $*" >&2; exit 2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --arch) arch=${2:?}; shift 2 ;;
    --jobs) jobs=${2:?}; shift 2 ;;
    --skip-build) skip_build=1; shift ;;
    --sanitize) sanitize=1; shift ;;
    --no-bench) bench=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ $jobs =~ ^[1-9][0-9]*$ ]] || die "--jobs must be a positive integer"
[[ $build = /* ]] || build="$root/$build"
[[ -n $out ]] || out="$root/runs/gpu-$(hostname -s)-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out" || die "cannot create $out"
summary="$out/summary.txt"
: > "$summary"
failed=0

note() { echo "$*" | tee -a "$summary"; }
# step NAME LOGFILE CMD...: runs CMD with its output in LOGFILE, records PASS/FAIL.
step() {
  local name=$1 log=$2; shift 2
  echo "== $name (log: ${log#"$out"/})"
  if "$@" > "$log" 2>&1; then
    note "PASS  $name"
  else
    note "FAIL  $name (exit $?, see ${log#"$out"/})"
    failed=1
  fi
}

# ------------------------------------------------------------------------------------------------
# 1. The machine
{
  echo "date: $(date -u +%FT%TZ)  host: $(hostname)  nproc: $(nproc)"
  echo "git: $(git -C "$root" rev-parse HEAD 2>/dev/null) $(git -C "$root" status --short 2>/dev/null | wc -l) changed files"
  echo "--- nvidia-smi"; nvidia-smi 2>&1 || echo "nvidia-smi not available"
  echo "--- nvidia-smi -q (clocks, ECC, persistence)"; nvidia-smi -q 2>&1 | head -200 || true
  echo "--- nvcc"; (command -v nvcc && nvcc --version) 2>&1 || /usr/local/cuda/bin/nvcc --version 2>&1 || echo "nvcc not found"
  echo "--- cmake"; cmake --version 2>&1 | head -1
  echo "--- environment"; env | grep -E '^(MPIGAN_|CUDA_|NVIDIA_|NCCL_|SLURM_LOCALID|OMP_)' | sort || true
} > "$out/machine.txt" 2>&1
note "results: $out"
gpus=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | paste -sd';')
note "gpu: ${gpus:-none visible to nvidia-smi}"

# ------------------------------------------------------------------------------------------------
# 2. Build
if [[ $skip_build -eq 0 ]]; then
  step "configure ($build, CUDA architectures $arch)" "$out/configure.log" \
    cmake -S "$root" -B "$build" -G Ninja -DMPIGAN_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
      "-DCMAKE_CUDA_ARCHITECTURES=$arch"
  step "build mpigan_test_core" "$out/build_tests.log" cmake --build "$build" --target mpigan_test_core -j "$jobs"
  if [[ $failed -ne 0 ]]; then
    note "build failed: nothing to test"
    exit 3
  fi
  # The application is needed by the benchmarks only; its failure does not stop the tests.
  if ! cmake --build "$build" --target mpigan -j "$jobs" > "$out/build_mpigan.log" 2>&1; then
    note "NOTE  mpigan (apps) did not build, benchmarks will be skipped (see build_mpigan.log)"
  fi
fi
tests="$build/tests/mpigan_test_core"
[[ -x $tests ]] || { note "FAIL  $tests does not exist (build first, or drop --skip-build)"; exit 3; }

# ------------------------------------------------------------------------------------------------
# 3. Tests. A "SKIPPED: no GPU" in a log means the binary saw no device: that is a failure here.
gpu_suite() {  # gpu_suite LOGNAME [ENV=VALUE...] -- [doctest args...]
  local log="$out/$1"; shift
  local envs=()
  while [[ $# -gt 0 && $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  echo "== tests ${envs[*]} $* (log: ${log#"$out"/})"
  if ! env "${envs[@]}" "$tests" --force-colors=0 "$@" > "$log" 2>&1; then
    note "FAIL  tests ${envs[*]} $* (see ${log#"$out"/})"
    failed=1
  elif grep -q "SKIPPED: no GPU\|SKIPPED: backend 'cuda'" "$log"; then
    note "FAIL  tests ${envs[*]} $*: the tests saw no GPU (CUDA_VISIBLE_DEVICES? driver?)"
    failed=1
  else
    note "PASS  tests ${envs[*]} $* ($(grep -m1 -o 'test cases: .*' "$log"))"
  fi
}
# Suite "cuda" (test_cuda_backend.cpp) and the cuda instances of test_ops.cpp's templated cases.
gpu_tests="cuda: *,*<cuda>"
gpu_suite test_cuda_fp32.log MPIGAN_CUDA_TF32=0 -- -tc="$gpu_tests"
gpu_suite test_cuda_tf32.log MPIGAN_CUDA_TF32=1 -- -tc="*conv3d*<cuda>,*inner product*<cuda>,cuda: conv3d*"
gpu_suite test_cuda_heuristic_deterministic.log MPIGAN_CUDA_CONV_ALGO=heuristic MPIGAN_CUDA_DETERMINISTIC=1 -- \
  -tc="*conv3d*<cuda>,cuda: conv3d*"
# Every convolution's weight gradient as a forward convolution of the transposed problem (docs/cuda.md).
gpu_suite test_cuda_wgrad_forward.log MPIGAN_CUDA_WGRAD=forward -- -tc="*conv3d*<cuda>,cuda: conv3d*"
gpu_suite test_cuda_wgrad_forward_tf32.log MPIGAN_CUDA_WGRAD=forward MPIGAN_CUDA_TF32=1 -- -tc="*conv3d*<cuda>,cuda: conv3d*"
# The whole core suite: also runs the op tests of tests/unit/core/test_ops.cpp, which are templated
# over backend tags and include the cuda backend (CudaTag) when it is compiled.
step "tests: whole core suite (incl. CudaTag op tests)" "$out/test_core_all.log" "$tests" --force-colors=0
if grep -q "SKIPPED: backend 'cuda'" "$out/test_core_all.log"; then
  note "FAIL  whole core suite: the CudaTag tests skipped (no GPU visible)"
  failed=1
fi
# The backend's describe() line, printed by the memory test.
grep -m1 -o "cuda (device.*" "$out/test_cuda_fp32.log" | sed 's/^/backend: /' | tee -a "$summary" || true

if (cd "$build" && ctest -N -L gpu 2>/dev/null | grep -q "Total Tests: [1-9]"); then
  step "ctest -L gpu" "$out/ctest_gpu.log" bash -c "cd '$build' && ctest -L gpu --output-on-failure"
fi
if [[ $sanitize -eq 1 ]]; then
  if command -v compute-sanitizer > /dev/null; then
    # Without the caching allocator, so that use-after-free reaches the driver.
    step "compute-sanitizer memcheck" "$out/sanitizer.log" env MPIGAN_CUDA_CACHING=0 \
      compute-sanitizer --tool memcheck --error-exitcode 1 "$tests" -tc="$gpu_tests" --force-colors=0
  else
    note "NOTE  compute-sanitizer not found, --sanitize skipped"
  fi
fi

# ------------------------------------------------------------------------------------------------
# 4. Benchmarks
if [[ $bench -eq 1 ]]; then
  mpigan="$build/apps/mpigan"
  # HOOK(bench-step): the training-step benchmark of the engine on the GPU, side by side with the
  # PyTorch peer (bench/compare_step.sh). Runs once `mpigan bench step` exists and accepts
  # --device cuda; until then it is reported as not available. Adjust models/batches here.
  if [[ -x $mpigan ]] && "$mpigan" bench step --help > /dev/null 2>&1; then
    for model in 3dgan-25 anglegan-51; do
      for batch in 16 64 128; do
        step "bench step $model batch $batch (mpigan cuda vs PyTorch)" "$out/bench_${model}_b${batch}.log" \
          env LOG_DIR="$out/bench_${model}_b${batch}" "$root/bench/compare_step.sh" --device cuda \
            --build "$build" --model "$model" --batch "$batch" --steps 20
      done
    done
  else
    note "n/a   bench step: 'mpigan bench step' is not available yet (HOOK(bench-step) in bench/gpu/run_all.sh)"
  fi
  # HOOK(pytorch-peer): the PyTorch peer alone (e.g. when mpigan is not built), for a baseline.
  if [[ -f $root/bench/pytorch/bench_step.py ]] && "${PYTHON:-python3}" -c "import torch; assert torch.cuda.is_available()" \
      > /dev/null 2>&1; then
    step "bench PyTorch peer 3dgan-25 batch 64 (cuda)" "$out/bench_pytorch_3dgan-25_b64.log" \
      "${PYTHON:-python3}" "$root/bench/pytorch/bench_step.py" --model 3dgan-25 --batch 64 --steps 20 --device cuda
  else
    note "n/a   PyTorch peer: no python with torch and CUDA (set PYTHON=...)"
  fi
  # HOOK(op-bench): per-op timings of the cuda backend (conv3d per 3DGAN layer, BN, optimizer
  # updates) belong here once an op-level benchmark exists.
fi

# ------------------------------------------------------------------------------------------------
echo
echo "== summary ($summary)"
cat "$summary"
exit $failed
