#!/usr/bin/env bash
# Packs a CUDA build made on one machine for a GPU machine that has the NVIDIA driver, the CUDA
# runtime, cuBLAS, cuDNN and NCCL but none of mpigan's host libraries (oneDNN, HDF5, yaml-cpp,
# MPICH, spdlog, fmt, ...) and no package manager: a cluster's compute node image, a container
# with only the CUDA stack, a lent cloud GPU.
#
#   bench/gpu/bundle.sh [--build DIR] [--out FILE.tar.xz]      (defaults: build, .gpu/mpigan-gpu.tar.xz)
#
# The archive holds bin/ (mpigan_test_core, mpigan, mpiexec.hydra, hydra_pmi_proxy, stripped),
# lib/ (every shared library they load, except the driver and the CUDA libraries above),
# lib-glibc/ (this machine's C and C++ runtime, used only where the target's glibc is older),
# build/tests/mpigan_test_core and build/apps/mpigan (wrappers, so that
# `bench/gpu/run_all.sh --skip-build --build DIR/build` runs them), and env.sh.
# On the GPU machine:
#   mkdir -p /tmp/g && tar -xJf mpigan-gpu.tar.xz -C /tmp/g && source /tmp/g/env.sh
#   bench/gpu/run_all.sh --skip-build --build /tmp/g/build --out runs/gpu
# env.sh finds the CUDA libraries (/usr/local/cuda*, the system's, a Python environment's
# nvidia-* wheels) and prints what it chose.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build="$root/build"
out="$root/.gpu/mpigan-gpu.tar.xz"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bundle.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
bins=("$build/tests/mpigan_test_core" "$build/apps/mpigan" /usr/bin/mpiexec.hydra /usr/bin/hydra_pmi_proxy)
for b in "${bins[@]}"; do
  [[ -x $b ]] || { echo "bundle.sh: $b does not exist (build with CUDA first: scripts/setup.sh --cuda ON)" >&2; exit 3; }
done
ldd "$build/tests/mpigan_test_core" | grep -q libcudart ||
  { echo "bundle.sh: $build/tests/mpigan_test_core is not linked with CUDA (configure with -DMPIGAN_CUDA=ON)" >&2; exit 3; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{bin,lib,lib-glibc,build/tests,build/apps}
for b in "${bins[@]}"; do
  cp "$b" "$stage/bin/"
  strip --strip-unneeded "$stage/bin/$(basename "$b")"
done
# What the GPU machine provides itself: the driver and the CUDA libraries.
provided='^(linux-vdso|libcuda\.so|libcudart\.so|libcublas(Lt)?\.so|libcudnn[a-z_]*\.so|libnccl\.so|libnvidia-)'
glibc='^(ld-linux-x86-64|libc|libm|libdl|librt|libpthread|libresolv|libutil|libstdc\+\+|libgcc_s)\.so'
for b in "${bins[@]}"; do ldd "$b"; done | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3} $1 ~ /^\/.*ld-linux/ {print "ld-linux-x86-64.so.2", $1}' |
  sort -u | while read -r name path; do
    if [[ $name =~ $provided ]]; then continue; fi
    if [[ $name =~ $glibc ]]; then cp -L "$path" "$stage/lib-glibc/$name"; else cp -L "$path" "$stage/lib/$name"; fi
  done
glibc_needed=$(getconf GNU_LIBC_VERSION | cut -d' ' -f2)

cat > "$stage/env.sh" <<EOF
# Sourced on the GPU machine: LD_LIBRARY_PATH for the bundle and the machine's CUDA libraries.
_b=\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)
_cuda=""
for _lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do
  _hit=\$( (ldconfig -p 2>/dev/null | awk -v l="\$_lib" '\$1 == l {print \$NF; exit}';
           find /usr/local/cuda*/lib64/ /usr/local/cuda*/targets/x86_64-linux/lib/ /usr/local/nvidia/lib64/ \\
                /usr/lib/x86_64-linux-gnu/ /opt /usr/local/lib /usr/lib/python3* -name "\$_lib" 2>/dev/null) | head -1)
  if [[ -n \$_hit ]]; then
    echo "env.sh: \$_lib: \$_hit"
    _cuda="\$_cuda:\$(dirname "\$_hit")"
  else
    echo "env.sh: \$_lib: NOT FOUND"
  fi
done
export LD_LIBRARY_PATH="\$_b/lib\$_cuda\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
# This bundle's programs were linked against glibc $glibc_needed: where the machine's is older, run
# them through the bundled loader and C/C++ runtime.
_have=\$(getconf GNU_LIBC_VERSION 2>/dev/null | cut -d' ' -f2)
if [[ -z \$_have ]] || [[ \$(printf '%s\n%s\n' "\$_have" "$glibc_needed" | sort -V | head -1) != "$glibc_needed" ]]; then
  export MPIGAN_BUNDLE_LOADER="\$_b/lib-glibc/ld-linux-x86-64.so.2"
  echo "env.sh: glibc \${_have:-unknown} < $glibc_needed: running through the bundled loader"
else
  export MPIGAN_BUNDLE_LOADER=""
  echo "env.sh: glibc \$_have >= $glibc_needed"
fi
export PATH="\$_b/build/apps:\$_b/bin:\$PATH"
EOF
for pair in tests/mpigan_test_core apps/mpigan; do
  cat > "$stage/build/$pair" <<EOF
#!/usr/bin/env bash
_b=\$(cd "\$(dirname "\${BASH_SOURCE[0]}")/../.." && pwd)
if [[ -n \${MPIGAN_BUNDLE_LOADER:-} ]]; then
  exec "\$MPIGAN_BUNDLE_LOADER" --library-path "\$_b/lib-glibc:\$LD_LIBRARY_PATH" "\$_b/bin/$(basename "$pair")" "\$@"
fi
exec "\$_b/bin/$(basename "$pair")" "\$@"
EOF
  chmod +x "$stage/build/$pair"
done
mkdir -p "$(dirname "$out")"
tar -I 'xz -T2' -cf "$out" -C "$stage" .
echo "bundle.sh: $out ($(du -h "$out" | cut -f1)): $(ls "$stage/bin" | tr '\n' ' ')+ $(ls "$stage/lib" | wc -l) libraries"
