#!/usr/bin/env bash
# scripts/demo.sh's GPU half, on a GPU machine that cannot build h20 (no
# LLVM/MLIR 22 there): the bundle's art/seed-dense-8l.S32768.h20 is what
# demo.sh compiles on a GPU (h20-opt --target=h200 --logits=last
# --max-positions=32768 on models/llama/generate.py's 8-layer seed-dense
# graph; scripts/gpu-bundle.sh with H20_BUNDLE_BENCH=1, whose S list must
# hold 32768). This makes the weights with generate.py and the demo's
# 32K-token prompt (numpy seed 0, as demo.sh), runs h20-run with the demo's
# flags and prints demo_summary.py's lines, as demo.sh does; then checks
# --verbose (weights loaded in GiB/s, one line per chunk when stderr is not
# a terminal) and --quiet (nothing printed, the report still written).
#   scripts/gpu-demo-check.sh BUNDLE [WORK_DIR]      (WORK_DIR: /tmp/h20-demo)
# Exit 1 when a step fails.
set -uo pipefail
bundle=${1:?usage: gpu-demo-check.sh BUNDLE [WORK_DIR]}
work=${2:-/tmp/h20-demo}
export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
art=$bundle/art/seed-dense-8l.S32768.h20
cfg=$bundle/models/llama/configs/seed-dense.json
[[ -f $art ]] || { echo "gpu-demo-check: no $art (bundle made without H20_BUNDLE_BENCH=1 and S 32768)" >&2; exit 2; }
py=python3
sd=$work/seed-dense-8l
mkdir -p "$sd"
cp "$bundle/seed-dense-8l/model.onnx" "$bundle/seed-dense-8l/layout.json" "$sd/"
t0=$SECONDS
if ! cmp -s "$sd/layout.json" "$sd/weights.done" 2>/dev/null; then
  "$py" "$bundle/models/llama/generate.py" "$cfg" "$sd" --layers 8 --weights >/dev/null || exit 1
  cp "$sd/layout.json" "$sd/weights.done"
fi
echo "weights: $((SECONDS - t0)) s"
"$py" -c "import json, numpy as np; v = json.load(open('$cfg'))['vocab_size']; \
np.save('$work/ids.npy', np.random.default_rng(0).integers(0, v, (1, 32768), dtype=np.int64))"
failed=0
echo "== h20-run (the demo's flags)"
"$bundle/bin/h20-run" "$art" --ids "$work/ids.npy" --weights-dir "$sd" --warmup 1 --repeat 3 \
  --report "$work/report.json" || failed=1
"$py" "$bundle/models/llama/demo_summary.py" "$cfg" 32768 "$work/report.json" --layers 8 || failed=1
echo "== --verbose (stderr not a terminal)"
"$bundle/bin/h20-run" "$art" --ids "$work/ids.npy" --weights-dir "$sd" --verbose \
  2>"$work/verbose.txt" >/dev/null || failed=1
cat "$work/verbose.txt"
grep -q "GiB/s" "$work/verbose.txt" && grep -q "prefill: chunk 4/4" "$work/verbose.txt" ||
  { echo "FAIL: --verbose printed no weight-loading or chunk lines"; failed=1; }
echo "== --quiet"
rm -f "$work/quiet.json"
out=$("$bundle/bin/h20-run" "$art" --ids "$work/ids.npy" --weights-dir "$sd" --quiet \
  --report "$work/quiet.json" 2>&1) || failed=1
[[ -z $out && -s $work/quiet.json ]] || { echo "FAIL: --quiet printed '$out' or wrote no report"; failed=1; }
echo "gpu-demo-check: $([[ $failed == 0 ]] && echo PASS || echo FAIL) ($((SECONDS - t0)) s)"
exit $failed
