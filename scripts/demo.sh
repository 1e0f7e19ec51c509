#!/usr/bin/env bash
# The main job: set up, build, and compile the bundled demo model
# (models/demo/llama_gqa_op23.onnx, a 2-layer GQA Llama exported by
# torch.onnx at opset 23), printing its IR.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
"${H20_BUILD_DIR:-$root/build}/bin/h20-opt" "$root/models/demo/llama_gqa_op23.onnx" "$@"
