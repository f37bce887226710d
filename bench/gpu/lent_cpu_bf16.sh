#!/usr/bin/env bash
# bf16 on the CPU cores of a lent GPU machine, from a bundle of bench/gpu/bundle.sh, in one command
# that ends by itself inside BUDGET seconds (default 150). The project's own machines mostly lack
# native bf16 (oneDNN's avx512_core_bf16 or AMX); a lent machine's CPU may have it.
#
#   bench/gpu/lent_cpu_bf16.sh BUNDLE.tar.xz OUT_DIR [BUDGET]
#
# Reads the CPU's model and flags and the ISA oneDNN dispatches to; without avx512_bf16 or amx_bf16
# it stops there. Otherwise, side by side in one run (bench/compare_step.sh, compare_generate.sh,
# all cores): the training step of 3dgan-25 (batch 64) in fp32 and in bf16 against PyTorch's fp32
# and bf16 autocast, then generation (batch 128) in bf16 against PyTorch's fp32 eval and bf16
# autocast. OUT_DIR gets summary.txt and logs.tar.xz.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
usage="usage: lent_cpu_bf16.sh BUNDLE.tar.xz OUT_DIR [BUDGET_SECONDS]"
bundle=${1:?$usage}
out=${2:?$usage}
budget=${3:-150}
start=$SECONDS
left() { echo $((budget - (SECONDS - start))); }
source "$root/bench/gpu/lent_common.sh"
lent_unpack "$bundle" "$out"
logs="$out/logs"
mkdir -p "$logs"
summary="$out/summary.txt"
say() { echo "$*" >> "$summary"; }
{ date -u; lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket)'; } > "$summary" 2>&1
flags=$(grep -o -w -E 'avx512f|avx512_bf16|amx_tile|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')
say "flags: ${flags:-none of avx512f, avx512_bf16, amx_tile, amx_bf16}"
threads=$(nproc)
"$mpigan" bench step --model tiny-8 --batch 4 --steps 1 --threads "$threads" --precision bf16 > "$logs/isa.txt" 2>&1
say "mpigan: $(head -n 1 "$logs/isa.txt" | cut -c1-300)"
if [[ $flags != *avx512_bf16* && $flags != *amx_bf16* ]]; then
  say "no native bf16 on this CPU: nothing to measure"
else
  export PYTHON=${PYTHON:-python3}
  for prec in fp32 bf16; do
    (($(left) > 40)) || break
    LOG_DIR="$logs/step_$prec" timeout $(($(left) - 30)) "$root/bench/compare_step.sh" --device cpu --precision "$prec" \
      --model 3dgan-25 --batch 64 --steps 4 --threads "$threads" --build "$g/build" > "$logs/step_$prec.txt" 2>&1
    say "step $prec: exit $?"
    tail -n 5 "$logs/step_$prec.txt" >> "$summary"
  done
  if (($(left) > 40)); then
    timeout $(($(left) - 10)) "$root/bench/compare_generate.sh" --precision bf16 --batch 128 --batches 4 --repeat 3 \
      --threads "$threads" --build "$g/build" > "$logs/generate_bf16.txt" 2>&1
    say "generate bf16: exit $?"
    tail -n 6 "$logs/generate_bf16.txt" >> "$summary"
  fi
fi
tar -cJf "$out/logs.tar.xz" -C "$out" logs env.txt && rm -rf "$logs" "$out/env.txt"
say "elapsed $((SECONDS - start)) s"
rm -rf "$g"
cat "$summary"
