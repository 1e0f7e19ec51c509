#!/usr/bin/env bash
# compute-sanitizer over every GPU program h20 ships, with its four tools:
#   memcheck   out-of-bounds / misaligned accesses, leaks of device memory
#   racecheck  shared-memory hazards between threads
#   synccheck  illegal __syncthreads / barrier use (divergent barriers)
#   initcheck  reads of device memory never written
# Programs (each a run under each tool):
#   - fixture prefills: h20-run on each artifact matching ARTIFACT_GLOB
#     (default: llama_gqa_op23.f32.h20 and llama_gqa_op23.bf16.h20, S = 1024
#     in 64-token chunks: chunked KV writes, causal offsets, the partial last
#     chunk, every generated (MLIR) kernel kind, both attention variants,
#     cuBLASLt GEMMs);
#   - attention-check's correctness cases on every attention kernel kind
#     (mma.sync and wgmma; odd lengths, GQA, windows, 64-bit offsets);
#   - sparse-attention-check (DeepSeek-V4.1 sparse attention and the three
#     indexer modes) and moe-check (routing kernels, grouped GEMMs);
#   - h20-gpu-unittests (the runtime's GPU tests: executor, CUDA graphs,
#     context / tensor parallel ranks, GEMM tuning).
#   scripts/gpu-sanitize.sh [BUNDLE_DIR] [ARTIFACT_GLOB]   (bundle from gpu-bundle.sh)
# H20_SANITIZE_TOOLS picks the tools (default: all four);
# H20_SANITIZE_PROGRAMS picks the programs (default: "prefill attention
# sparse moe unittests"). Logs go to BUNDLE_DIR/results/sanitize.TOOL.RUN.txt
# (and $OUT when set); prints one line per run, the total error count, and a
# JSON summary (results/sanitize-summary.json); exit 1 if any error.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=${1:-$here}
glob=${2:-llama_gqa_op23.f32.h20 llama_gqa_op23.bf16.h20}
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[[ -x $cs ]] || { echo "SKIP: compute-sanitizer not found"; exit 0; }
results=$bundle/results
mkdir -p "$results"
programs=" ${H20_SANITIZE_PROGRAMS:-prefill attention sparse moe unittests} "
total=0
rows=()
printf '%-10s %-48s %-8s %s\n' TOOL RUN ERRORS SECONDS

# sanitize TOOL NAME CASES_REGEX CMD...: one run; counts the tool's errors.
# API errors are not counted: cuBLASLt probes kernels for other
# architectures at start-up (cudaFuncGetAttributes -> "no kernel image",
# handled inside the library), which memcheck would otherwise report as
# errors of h20's process.
sanitize() {
  local tool=$1 name=$2 cases=$3
  shift 3
  local out=$results/sanitize.$tool.$name.txt extra=(--report-api-errors no) t0=$SECONDS
  [[ $tool == memcheck ]] && extra+=(--leak-check full)
  # initcheck: cudaMemset-free buffers that kernels fully overwrite are
  # fine; only reads of never-written memory count.
  H20_RUN=$bin/h20-run "$cs" --tool "$tool" "${extra[@]}" --error-exitcode 99 "$@" >"$out" 2>&1
  local rc=$? n
  n=$(grep -oE 'ERROR SUMMARY: [0-9]+' "$out" | grep -oE '[0-9]+' | tail -1)
  [[ -z $n ]] && n=$([[ $rc == 0 ]] && echo 0 || echo "?")
  [[ $rc != 0 && $n == 0 ]] && n="? (exit $rc)"
  local label=$name
  [[ -n $cases ]] && label="$name ($(grep -cE "$cases" "$out") cases)"
  printf '%-10s %-48s %-8s %s\n' "$tool" "$label" "$n" "$((SECONDS - t0))"
  rows+=("{\"tool\": \"$tool\", \"run\": \"$name\", \"errors\": \"$n\", \"exit\": $rc, \"seconds\": $((SECONDS - t0))}")
  [[ $n =~ ^[0-9]+$ ]] && total=$((total + n)) || total=$((total + 1))
}

for tool in ${H20_SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}; do
  if [[ $programs == *" prefill "* ]]; then
    for pattern in $glob; do
      for art in "$bundle"/art/$pattern; do
        [[ -f $art ]] || { echo "gpu-sanitize: no artifact $art" >&2; total=$((total + 1)); continue; }
        base=$(basename "$art" .h20)
        model=${base%%.*}
        sanitize "$tool" "$base" "" "$bin/h20-run" "$art" \
          --ids "$bundle/models/$model.ids1024.npy" --weights-dir "$bundle/models" --warmup 0
      done
    done
  fi
  [[ $programs == *" attention "* && -x $bin/attention-check ]] &&
    sanitize "$tool" attention-check '^PASS' "$bin/attention-check" --no-timing --kernels all
  [[ $programs == *" sparse "* && -x $bin/sparse-attention-check ]] &&
    sanitize "$tool" sparse-attention-check '^PASS' "$bin/sparse-attention-check"
  [[ $programs == *" moe "* && -x $bin/moe-check ]] &&
    sanitize "$tool" moe-check '^PASS' "$bin/moe-check"
  # GemmThroughput only times cuBLASLt, and H20RunGpusNcclAndGraphs starts
  # one process per GPU under NCCL's watchdog (too slow under a sanitizer);
  # both run plainly in gpu-test.sh.
  [[ $programs == *" unittests "* && -x $bin/h20-gpu-unittests ]] &&
    sanitize "$tool" h20-gpu-unittests '^\[       OK \]' "$bin/h20-gpu-unittests" \
      "--gtest_filter=${H20_SANITIZE_GTEST_FILTER:-*-*GemmThroughput*:*H20RunGpusNccl*}"
done
echo "compute-sanitizer: $total error(s) in total"
{
  printf '{"gpu": "%s", "driver": "%s", "tools": "%s", "total_errors": %d, "runs": [\n' \
    "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" \
    "$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)" \
    "${H20_SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}" "$total"
  for i in "${!rows[@]}"; do printf '  %s%s\n' "${rows[$i]}" "$([[ $i -lt $((${#rows[@]} - 1)) ]] && echo ,)"; done
  printf ']}\n'
} >"$results/sanitize-summary.json"
[[ -n ${OUT:-} ]] && cp "$results"/sanitize.* "$results/sanitize-summary.json" "$OUT/" 2>/dev/null
[[ $total == 0 ]]
