#!/usr/bin/env bash
# Where does the bf16 difference between h20 and PyTorch come from? After
# run-bench.sh's section B at S (same H20_BENCH_WORK), runs the PyTorch
# reference (models/llama/reference.py) on the same weights and ids in float32
# and in bf16, and reports the relative L2 of the last-position logits of
# h20 (bf16) and of PyTorch (bf16), each against the float32 PyTorch run.
# If both bf16 runs are about equally far from float32, their mutual
# difference is bf16 rounding, not an h20 error.
# Usage: BUNDLE/bench/l2-attribution.sh [BUNDLE] [S]   -> prints one JSON line
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=${1:-$(dirname "$here")}
S=${2:-32768}
work=${H20_BENCH_WORK:-/tmp/h20-bench}
res=${H20_BENCH_RESULTS:-$work/results}
sd=$work/seed-dense-8l
h20=$res/ttft-h20-S$S.npy
[[ -f $h20 && -f $sd/weights.done ]] || { echo "l2-attribution: run run-bench.sh section B at S=$S first ($h20)" >&2; exit 1; }
py=${PYTHON:-python3}
ids=$work/l2-ids-$S.npy
"$py" -c "import json, numpy as np; v = json.load(open('$sd/layout.json'))['config']['vocab_size']; np.save('$ids', np.random.default_rng(0).integers(0, v, (1, $S), dtype=np.int64))"
"$py" "$bundle/models/llama/reference.py" "$sd" "$ids" "$work/l2-f32-$S.npy" --dtype f32 --no-warmup >&2
"$py" "$bundle/models/llama/reference.py" "$sd" "$ids" "$work/l2-bf16-$S.npy" --dtype bf16 --no-warmup >&2
"$py" - "$h20" "$work/l2-bf16-$S.npy" "$work/l2-f32-$S.npy" "$S" <<'PY'
import json, sys
import numpy as np
h20, bf16, f32 = (np.load(p).astype(np.float64).reshape(-1) for p in sys.argv[1:4])
rel = lambda a, b: float(np.linalg.norm(a - b) / np.linalg.norm(b))
print(json.dumps({"S": int(sys.argv[4]), "h20_bf16_vs_torch_f32": rel(h20, f32),
                  "torch_bf16_vs_torch_f32": rel(bf16, f32), "h20_bf16_vs_torch_bf16": rel(h20, bf16),
                  "next_token": {"h20": int(h20.argmax()), "torch_bf16": int(bf16.argmax()),
                                 "torch_f32": int(f32.argmax())}}))
PY
