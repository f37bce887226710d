#!/usr/bin/env bash
# clang-tidy (Debian 12's, 14) with the checks of .clang-tidy over the unity translation units of
# the given layers of a configured build tree (each includes its layer's .cpp files); findings in
# those layers' own .cpp and .hpp files are reported. Prints them and exits 1 when there is any.
#
#   scripts/tidy.sh [BUILD (build)] [LAYERS ("algos dist worker master sandbox", or "all")]
#
# CI runs the default, the distributed core (clean). `all` adds core, nn, models, data, physics,
# train, deploy, hpo and apps, which still have findings (docs/coding_style.md, "clang-tidy").
# Environment: MPIGAN_JOBS (parallel clang-tidy processes; default: number of cores).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${1:-build}
layers=${2:-algos dist worker master sandbox}
[[ $layers == all ]] && layers="core nn models data physics train deploy algos dist worker master sandbox hpo apps"
layers=${layers// /|}
jobs=${MPIGAN_JOBS:-$(nproc)}
if ! command -v clang-tidy >/dev/null; then
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  echo "== tidy: installing clang-tidy"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends clang-tidy >/dev/null
fi
[[ -f $build/compile_commands.json ]] || { echo "tidy: $build/compile_commands.json missing (configure $build first)" >&2; exit 2; }
units=$(/usr/bin/python3 - "$build" "$layers" <<'PY'
import json, re, sys
build, layers = sys.argv[1], sys.argv[2]
for entry in json.load(open(f"{build}/compile_commands.json")):
    f = entry["file"]
    if re.search(rf"/({layers})/CMakeFiles/[^/]+/Unity/[^/]+\.cxx$", f) or (
            "core" in layers.split("|") and f.endswith("core/kernels/vector_kernels.cpp")):
        print(f)
PY
)
[[ -n $units ]] || { echo "tidy: no translation units found in $build/compile_commands.json" >&2; exit 2; }
filter=".*/($layers)/.*\\.(cpp|hpp)\$"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
t0=$SECONDS
# The build's warnings are the compiler's to report (with -Werror in CI they would come back as
# clang errors); GCC's own pragmas and warning options are unknown to clang.
extra=(--extra-arg=-Wno-error --extra-arg=-Wno-unknown-pragmas --extra-arg=-Wno-unknown-warning-option)
# shellcheck disable=SC2086
printf '%s\n' $units | xargs -P "$jobs" -I{} clang-tidy -p "$build" --quiet "${extra[@]}" --header-filter="$filter" {} \
  >"$out" 2>/dev/null || true
findings=$(grep -E ': (warning|error): ' "$out" | sort -u || true)
n=$(grep -c . <<<"$findings" || true)
echo "== tidy: $(wc -w <<<"$units") translation units in $((SECONDS - t0)) s; $n finding(s)"
if [[ $n -gt 0 ]]; then
  echo "$findings"
  exit 1
fi
