#!/usr/bin/env bash
# A trained generator in mpigan and in ONNX Runtime, side by side: `mpigan generate` (its
# generation alone: latent, generator in inference mode, inverse preprocessing) against ONNX
# Runtime's CPU provider running the same generator exported by `mpigan export` (the same graph
# end to end; bench/onnx/bench_ort.mjs), alternately, same batch and threads.
#
#   bench/compare_generate_ort.sh [GENERATOR (3dgan-5-mmd-concat-800k)] [--batch B] [--batches K]
#                                 [--threads T] [--repeat R] [--precision fp32|bf16] [--build DIR]
#
# GENERATOR: a shipped generator's name, a run directory or a checkpoint. --precision bf16 runs
# mpigan's bf16 convolutions (ONNX Runtime stays fp32). Needs tests/onnx/setup.sh (npm's
# onnxruntime-node). Prints each side's showers/s per repeat, then the medians and their ratio.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
gen=3dgan-5-mmd-concat-800k batch=128 batches=8 threads=$(nproc) repeat=3 build=build precision=fp32
while [[ $# -gt 0 ]]; do
  case "$1" in
    --batch) batch=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    -*) echo "compare_generate_ort.sh: unknown argument '$1'" >&2; exit 2 ;;
    *) gen=$1; shift ;;
  esac
done
case "$precision" in fp32|bf16) ;; *) echo "compare_generate_ort.sh: --precision must be fp32 or bf16" >&2; exit 2 ;; esac
[[ $build = /* ]] || build="$root/$build"  # a relative --build is under the repository
mpigan="$build/apps/mpigan"
[[ -x $mpigan ]] || { echo "compare_generate_ort.sh: $mpigan is not built" >&2; exit 3; }
[[ -d $root/tests/onnx/node_modules/onnxruntime-node ]] || { echo "compare_generate_ort.sh: run tests/onnx/setup.sh first" >&2; exit 3; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
"$mpigan" export "$gen" --onnx "$work/g.onnx" >/dev/null
value() { grep -o '^showers_per_s=[0-9.]*' | tail -1 | cut -d= -f2; }
events=$((batch * batches))
m=() o=()
for ((r = 1; r <= repeat; r++)); do
  m+=("$(OMP_NUM_THREADS=$threads "$mpigan" generate "$gen" --events "$events" --energy 10:500 --batch "$batch" \
        --threads "$threads" --precision "$precision" --seed "$r" --out "$work/g.h5" | value)")
  o+=("$(node "$here/onnx/bench_ort.mjs" "$work/g.onnx" --batch "$batch" --batches "$batches" --threads "$threads" | value)")
  echo "repeat $r: mpigan ($precision) ${m[-1]} showers/s, ONNX Runtime ${o[-1]} showers/s"
done
/usr/bin/python3 - "${m[*]}" "${o[*]}" "$gen" "$batch" "$threads" "$precision" <<'PY'
import statistics, sys
m = [float(x) for x in sys.argv[1].split()]
o = [float(x) for x in sys.argv[2].split()]
mm, om = statistics.median(m), statistics.median(o)
print(f"{sys.argv[3]}, batch {sys.argv[4]}, {sys.argv[5]} threads: mpigan ({sys.argv[6]}) {mm:.1f} showers/s "
      f"({min(m):.1f}..{max(m):.1f}), ONNX Runtime {om:.1f} ({min(o):.1f}..{max(o):.1f}), ratio {mm / om:.2f}")
PY
