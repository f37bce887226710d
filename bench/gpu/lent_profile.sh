#!/usr/bin/env bash
# Where the GPU step's time goes, on a machine that runs a bundle of bench/gpu/bundle.sh:
#
#   bench/gpu/lent_profile.sh BUNDLE.tar.xz OUT_DIR
#
#  1. 3dgan-25 at batch 128 and anglegan-51 at batch 64: `mpigan bench step --device cuda --profile 2`
#     (the step, then two steps timed layer by layer; each convolution's measured algorithms), with
#     the weight gradients chosen by measurement (MPIGAN_CUDA_WGRAD=measured) and with cuDNN's
#     weight-gradient algorithms only (legacy, the default), and the PyTorch peer with `--profile 25`
#     (its top kernels by GPU time), in strict fp32 and again with TF32 on both sides;
#  2. compute-sanitizer memcheck over the backend's own GPU tests (caching allocator off).
# Everything lands in OUT_DIR; summary.txt has the step times.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bundle=${1:?usage: lent_profile.sh BUNDLE.tar.xz OUT_DIR}
out=${2:?usage: lent_profile.sh BUNDLE.tar.xz OUT_DIR}
source "$root/bench/gpu/lent_common.sh"
lent_unpack "$bundle" "$out"
py=${PYTHON:-python3}
summary="$out/summary.txt"
nvidia-smi -L > "$summary" 2>&1
for cfg in "3dgan-25 128" "anglegan-51 64"; do
  read -r model batch <<< "$cfg"
  for tf32 in 0 1; do
    tag="${model}_b${batch}_tf32-$tf32"
    for wgrad in measured legacy; do
      MPIGAN_CUDA_TF32=$tf32 MPIGAN_CUDA_WGRAD=$wgrad timeout 100 "$mpigan" bench step --device cuda --model "$model" \
        --batch "$batch" --steps 8 --threads 8 --profile 2 --log-level debug > "$out/mpigan_${tag}_$wgrad.txt" 2>&1
      echo "mpigan  $tag wgrad $wgrad: exit $? $(grep -h 'samples_per_s\|^profile:' "$out/mpigan_${tag}_$wgrad.txt" |
        tr '\n' ' ') weight gradients as forward: $(grep -c 'as a forward convolution' "$out/mpigan_${tag}_$wgrad.txt")" \
        >> "$summary"
    done
    flag=(); [[ $tf32 == 1 ]] && flag=(--tf32)
    timeout 100 "$py" "$root/bench/pytorch/bench_step.py" --device cuda --model "$model" --batch "$batch" \
      --steps 8 --threads 8 --profile 25 "${flag[@]}" > "$out/pytorch_$tag.txt" 2>&1
    echo "pytorch $tag: exit $? $(grep -h 'step_time_s' "$out/pytorch_$tag.txt")" >> "$summary"
  done
done
MPIGAN_CUDA_CACHING=0 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 \
  "$g/bin/mpigan_test_core" -tc="cuda: *" --force-colors=0 > "$out/memcheck.txt" 2>&1
echo "compute-sanitizer memcheck (cuda: *): exit $? $(grep -h 'ERROR SUMMARY\|test cases:' "$out/memcheck.txt" | tr '\n' ' ')" >> "$summary"
rm -rf "$g"
cat "$summary"
