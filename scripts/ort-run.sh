#!/usr/bin/env bash
# Runs tools/ort-run/ort-run.mjs (an ONNX model on ONNX Runtime's CPU
# execution provider, .npy in and out: the numerical oracle beside PyTorch)
# with the onnxruntime-node that scripts/setup.sh installed into
# third_party/ort/ (or $H20_ORT_NODE_MODULES). Arguments go to ort-run.mjs:
#
#   scripts/ort-run.sh MODEL.onnx --input NAME=FILE.npy ... --output-dir DIR
#                      [--outputs NAME,...] [--no-opt] [--threads N]
#   scripts/ort-run.sh --version      # exit 0 iff ONNX Runtime loads
#
# Exits 1 with a message when node or the package is missing.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
node=$(command -v node || command -v nodejs || true)
if [[ -z $node ]]; then
  echo "ort-run: error: node is not installed (run scripts/setup.sh)" >&2
  exit 1
fi
export H20_ORT_NODE_MODULES=${H20_ORT_NODE_MODULES:-$root/third_party/ort/node_modules}
if [[ ! -f $H20_ORT_NODE_MODULES/onnxruntime-node/package.json ]]; then
  echo "ort-run: error: onnxruntime-node is not installed in $H20_ORT_NODE_MODULES (run scripts/setup.sh)" >&2
  exit 1
fi
exec "$node" "$root/tools/ort-run/ort-run.mjs" "$@"
