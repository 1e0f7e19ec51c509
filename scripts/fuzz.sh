#!/usr/bin/env bash
# Builds one libFuzzer target and runs it for a while, one worker.
#
#   scripts/fuzz.sh TARGET SECONDS [CORPUS_DIR]
#
# TARGET: onnx-import (the ONNX importer on protobuf bytes), artifact
# (readArtifact + manifest + GPU program + CPU ABI check), tensor-io (token
# ids, .npy, TensorProto .pb) or pipeline (valid models mutated structurally:
# import, the attn pipeline and the CPU lowering to LLVM IR). The build
# (clang-22, ASan + UBSan, coverage; CMake option H20_FUZZ=ON) goes to its
# own directory, build-fuzz/ or
# $H20_FUZZ_BUILD_DIR. CORPUS_DIR (default: <build>/corpus/TARGET) is where
# the corpus grows; it starts from the checked-in seeds in
# test/Fuzz/corpus/TARGET, which are only read. A crashing input is written
# to <build>/crashes/TARGET/ and the script exits non-zero; the log is
# <build>/fuzz-TARGET.log, and the last lines (executions, corpus) are printed.
# H20_FUZZ_FLAGS adds libFuzzer flags (e.g. "-fork=1 -ignore_crashes=1" to
# go on after a crash: each crash is still written to <build>/crashes/TARGET/).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: $0 onnx-import|artifact|tensor-io|pipeline SECONDS [CORPUS_DIR]"
target=${1:?$usage}
seconds=${2:?$usage}
case $target in
  onnx-import|artifact|tensor-io|pipeline) ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
[[ $seconds =~ ^[0-9]+$ ]] || { echo "$usage" >&2; exit 2; }

build=${H20_FUZZ_BUILD_DIR:-$root/build-fuzz}
seeds=$root/test/Fuzz/corpus/$target
corpus=${3:-$build/corpus/$target}
crashes=$build/crashes/$target
log=$build/fuzz-$target.log

"$root/scripts/setup.sh" >/dev/null
if [[ ! -f $build/build.ninja ]]; then
  args=(-G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
        -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 -DH20_FUZZ=ON
        -DH20_SANITIZE="address;undefined")
  if command -v ld.lld-22 >/dev/null; then
    args+=(-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld)
  fi
  cmake "${args[@]}"
fi
cmake --build "$build" --target "h20-fuzz-$target" -- -j "${H20_JOBS:-2}"

mkdir -p "$corpus" "$crashes"
# Crash files this run writes (with -fork=N -ignore_crashes=1 the run goes
# on after each one, and libFuzzer's exit status says nothing of them).
stamp=$(mktemp)
# Reports abort the run (and name the input). Leaks are not findings here:
# every input gets a fresh MLIRContext, but libMLIR keeps some global state
# on purpose. allow_user_poisoning=0: see scripts/sanitize.sh (LLVM's
# allocators, half instrumented, give false use-after-poison reports).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allow_user_poisoning=0:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
echo "fuzz: $target for ${seconds}s, corpus $corpus (seeds $seeds), crashes in $crashes/"
set +e
"$build/bin/h20-fuzz-$target" "$corpus" "$seeds" \
  -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -max_len=262144 \
  -print_final_stats=1 -artifact_prefix="$crashes/" ${H20_FUZZ_FLAGS:-} >"$log" 2>&1
rc=$?
set -e
grep -E "^#[0-9]+[[:space:]]+(DONE|INITED)|stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb" "$log" || true
# -fork=N: the last status line (executions, corpus, crashes so far).
grep -E "^#[0-9]+: " "$log" | tail -1 || true
echo "fuzz: corpus now $(find "$corpus" -type f | wc -l) inputs, $(du -sh "$corpus" | cut -f1)"
found=$(find "$crashes" -type f -newer "$stamp" | wc -l)
rm -f "$stamp"
if [[ $found -ne 0 ]]; then
  echo "fuzz: $found new crash/timeout/oom input(s) in $crashes/" >&2
  if [[ $rc -eq 0 ]]; then rc=1; fi
fi
if [[ $rc -ne 0 ]]; then
  echo "fuzz: $target FAILED (exit $rc); see $log and $crashes/" >&2
  grep -E "ERROR|runtime error|Test unit written|SUMMARY" "$log" | head -20 >&2 || true
  exit 1
fi
echo "fuzz: $target ok (no crash in ${seconds}s)"
