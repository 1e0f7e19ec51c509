#!/usr/bin/env bash
# h20's demo, from a fresh clone: sets up, builds, makes a model with the
# project's own generators (random weights, deterministic), compiles it and
# runs its prefill, then prints TTFT, tokens/s, memory and (on a GPU) the
# FLOP floor and h20's distance from it.
#
#   scripts/demo.sh [llama|v41] [--tokens N] [--device cpu|gpu] [-- H20-RUN ARGS]
#
# llama (default): on a Hopper GPU (H20/H100/H200/H800) the seed-dense model
#   (models/llama/configs/seed-dense.json: hidden 4096, 32 heads x 128, MLP
#   11008, vocab 129280; H20_DEMO_LAYERS layers, default 8: 10.8 GB of
#   float32 weights made once into H20_DEMO_DIR, default ~/.cache/h20-demo)
#   on a 32K-token prompt; on the CPU the 2-layer `tiny` model on 64 tokens
#   (made into the same folder).
# v41: DeepSeek-V4.1's tiny configuration (every layer kind: sliding
#   window, compressed KV with the lightning indexer, heavily compressed KV,
#   MoE with hash and score routing, Engram) exported to ONNX, its fused KV
#   plan printed, compiled for the CPU and run on 64 tokens, and its logits
#   compared with the numpy float32 reference.
# The device: a GPU when nvidia-smi shows one (--device or H20_DEMO_DEVICE
# overrides). Extra arguments after -- go to h20-run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${H20_BUILD_DIR:-$root/build}
model=llama tokens= device=${H20_DEMO_DEVICE:-}
run_args=()
while (($#)); do
  case $1 in
    llama|v41) model=$1 ;;
    --tokens) tokens=${2:?--tokens needs a count}; shift ;;
    --tokens=*) tokens=${1#*=} ;;
    --device) device=${2:?--device needs cpu or gpu}; shift ;;
    --device=*) device=${1#*=} ;;
    --) shift; run_args=("$@"); break ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
    *) echo "demo: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ -z $tokens || $tokens =~ ^[1-9][0-9]*$ ]] || { echo "demo: --tokens takes a positive count, got '$tokens'" >&2; exit 2; }
if [[ -z $device ]]; then
  device=cpu
  if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU; then
    device=gpu
  fi
fi
[[ $device == cpu || $device == gpu ]] || { echo "demo: --device must be cpu or gpu, got '$device'" >&2; exit 2; }

step() { printf '\n== %s\n' "$*" >&2; }
# Setup and build write to a log; the first time they take a while, so say
# how long and where to watch.
log=${TMPDIR:-/tmp}/h20-demo-build.log
if [[ -x $build/bin/h20-opt ]]; then
  step "setting up and building (up to date: seconds; log $log)"
else
  step "setting up and building, the first time only: Debian packages, then about 10-30 minutes of compiling on 2 cores (progress: tail -f $log)"
fi
if ! { "$root/scripts/setup.sh" && "$root/scripts/build.sh"; } >"$log" 2>&1; then
  tail -20 "$log" >&2
  echo "demo: setup or build failed; the whole log is $log" >&2
  exit 1
fi
# The Python with numpy and onnx (setup.sh installs Debian's).
py=python3
"$py" -c "import numpy, onnx" 2>/dev/null || py=/usr/bin/python3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# The GPU's h20 target from its name (nvidia-smi), for the tile choices.
gpu_target() {
  local name
  name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  case " ${name^^} " in
    *" H20 "*) echo h20 ;; *" H100 "*) echo h100 ;; *" H800 "*) echo h800 ;; *) echo h200 ;;
  esac
}

if [[ $model == v41 ]]; then
  tokens=${tokens:-64}
  dir=$out/v41
  step "DeepSeek-V4.1 tiny: generating the checkpoint and a $tokens-token prompt (models/deepseek_v41)"
  "$py" "$root/models/deepseek_v41/generate.py" tiny "$dir" --ids "$tokens" >/dev/null
  "$py" "$root/models/deepseek_v41/export.py" "$dir" "$dir/onnx" --logits last >/dev/null
  step "the fused KV-cache plan for 1M tokens (h20-opt --print-kv-plan)"
  "$build/bin/h20-opt" "$dir/onnx/model.onnx" --emit=planned --target=h200 \
    --max-seq=1048576 --print-kv-plan -o /dev/null
  step "compiling for the CPU and running the prefill"
  # -O1: the tiny model's LLVM compile takes ~50 s at -O3, ~10 s at -O1.
  "$build/bin/h20-opt" "$dir/onnx/model.onnx" --target=cpu --cpu-opt-level=1 --logits=last \
    -o "$out/v41.h20"
  "$build/bin/h20-run" "$out/v41.h20" --ids "$dir/ids-$tokens.npy" --dump-logits "$out/h20.npy" \
    --report "$out/report.json" ${run_args[@]+"${run_args[@]}"}
  step "against the numpy float32 reference (models/deepseek_v41/reference.py)"
  "$py" "$root/models/deepseek_v41/reference.py" "$dir" "$dir/ids-$tokens.npy" "$out/ref.npy" \
    --logits last >/dev/null
  "$build/bin/npy-compare" "$out/h20.npy" "$out/ref.npy" --max-rel-l2 1e-4
  exit 0
fi

if [[ $device == gpu ]]; then
  config=seed-dense layers=${H20_DEMO_LAYERS:-8} tokens=${tokens:-32768}
  dir=${H20_DEMO_DIR:-$HOME/.cache/h20-demo}/$config-${layers}l
else
  config=tiny layers=2 tokens=${tokens:-64}
  dir=${H20_DEMO_DIR:-$HOME/.cache/h20-demo}/$config-${layers}l
fi
cfg=$root/models/llama/configs/$config.json
step "model: $config, $layers layers (models/llama/generate.py, random weights) into $dir"
mkdir -p "$dir"
"$py" "$root/models/llama/generate.py" "$cfg" "$dir" --layers "$layers" --graph >/dev/null
if [[ ! -f $dir/weights.done ]]; then
  "$py" "$root/models/llama/generate.py" "$cfg" "$dir" --layers "$layers" --weights >/dev/null
  touch "$dir/weights.done"
fi
"$py" -c "import json, numpy as np; v = json.load(open('$cfg'))['vocab_size']; \
np.save('$out/ids.npy', np.random.default_rng(0).integers(0, v, (1, $tokens), dtype=np.int64))"

if [[ $device == gpu ]]; then
  target=$(gpu_target)
  step "compiling for --target=$target (bf16, last-position logits, prompts up to $tokens tokens)"
  if "$build/bin/h20-opt" "$dir/model.onnx" --target="$target" --logits=last \
       --max-positions="$tokens" -o "$out/demo.h20"; then
    step "prefill of $tokens tokens on the GPU (one warm-up, then the median of 3)"
    "$build/bin/h20-run" "$out/demo.h20" --ids "$out/ids.npy" --warmup 1 --repeat 3 \
      --report "$out/report.json" ${run_args[@]+"${run_args[@]}"}
    "$py" "$root/models/llama/demo_summary.py" "$cfg" "$tokens" "$out/report.json" --layers "$layers"
    exit 0
  fi
  echo "demo: the GPU compile failed; running the CPU demo instead" >&2
  config=tiny layers=2 tokens=64 dir=$out/tiny cfg=$root/models/llama/configs/tiny.json
  "$py" "$root/models/llama/generate.py" "$cfg" "$dir" --layers 2 --graph --weights >/dev/null
  "$py" -c "import numpy as np; np.save('$out/ids.npy', np.random.default_rng(0).integers(0, 1000, (1, 64), dtype=np.int64))"
fi
step "compiling for the CPU and running a $tokens-token prefill"
"$build/bin/h20-opt" "$dir/model.onnx" --target=cpu --logits=last -o "$out/demo.h20"
"$build/bin/h20-run" "$out/demo.h20" --ids "$out/ids.npy" --report "$out/report.json" \
  ${run_args[@]+"${run_args[@]}"}
"$py" "$root/models/llama/demo_summary.py" "$cfg" "$tokens" "$out/report.json" --layers "$layers"
