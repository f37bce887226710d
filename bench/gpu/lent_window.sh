#!/usr/bin/env bash
# One short GPU window, from a bundle of bench/gpu/bundle.sh, in one command that ends by itself
# inside BUDGET seconds (default 540):
#
#   bench/gpu/lent_window.sh BUNDLE.tar.xz OUT_DIR [BUDGET] [RESUME.tar]
#
#  1. the convolutions against the reference through cuDNN's graph API (MPIGAN_CUDA_CONV_API=graph,
#     every direction that one of its engines runs), strict fp32 and TF32; a mode that fails is run
#     again with synchronous launches (the test and conv case at fault) and under compute-sanitizer
#     (the kernel at fault), then without cuDNN's runtime-compiled engines (MPIGAN_CUDA_GRAPH_RTC=0,
#     kept for its steps below if that passes; else they stay on the legacy API);
#  2. the training step of 3dgan-25 (batch 128) and anglegan-51 (batch 64, TF32 only) with each
#     convolution direction on the faster of the graph API and the legacy API by measurement
#     (MPIGAN_CUDA_CONV_API=measured, weight gradients also as forward convolutions where faster)
#     and with cuDNN's legacy algorithms alone, beside the PyTorch peer in the same math, all on
#     this GPU; the bf16 convolutions (their op test against the reference, the 3dgan-25 step beside
#     PyTorch's bf16 autocast); then generation (3dgan-25, batch 1 024, TF32) beside PyTorch's eval
#     (bench/compare_generate.sh --device cuda);
#  3. one window of the 3dgan-25 campaign (examples/3dgan-25-campaign.yaml, TF32): continues the run
#     packed in RESUME.tar (a previous window's OUT_DIR/run.tar, with the run's own configuration;
#     its showers are simulated again where that configuration names them) or starts it, trains until the
#     budget's last ~70 s, is stopped by SIGTERM (it checkpoints), then validates its best generator
#     against the held-out showers.
# OUT_DIR gets summary.txt, logs.tar.xz (every log and profile), run.tar (the run directory: config,
# metrics.csv, the latest checkpoint, the validation report) and best.h5 (the generator of the best
# figure of merit): four files, each small enough to come back from a lent machine.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
usage="usage: lent_window.sh BUNDLE.tar.xz OUT_DIR [BUDGET_SECONDS] [RESUME.tar]"
bundle=${1:?$usage}
out=${2:?$usage}
budget=${3:-540}
resume=${4:-}
start=$SECONDS
left() { echo $((budget - (SECONDS - start))); }
source "$root/bench/gpu/lent_common.sh"
lent_unpack "$bundle" "$out"
py=${PYTHON:-python3}
logs="$out/logs"
mkdir -p "$logs"
summary="$out/summary.txt"
{ date -u; nvidia-smi -L; } > "$summary" 2>&1
say() { echo "$*" >> "$summary"; }

# The campaign's showers, simulated on the CPU cores while the GPU runs the tests and benchmarks.
work=$(mktemp -d)
cfg="$root/examples/3dgan-25-campaign.yaml"
data="$work/data"
if [[ -n $resume && -f $resume ]]; then
  # a resumed run reads its showers where its configuration says (simulated again: same seed, same showers)
  # the archive names it ./config.yaml or config.yaml, as the tar that packed it did
  pattern=$( (tar -xOf "$resume" ./config.yaml 2>/dev/null || tar -xOf "$resume" config.yaml) | awk '/^data:/ {d = 1} d && /^ *- / {print $2; exit}')
  [[ -n $pattern ]] && data=$(dirname "$pattern")
fi
"$mpigan" simulate --events 30000 --geometry 25x25x25 --energy 10:500 --events-per-file 3000 --seed 7 \
  --threads 6 --out "$data" > "$logs/simulate.txt" 2>&1 &
sim_pid=$!

# 1. correctness of the graph API's convolutions (the op tests of every conv3d case run through it),
# per math mode; a mode that fails is run once more with every launch synchronous and under
# compute-sanitizer, to name the engine and kernel at fault, and its steps use the legacy API.
# conv_tests RTC TF32 LOG [WRAPPER...]: the conv3d op tests of the cuda backend through the graph API,
# with cuDNN's runtime-compiled engines allowed or not; under compute-sanitizer, the real binary (the
# build/ one is the bundle's loader wrapper) and the op tests only.
conv_tests() {
  local rtc=$1 tf32=$2 log=$3
  shift 3
  local bin=$g/build/tests/mpigan_test_core filter="*conv3d*<cuda>,cuda: conv3d*"
  if (($#)) && [[ $1 == compute-sanitizer ]]; then bin=$g/bin/mpigan_test_core filter="*conv3d*<cuda>"; fi
  MPIGAN_CUDA_GRAPH_RTC=$rtc MPIGAN_CUDA_CONV_API=graph MPIGAN_CUDA_TF32=$tf32 timeout 90 "$@" "$bin" -tc="$filter" \
    --force-colors=0 > "$log" 2>&1
}
graph_ok=(0 0)
rtc=(1 1)  # MPIGAN_CUDA_GRAPH_RTC per mode: 0 once the tests pass only without runtime-compiled engines
for tf32 in 0 1; do
  # with runtime-compiled engines (TF32 refuses them by default): whether cuDNN's engine still faults
  conv_tests 1 "$tf32" "$logs/tests_conv-graph_tf32-$tf32.txt"
  rc=$?
  say "tests MPIGAN_CUDA_CONV_API=graph TF32=$tf32: exit $rc $(grep -h 'test cases:' "$logs/tests_conv-graph_tf32-$tf32.txt")"
  if [[ $rc == 0 ]]; then
    graph_ok[tf32]=1
  else
    # every launch synchronous: the fault surfaces in the test case and conv case that launched it
    conv_tests 1 "$tf32" "$logs/diagnose_graph_tf32-$tf32.txt" env CUDA_LAUNCH_BLOCKING=1
    say "  synchronous launches: exit $?; where it failed:"
    grep -h 'TEST CASE\|case_name\|CUDA error\|cuDNN error' "$logs/diagnose_graph_tf32-$tf32.txt" | head -n 6 |
      cut -c1-300 >> "$summary"
    if command -v compute-sanitizer > /dev/null; then
      conv_tests 1 "$tf32" "$logs/sanitizer_graph_tf32-$tf32.txt" compute-sanitizer --tool memcheck --print-limit 3
      say "  compute-sanitizer: exit $?"
      grep -h -A3 'Invalid\|misaligned\|Misaligned' "$logs/sanitizer_graph_tf32-$tf32.txt" | head -n 8 | cut -c1-300 \
        >> "$summary"
    fi
    # the kernel at fault so far (TF32) came from cuDNN's runtime-compiled engines: without them?
    conv_tests 0 "$tf32" "$logs/tests_conv-graph-nortc_tf32-$tf32.txt"
    rc=$?
    say "  without runtime-compiled engines (MPIGAN_CUDA_GRAPH_RTC=0): exit $rc $(grep -h 'test cases:' \
      "$logs/tests_conv-graph-nortc_tf32-$tf32.txt")"
    if [[ $rc == 0 ]]; then
      graph_ok[tf32]=1
      rtc[tf32]=0
    fi
  fi
done

# 2. the step, both sides, same GPU
bench() {  # bench MODEL BATCH TF32 API STEPS   (API: measured = graph or legacy per direction; legacy)
  local tag="$1_b$2_tf32-$3" wgrad=legacy
  [[ $4 == measured ]] && wgrad=measured
  MPIGAN_CUDA_TF32=$3 MPIGAN_CUDA_CONV_API=$4 MPIGAN_CUDA_WGRAD=$wgrad MPIGAN_CUDA_GRAPH_RTC=${rtc[$3]} \
    timeout 90 "$mpigan" bench step --device cuda \
    --model "$1" --batch "$2" --steps "$5" --threads 6 --profile 2 --log-level debug > "$logs/mpigan_${tag}_$4.txt" 2>&1
  say "mpigan  $tag conv API $4: exit $? $(grep -h 'samples_per_s' "$logs/mpigan_${tag}_$4.txt" | tr '\n' ' ')" \
    "graph-API directions: $(grep -c 'against legacy' "$logs/mpigan_${tag}_$4.txt")," \
    "forward-form weight gradients: $(grep -c 'as a forward convolution, algo' "$logs/mpigan_${tag}_$4.txt")"
}
peer() {  # peer MODEL BATCH TF32 STEPS
  local tag="$1_b$2_tf32-$3" flag=()
  [[ $3 == 1 ]] && flag=(--tf32)
  timeout 60 "$py" "$root/bench/pytorch/bench_step.py" --device cuda --model "$1" --batch "$2" --steps "$4" \
    --threads 6 --profile 25 "${flag[@]}" > "$logs/pytorch_$tag.txt" 2>&1
  say "pytorch $tag: exit $? $(grep -h 'step_time_s\|samples_per_s' "$logs/pytorch_$tag.txt" | tr '\n' ' ')"
}
for tf32 in 1 0; do
  ((tf32 == 1 || $(left) > 420)) || continue
  [[ ${graph_ok[tf32]} == 1 ]] && bench 3dgan-25 128 $tf32 measured 8
  bench 3dgan-25 128 $tf32 legacy 8
  peer 3dgan-25 128 $tf32 8
done
# bf16 convolutions (graph API engines on bf16 tensor cores, fp32 accumulation): the op test against
# the reference on bf16-rounded inputs (both layouts of the bf16 copies), then the step beside PyTorch's
# bf16 autocast
if (($(left) > 420)); then
  timeout 120 "$g/build/tests/mpigan_test_core" -tc="cuda: bf16*" --force-colors=0 -s > "$logs/tests_bf16.txt" 2>&1
  say "tests bf16: exit $? $(grep -h 'test cases:' "$logs/tests_bf16.txt")"
  for layout in channels_last channels_first; do
    [[ $layout == channels_last ]] || (($(left) > 380)) || continue
    log="$logs/mpigan_3dgan-25_b128_bf16_$layout.txt"
    MPIGAN_CUDA_BF16_LAYOUT=$layout timeout 90 "$mpigan" bench step --device cuda --precision bf16 --model 3dgan-25 \
      --batch 128 --steps 8 --threads 6 --profile 2 --log-level debug > "$log" 2>&1
    say "mpigan  3dgan-25_b128_bf16 $layout: exit $? $(grep -h 'samples_per_s' "$log" | tr '\n' ' ')" \
      "bf16 graph-API plans: $(grep -c 'bf16 operands[^)]*): graph API' "$log")," \
      "fp32 fallbacks: $(grep -c 'runs in fp32' "$log")"
  done
  timeout 60 "$py" "$root/bench/pytorch/bench_step.py" --device cuda --model 3dgan-25 --batch 128 --steps 8 \
    --threads 6 --profile 25 --bf16 > "$logs/pytorch_3dgan-25_b128_bf16.txt" 2>&1
  say "pytorch 3dgan-25_b128_bf16: exit $? $(grep -h 'step_time_s\|samples_per_s' "$logs/pytorch_3dgan-25_b128_bf16.txt" |
    tr '\n' ' ')"
fi
if (($(left) > 360)); then
  [[ ${graph_ok[1]} == 1 ]] && bench anglegan-51 64 1 measured 4
  peer anglegan-51 64 1 4
fi
# generation, both sides, TF32: the generator in inference mode and the showers in host memory
if (($(left) > 330)); then
  PYTHON=$py timeout 120 "$root/bench/compare_generate.sh" --device cuda --tf32 --batch 1024 --batches 8 --repeat 2 \
    --threads 6 --build "$g/build" > "$logs/generate_3dgan-25_b1024_tf32-1.txt" 2>&1
  say "generate: exit $? $(tail -n 1 "$logs/generate_3dgan-25_b1024_tf32-1.txt")"
fi

# 3. the campaign's window
wait "$sim_pid"
say "simulate exit $? $(tail -n 1 "$logs/simulate.txt")"
run="$work/run"
if [[ -n $resume && -f $resume ]]; then
  # with the run's own configuration: a resume may not change what the run trains
  mkdir -p "$run" && tar -xf "$resume" -C "$run"
  cfg="$run/config.yaml"
  args=(--resume "$run" --set threads=6)
  say "resuming $(tail -n 1 "$run/metrics.csv" | cut -d, -f1-4) (showers in $data)"
else
  args=(--out "$run" --set "data.train=$data/*.h5" --set threads=6)
fi
api=measured
[[ ${graph_ok[1]} == 1 ]] || api=legacy
train_s=$(($(left) - 75))
say "training for $train_s s (TF32, conv API: $api)"
if ((train_s > 30)); then
  MPIGAN_CUDA_TF32=1 MPIGAN_CUDA_CONV_API=$api MPIGAN_CUDA_WGRAD=$api MPIGAN_CUDA_GRAPH_RTC=${rtc[1]} \
    timeout -s TERM "$train_s" "$mpigan" train "$cfg" "${args[@]}" \
    > "$logs/train.txt" 2>&1
  say "train exit $? (124/75: stopped by SIGTERM at the window's end, checkpointed)"
  grep '^physics' "$run/metrics.csv" | tail -n 3 | cut -d, -f1-12 >> "$summary"
  tail -n 1 "$run/metrics.csv" | cut -d, -f1-6 >> "$summary"
  held_out=$(ls "$data"/*.h5 | tail -n 1)
  MPIGAN_CUDA_TF32=1 timeout $(($(left) - 15)) "$mpigan" validate "$run" --reference "$held_out" \
    --out "$run/validation" > "$logs/validate.txt" 2>&1
  say "validate exit $?"
  grep -iE "figure of merit|fpd|auc|sampling fraction|verdict" "$logs/validate.txt" | head -16 >> "$summary"
fi
# What comes back: the run without its older checkpoints and without the validation's generated
# showers (3 000 of 25^3 cells: more than a lent machine sends back), and the logs.
if [[ -d $run ]]; then
  latest=$(cat "$run/checkpoints/latest" 2>/dev/null)
  (cd "$run" && tar -cf "$out/run.tar" --exclude='checkpoints/*' --exclude=generated.h5 --exclude=events.csv . &&
    tar -rf "$out/run.tar" checkpoints/latest ${latest:+"checkpoints/$latest"})
  cp "$run/checkpoints/best.h5" "$out/best.h5" 2>/dev/null
fi
tar -cJf "$out/logs.tar.xz" -C "$out" logs env.txt && rm -rf "$logs" "$out/env.txt"
ls -la "$out" >> "$summary"
say "elapsed $((SECONDS - start)) s"
rm -rf "$g" "$work" "$data"
cat "$summary"
