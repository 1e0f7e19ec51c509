#!/usr/bin/env bash
# check-registry.sh SRC_ROOT: fails if a pass declared in any Passes.td is
# missing from test/Harness/registered-passes.txt.
set -euo pipefail
root=$1
registry="$root/test/Harness/registered-passes.txt"
status=0
for pass in $(grep -ohE 'Pass<"h20-[a-z0-9-]+"' "$root"/include/h20/*/Passes.td | sed -E 's/Pass<"(.*)"/\1/'); do
  if ! grep -qE "(\(|\s|^excused: )$pass(\)|\{|\s|$)" "$registry"; then
    echo "pass $pass is not registered with the before/after harness ($registry)"
    status=1
  fi
done
exit $status
