#!/usr/bin/env bash
# Install the ONNX Runtime harness dependencies (onnxruntime-node, pinned in
# package-lock.json) into tests/onnx/node_modules. Works from any cwd.
#
# --ignore-scripts is deliberate: onnxruntime-node's postinstall script only
# downloads the CUDA/TensorRT execution providers from NuGet; the CPU runtime
# used by check_onnx.mjs ships inside the npm package itself.
set -euo pipefail

here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

for tool in node npm; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "tests/onnx/setup.sh: error: '$tool' not found in PATH; install Node.js and npm first" >&2
        exit 1
    fi
done

if [[ -d node_modules/onnxruntime-node ]]; then
    echo "tests/onnx/setup.sh: node_modules/onnxruntime-node already present, skipping install"
    exit 0
fi

echo "tests/onnx/setup.sh: installing dependencies into $here/node_modules"
npm ci --ignore-scripts --no-audit --no-fund
