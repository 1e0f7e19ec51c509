#!/usr/bin/env bash
# The main job: set up, build, compile the bundled demo model
# (models/demo/llama_gqa_op23.onnx, a 2-layer GQA Llama exported by
# torch.onnx at opset 23) and run its prefill on a 64-token prompt,
# printing the next token id and the time. Runs on the CPU: the GPU target
# is not built yet (see README "Status").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${H20_BUILD_DIR:-$root/build}
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$build/bin/h20-opt" "$root/models/demo/llama_gqa_op23.onnx" --target=cpu --logits=last \
  -o "$out/demo.h20"
"$build/bin/h20-run" "$out/demo.h20" --ids "$root/models/demo/llama_gqa_op23.ids64.npy" "$@"
