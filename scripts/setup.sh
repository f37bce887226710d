#!/usr/bin/env bash
# Installs what mpigan needs on Debian 12 (only what is missing), then configures and builds.
#
#   scripts/setup.sh [--build-dir DIR] [--cuda AUTO|ON|OFF] [--type Release|Debug] [--target T ...]
#                    [--with-slurm] [--with-pytorch] [--werror] [--unity]
#
# --werror: configure with -DMPIGAN_WERROR=ON (every compiler warning fails the build; CI).
# --unity: a unity build (sources compiled in batches of 16: about 40 % less compile time from
#          nothing, coarser incremental rebuilds; CI). Environment: MPIGAN_UNITY=ON does the same.
# Environment: MPIGAN_JOBS (parallel build jobs; default: number of cores).
# Idempotent: a second run installs nothing and rebuilds only what changed.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$root/build"
cuda=AUTO
type=Release
targets=()
with_slurm=0
with_pytorch=0
werror=OFF
unity=${MPIGAN_UNITY:-OFF}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build=${2:?}; shift 2 ;;
    --cuda) cuda=${2:?}; shift 2 ;;
    --type) type=${2:?}; shift 2 ;;
    --target) targets+=("${2:?}"); shift 2 ;;
    --with-slurm) with_slurm=1; shift ;;
    --with-pytorch) with_pytorch=1; shift ;;
    --werror) werror=ON; shift ;;
    --unity) unity=ON; shift ;;
    -h|--help) sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# Debian 12 packages. MPICH, not Open MPI: CMake is pointed at mpicxx.mpich explicitly, so an Open MPI
# installed beside it (python3-mpi4py pulls one in) does not matter.
packages=(build-essential cmake ninja-build pkg-config
          mpich libmpich-dev
          libdnnl-dev ocl-icd-opencl-dev opencl-c-headers
          libeigen3-dev libhdf5-dev zlib1g-dev libyaml-cpp-dev
          libfmt-dev libspdlog-dev libcli11-dev doctest-dev libbenchmark-dev nlohmann-json3-dev libnlopt-cxx-dev
          libonnx-dev libprotobuf-dev python3-onnx
          python3-matplotlib python3-numpy python3-yaml python3-jsonschema)
# Node.js runs the ONNX Runtime check of `mpigan export` (tests/onnx): Debian's, unless one is there.
command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)
((with_slurm)) && packages+=(slurm-wlm munge)
((with_pytorch)) && packages+=(python3-torch python3-numpy python3-h5py)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "== setup: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

jobs=${MPIGAN_JOBS:-$(nproc)}
if [[ ! -f "$build/build.ninja" ]]; then
  echo "== setup: configuring $build (CUDA: $cuda, $type, warnings as errors: $werror, unity build: $unity)"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="$type" -DMPIGAN_CUDA="$cuda" -DMPIGAN_WERROR="$werror" \
    -DCMAKE_UNITY_BUILD="$unity" -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 >/dev/null
else
  # An existing build directory: switch on there too what was asked for.
  if [[ $werror == ON ]]; then cmake "$build" -DMPIGAN_WERROR=ON >/dev/null; fi
  if [[ $unity == ON ]]; then cmake "$build" -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 >/dev/null; fi
fi
echo "== setup: building ${targets[*]:-everything} with $jobs jobs"
if ((${#targets[@]})); then
  cmake --build "$build" -j "$jobs" --target "${targets[@]}"
else
  cmake --build "$build" -j "$jobs"
fi
