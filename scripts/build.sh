#!/usr/bin/env bash
# Configures (once) and builds h20 into build/. Binaries land in build/bin/.
# Uses clang-22 + lld when installed (faster links), else the system g++;
# override with CC/CXX. Extra arguments go to `cmake --build`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${H20_BUILD_DIR:-$root/build}

if [[ ! -f $build/build.ninja ]]; then
  args=(-G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=${H20_BUILD_TYPE:-Release})
  if [[ -z ${CXX:-} ]] && command -v clang++-22 >/dev/null; then
    args+=(-DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22)
    if command -v ld.lld-22 >/dev/null; then
      args+=(-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld)
    fi
  fi
  cmake "${args[@]}"
fi
cmake --build "$build" "$@"
