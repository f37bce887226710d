#!/usr/bin/env bash
# mpigan in an OCI image, built and run with podman from a Debian 12 base made here (no image
# registry needed: the base is a debootstrap root, imported).
#
#   scripts/container.sh base                 make localhost/mpigan-base:bookworm (debootstrap minbase)
#   scripts/container.sh build [--cuda]       build localhost/mpigan:VERSION (and :latest) from ./Containerfile
#   scripts/container.sh run [PODMAN_OPTS --] CMD ...
#                                             run CMD in the image, the current directory mounted at /work
#   scripts/container.sh save FILE [--docker] write the image as an OCI archive (podman load, Apptainer),
#                                             or with --docker as a docker archive (Sarus's `sarus load`)
#
# `build` makes the base when it is missing. --cuda builds the CUDA backend against the toolkit at
# $CUDA_HOME (default /usr/local/cuda, mounted read-only into the build) and bundles the CUDA, cuDNN,
# cuBLAS and NCCL libraries mpigan links into the image. Environment: MPIGAN_IMAGE (the image's name,
# default localhost/mpigan), MPIGAN_BASE_DIR (the debootstrap root, default /var/tmp/mpigan-base),
# DEBIAN_MIRROR (default: the host's apt mirror), MPIGAN_JOBS (build jobs; default: the host's cores).
#
# Podman runs with runc and no default ulimits (container/containers.conf): the machines this
# was made on refuse crun's cgroup set-up and the default ulimits.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$root/container/containers.conf}
image=${MPIGAN_IMAGE:-localhost/mpigan}
base_image=localhost/mpigan-base:bookworm
base_dir=${MPIGAN_BASE_DIR:-/var/tmp/mpigan-base}
version=$(sed -nE 's/^project\(mpigan VERSION ([0-9.]+).*/\1/p' "$root/CMakeLists.txt")

die() {
  echo "container.sh: $*" >&2
  exit 1
}
need() { command -v "$1" >/dev/null || die "'$1' not found: apt-get install $2"; }

# The host's Debian mirror (deb822 or one-line sources), so the base and apt inside the build use
# what this machine reaches.
host_mirror() {
  local m
  m=$(sed -nE 's/^URIs: *(\S+).*/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | grep -v security | head -1)
  [[ -n $m ]] || m=$(sed -nE 's/^deb +(\[[^]]*\] +)?(\S+) +bookworm .*/\2/p' /etc/apt/sources.list 2>/dev/null | head -1)
  echo "${m:-http://deb.debian.org/debian}"
}

make_base() {
  need debootstrap debootstrap
  need podman "podman runc"
  local mirror=${DEBIAN_MIRROR:-$(host_mirror)}
  if [[ ! -x $base_dir/usr/bin/apt-get ]]; then
    echo "== container: debootstrap bookworm (minbase) from $mirror into $base_dir"
    rm -rf "$base_dir"
    debootstrap --variant=minbase bookworm "$base_dir" "$mirror" >"$base_dir.log" 2>&1 ||
      die "debootstrap failed (log: $base_dir.log): $(tail -3 "$base_dir.log")"
    printf 'deb %s bookworm main\ndeb %s bookworm-updates main\n' "$mirror" "$mirror" >"$base_dir/etc/apt/sources.list"
    rm -rf "$base_dir/var/cache/apt/archives/"*.deb "$base_dir/var/lib/apt/lists/"*
  fi
  echo "== container: importing $base_dir as $base_image"
  tar -C "$base_dir" -c . | podman import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' - "$base_image" >/dev/null
}

build() {
  local cuda=OFF
  [[ ${1:-} == --cuda ]] && cuda=ON
  need podman "podman runc"
  podman image exists "$base_image" || make_base
  local args=(--build-arg "BASE=$base_image" --build-arg "CUDA=$cuda" --build-arg "JOBS=${MPIGAN_JOBS:-$(nproc)}"
              -t "$image:$version" -t "$image:latest" -f "$root/Containerfile")
  if [[ $cuda == ON ]]; then
    local cuda_home=${CUDA_HOME:-/usr/local/cuda}
    [[ -x $cuda_home/bin/nvcc ]] || die "--cuda: no nvcc under $cuda_home (set CUDA_HOME)"
    args+=(-v "$(readlink -f "$cuda_home"):/usr/local/cuda:ro" -t "$image:$version-cuda")
  fi
  echo "== container: building $image:$version (CUDA $cuda)"
  podman build "${args[@]}" "$root"
}

run() {
  local opts=()
  if [[ " $* " == *" -- "* ]]; then
    while [[ $1 != -- ]]; do opts+=("$1"); shift; done
    shift
  fi
  podman run --rm -v "$PWD:/work" -w /work --shm-size 1g "${opts[@]}" "$image:latest" "$@"
}

case "${1:-}" in
  base) make_base ;;
  build) shift; build "$@" ;;
  run) shift; run "$@" ;;
  save)
    [[ -n ${2:-} ]] || die "save FILE [--docker]"
    format=oci-archive
    [[ ${3:-} == --docker ]] && format=docker-archive
    podman save --format "$format" -o "$2" "$image:latest"
    ;;
  -h | --help | "") sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' ;;
  *) die "unknown command '$1' (see --help)" ;;
esac
