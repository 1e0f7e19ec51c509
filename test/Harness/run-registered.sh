#!/usr/bin/env bash
# run-registered.sh MODEL.onnx IDS.npy: runs pass-harness.sh for every
# pipeline in registered-passes.txt; fails on the first that differs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
grep -vE '^(#|excused:)' "$here/registered-passes.txt" | while read -r pipeline; do
  "$here/pass-harness.sh" "$1" "$2" "$pipeline"
done
