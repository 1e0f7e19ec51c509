#!/usr/bin/env bash
# Issue 27's op edge cases (LayerNormalization, GatherND, CumSum, Trilu,
# Slice with negative steps and INT64 sentinels, Range with negative or
# fractional deltas, Softplus of large inputs; test/Target/CPU/Inputs/
# make_op_cases.py) on the GPU target: each case compiled with
#   h20-opt model.onnx --target=h200 --compute-type=f32
# run with h20-run --inputs-from, and every output compared with its numpy
# reference by tensor-compare (|out - ref| <= 1e-5 + 1e-5 |ref|, as the CPU
# test onnx-op-numerics-issue27.test; H20_COMPARE_ARGS overrides).
#
#   scripts/gpu-op-cases.sh prepare DIR [CASE ...]
#       on the build machine (h20-opt; python3 with onnx and numpy): writes
#       the cases to DIR/cases, the artifacts to DIR/art, h20-run,
#       tensor-compare and their non-system libraries to DIR/bin and DIR/lib,
#       and this script to DIR/gpu-op-cases.sh. Prints "<case> COMPILED" or
#       "<case> FAIL compile: <reason>" per case (no GPU needed: the lit test
#       test/Target/GPU/issue27-ops-compile.test runs this).
#   DIR/gpu-op-cases.sh run DIR
#       on the GPU machine (an H200; no compiler needed): prints
#       "<case> PASS", "<case> FAIL <stage>: <reason>" or "<case> SKIP no
#       GPU" per case, then "gpu op cases: P of N cases pass on the GPU
#       target". Exit 0 when all passed (or all were skipped), else 1.
#   scripts/gpu-op-cases.sh prepare DIR --from CASES_DIR
#       the same for backend-test cases already written to CASES_DIR (e.g.
#       the com.microsoft contrib ops of test/Oracle/Inputs/ms_contrib_cases.py
#       with ONNX Runtime's outputs as references).
#   scripts/gpu-op-cases.sh [CASE ...]
#       both, in a temporary directory, on a machine with the build and a GPU.
#
# CASE defaults to issue27 (all of issue 27's cases). slice_reverse_dynamic
# is left out of the default list: its input has a dynamic dim and the GPU
# target runs static input shapes only (it is reported as SKIP).
# Tools: $H20_BIN, else the directory of h20-opt on PATH, else build/bin.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." 2>/dev/null && pwd)

usage() {
  echo "usage: gpu-op-cases.sh prepare DIR [CASE ...] | run DIR | [CASE ...]" >&2
  exit 2
}

# The directory holding h20-opt, h20-run and tensor-compare of the build.
tools_dir() {
  if [[ -n ${H20_BIN:-} ]]; then
    echo "$H20_BIN"
  elif command -v h20-opt >/dev/null; then
    dirname "$(command -v h20-opt)"
  else
    echo "$root/build/bin"
  fi
}

# A Python with onnx and numpy.
python_with_onnx() {
  local p
  for p in ${PYTHON:-} python3 /usr/bin/python3; do
    if "$p" -c "import onnx, numpy" 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  echo "gpu-op-cases: no python3 with the onnx and numpy packages" >&2
  return 1
}

prepare() { # DIR CASE...
  local dir=$1
  shift
  local bin py gen c
  bin=$(tools_dir)
  [[ -x $bin/h20-opt ]] || { echo "gpu-op-cases: no h20-opt in '$bin' (build first)" >&2; exit 2; }
  py=$(python_with_onnx) || exit 2
  gen=$root/test/Target/CPU/Inputs/make_op_cases.py
  rm -rf "$dir"
  mkdir -p "$dir/cases" "$dir/art" "$dir/bin" "$dir/lib"
  local names=("$@")
  if [[ ${#names[@]} == 0 ]]; then
    names=(issue27)
  fi
  if [[ ${names[0]} == --from ]]; then
    [[ -d ${names[1]:-} ]] || { echo "gpu-op-cases: --from needs a directory of cases" >&2; exit 2; }
    cp -r "${names[1]}"/. "$dir/cases/"
  else
    "$py" "$gen" "$dir/cases" "${names[@]}" || exit 1
  fi
  # The default list leaves out the dynamic-shape case (static inputs only).
  if [[ $# == 0 && -d $dir/cases/slice_reverse_dynamic ]]; then
    rm -rf "$dir/cases/slice_reverse_dynamic"
    echo "slice_reverse_dynamic" >"$dir/skipped.txt"
  fi
  for c in "$dir"/cases/*/; do
    c=$(basename "$c")
    if "$bin/h20-opt" "$dir/cases/$c/model.onnx" --target=h200 --compute-type=f32 \
        -o "$dir/art/$c.h20" >"$dir/art/$c.log" 2>&1; then
      echo "$c COMPILED"
    else
      echo "$c FAIL compile: $(grep -m1 -o 'error: .*' "$dir/art/$c.log" | cut -c8-160)"
      rm -f "$dir/art/$c.h20"
    fi
  done
  local t
  for t in h20-run tensor-compare; do
    cp "$bin/$t" "$dir/bin/"
  done
  # Shared libraries a fresh GPU machine may lack (the rest is glibc/libstdc++).
  for t in "$dir"/bin/*; do
    ldd "$t" | awk '/=> \// {print $3}' | grep -E 'libprotobuf|libonnx_proto' || true
  done | sort -u | while read -r so; do cp -L "$so" "$dir/lib/"; done
  cp "$here/gpu-op-cases.sh" "$dir/gpu-op-cases.sh"
}

run() { # DIR
  local dir=$1 c w ok pass=0 total=0 skipped=0
  [[ -x $dir/bin/h20-run ]] || { echo "gpu-op-cases: no bin/h20-run in '$dir' (run prepare first)" >&2; exit 2; }
  export LD_LIBRARY_PATH=$dir/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  mkdir -p "$dir/out"
  if [[ -f $dir/skipped.txt ]]; then
    while read -r c; do
      echo "$c SKIP the GPU target runs static input shapes only"
    done <"$dir/skipped.txt"
  fi
  for c in "$dir"/cases/*/; do
    c=$(basename "$c")
    total=$((total + 1))
    w=$dir/out/$c
    mkdir -p "$w"
    if [[ ! -f $dir/art/$c.h20 ]]; then
      echo "$c FAIL compile: $(grep -m1 -o 'error: .*' "$dir/art/$c.log" 2>/dev/null | cut -c8-160)"
      continue
    fi
    if ! "$dir/bin/h20-run" "$dir/art/$c.h20" --inputs-from "$dir/cases/$c/test_data_set_0" \
        --outputs-to "$w" >"$w/run.log" 2>&1; then
      if grep -q "no CUDA-capable GPU\|no GPU" "$w/run.log"; then
        echo "$c SKIP no GPU"
        skipped=$((skipped + 1))
      else
        echo "$c FAIL run: $(grep -m1 -o 'error: .*' "$w/run.log" | cut -c8-160)"
      fi
      continue
    fi
    ok=1
    for ref in "$dir/cases/$c"/test_data_set_0/output_*.pb; do
      # shellcheck disable=SC2086
      if ! "$dir/bin/tensor-compare" "$w/$(basename "$ref")" "$ref" \
          ${H20_COMPARE_ARGS:---atol 1e-5 --rtol 1e-5} >"$w/compare.log" 2>&1; then
        ok=0
        echo "$c FAIL compare $(basename "$ref"): $(head -1 "$w/compare.log")"
        break
      fi
    done
    if [[ $ok == 1 ]]; then
      echo "$c PASS"
      pass=$((pass + 1))
    fi
  done
  echo "gpu op cases: $pass of $total cases pass on the GPU target ($skipped skipped: no GPU)"
  [[ $pass == $((total - skipped)) ]]
}

case ${1:-} in
  prepare)
    [[ $# -ge 2 ]] || usage
    dir=$2
    shift 2
    prepare "$dir" "$@"
    ;;
  run)
    [[ $# == 2 ]] || usage
    run "$2"
    ;;
  -h | --help)
    usage
    ;;
  *)
    dir=$(mktemp -d)/gpu-op-cases
    prepare "$dir" "$@" >/dev/null
    run "$dir"
    ;;
esac
