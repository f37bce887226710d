#!/usr/bin/env bash
# Side-by-side training-step benchmark: mpigan vs the PyTorch peer (bench/pytorch/bench_step.py).
#
#   bench/compare_step.sh [--model 3dgan-25|anglegan-51] [--batch B] [--steps S] [--threads T]
#                         [--device cpu|cuda] [--precision fp32|bf16] [--build DIR]
#
# Runs, one after the other on this machine,
#   DIR/apps/mpigan bench step --model M --batch B --steps S --threads T
#   /usr/bin/python3 bench/pytorch/bench_step.py --model M --batch B --steps S --threads T [--device D]
# then prints a table of samples/s (from each program's last line `samples_per_s=X`), their ratio
# (mpigan / PyTorch) and peak memory (`peak_rss_mb=`, and on cuda `peak_gpu_mem_mb=` over the run
# and `peak_gpu_mem_steps_mb=` over the timed steps, after the warm-up's algorithm searches).
# Defaults: model 3dgan-25, batch 16, steps 5, threads $(nproc), device cpu, build dir `build`.
# --device other than cpu is passed on to mpigan too. --precision bf16: mpigan's bf16 convolutions
# (`bench step --precision bf16`) against PyTorch's bf16 autocast (`bench_step.py --bf16`); on a
# CPU without native bf16 mpigan says so and runs fp32 (MPIGAN_BF16_EMULATION=1 emulates it). Environment: PYTHON (default
# /usr/bin/python3, Debian's, which has torch), LOG_DIR (keep the two programs' full output there;
# default a temporary directory that is removed).
# Exit status: 0 when both ran, 3 when mpigan is not built or failed (the PyTorch side still
# runs and the table shows why), 1 when the PyTorch side failed, 2 on a usage error.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

model=3dgan-25
batch=16
steps=5
threads=$(nproc)
device=cpu
precision=fp32
build=build
python=${PYTHON:-/usr/bin/python3}

usage() { sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
die() { echo "compare_step.sh: $*" >&2; exit 2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model=${2:?}; shift 2 ;;
    --batch) batch=${2:?}; shift 2 ;;
    --steps) steps=${2:?}; shift 2 ;;
    --threads) threads=${2:?}; shift 2 ;;
    --device) device=${2:?}; shift 2 ;;
    --precision) precision=${2:?}; shift 2 ;;
    --build) build=${2:?}; shift 2 ;;
    --model=*|--batch=*|--steps=*|--threads=*|--device=*|--precision=*|--build=*)
      k=${1%%=*}; set -- "$k" "${1#*=}" "${@:2}" ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
case "$model" in 3dgan-25|anglegan-51) ;; *) die "--model must be 3dgan-25 or anglegan-51" ;; esac
case "$device" in cpu|cuda) ;; *) die "--device must be cpu or cuda" ;; esac
case "$precision" in fp32|bf16) ;; *) die "--precision must be fp32 or bf16" ;; esac
for v in batch steps threads; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--$v must be a positive integer"
done
[[ $build = /* ]] || build="$root/$build"
mpigan="$build/apps/mpigan"

if [[ -n ${LOG_DIR:-} ]]; then
  logs=$LOG_DIR; mkdir -p "$logs"
else
  logs=$(mktemp -d); trap 'rm -rf "$logs"' EXIT
fi

# value KEY FILE: the last `KEY=value` line of FILE, or empty.
value() { grep -E "^$1=" "$2" 2>/dev/null | tail -n 1 | cut -d= -f2- || true; }
# The final line must be samples_per_s=X.
final_rate() { tail -n 1 "$1" 2>/dev/null | sed -n 's/^samples_per_s=//p'; }

common=(--model "$model" --batch "$batch" --steps "$steps" --threads "$threads")
dev_args=()
[[ $device != cpu ]] && dev_args=(--device "$device")
m_prec=(--precision "$precision") p_prec=()
[[ $precision = bf16 ]] && p_prec=(--bf16)

echo "== $(date -u +%FT%TZ) $(hostname) nproc=$(nproc) load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== model=$model batch=$batch steps=$steps threads=$threads device=$device precision=$precision build=$build"

status=0
m_note=""
if [[ ! -x $mpigan ]]; then
  m_note="not built"
  echo "== mpigan: not built: $mpigan does not exist." >&2
  echo "   Build it first, e.g.: cmake --build ${build#"$root"/} --target mpigan   (or pass --build DIR)" >&2
  status=3
else
  echo "== mpigan: $mpigan bench step ${common[*]} ${dev_args[*]} ${m_prec[*]}"
  if "$mpigan" bench step "${common[@]}" "${dev_args[@]}" "${m_prec[@]}" >"$logs/mpigan.log" 2>&1; then
    cat "$logs/mpigan.log"
  else
    rc=$?
    cat "$logs/mpigan.log"
    m_note="failed (rc=$rc)"; status=3
  fi
  if [[ -z $m_note && -z $(final_rate "$logs/mpigan.log") ]]; then
    m_note="no samples_per_s line"; status=3
  fi
fi

py_cmd=("$python" "$here/pytorch/bench_step.py" "${common[@]}" "${dev_args[@]}" "${p_prec[@]}")
echo "== pytorch: ${py_cmd[*]}"
p_note=""
if "${py_cmd[@]}" >"$logs/pytorch.log" 2>&1; then
  cat "$logs/pytorch.log"
else
  rc=$?
  cat "$logs/pytorch.log"
  p_note="failed (rc=$rc)"; status=1
fi
if [[ -z $p_note && -z $(final_rate "$logs/pytorch.log") ]]; then
  p_note="no samples_per_s line"; status=1
fi

m_rate=${m_note:-$(final_rate "$logs/mpigan.log")}
p_rate=${p_note:-$(final_rate "$logs/pytorch.log")}
ratio=n/a
if [[ -z $m_note && -z $p_note ]]; then
  ratio=$(awk -v a="$m_rate" -v b="$p_rate" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
fi
m_rss=$(value peak_rss_mb "$logs/mpigan.log"); p_rss=$(value peak_rss_mb "$logs/pytorch.log")

echo
printf '%-12s %6s %8s %-6s %22s %22s %7s %15s %15s' model batch threads device \
  "mpigan samples/s" "pytorch samples/s" ratio "mpigan rss MB" "pytorch rss MB"
[[ $device = cuda ]] && printf ' %15s %15s %17s %17s' "mpigan gpu MB" "pytorch gpu MB" "mpigan steps MB" \
  "pytorch steps MB"
echo
printf '%-12s %6s %8s %-6s %22s %22s %7s %15s %15s' "$model" "$batch" "$threads" "$device" \
  "$m_rate" "$p_rate" "$ratio" "${m_rss:-n/a}" "${p_rss:-n/a}"
if [[ $device = cuda ]]; then
  m_gpu=$(value peak_gpu_mem_mb "$logs/mpigan.log"); p_gpu=$(value peak_gpu_mem_mb "$logs/pytorch.log")
  m_steps=$(value peak_gpu_mem_steps_mb "$logs/mpigan.log")
  p_steps=$(value peak_gpu_mem_steps_mb "$logs/pytorch.log")
  printf ' %15s %15s %17s %17s' "${m_gpu:-n/a}" "${p_gpu:-n/a}" "${m_steps:-n/a}" "${p_steps:-n/a}"
fi
echo
[[ -n ${LOG_DIR:-} ]] && echo "(logs in $logs)"
exit $status
