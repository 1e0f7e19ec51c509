#!/usr/bin/env bash
# Compile time of the full DeepSeek-V4.1-Flash graph (no GPU needed): the
# graph-only export of transformers' default config (40 layers, 384
# experts; weights are a sparse file the compiler only stats), compiled by
# h20-opt for --target=h200 at 128K / 512K / 1M positions and for
# --target=h20 at 128K, one at a time, wall time and peak RSS of each.
# With BASELINE=/path/to/older/h20-opt the same compiles run with it too,
# in the same run on the same machine (the comparison issue 30 asks for).
# Writes bench/results/v41-compile-time-<commit>.json.
# BASELINE_POSITIONS limits the baseline's h200 runs (default: POSITIONS).
# Usage: [BASELINE=old-h20-opt [BASELINE_POSITIONS="131072"]]
#        [POSITIONS="131072 524288 1048576"] [PYTHON=python3 with numpy and onnx]
#        bench/v41-compile-time.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${H20_BUILD_DIR:-$root/build}/bin
positions=${POSITIONS:-131072 524288 1048576}
py=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo '{"name": "flash-full"}' > "$work/config.json"
"$py" "$root/models/deepseek_v41/export.py" --graph-only --logits last "$work/config.json" \
  "$work/onnx" > /dev/null

# time_one BIN TARGET POSITIONS -> "seconds peak_kib"
time_one() {
  /usr/bin/time -f "%e %M" -o "$work/time" "$1" "$work/onnx/model.onnx" --target="$2" \
    --logits=last --max-positions="$3" -o "$work/m.h20" --quiet 2> "$work/log" ||
    { cat "$work/log" >&2; exit 1; }
  cat "$work/time"
}

rows=()
for which in new baseline; do
  b="$bin/h20-opt"
  ps=$positions
  if [ "$which" = baseline ]; then
    [ -n "${BASELINE:-}" ] || continue
    b=$BASELINE
    ps=${BASELINE_POSITIONS:-$positions}
  fi
  for t in "h200:$ps" h20:131072; do
    target=${t%%:*}
    for p in ${t#*:}; do
      read -r s kib < <(time_one "$b" "$target" "$p")
      echo "$which $target $p: ${s} s, $((kib / 1024)) MiB" >&2
      rows+=("{\"compiler\": \"$which\", \"target\": \"$target\", \"max_positions\": $p, \"seconds\": $s, \"peak_rss_mib\": $((kib / 1024))}")
    done
  done
done
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
out="$root/bench/results/v41-compile-time-$commit.json"
{
  echo "{"
  echo "  \"benchmark\": \"v41-compile-time\","
  echo "  \"model\": \"DeepSeek-V4.1-Flash, export.py --graph-only, logits last\","
  echo "  \"cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')\","
  echo "  \"cores\": $(nproc), \"commit\": \"$commit\", \"baseline\": \"${BASELINE:-}\","
  echo "  \"date\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\","
  echo "  \"runs\": ["
  (IFS=$'\n'; echo "${rows[*]}" | sed 's/^/    /; $!s/$/,/')
  echo "  ]"
  echo "}"
} > "$out"
cat "$out"
