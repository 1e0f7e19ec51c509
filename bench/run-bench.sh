#!/usr/bin/env bash
# Issue 7 benchmarks, on the GPU machine, inside a bundle made by
#   H20_BUNDLE_BENCH=1 scripts/gpu-bundle.sh BUNDLE        (or =only)
# Usage: BUNDLE/bench/run-bench.sh [BUNDLE]
#
# Sections (H20_BENCH_SECTIONS, default "A B C"); estimated times on one H200:
#   A  attention alone, causal bf16, B=1 H=32 D=128, S in H20_BENCH_ATTN_S
#      (default 8192 32768 131072): h20's kernels (attention-check --time
#      --kernels all: the mma.sync kernel and the wgmma one (h20's choice
#      for these shapes); --no-check
#      unless H20_BENCH_ATTN_CHECK=1, which first runs the correctness cases
#      on both), PyTorch SDPA cuDNN and FlashAttention-2 (bench/attn_torch.py);
#      then h20's outputs at every timed S against SDPA on the same inputs
#      (attention-check --dump, bench/attn_check_torch.py: rel. L2 <= 1e-2).
#      ~1.5 min (torch import, NVRTC compile, 13 calls per kernel and S;
#      one 128K call is 0.25-0.6 s).
#   B  seed-dense (8 layers) TTFT, bf16, last-position logits, S in
#      H20_BENCH_TTFT_S (default 32768 131072 524288): h20-run on the
#      artifact compiled for that S, then PyTorch (bench/ttft_torch.py,
#      models/llama/reference.py) on the same weights, plus the GEMM peak.
#      Weights: 10.8 GB of float32 generated once into H20_BENCH_WORK
#      (default /tmp/h20-bench; reused while the machine stays up): ~1 min.
#      h20 also runs the model with its linears as block-scaled FP8 GEMMs
#      (art/seed-dense-8l.S*.fp8lin.h20, --quantize-linears=fp8;
#      H20_BENCH_FP8=0 skips it), compared with the same PyTorch bf16 logits.
#      Then the same PyTorch prefill with every layer through torch.compile
#      (TorchInductor; H20_BENCH_COMPILE=0 skips it): one compiling warm-up
#      prefill of all S tokens per S, then the timed runs (its time on an
#      H200 not yet measured; a compilation is typically 0.5-2 min).
#      H20_BENCH_H20_ARGS: extra h20-run arguments (default none: the
#      cuBLASLt heuristic's first algorithm; --tune-gemms, which times up
#      to 8 candidates per GEMM shape in the warm-up run, measured no gain
#      on seed-dense at 128K: BENCHMARKS.md).
#      Runs: H20_BENCH_RUNS (default 5) measured prefills per S,
#      H20_BENCH_LONG_RUNS (default 1) from S >= 262144.
#      Estimates: weights ~1 min; h20 weight load ~10-20 s per S; h20 32K
#      5 x ~0.8 s, 128K 5 x ~7 s, 512K 1 x ~90 s (+ one warm-up chunk);
#      PyTorch load ~20 s, 32K 5 x ~0.5 s, 128K 5 x ~3 s, 512K 1 x ~45 s.
#      32K + 128K: ~3 min; 512K alone: ~3.5 min. One device command may
#      run 10 minutes: run 512K in a command of its own.
#   C  the cost model's predicted TTFT (1 and 8 H20s, 1 H200) for the same
#      model and S, computed when the bundle was made (no GPU): printed
#      beside B and labelled a model, not a measurement. Seconds.
#
# Results: H20_BENCH_RESULTS (default H20_BENCH_WORK/results, outside the
# bundle so that a second device command, which may carry the bundle anew,
# adds to the first's) and $OUT/bench/ when OUT is set: raw JSON per section
# and S, logs, the merged record issue7.json, the tables (summary.md) and
# issue7.png when matplotlib is there. The last thing printed is the table.
# Exit 1 if a step failed (the others still ran).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=${1:-$(dirname "$here")}
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
sections=${H20_BENCH_SECTIONS:-A B C}
attn_s=${H20_BENCH_ATTN_S:-8192 32768 131072}
ttft_s=${H20_BENCH_TTFT_S:-32768 131072 524288}
runs=${H20_BENCH_RUNS:-5}
long_runs=${H20_BENCH_LONG_RUNS:-1}
h20_args=${H20_BENCH_H20_ARGS-}
long_from=262144
work=${H20_BENCH_WORK:-/tmp/h20-bench}
res=${H20_BENCH_RESULTS:-$work/results}
mkdir -p "$res" "$work"
log=$res/run-bench.log
failed=0
want() { [[ " $sections " == *" $1 "* ]]; }
say() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$log"; }
step_failed() { say "FAILED: $*"; failed=1; }
t_start=$(date +%s)
py=python3

{
  echo "{"
  echo "  \"date\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\","
  echo "  \"host\": \"$(hostname)\","
  echo "  \"nvidia_smi\": \"$(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null | head -1 | tr -d '"')\","
  echo "  \"sections\": \"$sections\""
  echo "}"
} >"$res/env-$(date +%s).json"
cp "$bundle/bench/build-info.json" "$res/" 2>/dev/null

# ---- A: attention alone ------------------------------------------------------------
if want A; then
  say "A: attention, S = $attn_s (~1.5 min)"
  csv=$(tr ' ' ',' <<<"$attn_s")
  rm -f "$res/attn-h20.json"
  check=(--no-check)
  [[ ${H20_BENCH_ATTN_CHECK:-0} == 1 ]] && check=()
  dump=$work/attn-dump
  rm -rf "$dump" && mkdir -p "$dump"
  if "$bin/attention-check" "${check[@]}" --time "$csv" --kernels "${H20_BENCH_ATTN_KERNELS:-all}" \
       --json "$res/attn-h20.json" --dump "$dump" >"$res/attn-h20.log" 2>&1 && [[ -s $res/attn-h20.json ]]; then
    say "A: h20 (attention-check --time): $("$py" -c "import json, sys; print(len(json.load(open(sys.argv[1]))))" "$res/attn-h20.json") timings"
  else
    # An older attention-check (no --no-check/--time/--json): its one TIME
    # line (S = 8192) after no check cases (a filter that matches none).
    say "A: attention-check has no --time/--json (or failed); falling back to its TIME line"
    "$bin/attention-check" --filter __no_case__ >>"$res/attn-h20.log" 2>&1 || step_failed "attention-check"
    "$py" - "$res/attn-h20.log" "$res/attn-h20.json" <<'EOF' || step_failed "parsing attention-check TIME lines"
import json, re, sys
rows = []
pat = re.compile(r"^TIME (\S+)\s+B=1 H=(\d+) S=(\d+) causal: ([0-9.]+) ms, ([0-9.]+) TFLOP/s")
for line in open(sys.argv[1]):
    m = pat.match(line)
    if m:
        rows.append({"kernel": m[1], "S": int(m[3]), "H": int(m[2]), "D": 128, "ms": float(m[4]),
                     "tflops": float(m[5]), "source": "attention-check TIME line (no --time: S=8192 only)"})
json.dump(rows, open(sys.argv[2], "w"), indent=1)
print(f"{len(rows)} TIME line(s)")
EOF
  fi
  grep -a '^SKIP' "$res/attn-h20.log" && say "A: attention-check found no GPU"
  # shellcheck disable=SC2086
  "$py" "$here/attn_torch.py" --S $attn_s --out "$res/attn-torch.json" 2>&1 | tee -a "$log" ||
    step_failed "attn_torch.py"
  # h20's outputs at the timed shapes against SDPA on the same inputs.
  "$py" "$here/attn_check_torch.py" "$dump" --out "$res/attn-check-torch.json" 2>&1 | tee -a "$log" ||
    step_failed "attn_check_torch.py (h20 vs SDPA at the benchmarked shapes)"
  rm -rf "$dump"
  say "A: done"
fi

# ---- B: seed-dense TTFT -------------------------------------------------------------
if want B; then
  say "B: seed-dense 8 layers, S = $ttft_s"
  sd=$work/seed-dense-8l
  mkdir -p "$sd"
  cp "$bundle/seed-dense-8l/model.onnx" "$bundle/seed-dense-8l/layout.json" "$sd/"
  cp "$bundle/seed-dense-8l/layout.json" "$res/model-layout.json"
  # Weights: generated once (same seed, same bytes as anywhere), marked done
  # with the layout they were made for.
  if ! cmp -s "$sd/layout.json" "$sd/weights.done" 2>/dev/null; then
    say "B: generating weights into $sd ($("$py" -c "import json; print(round(json.load(open('$sd/layout.json'))['bytes'] / 2**30, 1))") GiB of float32, ~1 min)"
    t0=$(date +%s)
    rm -f "$sd/weights.done"
    if "$py" "$bundle/models/llama/generate.py" seed-dense "$sd" --layers 8 --weights >>"$log" 2>&1; then
      cp "$sd/layout.json" "$sd/weights.done"
      say "B: weights generated in $(($(date +%s) - t0)) s"
    else
      step_failed "generate.py --weights"
    fi
  else
    say "B: weights already in $sd"
  fi
  # Token ids: uniform over the vocabulary, seed 0 (as scripts/gpu-test.sh).
  for S in $ttft_s; do
    "$py" -c "import json, numpy as np; v = json.load(open('$sd/layout.json'))['config']['vocab_size']; np.save('$sd/ids-$S.npy', np.random.default_rng(0).integers(0, v, (1, $S), dtype=np.int64))"
  done
  # h20 first (its logits are compared in the PyTorch step).
  if "$bin/h20-run" --help 2>&1 | grep -q -- --repeat; then repeat_ok=1; else repeat_ok=0; fi
  # h20_ttft ART TAG LABEL S: the prefill of S tokens with ART, its logits
  # and report as RES/ttft-TAG-S$S.{npy,report.json}.
  h20_ttft() {
    local art=$1 tag=$2 label=$3 S=$4 n=$runs rep=() t0
    ((S >= long_from)) && n=$long_runs
    ((repeat_ok)) && rep=(--repeat "$n")
    say "B: $label S=$S (${n} run(s))"
    t0=$(date +%s)
    # shellcheck disable=SC2086
    if "$bin/h20-run" "$art" --ids "$sd/ids-$S.npy" --weights-dir "$sd" "${rep[@]}" $h20_args \
         --dump-logits "$res/ttft-$tag-S$S.npy" --report "$res/ttft-$tag-S$S.report.json" \
         >"$res/ttft-$tag-S$S.log" 2>&1; then
      say "B: $label S=$S: $(grep -o '"ttft_ms": [0-9.]*' "$res/ttft-$tag-S$S.report.json" | head -1) (wall $(($(date +%s) - t0)) s)"
    else
      step_failed "h20-run $label S=$S (exit $?): $(tail -1 "$res/ttft-$tag-S$S.log")"
    fi
  }
  for S in $ttft_s; do
    art=$bundle/art/seed-dense-8l.S$S.h20
    if [[ ! -f $art ]]; then step_failed "no artifact $art (bundle made with other H20_BENCH_TTFT_S?)"; continue; fi
    h20_ttft "$art" h20 h20 "$S"
  done
  # Issue 33: the same model with its linears as block-scaled FP8 GEMMs
  # (h20-opt --quantize-linears=fp8; H20_BENCH_FP8=0 skips it).
  for S in $ttft_s; do
    art=$bundle/art/seed-dense-8l.S$S.fp8lin.h20
    [[ ${H20_BENCH_FP8:-1} != 0 && -f $art ]] && h20_ttft "$art" h20fp8 "h20 FP8 linears" "$S"
  done
  say "B: PyTorch (GEMM peak, then S = $ttft_s)"
  # shellcheck disable=SC2086
  "$py" "$here/ttft_torch.py" --model-dir "$sd" --S $ttft_s --results "$res" --runs "$runs" \
    --long-from $long_from --long-runs "$long_runs" 2>&1 | tee -a "$log" || step_failed "ttft_torch.py"
  if [[ ${H20_BENCH_COMPILE:-1} != 0 ]]; then
    say "B: PyTorch with torch.compile (S = $ttft_s; each S compiles once)"
    # shellcheck disable=SC2086
    "$py" "$here/ttft_torch.py" --model-dir "$sd" --S $ttft_s --results "$res" --runs "$runs" \
      --long-from $long_from --long-runs "$long_runs" --no-gemm --compile 2>&1 | tee -a "$log" ||
      step_failed "ttft_torch.py --compile"
  fi
  rm -f "$sd"/ids-*.npy
  say "B: done"
fi

# ---- C: the cost model's prediction (made with the bundle, no GPU) --------------------
if want C; then
  if ls "$bundle"/bench/predicted-S*.json >/dev/null 2>&1; then
    cp "$bundle"/bench/predicted-S*.json "$res/"
    say "C: cost-model predictions (a model, not a measurement):"
    cat "$bundle"/bench/predicted-S*.txt 2>/dev/null | tee -a "$log"
  else
    step_failed "C: no predicted-S*.json in the bundle (made without H20_BUNDLE_BENCH?)"
  fi
fi

say "total $(($(date +%s) - t_start)) s"
"$py" "$here/summarize.py" "$res" --record "$res/issue7.json" --markdown "$res/summary.md" >>"$log" 2>&1 ||
  step_failed "summarize.py"
"$py" "$here/plot.py" "$res/issue7.json" "$res/issue7.png" 2>&1 | tee -a "$log"
[[ -n ${OUT:-} ]] && mkdir -p "$OUT/bench" && cp "$res"/*.json "$res"/*.log "$res"/*.md "$OUT/bench/" 2>/dev/null &&
  cp "$res"/*.png "$OUT/bench/" 2>/dev/null
echo
cat "$res/summary.md" 2>/dev/null
exit $failed
