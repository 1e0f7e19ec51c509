#!/usr/bin/env bash
# Sets up (Debian packages), builds, and runs every test: lit + FileCheck and
# GoogleTest, through ctest (its "100% tests passed" summary, then the time).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
ctest --test-dir "${H20_BUILD_DIR:-$root/build}" --output-on-failure -j "$(nproc)"
