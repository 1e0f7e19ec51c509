#!/usr/bin/env bash
# Issue 28's GPU checks: the real-export matrix (test/Models/exports, made by
# models/exports/export.py) and the Llama-3.1-8B-shaped bf16 export at long
# prompts against PyTorch eager on the same weights.
#
#   scripts/gpu-exports-check.sh bundle DIR [L8B_ONNX]
#       on the build machine: h20-run and its libraries into DIR/bin, DIR/lib;
#       every matrix cell compiled for --target=h200 into DIR/art; with
#       L8B_ONNX (export_8b.py's model.onnx, its data file beside it, sparse
#       is enough: the compiler only stats it), DIR/l8b/model.onnx and the
#       artifact DIR/l8b/l8b.h20 (--logits=last, --max-positions 131072).
#   scripts/gpu-exports-check.sh run DIR OUT [S ...]
#       on the GPU machine (torch, transformers): the matrix on the GPU
#       target (OUT/matrix-gpu.json, a table), then, if DIR/l8b exists, the
#       8B weights written from the seeded model (export_8b.py weights),
#       h20 and PyTorch (bf16, SDPA) prefills at each S (default 32768
#       131072): OUT/l8b-S.json (TTFT, peak memory, next tokens, rel. L2),
#       and PyTorch float32 on the same weights at the smallest S.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:?usage: gpu-exports-check.sh bundle DIR [L8B_ONNX] | run DIR OUT [S ...]}
dir=${2:?missing DIR}

if [[ $mode == bundle ]]; then
  build=${H20_BUILD_DIR:-$root/build}
  "$root/scripts/build.sh" >/dev/null
  rm -rf "$dir" && mkdir -p "$dir/bin" "$dir/lib" "$dir/art"
  cp "$build/bin/h20-run" "$build/bin/npy-compare" "$dir/bin/"
  ldd "$build/bin/h20-run" | awk '/=> \// {print $3}' | grep -E 'libprotobuf|libonnx_proto' |
    while read -r so; do cp -L "$so" "$dir/lib/"; done || true
  python3=/usr/bin/python3
  "$python3" "$root/models/exports/check.py" "$root/test/Models/exports" --h20 "$build/bin" \
    --targets h200 --work "$dir/art" --json "$dir/art/compile.json" | tail -1 || true
  rm -f "$dir/art"/*.npy
  if [[ -n ${3:-} ]]; then
    mkdir -p "$dir/l8b"
    cp "$3" "$dir/l8b/model.onnx"
    "$build/bin/h20-opt" "$3" --target=h200 --logits=last --max-positions=131072 \
      -o "$dir/l8b/l8b.h20"
    # The same graph on the mma.sync attention kernel (FA2-style), for the
    # bf16 accuracy attribution.
    "$build/bin/h20-opt" "$3" --target=h200 --logits=last --attention-kernel=mma \
      --max-positions=131072 -o "$dir/l8b/l8b-mma.h20"
  fi
  # The com.microsoft contrib-op cases with ONNX Runtime's outputs.
  if "$python3" "$root/test/Oracle/Inputs/ms_contrib_cases.py" "$root/scripts/ort-run.sh" \
      "$dir/contrib-cases" >/dev/null; then
    "$root/scripts/gpu-op-cases.sh" prepare "$dir/contrib" --from "$dir/contrib-cases" | tail -1
  fi
  rm -rf "$dir/contrib-cases"
  echo "gpu-exports-check: bundle in $dir ($(du -sh "$dir" | cut -f1))"
  exit 0
fi

[[ $mode == run ]] || { echo "gpu-exports-check: mode must be bundle or run" >&2; exit 2; }
out=${3:?missing OUT}
shift 3
seqs=("$@")
((${#seqs[@]})) || seqs=(32768 131072)
mkdir -p "$out"
export LD_LIBRARY_PATH=$dir/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
[[ ${H20_SKIP_MATRIX:-0} == 1 ]] || python3 "$root/models/exports/check.py" "$root/test/Models/exports" --h20 "$dir/bin" \
  --targets h200 --device gpu --no-compile --work "$dir/art" --json "$out/matrix-gpu.json" \
  2>&1 | tee "$out/matrix-gpu.log" | cut -c1-160 || true

if [[ -x $dir/contrib/gpu-op-cases.sh && ${H20_SKIP_MATRIX:-0} != 1 ]]; then
  H20_COMPARE_ARGS="--atol 1e-3 --rtol 1e-3" "$dir/contrib/gpu-op-cases.sh" run "$dir/contrib" \
    2>&1 | tee "$out/contrib-gpu.log" || true
fi

[[ -d $dir/l8b ]] || exit 0
work=${H20_L8B_WORK:-/tmp/l8b}
mkdir -p "$work"
cp "$dir/l8b/model.onnx" "$work/model.onnx"
python3 "$root/models/exports/export_8b.py" "$work" weights 2>&1 | tee "$out/l8b-weights.log"
for S in "${seqs[@]}"; do
  [[ ${H20_L8B_ONLY_ATTRIBUTE:-0} == 1 ]] && break
  python3 -c "import numpy as np; np.save('$work/ids$S.npy', np.random.default_rng($S).integers(0, 128000, size=(1, $S), dtype=np.int64))"
  "$dir/bin/h20-run" "$dir/l8b/l8b.h20" --ids "$work/ids$S.npy" --device gpu --weights-dir "$work" \
    --warmup 1 --repeat 2 --dump-logits "$work/h20-$S.npy" --report "$out/l8b-h20-$S.json" \
    2>&1 | tail -3 | tee "$out/l8b-h20-$S.log"
  f32=()
  [[ $S == "${seqs[0]}" ]] && f32=(--float32 "$work/torch32-$S.npy")
  python3 "$root/models/exports/export_8b.py" "$work" reference "$work/ids$S.npy" \
    "$work/torch-$S.npy" "${f32[@]}" --repeat 2 2>&1 | tail -2 | tee "$out/l8b-torch-$S.log"
  cp "$work/torch-report-$S.json" "$out/" 2>/dev/null || true
  python3 - "$work" "$S" "$out" <<'EOF'
import json, sys, os
import numpy as np
work, S, out = sys.argv[1], sys.argv[2], sys.argv[3]
def rel(a, b):
    return float(np.linalg.norm((a - b).ravel()) / np.linalg.norm(b.ravel()))
h = np.load(f"{work}/h20-{S}.npy").reshape(-1)
t = np.load(f"{work}/torch-{S}.npy").reshape(-1)
r = {"S": int(S), "h20_next": int(h.argmax()), "torch_next": int(t.argmax()),
     "rel_l2_h20_vs_torch_bf16": rel(h, t)}
if os.path.exists(f"{work}/torch32-{S}.npy"):
    f = np.load(f"{work}/torch32-{S}.npy").reshape(-1)
    r.update(float32_next=int(f.argmax()), rel_l2_h20_vs_f32=rel(h, f), rel_l2_torch_bf16_vs_f32=rel(t, f))
hr = json.load(open(f"{out}/l8b-h20-{S}.json"))
tr = json.load(open(f"{work}/torch-report-{S}.json"))
r.update(h20_ttft_ms=hr.get("ttft_ms"), h20_peak_gib=hr.get("peak_gpu_memory_bytes", 0) / 2**30,
         torch_ttft_ms=tr["ttft_ms"], torch_peak_gib=tr["peak_gib"], gpu=tr["gpu"])
json.dump(r, open(f"{out}/l8b-{S}.json", "w"), indent=1)
print(json.dumps(r))
EOF
done

# bf16 accuracy attribution (issue 28): at the smallest S, for two prompts,
# each bf16 implementation's distance from PyTorch float32 on the same
# weights: h20 (wgmma and mma.sync attention kernels) and PyTorch with each
# SDPA kernel alone (flash, cuDNN, memory-efficient) and with the softmax
# scale as the export rounds it: OUT/l8b-attribution.json.
[[ -f $dir/l8b/l8b-mma.h20 && ${H20_L8B_ATTRIBUTE:-1} == 1 ]] || exit 0
S=${seqs[0]}
for p in 0 1; do
  python3 -c "import numpy as np; np.save('$work/aids$p.npy', np.random.default_rng($S + 1000 * $p).integers(0, 128000, size=(1, $S), dtype=np.int64))"
  for art in l8b l8b-mma; do
    "$dir/bin/h20-run" "$dir/l8b/$art.h20" --ids "$work/aids$p.npy" --device gpu --weights-dir "$work" \
      --dump-logits "$work/attr-$art-$p.npy" 2>&1 | tail -1
  done
  python3 "$root/models/exports/export_8b.py" "$work" reference "$work/aids$p.npy" \
    "$work/attr-torch-$p.npy" --float32 "$work/attr-torch32-$p.npy" --repeat 1 \
    --variants flash,cudnn,efficient,export-scale 2>&1 | tail -1
done
python3 - "$work" "$out" "$S" <<'EOF2'
import json, sys
import numpy as np
work, out, S = sys.argv[1], sys.argv[2], int(sys.argv[3])
def rel(a, b):
    return float(np.linalg.norm((a - b).ravel()) / np.linalg.norm(b.ravel()))
names = {"h20 (wgmma attention)": "attr-l8b-{p}", "h20 (mma.sync attention)": "attr-l8b-mma-{p}",
         "PyTorch bf16 (SDPA default)": "attr-torch-{p}", "PyTorch bf16 (flash)": "attr-torch-{p}-flash",
         "PyTorch bf16 (cuDNN)": "attr-torch-{p}-cudnn", "PyTorch bf16 (efficient)": "attr-torch-{p}-efficient",
         "PyTorch bf16 (SDPA, the export's bf16-rounded scale)": "attr-torch-{p}-export-scale",
         "PyTorch float32 (float32 RoPE angles)": "attr-torch32-{p}"}
rows = {}
for name, pat in names.items():
    per = []
    for p in (0, 1):
        try:
            x = np.load(f"{work}/{pat.format(p=p)}.npy").reshape(-1)
        except OSError:
            per.append(None)
            continue
        f = np.load(f"{work}/attr-torch32-{p}.npy").reshape(-1)
        r = {"rel_l2_vs_f32": rel(x, f), "next": int(x.argmax()), "f32_next": int(f.argmax())}
        try:  # float32 with float64 RoPE angles
            e = np.load(f"{work}/attr-torch32-{p}-exact.npy").reshape(-1)
            r["rel_l2_vs_f32_exact_angles"] = rel(x, e)
        except OSError:
            pass
        per.append(r)
    rows[name] = per
json.dump({"S": S, "prompts": 2, "rows": rows}, open(f"{out}/l8b-attribution.json", "w"), indent=1)
print(f"| bf16 implementation (S = {S}) | vs float32, prompt 0 | prompt 1 | vs float32 with f64 RoPE angles, prompt 0 | prompt 1 | same next token |")
print("| --- | --- | --- | --- | --- | --- |")
def cell(r, k):
    return f"{r[k]:.2e}" if r and k in r else "-"
for name, per in rows.items():
    same = all(r and r["next"] == r["f32_next"] for r in per)
    print(f"| {name} | {cell(per[0], 'rel_l2_vs_f32')} | {cell(per[1], 'rel_l2_vs_f32')} | "
          f"{cell(per[0], 'rel_l2_vs_f32_exact_angles')} | {cell(per[1], 'rel_l2_vs_f32_exact_angles')} | "
          f"{'yes' if same else 'no'} |")
EOF2
