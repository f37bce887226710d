#!/usr/bin/env bash
# Side-by-side generation benchmark: `mpigan bench generate` (the work of `mpigan generate` per
# shower: the generator in inference mode + the inverse preprocessing) vs the PyTorch peer
# (bench/pytorch/bench_generate.py, the same generator under torch.no_grad()).
#
#   bench/compare_generate.sh [--model 3dgan-25|anglegan-51] [--batch B] [--batches K] [--threads T]
#                             [--repeat R] [--build DIR]
#
# Runs the two programs alternately R times (default 3) and prints each side's showers/s (median
# and range) and the ratio mpigan / PyTorch. Defaults: 3dgan-25, batch 128, 4 batches, all cores.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
model=3dgan-25 batch=128 batches=4 threads=$(nproc) repeat=3 build=build
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    *) echo "compare_generate.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
python=${PYTHON:-/usr/bin/python3}
mpigan="$root/$build/apps/mpigan"
[[ -x $mpigan ]] || { echo "compare_generate.sh: $mpigan is not built" >&2; exit 3; }
"$python" -c 'import torch' 2>/dev/null || { echo "compare_generate.sh: $python has no torch (apt-get install python3-torch)" >&2; exit 1; }
value() { grep -o '^showers_per_s=[0-9.]*' | tail -1 | cut -d= -f2; }
m=() p=()
for ((r = 1; r <= repeat; r++)); do
  m+=("$(OMP_NUM_THREADS=$threads "$mpigan" bench generate --model "$model" --batch "$batch" --batches "$batches" --threads "$threads" | value)")
  p+=("$("$python" "$here/pytorch/bench_generate.py" --model "$model" --batch "$batch" --batches "$batches" --threads "$threads" | value)")
  echo "repeat $r: mpigan ${m[-1]} showers/s, PyTorch ${p[-1]} showers/s"
done
"$python" - "${m[*]}" "${p[*]}" "$model" "$batch" "$threads" <<'PY'
import statistics, sys
m = [float(x) for x in sys.argv[1].split()]
p = [float(x) for x in sys.argv[2].split()]
mm, pm = statistics.median(m), statistics.median(p)
print(f"{sys.argv[3]}, batch {sys.argv[4]}, {sys.argv[5]} threads: mpigan {mm:.1f} showers/s ({min(m):.1f}..{max(m):.1f}), "
      f"PyTorch {pm:.1f} ({min(p):.1f}..{max(p):.1f}), ratio {mm / pm:.2f}")
PY
