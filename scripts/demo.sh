#!/usr/bin/env bash
# The main job: set up, build, compile the bundled demo model
# (models/demo/llama_gqa_op23.onnx, a 2-layer GQA Llama exported by
# torch.onnx at opset 23) and run its prefill on a 64-token prompt,
# printing the next token id and the time. On the GPU (H20/H100/H200/H800,
# compute capability 9.x) when one is present and the CUDA toolkit's NVRTC
# can compile for it, on the CPU otherwise; H20_DEMO_DEVICE=cpu|gpu forces
# one. Extra arguments go to h20-run (e.g. --report r.json).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${H20_BUILD_DIR:-$root/build}
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
model=$root/models/demo/llama_gqa_op23.onnx
ids=$root/models/demo/llama_gqa_op23.ids64.npy
device=${H20_DEMO_DEVICE:-}
if [[ -z $device ]]; then
  device=cpu
  if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU; then
    device=gpu
  fi
fi
if [[ $device == gpu ]]; then
  if "$build/bin/h20-opt" "$model" --target=h200 --logits=last --max-positions=64 \
       -o "$out/demo.h20" 2>"$out/gpu-compile.err"; then
    export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    "$build/bin/h20-run" "$out/demo.h20" --ids "$ids" --device gpu "$@"
    exit $?
  fi
  echo "demo: the GPU compile failed, running on the CPU instead:" >&2
  cat "$out/gpu-compile.err" >&2
fi
"$build/bin/h20-opt" "$model" --target=cpu --logits=last -o "$out/demo.h20"
"$build/bin/h20-run" "$out/demo.h20" --ids "$ids" "$@"
