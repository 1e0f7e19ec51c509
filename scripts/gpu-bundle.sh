#!/usr/bin/env bash
# Prepares everything the GPU tests need into one directory, on the build
# machine (the compiler needs LLVM/MLIR 22; a GPU machine may have neither):
#   bin/      h20-run, attention-check, sparse-attention-check, moe-check,
#             gemm-fp8-check, h20-gpu-unittests, npy-compare, artifact-info
#   lib/      their non-system shared libraries (protobuf, onnx_proto)
#   models/   the fixtures' ONNX files, ids and reference logits
#   art/      artifacts compiled for the H200 (sm_90): each fixture in f32
#             and bf16 (chunks of 64 tokens, so S = 1024 runs 16 chunks),
#             plus last-position-logits variants
#   gpu-test.sh, the runner; bench/v41-kernels.sh (DeepSeek-V4.1-Flash
#             sparse attention and indexer timings, issue 9); with
#             H20_BUNDLE_BENCH=1 or v41, bench/v41-solo-rank.sh and its
#             art/v41-solo.* (one rank of the full 8-GPU V4.1-Flash, issue 32).
# With H20_BUNDLE_BENCH=1 (or =only: the benchmark part alone, without the
# fixtures, conformance cases and seed-dense test models), also the issue-7
# benchmarks (bench/run-bench.sh runs them on the GPU machine); with
# H20_BUNDLE_BENCH=v41, DeepSeek-V4.1's parts alone: the tiny checkpoint's
# artifacts and the Flash-layer artifacts of bench/v41-layers.sh; with
# H20_BUNDLE_BENCH=tp, the tensor-parallel check's parts alone (issue 8,
# scripts/gpu-tp-check.sh): the fixtures and seed-dense 2 layers compiled
# for 1 GPU and split over T = 2, 4, 8 ranks (art/*.tpT.h20; the full
# bundle has them too); with H20_BUNDLE_BENCH=robust, issue 27's checks
# alone (gpu-robust-check.sh): opcases/ (scripts/gpu-op-cases.sh prepare),
# ranges/ (index inputs in and out of range, with the CPU target's
# outputs) and llama_gqa_op23 in f32 and bf16 for gpu-sanitize.sh:
#   bench/      run-bench.sh, its Python parts, build-info.json, and the
#               cost model's predicted TTFT (section C) for each S, computed
#               here: predicted-S*.json / .txt
#   seed-dense-8l/  the 8-layer seed-dense graph (weights made there)
#   art/seed-dense-8l.S*.h20  one artifact per S (and one with 8192-token
#               chunks, .c8192.h20) (H20_BENCH_TTFT_S, default
#               32768 131072 524288): --max-positions sizes the KV cache, so
#               each S runs with the memory it needs
# Usage: scripts/gpu-bundle.sh OUTDIR [FIXTURES_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${H20_BUILD_DIR:-$root/build}
out=${1:?usage: gpu-bundle.sh OUTDIR [FIXTURES_DIR]}
fixtures=${2:-$root/../shared/fixtures/onnx}
bench=${H20_BUNDLE_BENCH:-0}
[[ $bench == 0 || $bench == 1 || $bench == only || $bench == v41 || $bench == tp || $bench == robust ]] ||
  { echo "gpu-bundle: H20_BUNDLE_BENCH must be 0, 1, only, v41, tp or robust" >&2; exit 2; }
# The Llama fixtures, conformance cases and seed-dense test models.
llama_tests=1
[[ $bench == only || $bench == v41 || $bench == tp || $bench == robust ]] && llama_tests=0
# Tensor-parallel artifacts (fixtures and seed-dense 2 layers at T = 1, 2, 4, 8).
tp_tests=1
[[ $bench == only || $bench == v41 || $bench == robust ]] && tp_tests=0
"$root/scripts/build.sh" >/dev/null
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/models" "$out/art"
for t in h20-run attention-check sparse-attention-check moe-check gemm-fp8-check h20-gpu-unittests npy-compare tensor-compare artifact-info; do
  [[ -x $build/bin/$t ]] && cp "$build/bin/$t" "$out/bin/"
done
# Shared libraries a fresh GPU machine may lack (the rest is glibc/libstdc++).
for t in "$out"/bin/*; do
  ldd "$t" | awk '/=> \// {print $3}' |
    grep -E 'libprotobuf|libonnx_proto' || true
done | sort -u | while read -r so; do cp -L "$so" "$out/lib/"; done
# The V4.1 kernel benchmark needs only bin/ (issue 9; any bundle).
mkdir -p "$out/bench" && cp "$root/bench/v41-kernels.sh" "$root/bench/v41-layers.sh" "$out/bench/"
cp "$root/scripts/gpu-test.sh" "$root/scripts/gpu-sanitize.sh" "$root/scripts/gpu-cp-check.sh" "$root/scripts/gpu-demo-check.sh" "$root/scripts/gpu-v41-check.sh" \
  "$root/scripts/gpu-nccl-check.sh" "$root/scripts/gpu-tp-check.sh" "$root/scripts/gpu-robust-check.sh" "$out/"

# Issue 27 (gpu-robust-check.sh): the op edge cases, index inputs out of
# range, and one fixture prefill in f32 and bf16 for compute-sanitizer.
if [[ $bench == robust ]]; then
  if python3 -c "import onnx, numpy" 2>/dev/null; then rpy=python3; else rpy=/usr/bin/python3; fi
  H20_BIN=$build/bin "$root/scripts/gpu-op-cases.sh" prepare "$out/opcases" >"$out/opcases.log"
  r=$out/ranges
  mkdir -p "$r"
  "$rpy" "$root/test/Target/CPU/Inputs/make_range_cases.py" "$r"
  for m in gather_s rope_s; do
    "$build/bin/h20-opt" "$r/$m.onnx" --target=h200 --compute-type=f32 -o "$r/$m.gpu.h20"
    "$build/bin/h20-opt" "$r/$m.onnx" --target=cpu --cpu-opt-level=0 -o "$r/$m.cpu.h20"
  done
  # The CPU target's outputs, which the GPU's must equal.
  "$build/bin/h20-run" "$r/gather_s.cpu.h20" --input i="$r/i3_ok.npy" --output y="$r/gather-in-range.cpu.npy" >/dev/null
  "$build/bin/h20-run" "$r/rope_s.cpu.h20" --input x="$r/x.npy" --input position_ids="$r/pos_ok.npy" \
    --output y="$r/rope-in-range.cpu.npy" >/dev/null
  m=llama_gqa_op23
  cp "$fixtures/$m.onnx" "$fixtures/$m".ids1024.npy "$out/models/"
  for ct in f32 bf16; do
    "$build/bin/h20-opt" "$fixtures/$m.onnx" --target=h200 --compute-type=$ct \
      --max-positions=1024 --chunk=64 -o "$out/art/$m.$ct.h20"
  done
fi
models=(llama_gqa_op18 llama_gqa_op23 llama_mha_op23)
[[ $llama_tests == 0 ]] && models=()
for m in "${models[@]}"; do
  cp "$fixtures/$m.onnx" "$fixtures/$m".ids*.npy "$fixtures/$m".logits*.npy "$out/models/"
  for ct in f32 bf16; do
    "$build/bin/h20-opt" "$fixtures/$m.onnx" --target=h200 --compute-type=$ct \
      --max-positions=1024 --chunk=64 -o "$out/art/$m.$ct.h20"
    "$build/bin/h20-opt" "$fixtures/$m.onnx" --target=h200 --compute-type=$ct \
      --max-positions=1024 --chunk=64 --logits=last -o "$out/art/$m.$ct.last.h20"
  done
  # The float linears as block-scaled FP8 GEMMs, weights quantised on load
  # (--quantize-linears=fp8; gpu-test.sh: "fp8 linears").
  "$build/bin/h20-opt" "$fixtures/$m.onnx" --target=h200 --compute-type=bf16 \
    --max-positions=1024 --chunk=64 --quantize-linears=fp8 -o "$out/art/$m.bf16.fp8lin.h20" \
    2>/dev/null
done
# Tensor parallelism: each last-position fixture artifact split over T ranks.
if [[ $tp_tests == 1 ]]; then
  for m in llama_gqa_op18 llama_gqa_op23 llama_mha_op23; do
    cp "$fixtures/$m.onnx" "$fixtures/$m".ids*.npy "$out/models/"
    for ct in f32 bf16; do
      [[ -f $out/art/$m.$ct.last.h20 ]] ||
        "$build/bin/h20-opt" "$fixtures/$m.onnx" --target=h200 --compute-type=$ct \
          --max-positions=1024 --chunk=64 --logits=last -o "$out/art/$m.$ct.last.h20"
      for t in 2 4 8; do
        "$build/bin/h20-opt" "$fixtures/$m.onnx" --target=h200 --compute-type=$ct \
          --max-positions=1024 --chunk=64 --logits=last --gpus $t --parallel tensor \
          -o "$out/art/$m.$ct.last.tp$t.h20" 2>>"$out/art/tp-compile.log"
      done
    done
  done
fi

# ONNX's own conformance cases (Attention, RotaryEmbedding, RMSNormalization),
# compiled for the GPU in their own types (f32 stays f32, f16 stays f16); a
# case that does not compile leaves its reason in conformance-art/CASE.err.
conformance=${H20_CONFORMANCE_DIR:-$root/../shared/conformance/onnx-node}
if [[ -d $conformance && $llama_tests == 1 ]]; then
  mkdir -p "$out/conformance-art"
  cp -r "$conformance" "$out/conformance"
  cp "$root/test/Conformance/expected-pass.txt" "$out/conformance-expected.txt"
  for dir in "$conformance"/*/; do
    c=$(basename "$dir")
    "$build/bin/h20-opt" "$dir/model.onnx" --target=h200 --compute-type=f32 \
      -o "$out/conformance-art/$c.h20" 2>"$out/conformance-art/$c.err" || true
    [[ -s $out/conformance-art/$c.err ]] || rm -f "$out/conformance-art/$c.err"
  done
fi

# seed-dense shapes (DESIGN.md section 2), 2 layers, S = 32768: the graph is
# compiled here against a sparse weights file of the right size; the GPU
# machine fills the weights (same seed, same bytes) and compares h20 with
# models/llama/reference.py (PyTorch) on them.
if python3 -c "import onnx, numpy" 2>/dev/null; then py=python3; else py=/usr/bin/python3; fi
cp -r "$root/models/llama" "$out/models/llama"
if [[ $llama_tests == 1 ]]; then
mkdir -p "$out/seed-dense-2l"
"$py" "$root/models/llama/generate.py" seed-dense "$out/seed-dense-2l" --layers 2 --graph
"$build/bin/h20-opt" "$out/seed-dense-2l/model.onnx" --target=h200 --compute-type=bf16 \
  --logits=last --max-positions=32768 --chunk=2048 -o "$out/art/seed-dense-2l.bf16.last.h20"
# The same at S = 262144 (gpu-nccl-check.sh: scaling over N GPUs, faults).
"$build/bin/h20-opt" "$out/seed-dense-2l/model.onnx" --target=h200 --compute-type=bf16 \
  --logits=last --max-positions=262144 -o "$out/art/seed-dense-2l.S262144.h20"
fi
if [[ $tp_tests == 1 ]]; then
  [[ -f $out/seed-dense-2l/model.onnx ]] ||
    "$py" "$root/models/llama/generate.py" seed-dense "$out/seed-dense-2l" --layers 2 --graph
  [[ -f $out/art/seed-dense-2l.bf16.last.h20 ]] ||
    "$build/bin/h20-opt" "$out/seed-dense-2l/model.onnx" --target=h200 --compute-type=bf16 \
      --logits=last --max-positions=32768 --chunk=2048 -o "$out/art/seed-dense-2l.bf16.last.h20"
  for t in 2 4 8; do
    "$build/bin/h20-opt" "$out/seed-dense-2l/model.onnx" --target=h200 --compute-type=bf16 \
      --logits=last --max-positions=32768 --chunk=2048 --gpus $t --parallel tensor \
      -o "$out/art/seed-dense-2l.bf16.last.tp$t.h20" 2>>"$out/art/tp-compile.log"
  done
  rm -f "$out/seed-dense-2l/weights.bin"   # sparse here; generated there
fi
if [[ $llama_tests == 1 ]]; then
rm -f "$out/seed-dense-2l/weights.bin"   # sparse here; generated there
# 64-bit indexing: one seed-dense layer at S = 524288 + 4096, where one
# layer's K holds 32 x 528384 x 128 > 2^31 elements.
mkdir -p "$out/seed-dense-1l"
"$py" "$root/models/llama/generate.py" seed-dense "$out/seed-dense-1l" --layers 1 --graph
"$build/bin/h20-opt" "$out/seed-dense-1l/model.onnx" --target=h200 --compute-type=bf16 \
  --logits=last --max-positions=528384 -o "$out/art/seed-dense-1l.bf16.last.h20"
rm -f "$out/seed-dense-1l/weights.bin"
fi

# DeepSeek-V4.1's tiny config (every layer kind) and tiny-all-picks (the
# same with every top-k keeping all it chooses from: nothing for bf16
# rounding to flip), from bf16 checkpoints as V4.1 ships: the export,
# reference logits (models/deepseek_v41/reference.py, float32 numpy on the
# same weights) at S = 8, 129, 1000, and the GPU artifacts (one chunk of
# 1024 tokens) in f32 and bf16: models/v41 and
# art/v41-tiny.*, models/v41-all-picks and art/v41-all-picks.*. And
# tiny-window (window-only layers) and tiny-chunked (every layer kind but
# Engram), which run a chunk at a time: chunks of 12 tokens, the window
# latents, compressed entries and indexer keys carried in caches
# (models/v41-window, art/v41-window.*, models/v41-chunked,
# art/v41-chunked.*). And tiny-wide (tiny-all-picks with 128-wide KV rows:
# FP8 fake-quantised, the wgmma sparse attention on Hopper; models/v41-wide,
# art/v41-wide.*). Each reference also writes quant-S.json (reference.py
# --quant-margins: how close each FP8 / FP4 rounding is to flipping).
# v41_model CFG DIR GENERATE-ARGS... -- EXPORT-ARGS...: a random
# checkpoint of CFG, its export to DIR, ids and reference logits at S = 8,
# 129, 1000 (the checkpoint itself is dropped).
v41_model() {
  local cfg=$1 dir=$2 gen=() exp=()
  shift 2
  while [[ $# -gt 0 && $1 != -- ]]; do gen+=("$1"); shift; done
  [[ $# -gt 0 ]] && shift
  exp=("$@")
  mkdir -p "$dir"
  "$py" "$root/models/deepseek_v41/generate.py" "$cfg" "$dir/ckpt" "${gen[@]}" --ids 8 129 1000 >/dev/null
  "$py" "$root/models/deepseek_v41/export.py" "$dir/ckpt" "$dir" "${exp[@]}" >/dev/null
  for S in 8 129 1000; do
    cp "$dir/ckpt/ids-$S.npy" "$dir/"
    "$py" "$root/models/deepseek_v41/reference.py" "$dir/ckpt" "$dir/ids-$S.npy" "$dir/ref-$S.npy" \
      --quant-margins "$dir/quant-$S.json" >/dev/null
  done
}
# v41_art ONNX NAME COMPUTE [H20-OPT ARGS...]: a tiny V4.1 model's GPU
# artifact art/NAME.h20 (h200, prompts up to 1024 tokens).
v41_art() {
  local onnx=$1 name=$2 ct=$3
  shift 3
  "$build/bin/h20-opt" "$onnx" --target=h200 --compute-type="$ct" --max-positions=1024 "$@" \
    -o "$out/art/$name.h20" 2>/dev/null
}
if [[ $bench != only && $bench != tp && $bench != robust ]]; then
  for cfg in tiny tiny-all-picks tiny-window tiny-chunked tiny-wide; do
    name=${cfg/#tiny-/}
    v41=$out/models/v41${cfg#tiny}
    v41_model "$cfg" "$v41" --dtype bf16
    rm -rf "$v41/ckpt"
    chunk=(); [[ $cfg == tiny-window || $cfg == tiny-chunked ]] && chunk=(--chunk=12)
    for ct in f32 bf16; do
      v41_art "$v41/model.onnx" "v41-$name.$ct" "$ct" "${chunk[@]}"
      # tiny (Engram too) also in chunks of 12: art/v41-tiny-c12.*.
      if [[ $cfg == tiny ]]; then
        v41_art "$v41/model.onnx" "v41-tiny-c12.$ct" "$ct" --chunk=12
        # And with every gather-only table (the token embedding, Engram's
        # n-gram tables) in pinned host memory: art/v41-tiny-c12h.*.
        v41_art "$v41/model.onnx" "v41-tiny-c12h.$ct" "$ct" --chunk=12 --host-tables=all
      fi
      # Chunks of 20 (>= the window's 15 rows before a chunk, not a divisor
      # of 16, 129 or 1000): the window latents in rings of 15 + 20 rows
      # (art/v41-{tiny,window,chunked}-c20.*); chunks of 12 keep them in
      # caches of every position.
      if [[ $cfg != tiny-all-picks && $cfg != tiny-wide ]]; then
        v41_art "$v41/model.onnx" "v41-$name-c20.$ct" "$ct" --chunk=20
      fi
      # Chunks of 10 and 7, which split the compressors' groups of 4 (and
      # 2): partial groups carried into the next chunk
      # (art/v41-{tiny,chunked}-c{10,7}.*).
      if [[ $cfg == tiny || $cfg == tiny-chunked ]]; then
        for c in 10 7; do
          v41_art "$v41/model.onnx" "v41-$name-c$c.$ct" "$ct" --chunk=$c
        done
      fi
    done
  done
  # tiny-fp8-engram: Engram tables as the release stores them (FP8 rows,
  # ue8m0 scales per 32 channels), kept FP8 (export.py --fp8-engram) and
  # read from pinned host memory (--host-tables=all), in chunks of 12
  # (art/v41-fp8-engram.{f32,bf16}.h20); references from reference.py on
  # the same checkpoint.
  ve=$out/models/v41-fp8-engram
  v41_model tiny-fp8-engram "$ve" --dtype bf16 --engram-fp8 -- --fp8-engram
  rm -rf "$ve/ckpt"
  for ct in f32 bf16; do
    v41_art "$ve/model.onnx" "v41-fp8-engram.$ct" "$ct" --chunk=12 --host-tables=all
  done
  # tiny-all-picks from an FP8 checkpoint (generate.py --quantize fp8),
  # exported with --fp8-linears (art/v41-all-picks-fp8.{f32,bf16,bf16-c12}.h20:
  # FP8 GEMMs where the shapes allow) and without (the weights dequantised
  # on export: art/v41-all-picks-fp8.deq-bf16.h20); references from
  # reference.py on the same checkpoint.
  v8=$out/models/v41-all-picks-fp8
  v41_model tiny-all-picks "$v8" --quantize fp8 -- --fp8-linears
  "$py" "$root/models/deepseek_v41/export.py" "$v8/ckpt" "$v8/deq" >/dev/null
  rm -rf "$v8/ckpt"
  for ct in f32 bf16; do
    v41_art "$v8/model.onnx" "v41-all-picks-fp8.$ct" "$ct"
  done
  v41_art "$v8/model.onnx" v41-all-picks-fp8.bf16-c12 bf16 --chunk=12
  v41_art "$v8/deq/model.onnx" v41-all-picks-fp8.deq-bf16 bf16
  # The FP8 linears kept FP8 in memory but run as bf16 GEMMs on a
  # dequantised temporary (--fp8-gemm=dequantize): bf16 activations.
  v41_art "$v8/model.onnx" v41-all-picks-fp8.bf16-deqgemm bf16 --fp8-gemm=dequantize
  # tiny-all-picks from an FP8 checkpoint with FP4 routed experts
  # (generate.py --quantize fp8-fp4-experts) exported with --fp4-experts
  # (art/v41-all-picks-fp4.{f32,bf16}.h20: the experts stay MXFP4 on the
  # GPU, the linears widened) and with --fp8-linears too
  # (art/v41-all-picks-fp4.fp8-bf16.h20, as the V4.1 benchmarks run).
  v4=$out/models/v41-all-picks-fp4
  v41_model tiny-all-picks "$v4" --quantize fp8-fp4-experts -- --fp4-experts
  "$py" "$root/models/deepseek_v41/export.py" "$v4/ckpt" "$v4/fp8" --fp8-linears --fp4-experts >/dev/null
  rm -rf "$v4/ckpt"
  for ct in f32 bf16; do
    v41_art "$v4/model.onnx" "v41-all-picks-fp4.$ct" "$ct"
  done
  v41_art "$v4/fp8/model.onnx" v41-all-picks-fp4.fp8-bf16 bf16
  # tiny-fp8-experts (hidden and expert intermediate 128) with MXFP4
  # experts on the bf16 and the FP8 expert GEMM
  # (art/v41-fp8-experts.{bf16,fp8x}.h20; the latter --expert-gemm=fp8).
  vx=$out/models/v41-fp8-experts
  v41_model tiny-fp8-experts "$vx" --quantize fp8-fp4-experts -- --fp4-experts
  rm -rf "$vx/ckpt"
  v41_art "$vx/model.onnx" v41-fp8-experts.bf16 bf16
  v41_art "$vx/model.onnx" v41-fp8-experts.fp8x bf16 --expert-gemm=fp8
  # tiny-qat (the KV, compressed-KV and indexer fake quantisation on) from
  # an FP8 checkpoint with MXFP4 experts, in bf16 and f32, FP8 and
  # dequantised GEMMs, and its dequantised export: bench/v41-accuracy.sh's
  # compile step without the Flash-shaped part (models/v41-qat-fp4,
  # art/v41-qat-fp4.*.h20; gpu-test.sh's deepseek section gates them).
  PYTHON=$py H20_ACC_FLASH=0 "$root/bench/v41-accuracy.sh" compile "$out" || exit 1
  # Expert parallelism (h20-opt --gpus T --parallel tensor: each rank holds
  # E / T of the routed experts, an all-reduce sums their shares) for T =
  # 2, 4, 8: art/BASE.tpT.h20 beside art/BASE.h20, which
  # scripts/gpu-tp-check.sh runs on T virtual ranks against BASE on one GPU.
  for t in 2 4 8; do
    for ct in f32 bf16; do
      v41_art "$out/models/v41-all-picks/model.onnx" "v41-all-picks.$ct.tp$t" "$ct" \
        --gpus $t --parallel tensor
      v41_art "$v4/model.onnx" "v41-all-picks-fp4.$ct.tp$t" "$ct" --gpus $t --parallel tensor
    done
    v41_art "$out/models/v41-chunked/model.onnx" "v41-chunked-c20.f32.tp$t" f32 --chunk=20 \
      --gpus $t --parallel tensor
    # bf16 splits the sparse attention and indexers by query rows too
    # (the kernels run 16-bit only; chunks of 20 divide over 2 and 4
    # ranks, not 8, where the split is withdrawn); each beside the same
    # split with --split-attention-rows=false (art/BASE.tpT.rows-off.h20),
    # which must give the same logits but for the output projection's GEMM
    # run on 1/T of the rows (gpu-tp-check.sh).
    v41_art "$out/models/v41-chunked/model.onnx" "v41-chunked-c20.bf16.tp$t" bf16 --chunk=20 \
      --gpus $t --parallel tensor
    v41_art "$out/models/v41-chunked/model.onnx" "v41-chunked-c20.bf16.tp$t.rows-off" bf16 \
      --chunk=20 --gpus $t --parallel tensor --split-attention-rows=false
    v41_art "$out/models/v41-all-picks/model.onnx" "v41-all-picks.bf16.tp$t.rows-off" bf16 \
      --gpus $t --parallel tensor --split-attention-rows=false
    # The FP8 checkpoint: its FP8 output projection is split by rows too.
    v41_art "$v8/model.onnx" "v41-all-picks-fp8.bf16.tp$t" bf16 --gpus $t --parallel tensor
    v41_art "$v8/model.onnx" "v41-all-picks-fp8.bf16.tp$t.rows-off" bf16 --gpus $t \
      --parallel tensor --split-attention-rows=false
  done
  # DeepSeek-V4.1-Flash-shaped layers at full width (gpu-tp-check.sh): two
  # flash-layers (--graph-only: h20-run makes dummy weights) with FP8
  # linears and MXFP4 experts, prompts up to 32768 tokens, on one GPU and
  # split over T = 2, 4, 8 ranks, and at T = 8 with the attention whole
  # (art/v41-flash-l2.S32768(.tpT)(.rows-off).h20).
  flg=$(mktemp -d)
  "$py" "$root/models/deepseek_v41/export.py" --graph-only flash-layers "$flg" --layers 2 \
    --logits last --fp8-linears --fp4-experts >/dev/null
  # Chunks of 8448 (not the MoE default, 32768 here): up to 8 virtual
  # ranks share one GPU, each with its own arena.
  flash_art() { # NAME H20-OPT ARGS...
    local name=$1
    shift
    "$build/bin/h20-opt" "$flg/model.onnx" --target=h200 --compute-type=bf16 --logits=last \
      --max-positions=32768 --chunk=8448 "$@" -o "$out/art/$name.h20" 2>/dev/null
  }
  flash_art v41-flash-l2.S32768
  for t in 2 4 8; do
    flash_art v41-flash-l2.S32768.tp$t --gpus $t --parallel tensor
  done
  flash_art v41-flash-l2.S32768.tp8.rows-off --gpus 8 --parallel tensor --split-attention-rows=false
  rm -rf "$flg"
  # Block-scaled FP8 linears (models/deepseek_v41/fp8_linear.py): weights
  # kept FP8 on the GPU, its inputs and both references (models/fp8-linear*,
  # art/fp8-linear*.h20).
  # fp8-linear-k640: K = 640, whose 5 scale blocks per row cuBLASLt reads
  # padded to 8; fp8-linear-n520: N = 520, whose two linears run on
  # dequantised copies (bf16 GEMMs), the head on FP8.
  for f8 in fp8-linear fp8-linear-k640 fp8-linear-n520; do
    shape=()
    [[ $f8 == fp8-linear-k640 ]] && shape=(--k 640 --n 512 --vocab 512)
    [[ $f8 == fp8-linear-n520 ]] && shape=(--n 520 --vocab 512)
    "$py" "$root/models/deepseek_v41/fp8_linear.py" "$out/models/$f8" "${shape[@]}" --tokens 8 129 \
      >/dev/null
    "$build/bin/h20-opt" "$out/models/$f8/model.onnx" --target=h200 --compute-type=bf16 \
      -o "$out/art/$f8.h20" 2>/dev/null
  done
fi

# Issue-7 benchmarks (bench/run-bench.sh): seed-dense, 8 layers, compiled
# once per S; the cost model's prediction for the same graph (section C,
# no GPU needed) from its attn-level IR with the last-position LM head.
if [[ $bench == 1 || $bench == only ]]; then
  sd=$out/seed-dense-8l
  mkdir -p "$sd" "$out/bench"
  "$py" "$root/models/llama/generate.py" seed-dense "$sd" --layers 8 --graph
  # Default chunk (8448 tokens on an H200) for bench B; 8192-token chunks
  # for the chunk-size comparison and bench/cp-scaling.sh (N ranks need S
  # in whole multiples of 2N chunks).
  for S in ${H20_BENCH_TTFT_S:-32768 131072 524288}; do
    "$build/bin/h20-opt" "$sd/model.onnx" --target=h200 --compute-type=bf16 \
      --logits=last --max-positions="$S" -o "$out/art/seed-dense-8l.S$S.h20"
    "$build/bin/h20-opt" "$sd/model.onnx" --target=h200 --compute-type=bf16 \
      --logits=last --max-positions="$S" --chunk=8192 -o "$out/art/seed-dense-8l.S$S.c8192.h20"
    # Issue 33: the linears as block-scaled FP8 GEMMs (run-bench.sh B).
    "$build/bin/h20-opt" "$sd/model.onnx" --target=h200 --compute-type=bf16 --logits=last \
      --max-positions="$S" --quantize-linears=fp8 -o "$out/art/seed-dense-8l.S$S.fp8lin.h20"
  done
  "$build/bin/h20-opt" "$sd/model.onnx" --emit=attn -o "$sd/model.attn.mlir"
  for S in ${H20_BENCH_TTFT_S:-32768 131072 524288}; do
    "$build/bin/h20-opt" "$sd/model.attn.mlir" --h20-logits-last \
      --h20-predict-prefill="targets=h20,h200 gpus=1,8 seq-len=$S element-bytes=2 output=$out/bench/predicted-S$S.json" \
      -o /dev/null >"$out/bench/predicted-S$S.txt"
  done
  rm -f "$sd/weights.bin" "$sd/model.attn.mlir"
fi
if [[ $bench != 0 && $bench != tp && $bench != robust ]]; then
  mkdir -p "$out/bench"
  # Issue 9 (bench/v41-layers.sh): one V4.1-Flash-shaped layer of each kind
  # at 128K and 512K, from --graph-only exports (no weights here: the GPU
  # run uses h20-run --dummy-weights, whose weights of one shape and type
  # share a buffer: the two-layer reindex model's 20 GiB + a 103 GB arena
  # fit one H200 at 512K). H20_V41_LAYER_KINDS picks kinds (unset: all of
  # window r2 r1-candidates r1-reindex; empty: none).
  kinds=${H20_V41_LAYER_KINDS-window r2 r1-candidates r1-reindex}
  for k in $kinds; do
    [[ " window r2 r1-candidates r1-reindex " == *" $k "* ]] ||
      { echo "gpu-bundle: H20_V41_LAYER_KINDS: unknown kind '$k'" >&2; exit 2; }
  done
  fl=$(mktemp -d)
  for spec in "window:flash-layers --layers 1" "r2:flash-r2" "r1-candidates:flash-r1-candidates" \
              "r1-reindex:flash-r1-reindex"; do
    kind=${spec%%:*}
    [[ " $kinds " == *" $kind "* ]] || continue
    read -r -a cfg <<<"${spec#*:}"
    "$py" "$root/models/deepseek_v41/export.py" --graph-only "${cfg[0]}" "$fl/$kind" --logits last \
      "${cfg[@]:1}" >/dev/null
    for S in 131072 524288; do
      "$build/bin/h20-opt" "$fl/$kind/model.onnx" --target=h200 --compute-type=bf16 --logits=last \
        --max-positions=$S -o "$out/art/v41-flash-$kind.S$S.h20" 2>/dev/null
    done
  done
  # Issue 32 (bench/v41-solo-rank.sh): rank 0 of the full V4.1-Flash
  # 8-GPU program, attention split by rows and whole, at 128K and 512K
  # (H20_V41_SOLO=0: skipped).
  if [[ ${H20_V41_SOLO:-1} != 0 ]]; then
    PYTHON=$py "$root/bench/v41-solo-rank.sh" compile "$out" || exit 1
  fi
  # Issue 30 (bench/v41-flash-deep.sh): the deepest Flash-shaped model of
  # every layer kind that fits the GPU, with FP8 linears and MXFP4 routed
  # experts, chunked, at 128K and 512K: H20_V41_DEEP_CONFIG, default
  # flash-16 (16 layers, 117 GiB at 512K: a 141 GB H200); flash-8 (8
  # layers, 61 GiB) for 80 GB cards. H20_V41_DEEP=0: skipped.
  if [[ ${H20_V41_DEEP:-1} != 0 ]]; then
    deep=${H20_V41_DEEP_CONFIG:-flash-16}
    # A config with Engram layers (flash-16e) exports from a directory
    # holding its config.json and a token map (random, seeded: the
    # benchmark's ids are random too).
    src=$deep
    if "$py" - "$root/models/deepseek_v41" "$deep" "$fl/deep-src" <<'PY'
import json, os, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import config
cfg = config.load(sys.argv[2])
if not cfg["engram_layer_ids"]:
    sys.exit(1)
os.makedirs(sys.argv[3], exist_ok=True)
with open(os.path.join(config.CONFIG_DIR, sys.argv[2] + ".json")) as f:
    raw = json.load(f)
with open(os.path.join(sys.argv[3], "config.json"), "w") as f:
    json.dump(raw, f)
rng = np.random.default_rng(int(cfg.get("seed", 0)) + 7)
np.save(os.path.join(sys.argv[3], "engram_token_map.npy"),
        rng.integers(0, cfg["engram_compressed_vocab_size"], cfg["vocab_size"], dtype=np.int64))
PY
    then
      src=$fl/deep-src
    fi
    "$py" "$root/models/deepseek_v41/export.py" --graph-only "$src" "$fl/deep" --logits last \
      --fp8-linears --fp4-experts --fp8-engram >/dev/null
    for S in 131072 524288; do
      "$build/bin/h20-opt" "$fl/deep/model.onnx" --target=h200 --compute-type=bf16 --logits=last \
        --max-positions=$S -o "$out/art/v41-flash-deep-$deep.S$S.h20" 2>/dev/null
    done
  fi
  rm -rf "$fl"
  cp "$root/bench/v41-flash-deep.sh" "$root/bench/v41_flops.py" "$out/bench/"
  # The cost model's kernel rates per target (a module without work), for
  # the benchmarks' measured-beside-model tables.
  echo 'module {}' >"$out/bench/empty.mlir"
  "$build/bin/h20-opt" "$out/bench/empty.mlir" -o /dev/null \
    --h20-predict-prefill="targets=h20,h100,h200,h800 gpus=1 output=$out/bench/cost-model.json" >/dev/null
  rm -f "$out/bench/empty.mlir"
  cp "$root"/bench/{run-bench.sh,l2-attribution.sh,cp-scaling.sh,attn_torch.py,attn_check_torch.py,attn-variants.sh,ttft_torch.py,cuda_timing.py,summarize.py,plot.py} "$out/bench/"
  commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
  dirty=false
  [[ -n $(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null) ]] && dirty=true
  printf '{"commit": "%s", "dirty": %s, "bundled": "%s", "ttft_s": "%s"}\n' "$commit" "$dirty" \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${H20_BENCH_TTFT_S:-32768 131072 524288}" >"$out/bench/build-info.json"
fi
echo "gpu-bundle: $(du -sh "$out" | cut -f1) in $out"
