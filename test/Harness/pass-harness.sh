#!/usr/bin/env bash
# pass-harness.sh MODEL.onnx IDS.npy PIPELINE [MAX_REL_L2]
#
# The before/after harness for transformation passes: raises MODEL to the
# attn level, applies PIPELINE (an MLIR pass pipeline, e.g.
# 'func.func(h20-canonical-order)') to a copy, compiles both for the CPU,
# runs both on IDS and fails unless their logits agree within MAX_REL_L2
# (default 1e-5). Tools come from PATH (lit puts build/bin first).
set -euo pipefail
model=$1 ids=$2 pipeline=$3 tol=${4:-1e-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
h20-opt "$model" --emit=attn -o "$tmp/before.mlir"
h20-opt "$tmp/before.mlir" --pass-pipeline="builtin.module($pipeline)" -o "$tmp/after.mlir"
h20-opt "$tmp/before.mlir" --target=cpu -o "$tmp/before.h20"
h20-opt "$tmp/after.mlir" --target=cpu -o "$tmp/after.h20"
h20-run "$tmp/before.h20" --ids "$ids" --dump-logits "$tmp/before.npy" > /dev/null
h20-run "$tmp/after.h20" --ids "$ids" --dump-logits "$tmp/after.npy" > /dev/null
echo -n "$pipeline: "
npy-compare "$tmp/after.npy" "$tmp/before.npy" --max-rel-l2 "$tol"
