#!/usr/bin/env bash
# `mpigan export` checked by the real ONNX Runtime (onnxruntime-node, tests/onnx/README.md) and by
# ONNX's Python checker: every model mpigan has, each exported as cell energies in GeV (and one as
# its raw output), run in ONNX Runtime on test vectors whose outputs mpigan's own engine computed
# for the same inputs (`mpigan export --vectors`).
#   - the shipped generators (trained; 3dgan-5-cond puts its latent on the sphere): within 1e-4
#     relative on every cell (check_onnx.mjs: cells below 1/1000 of the largest judged on its scale);
#   - tiny-8, 3dgan-25, 3dgan-5 with its input [E/100, z] and anglegan-51 after two training steps (every layer kind, the angle
#     model's inputs): within 1e-4, or within twice the spread between mpigan's own two engines
#     (oneDNN and the reference backend) on the same inputs where that spread is larger (weights two
#     steps from random make some cells sums of large cancelling terms);
#   - the check can fail: one cell of a vector moved by 1 % is caught.
# Usage: onnx_tests.sh PATH/TO/mpigan
set -uo pipefail
mpigan=${1:?mpigan binary}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap '[[ -n ${KEEP:-} ]] || rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "ok: $*"; }

"$here/setup.sh" >/dev/null || fail "tests/onnx/setup.sh could not install onnxruntime-node (npm)"
export OMP_NUM_THREADS=1 MPIGAN_GENERATORS="$root/generators"

# python3-onnx's checker with full shape inference, and the spread between two vector files.
py_check() {
  /usr/bin/python3 -c "import onnx, sys; m = onnx.load(sys.argv[1]); onnx.checker.check_model(m, full_check=True)" "$1"
}
spread() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
import numpy as np
a, b = (json.load(open(p))["outputs"] for p in sys.argv[1:3])
worst = 0.0
for k in a:
    x, y = np.array(a[k]["data"]), np.array(b[k]["data"])
    floor = 1e-3 * np.abs(y).max()
    worst = max(worst, float((np.abs(x - y) / np.maximum(np.abs(y), floor)).max()))
print(f"{worst:.3g}")
PY
}

# check NAME SOURCE [EXTRA export args]: export, check with Python, run in ONNX Runtime against the
# oneDNN engine's vectors (strict for trained generators, else within the engines' own spread).
check() {
  local name=$1 src=$2 strict=$3
  shift 3
  local onnx=$work/$name.onnx vec=$work/$name.json
  "$mpigan" export "$src" --onnx "$onnx" --vectors "$vec" --vector-events 3 "$@" >"$work/$name.log" 2>&1 ||
    fail "$name: export failed: $(tail -n 5 "$work/$name.log")"
  py_check "$onnx" || fail "$name: python3-onnx's checker rejects $onnx"
  local rtol=1e-4 engines=""
  if ((!strict)); then
    "$mpigan" export "$src" --vectors "$work/$name-ref.json" --vector-events 3 --vectors-backend reference "$@" \
      >/dev/null 2>&1 || fail "$name: reference vectors failed"
    local s
    s=$(spread "$vec" "$work/$name-ref.json")
    engines=", oneDNN vs reference $s"
    rtol=$(/usr/bin/python3 -c "print(max(1e-4, 2 * $s))")
  fi
  node "$here/check_onnx.mjs" "$onnx" "$vec" --rtol "$rtol" >"$work/$name.ort" 2>&1 ||
    fail "$name: ONNX Runtime disagrees with mpigan (rtol $rtol$engines): $(grep -E 'output|FAIL' "$work/$name.ort")"
  pass "$name: $(grep -o 'max_rel_err=[^ ]*' "$work/$name.ort") (rtol $rtol$engines), $(grep -o '[0-9]* operators' "$work/$name.log")"
}

# 1. The shipped generators.
check 3dgan-5-cond 3dgan-5-cond 1
check 3dgan-5-hlf 3dgan-5-hlf 1
check 3dgan-5-mmd 3dgan-5-mmd 1
check 3dgan-5-mmd-concat 3dgan-5-mmd-concat 1
check 3dgan-5-mmd-concat-800k 3dgan-5-mmd-concat-800k 1
check 3dgan-5-mmd-long 3dgan-5-mmd-long 1
check 3dgan-5-mmd-lateral 3dgan-5-mmd-lateral 1
check 3dgan-5 3dgan-5 1
check 3dgan-5-cond-raw 3dgan-5-cond 1 --raw

# 2. Every architecture after two training steps.
train_two() {
  local name=$1 model=$2 data=$3
  cat >"$work/$name.yaml" <<YAML
name: onnx-$name
seed: 2
threads: 1
model: {$model}
$data
training: {batch: 4, epochs: 1, max_updates: 2}
validation: {enabled: false}
checkpoint: {every: 2}
YAML
  "$mpigan" train "$work/$name.yaml" --out "$work/$name-run" >"$work/$name-train.log" 2>&1 ||
    fail "$name: training failed: $(tail -n 5 "$work/$name-train.log")"
}
train_two tiny-8 "name: tiny-8" "data: {synthetic: {events: 64, validation_events: 16}}"
train_two 3dgan-25 "name: 3dgan-25" "data: {train: '$work/d25/*.h5', validation_fraction: 0.25,
  simulate: {events: 32, energy: [10, 500], events_per_file: 8, dir: '$work/d25'}}"
# the rung with its energy concatenated to a latent on the sphere ([E/100, z sqrt(n)/|z|])
train_two 3dgan-5-concat "name: 3dgan-5, input: concat, noise: sphere, condition: true, hlf_head: true" "data: {
  train: '$work/d5/*.h5', validation_fraction: 0.25,
  simulate: {events: 32, energy: [10, 500], events_per_file: 8, dir: '$work/d5'}}"
train_two anglegan-51 "name: anglegan-51" "data: {train: '$work/d51/*.h5', validation_fraction: 0.25,
  simulate: {events: 32, energy: [50, 400], angle: [60, 120], events_per_file: 8, dir: '$work/d51'}}"
for m in tiny-8 3dgan-25 3dgan-5-concat anglegan-51; do check "$m" "$work/$m-run" 0; done

# 3. The check can fail: one cell moved by 1 %.
/usr/bin/python3 - "$work/3dgan-5-cond.json" "$work/moved.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
d = j["outputs"]["energies"]["data"]
i = max(range(len(d)), key=lambda k: d[k])
d[i] *= 1.01
json.dump(j, open(sys.argv[2], "w"))
PY
node "$here/check_onnx.mjs" "$work/3dgan-5-cond.onnx" "$work/moved.json" >"$work/moved.ort" 2>&1
rc=$?
[[ $rc -eq 1 ]] || fail "a cell moved by 1 % was not caught (exit $rc)"
pass "a cell moved by 1 % is caught: $(grep -o 'failing_elements=[^ ]*' "$work/moved.ort")"
echo "all ONNX export tests passed"
