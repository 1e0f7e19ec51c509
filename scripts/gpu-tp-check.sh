#!/usr/bin/env bash
# Issue 8 (tensor parallelism) acceptance on ONE GPU: an artifact split over
# T ranks (h20-opt --gpus T --parallel tensor), run by h20-run --gpus T
# --virtual-ranks (T executors on one GPU, each with its weight slices and
# its share of the heads and MLP columns; every all_reduce step summed over
# the ranks on the host in float32), must give the logits of the unsplit
# artifact on one GPU, for T = 2, 4, 8.
#   scripts/gpu-tp-check.sh BUNDLE   (a bundle made by scripts/gpu-bundle.sh,
#                                     e.g. H20_BUNDLE_BENCH=tp)
# Cases: the last-position fixture artifacts art/llama_*.{f32,bf16}.last
# (.tpT).h20 at S = 1024; DeepSeek-V4.1's expert parallelism on tiny
# configs (art/v41-*.tpT.h20, below); seed-dense shapes, 2 layers, S = 32768
# (art/seed-dense-2l.bf16.last(.tpT).h20; weights generated here with
# models/llama/generate.py, removed afterwards); the GPU unit tests of the
# mode (h20-gpu-unittests *TensorParallel*).
# PASS: relative L2 <= 2e-2 for bf16 (1e-4 for f32) against the unsplit
# run, the same argmax (npy-compare), and the report's
# tensor_parallel.logs_match and outputs_match true (every rank issued the
# same all-reduces; every rank ended with the same logits).
# Results: BUNDLE/results/tp-check.{txt,json,log} (and $OUT/ when set); the
# table on stdout. Exit 1 if any case failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=${1:-$here}
[[ -x $bundle/bin/h20-run ]] || { echo "gpu-tp-check: no bin/h20-run in '$bundle' (give a bundle from gpu-bundle.sh)" >&2; exit 2; }
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
results=$bundle/results/tp-check
mkdir -p "$results"
log=$bundle/results/tp-check.log
: >"$log"
t_start=$SECONDS
rows=()
json=()
failed=0
record() { # name status detail
  rows+=("$(printf '%-34s %-5s %s' "$1" "$2" "$3")")
  local d=${3//\\/\\\\}
  d=${d//\"/\\\"}
  json+=("{\"test\": \"$1\", \"status\": \"$2\", \"detail\": \"$d\"}")
  [[ $2 == FAIL ]] && failed=1
}
field() { # REPORT.json KEY...: a value of the report, or "?"
  python3 - "$@" <<'PY' 2>/dev/null || echo "?"
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2:]:
    v = v[k]
print(round(v, 1) if isinstance(v, float) else json.dumps(v) if isinstance(v, bool) else v)
PY
}

if [[ -x $bin/h20-gpu-unittests ]]; then
  if out=$(H20_RUN=$bin/h20-run "$bin/h20-gpu-unittests" --gtest_filter='*TensorParallel*' 2>&1); then st=PASS; else st=FAIL; fi
  echo "$out" >>"$log"
  grep -qE '\[  PASSED  \] [1-9]' <<<"$out" || st=FAIL
  record "h20-gpu-unittests *TensorParallel*" $st "$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' <<<"$out" | tr '\n' ' ')"
fi

# compare NAME BASE_ART IDS WEIGHTS_DIR TOL: the unsplit run, then each
# BASE.tpT.h20 on T virtual ranks, compared with it (h20-run also gets the
# arguments in the array `extra`).
extra=()
compare() {
  local name=$1 art=$2 ids=$3 wdir=$4 tol=$5
  local base=$results/$name
  # No result of an earlier run may stand in for a failed one.
  rm -f "$base".t[0-9]*.{npy,json,out}
  if ! "$bin/h20-run" "$art" --ids "$ids" --weights-dir "$wdir" --warmup 0 "${extra[@]}" \
      --dump-logits "$base.t1.npy" --report "$base.t1.json" >>"$log" 2>&1; then
    record "$name T=1" FAIL "the unsplit run failed (see tp-check.log)"
    return
  fi
  local t1
  t1=$(field "$base.t1.json" ttft_ms)
  for t in 2 4 8; do
    local tart=${art%.h20}.tp$t.h20 o=$base.t$t st cmp logs outs ar
    if [[ ! -f $tart ]]; then
      record "$name T=$t" FAIL "no $(basename "$tart") (see art/tp-compile.log)"
      continue
    fi
    echo "== $name T=$t" >>"$log"
    "$bin/h20-run" "$tart" --ids "$ids" --weights-dir "$wdir" --warmup 0 --gpus "$t" --virtual-ranks "${extra[@]}" \
      --dump-logits "$o.npy" --report "$o.json" >"$o.out" 2>&1
    local rc=$?
    cat "$o.out" >>"$log"
    if [[ $rc != 0 ]]; then
      record "$name T=$t" FAIL "h20-run exit $rc: $(grep -m1 -o 'error: .*' "$o.out" | cut -c1-110)"
      continue
    fi
    if cmp=$("$bin/npy-compare" "$o.npy" "$base.t1.npy" --max-rel-l2 "$tol" 2>&1); then st=PASS; else st=FAIL; fi
    echo "$cmp" >>"$log"
    # tiny-chunked in bf16: its random top-k choices have near ties, which
    # the ranks' different bf16 rounding of the experts' shares flips
    # (gpu-test.sh reports the same model against its reference as INFO);
    # reported, not gated, while the next token agrees. Its attention split
    # is gated bitwise below (rows vs whole).
    if [[ $st == FAIL && $name == v41-chunked*.bf16* ]] &&
       [[ $cmp =~ argmax\ ([0-9]+)\ vs\ reference\ ([0-9]+) ]] &&
       [[ ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]]; then
      st=INFO
    fi
    logs=$(field "$o.json" tensor_parallel logs_match)
    outs=$(field "$o.json" tensor_parallel outputs_match)
    [[ $logs == true && $outs == true ]] || st=FAIL
    ar=$(field "$o.json" tensor_parallel all_reduces)
    record "$name T=$t" $st "${cmp%%:*}; logs match: $logs; rank outputs equal: $outs; $ar all-reduces; TTFT $(field "$o.json" ttft_ms) ms (T=1 $t1 ms)"
  done
}

for art in "$bundle"/art/llama_*.last.h20; do
  [[ -f $art ]] || continue
  b=$(basename "$art" .h20)
  m=${b%%.*}
  tol=2e-2
  [[ $b == *.f32* ]] && tol=1e-4
  compare "$b" "$art" "$bundle/models/$m.ids1024.npy" "$bundle/models" $tol
done

# DeepSeek-V4.1 expert parallelism (gpu-bundle.sh: art/v41-*.tpT.h20):
# tiny-all-picks with float and with MXFP4 experts, f32 and bf16, and
# tiny-chunked in 20-token chunks (f32), each rank holding E / T experts,
# at S = 129 against the same artifact unsplit on one GPU: f32 within
# 1e-5, bf16 within 2e-2 (each rank rounds its share to bf16 before the
# all-reduce), the same next token.
for art in "$bundle"/art/v41-*.h20; do
  b=$(basename "$art" .h20)
  [[ $b == *.tp[0-9]* || $b == v41-flash-* || ! -f ${art%.h20}.tp2.h20 ]] && continue
  m=${b%%.*}
  m=${m%-c[0-9]*}
  tol=2e-2
  [[ $b == *.f32* ]] && tol=1e-5
  # FP8 activations (an FP8 checkpoint's linears): each rank's share of the
  # experts is summed before the next layer's 1 x 128 quantisation; the
  # bound gpu-test.sh gives that model against its reference.
  [[ $b == *-fp8.* ]] && tol=1e-1
  compare "$b.S129" "$art" "$bundle/models/$m/ids-129.npy" "$bundle/models/$m" $tol
done

# DeepSeek-V4.1's attention split by query rows (bf16; gpu-bundle.sh:
# art/v41-*.tpT.rows-off.h20 beside art/v41-*.tpT.h20): the split and the
# unsplit program of the same T must agree within 1e-2 and on the next
# token. Where the split ends at the attention itself the two are equal to
# the bit (the gather adds zeros); where it reaches the output projection,
# that GEMM runs with M / T rows, for which cuBLASLt may choose another
# algorithm (another summation order). FP8 activations (the FP8
# checkpoint, -fp8): its block-scaled shared expert splits by rows only
# when the attention does (a column split would cut its 128-wide scale
# blocks), and its rows' share then joins the routed experts' share in
# one bf16 all-reduce (h20-merge-all-reduces), where the unsplit program
# adds the whole shared expert after it: another bf16 rounding, which the next layer's
# 1 x 128 FP8 quantisation magnifies (H100, 7b9b74d: 4.9-5.0e-2 at T =
# 2, 4, 8, where before the shared-expert split the two were equal to the
# bit). Its bound is then every FP8 gate's, 1e-1, with the next token
# equal, and both programs' distances from the reference are reported.
# rows_vs_whole LABEL T SPLIT OFF_ART IDS REF TOL H20-RUN-ARGS...: the
# unsplit program OFF_ART on T virtual ranks against the split run already
# made (SPLIT.npy, SPLIT.json), within TOL (1e-2; 1e-1 with FP8
# activations) and on the next token; REF (a reference's logits, or "")
# as information.
rows_vs_whole() {
  local label=$1 t=$2 split=$3 off=$4 ids=$5 ref=$6 tol=$7
  shift 7
  local o=$split.rows-off cmp st vs=""
  rm -f "$o".{npy,json}
  if [[ ! -f $split.npy ]] || ! "$bin/h20-run" "$off" --ids "$ids" --warmup 0 --gpus "$t" \
      --virtual-ranks "$@" --dump-logits "$o.npy" --report "$o.json" >>"$log" 2>&1; then
    record "$label rows vs whole" FAIL "h20-run failed, or the split run did (see tp-check.log)"
    return
  fi
  if cmp=$("$bin/npy-compare" "$split.npy" "$o.npy" --max-rel-l2 "$tol" 2>&1); then st=PASS; else st=FAIL; fi
  echo "$cmp" >>"$log"
  if [[ -n $ref && -f $ref ]]; then
    local a b
    a=$("$bin/npy-compare" "$split.npy" "$ref" --max-rel-l2 1 2>&1 | grep -o 'rel_l2 [0-9.e+-]*')
    b=$("$bin/npy-compare" "$o.npy" "$ref" --max-rel-l2 1 2>&1 | grep -o 'rel_l2 [0-9.e+-]*')
    vs="; vs reference: split ${a#rel_l2 }, whole ${b#rel_l2 }"
  fi
  record "$label rows vs whole" $st "${cmp%%:*}; all-reduces $(field "$split.json" tensor_parallel all_reduces) vs $(field "$o.json" tensor_parallel all_reduces); TTFT $(field "$split.json" ttft_ms) vs $(field "$o.json" ttft_ms) ms$vs"
}
for off in "$bundle"/art/v41-*.tp[0-9]*.rows-off.h20; do
  [[ -f $off && $off != */v41-flash-* ]] || continue
  split=${off%.rows-off.h20}.h20
  b=$(basename "$split" .h20)
  t=${b##*.tp}
  m=${b%%.*}
  m=${m%-c[0-9]*}
  o=$results/$b.rows-split
  rm -f "$o".{npy,json}
  "$bin/h20-run" "$split" --ids "$bundle/models/$m/ids-129.npy" --weights-dir "$bundle/models/$m" \
    --warmup 0 --gpus "$t" --virtual-ranks --dump-logits "$o.npy" --report "$o.json" >>"$log" 2>&1
  tol=1e-2
  [[ $b == *-fp8.* ]] && tol=1e-1
  rows_vs_whole "$b" "$t" "$o" "$off" "$bundle/models/$m/ids-129.npy" "$bundle/models/$m/ref-129.npy" \
    "$tol" --weights-dir "$bundle/models/$m"
done

# DeepSeek-V4.1-Flash-shaped layers at full width (gpu-bundle.sh:
# art/v41-flash-l2.S32768(.tpT)(.rows-off).h20, a --graph-only export of
# two flash-layers, a window-only one and a ratio-2 one with its indexer,
# with FP8 linears and MXFP4 experts, 8448-token chunks): dummy weights
# (h20-run --dummy-weights: a rank's slice holds the values the unsplit
# weight holds there; H20_DUMMY_SHARE=0: every weight its own), 32768
# random ids. T = 2, 4, 8 virtual ranks against one GPU (bf16: 2e-2, the
# same next token); then at T = 8 the attention split by rows (query-side
# and output GEMMs on 1/T of the rows) against --split-attention-rows=false
# (1e-1: FP8 linears, see rows_vs_whole; H100, 7b9b74d: 1.25e-2).
# About 7 minutes on an H100 (the virtual ranks' all-reduces of 1.3 GB are
# summed on the host): H20_TP_FLASH=0 skips it.
fl=$bundle/art/v41-flash-l2.S32768.h20
if [[ -f $fl && ${H20_TP_FLASH:-1} != 0 ]]; then
  fids=$results/flash-ids-32768.npy
  python3 -c "import numpy as np; np.save('$fids', np.random.default_rng(32).integers(0, 129280, (1, 32768), dtype=np.int64))"
  export H20_DUMMY_SHARE=0
  extra=(--dummy-weights)
  compare v41-flash-l2.S32768 "$fl" "$fids" "$bundle/art" 2e-2
  rows_vs_whole "v41-flash-l2 T=8" 8 "$results/v41-flash-l2.S32768.t8" "${fl%.h20}.tp8.rows-off.h20" \
    "$fids" "" 1e-1 --dummy-weights
  extra=()
  unset H20_DUMMY_SHARE
fi

sd=$bundle/seed-dense-2l
art=$bundle/art/seed-dense-2l.bf16.last.h20
if [[ ! -f $art || ! -d $sd ]]; then
  record "seed-dense-2l S=32768" SKIP "seed-dense-2l not in the bundle"
elif ! python3 "$bundle/models/llama/generate.py" seed-dense "$sd" --layers 2 --weights >>"$log" 2>&1 ||
     ! python3 -c "import numpy as np; np.save('$sd/ids32768.npy', np.random.default_rng(0).integers(0, 129280, (1, 32768), dtype=np.int64))"; then
  record "seed-dense-2l S=32768" FAIL "generating the weights or ids failed (see tp-check.log)"
else
  compare seed-dense-2l.bf16.last.S32768 "$art" "$sd/ids32768.npy" "$sd" 2e-2
  rm -f "$sd/weights.bin"
fi

elapsed=$((SECONDS - t_start))
{
  echo "["
  for ((i = 0; i < ${#json[@]}; ++i)); do
    echo "  ${json[$i]}$([[ $i -lt $((${#json[@]} - 1)) ]] && echo ,)"
  done
  echo "]"
} >"$bundle/results/tp-check.json"
{
  printf '%-34s %-5s %s\n' TEST STATUS DETAIL
  printf '%s\n' "${rows[@]}"
  echo "virtual tensor parallelism vs T = 1: $(grep -c ' PASS ' <<<"$(printf '%s\n' "${rows[@]}")") passed, $(grep -c ' INFO ' <<<"$(printf '%s\n' "${rows[@]}")") reported (INFO) of ${#rows[@]}; ${elapsed} s"
} >"$bundle/results/tp-check.txt"
if [[ -n ${OUT:-} ]]; then
  mkdir -p "$OUT/tp-check"
  cp "$bundle"/results/tp-check.{txt,json,log} "$OUT/" 2>/dev/null
  cp "$results"/*.json "$OUT/tp-check/" 2>/dev/null
fi
echo
cat "$bundle/results/tp-check.txt"
exit $failed
