#!/usr/bin/env bash
# compute-sanitizer over every GPU kernel h20 runs on the fixtures: memcheck
# (out-of-bounds / misaligned accesses, leaks of device allocations) and
# racecheck (shared-memory hazards), on each fixture in f32 and bf16 at
# S = 1024 in 64-token chunks (so chunked KV writes, causal offsets and the
# partial last chunk are all exercised), plus the last-position LM head.
# That covers every generated (MLIR) kernel kind, both attention variants
# and the cuBLASLt GEMMs; then attention-check's correctness cases under
# both tools cover every attention kernel kind (mma.sync and wgmma).
#   scripts/gpu-sanitize.sh [BUNDLE_DIR] [ARTIFACT_GLOB]   (bundle from gpu-bundle.sh)
# H20_SANITIZE_TOOLS picks the tools (default: memcheck racecheck).
# Prints one line per run and the total error count; exit 1 if any error.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=${1:-$here}
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[[ -x $cs ]] || { echo "SKIP: compute-sanitizer not found"; exit 0; }
results=$bundle/results
mkdir -p "$results"
total=0
printf '%-10s %-44s %s\n' TOOL RUN ERRORS
for tool in ${H20_SANITIZE_TOOLS:-memcheck racecheck}; do
  for art in "$bundle"/art/${2:-llama_*.h20}; do
    base=$(basename "$art" .h20)
    model=${base%%.*}
    out=$results/sanitize.$tool.$base.txt
    # API errors are not counted: cuBLASLt probes kernels for other
    # architectures at start-up (cudaFuncGetAttributes -> "no kernel image",
    # handled inside the library), which memcheck would otherwise report as
    # errors of h20's process.
    extra=(--report-api-errors no)
    [[ $tool == memcheck ]] && extra+=(--leak-check full)
    "$cs" --tool "$tool" "${extra[@]}" --error-exitcode 99 "$bin/h20-run" "$art" \
      --ids "$bundle/models/$model.ids1024.npy" --weights-dir "$bundle/models" --warmup 0 \
      >"$out" 2>&1
    rc=$?
    n=$(grep -oE 'ERROR SUMMARY: [0-9]+' "$out" | grep -oE '[0-9]+' | tail -1)
    [[ -z $n ]] && n=$([[ $rc == 0 ]] && echo 0 || echo "?")
    [[ $rc != 0 && $n == 0 ]] && n="? (exit $rc)"
    printf '%-10s %-44s %s\n' "$tool" "$base" "$n"
    [[ $n =~ ^[0-9]+$ ]] && total=$((total + n)) || total=$((total + 1))
  done
  # The attention kernels alone, every variant kind on every correctness
  # case of attention-check (odd lengths, GQA, windows, strided views,
  # 64-bit offsets); skipped when an artifact glob was given.
  if [[ -z ${2:-} && -x $bin/attention-check ]]; then
    out=$results/sanitize.$tool.attention-check.txt
    "$cs" --tool "$tool" --report-api-errors no --error-exitcode 99 "$bin/attention-check" \
      --no-timing --kernels all >"$out" 2>&1
    rc=$?
    n=$(grep -oE 'ERROR SUMMARY: [0-9]+' "$out" | grep -oE '[0-9]+' | tail -1)
    [[ -z $n ]] && n=$([[ $rc == 0 ]] && echo 0 || echo "?")
    [[ $rc != 0 && $n == 0 ]] && n="? (exit $rc)"
    printf '%-10s %-44s %s\n' "$tool" "attention-check ($(grep -c '^PASS' "$out") cases)" "$n"
    [[ $n =~ ^[0-9]+$ ]] && total=$((total + n)) || total=$((total + 1))
  fi
done
echo "compute-sanitizer: $total error(s) in total"
[[ -n ${OUT:-} ]] && cp "$results"/sanitize.* "$OUT/" 2>/dev/null
[[ $total == 0 ]]
