#!/usr/bin/env bash
# Builds h20 with AddressSanitizer + UndefinedBehaviorSanitizer (CMake option
# H20_SANITIZE="address;undefined"; clang-22 when installed, else g++) in its
# own directory, build-sanitize/ or $H20_SANITIZE_BUILD_DIR, and runs the whole
# test suite there (ctest: lit + GoogleTest). h20's compiler, runtime, tools
# and tests are instrumented; libMLIR, libLLVM, protobuf and the code h20-opt
# generates for the CPU target (linked with `cc` into a .so that h20-run
# dlopens) are not.
#
# Every sanitizer report is written to <build>/sanitizer-logs/ (log_path), so
# a report is caught even in a test that expects a failing exit code; the
# script fails if any was written, and prints them. Extra arguments go to
# ctest (e.g. -R lit). Prints the build and test times.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${H20_SANITIZE_BUILD_DIR:-$root/build-sanitize}
logs=$build/sanitizer-logs

"$root/scripts/setup.sh"
t0=$(date +%s)
if [[ ! -f $build/build.ninja ]]; then
  args=(-G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
        -DH20_SANITIZE="address;undefined")
  if [[ -z ${CXX:-} ]] && command -v clang++-22 >/dev/null; then
    args+=(-DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22)
    if command -v ld.lld-22 >/dev/null; then
      args+=(-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld)
    fi
  fi
  cmake "${args[@]}"
fi
cmake --build "$build" -- -j "${H20_JOBS:-$(nproc)}"
t1=$(date +%s)

rm -rf "$logs" && mkdir -p "$logs"
# allow_user_poisoning=0: LLVM's BumpPtrAllocator (MLIR's type, attribute
# and operation storage) poisons and unpoisons its slabs in header code; the
# copies h20's instrumented code instantiates poison a slab, the copies inside
# the uninstrumented libMLIR then hand out memory from it without unpoisoning,
# and the next access from h20's code is reported as use-after-poison (a false
# positive; real heap, stack and global errors are still caught). Leaks are
# checked (none are reported, libMLIR's global state included).
export ASAN_OPTIONS="log_path=$logs/asan:allow_user_poisoning=0:detect_leaks=1:halt_on_error=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="log_path=$logs/ubsan:print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
set +e
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" "$@"
rc=$?
set -e
t2=$(date +%s)
echo "sanitize: build $((t1 - t0)) s, tests $((t2 - t1)) s"
if compgen -G "$logs/*" >/dev/null; then
  echo "sanitize: sanitizer reports in $logs:" >&2
  for f in "$logs"/*; do
    echo "== $f" >&2
    head -60 "$f" >&2
  done
  exit 1
fi
exit $rc
