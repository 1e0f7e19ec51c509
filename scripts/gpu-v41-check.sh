#!/usr/bin/env bash
# DeepSeek-V4.1 on one GPU in one short run (about 5 minutes on an H200),
# inside a bundle made by
#   H20_BUNDLE_BENCH=v41 H20_V41_LAYER_KINDS="r1-candidates r1-reindex" \
#     scripts/gpu-bundle.sh BUNDLE
# Steps, each under its own time limit, most important first:
#   1. sparse-attention-check: every sparse-attention and indexer case
#      against float64 (modes 0, 1, 2 of the tensor-core indexer);
#   2. gpu-test.sh section deepseek: tiny and tiny-all-picks, f32 and bf16,
#      S = 8, 129, 1000 against the float32 reference;
#   3. the tensor-core indexer timed at V4.1-Flash shapes, S = 128K: top-k
#      and candidate blocks at ratio 1, the top-k within candidate blocks
#      (mode 1, the reindex layer) at ratio 1 and 2 (bench/v41-kernels.sh
#      times all of them at 128K and 512K);
#   4. bench/v41-layers.sh on the bundle's Flash-layer artifacts;
#   5. h20-gpu-unittests.
# The limits add up to 550 s (a short device lease); v41-layers times one
# prefill after a warm-up unless H20_V41_REPEAT says otherwise.
# Usage: BUNDLE/gpu-v41-check.sh [BUNDLE]. Logs and JSON go to
# H20_BENCH_RESULTS (default /tmp/h20-v41-check), packed into
# $OUT/v41-check.tgz when OUT is set; a summary table is printed last.
# Exit 1 if any step failed or ran out of time.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=${1:-$here}
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
res=${H20_BENCH_RESULTS:-/tmp/h20-v41-check}
mkdir -p "$res"
summary=()
failed=0
step() { # name seconds command...: runs it with a limit, records rc and time
  local name=$1 limit=$2 t0 rc
  shift 2
  t0=$(date +%s)
  timeout "$limit" "$@" >"$res/$name.log" 2>&1
  rc=$?
  ((rc == 0)) || failed=1
  summary+=("$(printf '%-16s rc=%-3s %4ss' "$name" "$rc" "$(($(date +%s) - t0))")")
  # Packed after every step: what ran comes back even if a later one is cut.
  [[ -n ${OUT:-} ]] && printf '%s\n' "${summary[@]}" >"$res/steps.txt" &&
    tar czf "$OUT/v41-check.tgz" -C "$res" .
  return $rc
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$res/gpu.txt" 2>&1

step kernels 100 "$bin/sparse-attention-check"
step tiny 90 env -u OUT H20_GPU_SECTIONS=deepseek "$bundle/gpu-test.sh" "$bundle"
step indexer-time 75 "$bin/sparse-attention-check" --no-check --indexer-time 131072:1 \
  --candidates-time 131072:1 --within-time 131072:1,131072:2 --reps 2 --json "$res/indexer.json"
step layers 240 env -u OUT H20_V41_REPEAT=${H20_V41_REPEAT:-1} H20_BENCH_RESULTS="$res/layers" "$bundle/bench/v41-layers.sh" "$bundle"
step unittests 60 "$bin/h20-gpu-unittests"

{
  echo "GPU: $(cat "$res/gpu.txt")"
  printf '%s\n' "${summary[@]}"
  echo "-- kernels: $(grep -c '^PASS' "$res/kernels.log") PASS, $(grep -c '^FAIL' "$res/kernels.log") FAIL"
  grep -E '^FAIL' "$res/kernels.log" | head -5
  echo "-- tiny / all-picks:"
  grep -E '^deepseek' "$res/tiny.log"
  echo "-- indexer at Flash shapes:"
  grep -E '^TIME' "$res/indexer-time.log"
  echo "-- layers:"
  cat "$res/layers/v41-layers.md" 2>/dev/null || tail -5 "$res/layers.log"
  echo "-- unit tests: $(grep -E '^\[  (PASSED|FAILED) ' "$res/unittests.log" | tr '\n' ' ')"
} >"$res/summary.txt"
[[ -d $bundle/results ]] && cp "$bundle/results/gpu-tests.json" "$res/" 2>/dev/null
[[ -n ${OUT:-} ]] && tar czf "$OUT/v41-check.tgz" -C "$res" . && cp "$res/summary.txt" "$OUT/"
cat "$res/summary.txt"
exit $failed
