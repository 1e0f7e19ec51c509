#!/usr/bin/env bash
# Exports the whole real-export matrix (export.py), one process per
# architecture, into DIR; needs torch and transformers (the GPU machine).
#   models/exports/export-all.sh DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: export-all.sh DIR}
mkdir -p "$out"
pids=()
for a in llama3 qwen2 qwen3 mistral phi3 gemma2 gemma3; do
  PYTHONUNBUFFERED=1 python3 "$here/export.py" "$out" --archs "$a" > "$out/export-$a.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
