# Sourced by bench/gpu/lent_*.sh: `lent_unpack BUNDLE OUT_DIR` creates OUT_DIR, unpacks the bundle of
# bench/gpu/bundle.sh into a temporary directory ($g; the caller removes it), sources its env.sh
# (the CUDA libraries it found: OUT_DIR/env.txt) and sets mpigan to the bundled binary.
lent_unpack() {
  local bundle=$1 out=$2
  mkdir -p "$out"
  g=$(mktemp -d)
  tar -xJf "$bundle" -C "$g" || { echo "$(basename "$0"): cannot unpack $bundle" >&2; exit 3; }
  # shellcheck disable=SC1091
  source "$g/env.sh" > "$out/env.txt"
  mpigan=$g/build/apps/mpigan
}
