#!/usr/bin/env bash
# run-conformance.sh CASES_DIR OUT_DIR
# Compiles every ONNX backend-test case in CASES_DIR (model.onnx +
# test_data_set_0/) for the CPU target, runs it with h20-run --inputs-from,
# and compares every output with tensor-compare (|out - ref| <= 1e-3 +
# 1e-3 |ref|, float16: 2e-3; H20_COMPARE_ARGS, e.g. "--atol 0 --rtol 0",
# overrides it). Prints one line per case, "<case> PASS" or
# "<case> FAIL <stage>: <reason>", then the total. Tools come from PATH.
set -uo pipefail
cases=$1 out=$2
mkdir -p "$out"
pass=0 total=0
for dir in "$cases"/*/; do
  c=$(basename "$dir")
  total=$((total + 1))
  w="$out/$c"
  mkdir -p "$w"
  if ! h20-opt "$dir/model.onnx" --target=cpu -o "$w/m.h20" > "$w/compile.log" 2>&1; then
    echo "$c FAIL compile: $(grep -m1 -o 'error: .*' "$w/compile.log" | cut -c8-160)"
    continue
  fi
  if ! h20-run "$w/m.h20" --inputs-from "$dir/test_data_set_0" --outputs-to "$w" > "$w/run.log" 2>&1; then
    echo "$c FAIL run: $(grep -m1 -o 'error: .*' "$w/run.log" | cut -c8-160)"
    continue
  fi
  ok=1
  for ref in "$dir"/test_data_set_0/output_*.pb; do
    if ! tensor-compare "$w/$(basename "$ref")" "$ref" ${H20_COMPARE_ARGS:-} > "$w/compare.log" 2>&1; then
      ok=0
      echo "$c FAIL compare $(basename "$ref"): $(head -1 "$w/compare.log")"
      break
    fi
  done
  if [ $ok = 1 ]; then
    echo "$c PASS"
    pass=$((pass + 1))
  fi
done
echo "conformance: $pass of $total cases pass on the CPU target"
