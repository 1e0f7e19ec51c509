#!/usr/bin/env bash
# CPU-target benchmark (no GPU needed): whole `h20-run` wall time for one
# fixture at S = 1024, 5 runs, median; writes bench/results/cpu_prefill.json.
# Usage: bench/cpu_prefill.sh [FIXTURE_DIR] (default ../shared/fixtures/onnx)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
fixtures=${1:-$root/../shared/fixtures/onnx}
bin=${H20_BUILD_DIR:-$root/build}/bin
model=llama_gqa_op23
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin/h20-opt" "$fixtures/$model.onnx" --target=cpu -o "$tmp/m.h20"
times=()
for i in 1 2 3 4 5; do
  start=$(date +%s.%N)
  "$bin/h20-run" "$tmp/m.h20" --ids "$fixtures/$model.ids1024.npy" --report "$tmp/r$i.json" > /dev/null
  end=$(date +%s.%N)
  times+=("$(awk "BEGIN { printf \"%.3f\", $end - $start }")")
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
median=$(echo "$sorted" | sed -n 3p)
prefill=$(grep -o '"ttft_ms": [0-9.]*' "$tmp/r3.json" | awk '{print $2}')
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
cat > "$root/bench/results/cpu_prefill.json" <<JSON
{
  "benchmark": "cpu_prefill",
  "model": "$model",
  "tokens": 1024,
  "runs_s": [$(IFS=,; echo "${times[*]}")],
  "median_wall_s": $median,
  "prefill_ms_run3": $prefill,
  "cpu": "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')",
  "cores": $(nproc),
  "commit": "$commit",
  "date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
}
JSON
cat "$root/bench/results/cpu_prefill.json"
