#!/usr/bin/env bash
# Side-by-side generation benchmark: `mpigan bench generate` (the work of `mpigan generate` per
# shower: the generator in inference mode + the inverse preprocessing) vs the PyTorch peer
# (bench/pytorch/bench_generate.py, the same generator under torch.no_grad()).
#
#   bench/compare_generate.sh [--model 3dgan-25|anglegan-51] [--batch B] [--batches K] [--threads T]
#                             [--repeat R] [--precision fp32|bf16] [--device cpu|cuda] [--tf32]
#                             [--build DIR]
#
# Runs the two programs alternately R times (default 3) and prints each side's showers/s (median
# and range) and the ratio mpigan / PyTorch. Defaults: 3dgan-25, batch 128, 4 batches, all cores.
# --precision bf16: mpigan's bf16 convolutions against PyTorch's fp32 eval (the reference of the
# target) and, as a third figure, PyTorch's bf16 autocast (bench_generate.py --bf16).
# --device cuda: both on the GPU, the showers copied to host memory in both; --tf32 allows TF32
# convolutions on both sides (MPIGAN_CUDA_TF32=1, PyTorch's cudnn.allow_tf32), strict fp32 without.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
model=3dgan-25 batch=128 batches=4 threads=$(nproc) repeat=3 build=build precision=fp32 device=cpu tf32=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --tf32) tf32=1; shift ;;
    *) echo "compare_generate.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
python=${PYTHON:-/usr/bin/python3}
[[ $build = /* ]] || build="$root/$build"  # a relative --build is under the repository
mpigan="$build/apps/mpigan"
[[ -x $mpigan ]] || { echo "compare_generate.sh: $mpigan is not built" >&2; exit 3; }
"$python" -c 'import torch' 2>/dev/null || { echo "compare_generate.sh: $python has no torch (apt-get install python3-torch)" >&2; exit 1; }
value() { grep -o '^showers_per_s=[0-9.]*' | tail -1 | cut -d= -f2; }
case "$precision" in fp32|bf16) ;; *) echo "compare_generate.sh: --precision must be fp32 or bf16" >&2; exit 2 ;; esac
case "$device" in cpu|cuda) ;; *) echo "compare_generate.sh: --device must be cpu or cuda" >&2; exit 2 ;; esac
peer=(--device "$device")
((tf32)) && peer+=(--tf32)
m=() p=() pb=()
for ((r = 1; r <= repeat; r++)); do
  m+=("$(MPIGAN_CUDA_TF32=$tf32 OMP_NUM_THREADS=$threads "$mpigan" bench generate --model "$model" --batch "$batch" \
    --batches "$batches" --threads "$threads" --precision "$precision" --device "$device" | value)")
  p+=("$("$python" "$here/pytorch/bench_generate.py" --model "$model" --batch "$batch" --batches "$batches" \
    --threads "$threads" "${peer[@]}" | value)")
  line="repeat $r: mpigan ($precision) ${m[-1]} showers/s, PyTorch ${p[-1]} showers/s"
  if [[ $precision = bf16 ]]; then
    pb+=("$("$python" "$here/pytorch/bench_generate.py" --model "$model" --batch "$batch" --batches "$batches" \
      --threads "$threads" "${peer[@]}" --bf16 | value)")
    line+=", PyTorch bf16 autocast ${pb[-1]} showers/s"
  fi
  echo "$line"
done
"$python" - "${m[*]}" "${p[*]}" "$model" "$batch" "$threads" "$precision" "${pb[*]:-}" "$device" "$tf32" <<'PY'
import statistics, sys
m = [float(x) for x in sys.argv[1].split()]
p = [float(x) for x in sys.argv[2].split()]
mm, pm = statistics.median(m), statistics.median(p)
where = f"{sys.argv[5]} threads" if sys.argv[8] == "cpu" else f"cuda, tf32 {sys.argv[9]}"
line = (f"{sys.argv[3]}, batch {sys.argv[4]}, {where}: mpigan ({sys.argv[6]}) {mm:.1f} showers/s "
        f"({min(m):.1f}..{max(m):.1f}), PyTorch {pm:.1f} ({min(p):.1f}..{max(p):.1f}), ratio {mm / pm:.2f}")
if sys.argv[7].strip():
    pb = [float(x) for x in sys.argv[7].split()]
    line += f"; PyTorch bf16 autocast {statistics.median(pb):.1f} ({min(pb):.1f}..{max(pb):.1f})"
print(line)
PY
