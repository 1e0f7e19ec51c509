#!/usr/bin/env bash
# Issue 27's checks on a GPU machine, from a bundle made by
#   H20_BUNDLE_BENCH=robust scripts/gpu-bundle.sh DIR
# (no compiler needed here):
#  1. the op edge cases (LayerNormalization, GatherND, CumSum, Trilu, Slice,
#     Range, Softplus) on the GPU target against their numpy references
#     (DIR/opcases, scripts/gpu-op-cases.sh);
#  2. index inputs out of range on the GPU target (Gather indices, RoPE
#     position ids beyond the cos/sin cache): h20-run --device gpu exits 2
#     naming the input and writes nothing; in range, the outputs equal the
#     CPU target's (DIR/ranges, test/Target/CPU/Inputs/make_range_cases.py);
#  3. compute-sanitizer's four tools over the GPU programs (gpu-sanitize.sh).
#   DIR/gpu-robust-check.sh DIR
# Prints a table (one line per check) and exits 1 if any failed. Logs and
# results go to DIR/results (and $OUT when set).
set -uo pipefail
dir=${1:?usage: gpu-robust-check.sh BUNDLE_DIR}
bin=$dir/bin
export LD_LIBRARY_PATH=$dir/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
results=$dir/results
mkdir -p "$results"
fails=0
table=()
record() { table+=("$(printf '%-34s %-5s %s' "$1" "$2" "$3")"); [[ $2 == PASS ]] || fails=$((fails + 1)); }

# 1. Op edge cases.
if [[ -x $dir/opcases/gpu-op-cases.sh ]]; then
  "$dir/opcases/gpu-op-cases.sh" run "$dir/opcases" >"$results/op-cases.txt" 2>&1
  rc=$?
  record "op edge cases (GPU)" "$([[ $rc == 0 ]] && echo PASS || echo FAIL)" "$(tail -1 "$results/op-cases.txt")"
fi

# 2. Index ranges.
r=$dir/ranges
expect_bad() { # NAME ART INPUTS... : exit 2, message names the input, no output
  local name=$1 art=$2
  shift 2
  rm -f "$r/bad.npy"
  "$bin/h20-run" "$r/$art" --device gpu "$@" --output y="$r/bad.npy" >"$results/range.$name.txt" 2>&1
  local rc=$?
  if [[ $rc == 2 && ! -e $r/bad.npy ]] && grep -q "outside \[" "$results/range.$name.txt"; then
    record "range: $name" PASS "$(grep -o "input '[^']*' element.*" "$results/range.$name.txt" | cut -c1-90)"
  else
    record "range: $name" FAIL "exit $rc: $(tail -1 "$results/range.$name.txt" | cut -c1-90)"
  fi
}
expect_ok() { # NAME ART INPUTS...: runs on the GPU, output equals the CPU's
  local name=$1 art=$2
  shift 2
  if "$bin/h20-run" "$r/$art" --device gpu "$@" --output y="$r/$name.gpu.npy" >"$results/range.$name.txt" 2>&1 &&
     "$bin/tensor-compare" "$r/$name.gpu.npy" "$r/$name.cpu.npy" --atol 1e-5 --rtol 1e-5 >>"$results/range.$name.txt" 2>&1; then
    record "range: $name" PASS "in range: runs, equals the CPU target"
  else
    record "range: $name" FAIL "$(tail -1 "$results/range.$name.txt" | cut -c1-90)"
  fi
}
if [[ -d $r ]]; then
  expect_ok gather-in-range gather_s.gpu.h20 --input i="$r/i3_ok.npy"
  expect_bad gather-index-4-of-4 gather_s.gpu.h20 --input i="$r/i_hi.npy"
  expect_ok rope-in-range rope_s.gpu.h20 --input x="$r/x.npy" --input position_ids="$r/pos_ok.npy"
  expect_bad rope-position-16-of-16 rope_s.gpu.h20 --input x="$r/x.npy" --input position_ids="$r/pos_bad.npy"
  expect_bad rope-position-negative rope_s.gpu.h20 --input x="$r/x.npy" --input position_ids="$r/pos_neg.npy"
fi

# 3. compute-sanitizer.
if [[ ${H20_SKIP_SANITIZE:-0} != 1 ]]; then
  "$dir/gpu-sanitize.sh" "$dir" >"$results/sanitize.txt" 2>&1
  rc=$?
  record "compute-sanitizer (4 tools)" "$([[ $rc == 0 ]] && echo PASS || echo FAIL)" "$(grep 'error(s) in total' "$results/sanitize.txt")"
fi

[[ -n ${OUT:-} ]] && cp -r "$results" "$OUT/robust-results" 2>/dev/null
echo
cat "$results/sanitize.txt" 2>/dev/null | grep -E '^(TOOL|memcheck|racecheck|synccheck|initcheck)'
echo
printf '%s\n' "${table[@]}"
echo "gpu-robust-check: $fails failure(s)"
[[ $fails == 0 ]]
