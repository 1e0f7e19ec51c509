#!/usr/bin/env bash
# Runs every GPU test and prints a summary table. On a machine that builds
# h20 (LLVM/MLIR 22 installed), it prepares the bundle itself; on a GPU
# machine without the compiler, give it a bundle made by gpu-bundle.sh.
#   scripts/gpu-test.sh [BUNDLE_DIR]
# Tests: attention-check (the attention kernel vs an fp64 reference),
# sparse-attention-check and moe-check (DeepSeek-V4.1's kernels),
# h20-gpu-unittests (runtime on the GPU: GEMMs, program execution), and the
# fixtures end to end: 3 models x {f32, bf16} x S = 8, 64, 1024 (chunked
# prefill, 64-token chunks) against the PyTorch float32 logits: relative L2
# <= 1e-3 (f32) / 2e-2 (bf16) and the same next token; plus the
# last-position LM head against the reference's last row; and each bf16
# with its linears as block-scaled FP8 GEMMs (--quantize-linears=fp8:
# weights quantised per 128 x 128 block on load, activations per 1 x 128
# on the fly) at 1e-1 (FP8 activations, as the V4.1 FP8 checkpoint's
# gate) and the same next token.
# Results: BUNDLE/results/gpu-tests.json (and $OUT/ when set). Exit 1 if any
# test failed; 0 with every test SKIPped when there is no GPU.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=${1:-}
if [[ -z $bundle ]]; then
  if [[ -x $here/gpu-bundle.sh ]]; then
    bundle=$(mktemp -d)/bundle
    "$here/gpu-bundle.sh" "$bundle" || exit 1
  else
    bundle=$here
  fi
fi
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
results=$bundle/results
mkdir -p "$results"
log=$results/gpu-tests.log
: >"$log"
rows=()
json=()
failed=0
# H20_GPU_SECTIONS picks parts: kernels fixtures conformance deepseek seed (default: all);
# seed2 is the 2-layer seed-dense check alone (seed runs it and the 1-layer 528K one).
sections=${H20_GPU_SECTIONS:-kernels fixtures conformance deepseek seed}
want() { [[ " $sections " == *" $1 "* ]]; }
# logits_case ART WEIGHTS-DIR IDS REF TOL OUT: one h20-run prefill of the
# token ids IDS, its logits to OUT compared with REF (rel. L2 <= TOL and the
# same next token); sets st (PASS or FAIL) and cmp (npy-compare's line).
logits_case() {
  cmp=
  if "$bin/h20-run" "$1" --weights-dir "$2" --ids "$3" --dump-logits "$6" >>"$log" 2>&1 &&
     cmp=$("$bin/npy-compare" "$6" "$4" --max-rel-l2 "$5" 2>&1); then
    st=PASS
  else
    st=FAIL
  fi
}
record() { # name status detail
  rows+=("$(printf '%-44s %-5s %s' "$1" "$2" "$3")")
  # Also at once, timed, on stderr: a run cut by a time limit still shows
  # what passed and where its time went (the table below is printed last).
  printf '[%s] %s\n' "$(date +%T)" "${rows[${#rows[@]} - 1]}" >&2
  local d=${3//\\/\\\\}
  d=${d//\"/\\\"}
  json+=("{\"test\": \"$1\", \"status\": \"$2\", \"detail\": \"$d\"}")
  [[ $2 == FAIL ]] && failed=1
}

if want kernels && [[ -x $bin/attention-check ]]; then
  if out=$("$bin/attention-check" 2>&1); then st=PASS; else st=FAIL; fi
  echo "$out" >>"$log"
  grep -q '^SKIP' <<<"$out" && st=SKIP
  record attention-check $st "$(grep -cE '^PASS' <<<"$out") cases passed; $(grep -E 'TFLOP/s' <<<"$out" | tail -1)"
fi
if want kernels && [[ -x $bin/sparse-attention-check ]]; then
  if out=$("$bin/sparse-attention-check" 2>&1); then st=PASS; else st=FAIL; fi
  echo "$out" >>"$log"
  grep -q '^SKIP' <<<"$out" && st=SKIP
  record sparse-attention-check $st "$(grep -cE '^PASS' <<<"$out") cases passed"
fi
if want kernels && [[ -x $bin/moe-check ]]; then
  if out=$("$bin/moe-check" 2>&1); then st=PASS; else st=FAIL; fi
  echo "$out" >>"$log"
  grep -q '^SKIP' <<<"$out" && st=SKIP
  record moe-check $st "$(grep -cE '^PASS' <<<"$out") cases passed"
fi
if want kernels && [[ -x $bin/h20-gpu-unittests ]]; then
  if out=$("$bin/h20-gpu-unittests" 2>&1); then st=PASS; else st=FAIL; fi
  echo "$out" >>"$log"
  grep -q 'SKIPPED' <<<"$out" && ! grep -q '\[  PASSED  \] [1-9]' <<<"$out" && st=SKIP
  record h20-gpu-unittests $st "$(grep -E '^\[  (PASSED|FAILED) ' <<<"$out" | tr '\n' ' ')"
fi

gpu=yes
"$bin/h20-run" "$bundle/art/llama_gqa_op23.f32.h20" --ids "$bundle/models/llama_gqa_op23.ids8.npy" \
  --weights-dir "$bundle/models" >/dev/null 2>"$results/probe.err" || {
  grep -q "no CUDA-capable GPU" "$results/probe.err" && gpu=no
}
want fixtures && for m in llama_gqa_op18 llama_gqa_op23 llama_mha_op23; do
  for ct in f32 bf16; do
    tol=1e-3
    [[ $ct == bf16 ]] && tol=2e-2
    for S in 8 64 1024; do
      name="$m $ct S=$S"
      if [[ $gpu == no ]]; then record "$name" SKIP "no GPU"; continue; fi
      o=$results/$m.$ct.$S
      if ! "$bin/h20-run" "$bundle/art/$m.$ct.h20" --ids "$bundle/models/$m.ids$S.npy" \
          --weights-dir "$bundle/models" --dump-logits "$o.npy" --report "$o.json" >>"$log" 2>&1; then
        record "$name" FAIL "h20-run failed (see gpu-tests.log)"
        continue
      fi
      if cmp=$("$bin/npy-compare" "$o.npy" "$bundle/models/$m.logits$S.npy" --max-rel-l2 $tol 2>&1); then
        st=PASS
      else
        st=FAIL
      fi
      echo "$cmp" >>"$log"
      record "$name" $st "$(tr '\n' ' ' <<<"$cmp")"
    done
    name="$m $ct S=1024 logits=last"
    if [[ $gpu == no ]]; then record "$name" SKIP "no GPU"; continue; fi
    o=$results/$m.$ct.last
    if "$bin/h20-run" "$bundle/art/$m.$ct.last.h20" --ids "$bundle/models/$m.ids1024.npy" \
        --weights-dir "$bundle/models" --dump-logits "$o.npy" --report "$o.json" >>"$log" 2>&1 &&
       cmp=$("$bin/npy-compare" "$o.npy" "$bundle/models/$m.logits1024.npy" --max-rel-l2 $tol \
             --ref-last-row 2>&1); then
      record "$name" PASS "$(tr '\n' ' ' <<<"$cmp")"
    else
      record "$name" FAIL "$(tr '\n' ' ' <<<"${cmp:-h20-run failed}")"
    fi
  done
  [[ -f $bundle/art/$m.bf16.fp8lin.h20 ]] || continue
  for S in 8 1024; do
    name="$m bf16 fp8 linears S=$S"
    if [[ $gpu == no ]]; then record "$name" SKIP "no GPU"; continue; fi
    o=$results/$m.fp8lin.$S
    if "$bin/h20-run" "$bundle/art/$m.bf16.fp8lin.h20" --ids "$bundle/models/$m.ids$S.npy" \
        --weights-dir "$bundle/models" --dump-logits "$o.npy" --report "$o.json" >>"$log" 2>&1 &&
       cmp=$("$bin/npy-compare" "$o.npy" "$bundle/models/$m.logits$S.npy" --max-rel-l2 1e-1 2>&1); then
      record "$name" PASS "$(tr '\n' ' ' <<<"$cmp")"
    else
      record "$name" FAIL "$(tr '\n' ' ' <<<"${cmp:-h20-run failed}")"
    fi
  done
done

# ONNX conformance cases on the GPU target: every output of every case
# within |out - ref| <= 1e-3 + 1e-3 |ref| (f16: 2e-3), like the CPU column.
if want conformance && [[ -d $bundle/conformance ]]; then
  cpass=0 ctotal=0
  : >"$results/conformance-gpu.txt"
  for dir in "$bundle"/conformance/*/; do
    c=$(basename "$dir")
    ctotal=$((ctotal + 1))
    art=$bundle/conformance-art/$c.h20
    w=$results/conformance/$c
    mkdir -p "$w"
    if [[ $gpu == no ]]; then
      echo "$c SKIP no GPU" >>"$results/conformance-gpu.txt"
      continue
    fi
    if [[ ! -f $art ]]; then
      echo "$c FAIL compile: $(grep -m1 -o 'error: .*' "$bundle/conformance-art/$c.err" 2>/dev/null | cut -c8-140)" \
        >>"$results/conformance-gpu.txt"
      continue
    fi
    if ! "$bin/h20-run" "$art" --inputs-from "$dir/test_data_set_0" --outputs-to "$w" >"$w/run.log" 2>&1; then
      echo "$c FAIL run: $(grep -m1 -o 'error: .*' "$w/run.log" | cut -c8-140)" >>"$results/conformance-gpu.txt"
      continue
    fi
    ok=1
    for ref in "$dir"/test_data_set_0/output_*.pb; do
      if ! "$bin/tensor-compare" "$w/$(basename "$ref")" "$ref" >"$w/compare.log" 2>&1; then
        ok=0
        echo "$c FAIL compare $(basename "$ref"): $(head -1 "$w/compare.log")" >>"$results/conformance-gpu.txt"
        break
      fi
    done
    if [[ $ok == 1 ]]; then
      echo "$c PASS" >>"$results/conformance-gpu.txt"
      cpass=$((cpass + 1))
    fi
  done
  if [[ $gpu == no ]]; then
    record "ONNX conformance (GPU target)" SKIP "no GPU"
  else
    st=PASS
    # Regression guard: every case passing on the CPU target must pass here.
    if [[ -f $bundle/conformance-expected.txt ]]; then
      while read -r c; do
        grep -q "^$c PASS" "$results/conformance-gpu.txt" || st=FAIL
      done <"$bundle/conformance-expected.txt"
    fi
    record "ONNX conformance (GPU target)" $st "$cpass of $ctotal cases pass (results/conformance-gpu.txt)"
  fi
fi

# seed-dense layer shapes against PyTorch on the same weights in the same
# run (bf16, last-position logits): 2 layers at S = 32768 (the GPU target's
# end-to-end check), and 1 layer at S = 524288 + 4096, where one layer's K
# has more than 2^31 elements (64-bit indexing in every kernel).
seed_dense() { # layers S name
  local sd=$bundle/seed-dense-$1l art=$bundle/art/seed-dense-$1l.bf16.last.h20 name=$3 ref cmp st ttft
  if [[ $gpu == no ]]; then record "$name" SKIP "no GPU"; return; fi
  if ! python3 -c "import torch, numpy" 2>/dev/null; then
    record "$name" SKIP "python3 with torch and numpy not available"; return
  fi
  [[ -f $art ]] || { record "$name" SKIP "artifact not in the bundle"; return; }
  python3 "$bundle/models/llama/generate.py" seed-dense "$sd" --layers "$1" --weights >>"$log" 2>&1
  python3 -c "import numpy as np; np.save('$sd/ids.npy', np.random.default_rng(0).integers(0, 129280, (1, $2), dtype=np.int64))"
  if "$bin/h20-run" "$art" --ids "$sd/ids.npy" --weights-dir "$sd" \
       --dump-logits "$results/seed-dense-$1l.h20.npy" --report "$results/seed-dense-$1l.h20.json" >>"$log" 2>&1 &&
     ref=$(python3 "$bundle/models/llama/reference.py" "$sd" "$sd/ids.npy" "$results/seed-dense-$1l.ref.npy" 2>>"$log") &&
     cmp=$("$bin/npy-compare" "$results/seed-dense-$1l.h20.npy" "$results/seed-dense-$1l.ref.npy" --max-rel-l2 2e-2 2>&1); then
    st=PASS
  else
    st=FAIL
  fi
  echo "$ref" >>"$log"
  ttft=$(grep -o '"ttft_ms": [0-9.]*' "$results/seed-dense-$1l.h20.json" 2>/dev/null | head -1)
  record "$name" $st "$(tr '\n' ' ' <<<"${cmp:-failed} h20 $ttft; $ref")"
  rm -f "$sd/weights.bin"
}
# DeepSeek-V4.1 tiny and tiny-all-picks (gpu-bundle.sh): the GPU target
# (tensor-core sparse attention and indexer, MoE on grouped GEMMs,
# whole-prompt chunk) against the float32 reference on the same bf16
# weights, f32 gated at 1e-4. bf16: tiny-all-picks is gated at 2e-2 (every
# top-k keeps all it chooses from, so the distance is the arithmetic's);
# tiny's is reported (INFO), not gated: its random top-k choices have near
# ties that any bf16 prefill flips, and two bf16 emulations of the
# reference itself land 0.01-0.21 from it (models/deepseek_v41/README.md).
# tiny-window, tiny-chunked (tiny without Engram) and tiny-c12 (tiny) run in
# chunks of 12 tokens (window latents, compressed entries, indexer keys and
# Engram's token ids through caches) against the same whole-prompt
# reference: tiny-window gated as tiny-all-picks; the other two (tiny's
# top-k choices) gated in f32, their bf16 reported as tiny's. tiny-wide
# (128-wide FP8 KV rows, the wgmma sparse attention): f32 gated at 1e-4,
# or at 1e-2 (INFO between the two, naming it) where a rounding of the
# prompt's fake quantisation is within 1e-6 of flipping; bf16 at 6e-2
# (bf16 emulations of the reference land 2.7-3.9e-2 from it). The -c20
# variants run in chunks of 20, their window latents in rings (the 15 rows
# before the chunk, then its own), gated as their 12-token runs. The -c10
# and -c7 variants run in chunks that split the compressors' groups of 4
# (and, for 7, of 2): each compressor carries its partial last group into
# the next chunk (h20-chunked-prefill's carry-partial-groups), gated as
# their 12-token runs; tiny's chunked runs are also compared with its
# whole-prompt GPU run (issue 30: f32 within 1e-5, bf16 the same next
# token), "... vs whole". tiny-c12h is tiny-c12 with its gather-only
# tables (token embedding, Engram's) in pinned host memory the kernels
# read over PCIe (--host-tables=all): gated as tiny-c12, and its logits
# must equal tiny-c12's bit for bit ("... vs device tables"). fp8-engram
# (tiny-fp8-engram) keeps its Engram tables FP8 rows with their scales, in
# pinned host memory, in chunks of 12: gated as tiny (f32 1e-4, bf16
# reported) against reference.py on the same checkpoint.
if want deepseek; then
  for model in tiny all-picks window chunked tiny-c12 tiny-c20 window-c20 chunked-c20 wide \
               tiny-c10 tiny-c7 chunked-c10 chunked-c7 tiny-c12h fp8-engram; do
    base=${model%-c[0-9]*}
    dir=$bundle/models/v41
    [[ $base != tiny ]] && dir=$bundle/models/v41-$base
    [[ -f $bundle/art/v41-$model.f32.h20 && -d $dir ]] || continue
    for ct in f32 bf16; do
      for S in 8 129 1000; do
        name="deepseek-v4.1 $model $ct S=$S"
        if [[ $gpu == no ]]; then record "$name" SKIP "no GPU"; continue; fi
        tol=1e-4; [[ $ct == bf16 ]] && tol=2e-2
        [[ $base == wide && $ct == bf16 ]] && tol=6e-2
        logits_case "$bundle/art/v41-$model.$ct.h20" "$dir" "$dir/ids-$S.npy" "$dir/ref-$S.npy" \
          $tol "$results/v41-$model.$ct.S$S.npy"
        [[ ($base == tiny || $base == chunked || $base == fp8-engram) && $ct == bf16 && $st == FAIL &&
           -n ${cmp:-} ]] && st=INFO
        # tiny-wide in f32: a prompt with an FP8 / FP4 rounding within 1e-6
        # of flipping (reference.py --quant-margins) may drift by one code
        # from there on (2e-4 to 2e-3 seen): above 1e-4 it is reported
        # (INFO, naming the rounding) while within 1e-2 with the same next
        # token, and fails beyond that.
        if [[ $base == wide && $ct == f32 && $st == FAIL && -n ${cmp:-} && -f $dir/quant-$S.json ]]; then
          fragile=$(python3 -c "import json, sys; r = json.load(open(sys.argv[1]))[0]; print(r['site'], 'row', r['row'], '%.1e' % r['margin']) if r['margin'] < 1e-6 else None" "$dir/quant-$S.json" 2>/dev/null)
          if [[ -n $fragile ]] && "$bin/npy-compare" "$results/v41-$model.$ct.S$S.npy" "$dir/ref-$S.npy" \
               --max-rel-l2 1e-2 >/dev/null 2>&1; then
            st=INFO; cmp="$cmp (within 1e-2; a rounding near a midpoint: $fragile)"
          fi
        fi
        record "$name" $st "${cmp:-h20-run failed}"
        # tiny's chunked runs against its whole-prompt run (one chunk of
        # 1024 tokens), run before them in this loop.
        whole=$results/v41-$base.$ct.S$S.npy
        if [[ $model == *-c[0-9]* && $base == tiny && -f $whole && -f $results/v41-$model.$ct.S$S.npy ]]; then
          wtol=1e-5; [[ $ct == bf16 ]] && wtol=1
          if c=$("$bin/npy-compare" "$results/v41-$model.$ct.S$S.npy" "$whole" --max-rel-l2 $wtol 2>&1); then
            record "$name vs whole" PASS "$c"
          else
            record "$name vs whole" FAIL "${c:-npy-compare failed}"
          fi
        fi
        device=$results/v41-tiny-c12.$ct.S$S.npy
        if [[ $model == tiny-c12h ]]; then
          if [[ -f $device && -f $results/v41-$model.$ct.S$S.npy ]] &&
             cmp -s "$results/v41-$model.$ct.S$S.npy" "$device"; then
            record "$name vs device tables" PASS "bitwise equal to tiny-c12"
          else
            record "$name vs device tables" FAIL "differs from tiny-c12 (or a run failed)"
          fi
        fi
      done
    done
  done
fi
# A V4.1 model made from a quantised checkpoint against reference.py on the
# same checkpoint (float32, weights dequantised): v41_ckpt_cases MODEL
# LABEL SPEC..., each SPEC "artifact:weights subdir:tolerance" for
# art/MODEL.artifact.h20 at S = 8, 129, 1000, or
# "artifact:subdir:tolerance:loose[:any]": past the tolerance, a result
# within the loose bound is INFO, not FAIL (with the same next token, or
# any with ":any").
v41_ckpt_cases() {
  local model=$1 label=$2 spec a sub tol loose token w S name rel
  local dir=$bundle/models/$model
  shift 2
  for spec in "$@"; do
    IFS=: read -r a sub tol loose token <<<"$spec"
    w=$dir${sub:+/$sub}
    for S in 8 129 1000; do
      name="deepseek-v4.1 $label $a S=$S"
      if [[ $gpu == no ]]; then record "$name" SKIP "no GPU"; continue; fi
      logits_case "$bundle/art/$model.$a.h20" "$w" "$dir/ids-$S.npy" "$dir/ref-$S.npy" \
        "$tol" "$results/$model.$a.S$S.npy"
      rel=$(sed -n 's/^rel_l2 \([^ ]*\) .*/\1/p' <<<"${cmp:-}")
      if [[ $st == FAIL && -n $loose && -n $rel ]] &&
         awk -v r="$rel" -v b="$loose" 'BEGIN { exit !(r <= b) }' &&
         { [[ $token == any ]] || grep -qE 'argmax ([0-9]+) vs reference \1:' <<<"$cmp"; }; then
        st=INFO; cmp="$cmp (within the loose bound $loose)"
      fi
      record "$name" $st "${cmp:-h20-run failed}"
    done
  done
}
# tiny-all-picks from an FP8 checkpoint: with its FP8 linears kept FP8
# (f32, bf16 and bf16 in 12-token chunks; inputs of the FP8 GEMMs
# quantised per 1 x 128 block) gated on the next token and a 1e-1 bound,
# and the dequantised export in bf16 gated as all-picks bf16 (2e-2): the
# FP8 inputs' share of the error is the difference. bf16-deqgemm keeps the
# weights FP8 in memory but runs bf16 GEMMs on a dequantised temporary
# (--fp8-gemm=dequantize): gated as the dequantised export.
want deepseek && [[ -f $bundle/art/v41-all-picks-fp8.bf16.h20 ]] &&
  v41_ckpt_cases v41-all-picks-fp8 "all-picks FP8 ckpt" f32::1e-1 bf16::1e-1 bf16-c12::1e-1 deq-bf16:deq:2e-2 \
    bf16-deqgemm::2e-2
# tiny-all-picks with MXFP4 routed experts (kept FP4 on the GPU: the
# grouped GEMM dequantises in its load path): f32 and bf16 gated as
# tiny-all-picks (1e-4, 2e-2); with FP8 linears too (fp8-bf16) as the FP8
# checkpoint case above (1e-1).
want deepseek && [[ -f $bundle/art/v41-all-picks-fp4.bf16.h20 ]] &&
  v41_ckpt_cases v41-all-picks-fp4 "all-picks FP4 experts" f32::1e-4 bf16::2e-2 fp8-bf16:fp8:1e-1
# tiny-fp8-experts (tiny-all-picks with hidden and expert intermediate
# 128, the smallest the FP8 expert GEMM takes) with MXFP4 routed experts:
# bf16 on the bf16 expert GEMM gated as all-picks bf16 (2e-2), and on the
# FP8 one (fp8x: h20-opt --expert-gemm=fp8, the permuted token rows and
# the SwiGLU output quantised per 1 x 128 block by the gather and SwiGLU
# kernels) gated as the FP8 checkpoint's cases (1e-1).
want deepseek && [[ -f $bundle/art/v41-fp8-experts.bf16.h20 ]] &&
  v41_ckpt_cases v41-fp8-experts "all-picks FP8 experts" bf16::2e-2 fp8x::1e-1
# tiny-qat (head_dim 64: the KV, compressed-KV and indexer fake
# quantisation on; top-k choices as tiny's) from an FP8 checkpoint with
# MXFP4 experts (bench/v41-accuracy.sh compile: models/v41-qat-fp4, its
# exports fp8/ with FP8 linears and deq/ dequantised, artifacts by mode;
# that script's header has the measurements behind these bounds). f32 and
# fp8-deqf32 (the FP8 / FP4 storage in float32) gated at 1e-4, INFO to
# 1e-1 with the same next token: every prompt has fake-quant roundings
# within 1e-7 of a midpoint that another float32 order flips, and the
# top-k choices carry them (h20's CPU target: 1.0e-2 at S = 1000), while
# bugs simulated in reference.py land 0.18-0.37. The bf16 modes (MXFP4
# experts with widened linears, FP8 GEMMs, bf16 GEMMs on dequantised
# FP8, the dequantised export) gated as their all-picks cases, INFO to
# 0.8 whatever the next token: any bf16 rounding flips tiny-qat's
# near-tie choices (bf16 emulations of the reference: 0.27-0.36, the next
# token kept at 59-100% of positions), so only a gross error (unrelated
# logits: 1.4) fails them.
want deepseek && [[ -f $bundle/art/v41-qat-fp4.bf16.h20 ]] &&
  v41_ckpt_cases v41-qat-fp4 "qat FP8/FP4 ckpt" f32::1e-4:1e-1 fp8-deqf32:fp8:1e-4:1e-1 \
    bf16::2e-2:0.8:any fp8-bf16:fp8:1e-1:0.8:any fp8-deqgemm:fp8:2e-2:0.8:any deq-bf16:deq:2e-2:0.8:any
# Block-scaled FP8 linears (models/deepseek_v41/fp8_linear.py: an
# embedding, two linears with SiLU between and an LM head; K 512, N 1024,
# V 1024): weights FP8, inputs quantised per 1 x 128 block, cuBLASLt
# block-scaled FP8 GEMMs, bf16 activations, 8192-token chunks. Gated at
# 3e-2 against the reference that quantises and rounds the same way: the
# rest (measured 0.9-1.6e-2 on an H100) is the FP8 tensor cores' short
# accumulator (about 14 bits within each 128-deep block, DeepSeek-V3
# report section 3.3.2), which moves a bf16 rounding of the GEMM's output
# now and then, and so an e4m3 rounding of the next linear's input; a
# misread scale layout is O(1). The distance from the exact
# dequantised-weight reference (FP8 inputs cost about 2.5% per linear) is
# reported beside it.
# fp8-linear-k640 (K 640, N 512, V 512) has 5 scale blocks per weight row,
# padded to 8 for cuBLASLt; fp8-linear-n520 (N 520) runs two linears as
# bf16 GEMMs on dequantised weights (the reference does the same there).
for f8 in fp8-linear fp8-linear-k640 fp8-linear-n520; do
  want deepseek && [[ -f $bundle/art/$f8.h20 ]] || continue
  dir=$bundle/models/$f8
  for S in 8 129; do
    name="$f8 (block-scaled FP8) S=$S"
    if [[ $gpu == no ]]; then record "$name" SKIP "no GPU"; continue; fi
    o=$results/$f8.S$S.npy
    logits_case "$bundle/art/$f8.h20" "$dir" "$dir/ids-$S.npy" "$dir/ref-fp8-$S.npy" 3e-2 "$o"
    exact=$("$bin/npy-compare" "$o" "$dir/ref-$S.npy" --max-rel-l2 6e-2 2>&1 | head -1)
    record "$name" $st "${cmp:-h20-run failed}; vs exact weights: ${exact:-n/a}"
  done
done
if want seed || want seed2; then
  seed_dense 2 32768 "seed-dense-2l bf16 S=32768 vs PyTorch"
fi
if want seed; then
  seed_dense 1 528384 "seed-dense-1l bf16 S=528384 (K > 2^31 elems)"
fi

{
  echo "["
  for ((i = 0; i < ${#json[@]}; ++i)); do
    echo "  ${json[$i]}$([[ $i -lt $((${#json[@]} - 1)) ]] && echo ,)"
  done
  echo "]"
} >"$results/gpu-tests.json"
[[ -n ${OUT:-} ]] && cp -r "$results" "$OUT/" 2>/dev/null
echo
printf '%-44s %-5s %s\n' TEST STATUS DETAIL
printf '%s\n' "${rows[@]}"
exit $failed
