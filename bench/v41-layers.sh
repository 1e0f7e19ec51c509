#!/usr/bin/env bash
# Issue 9 layer benchmarks: one DeepSeek-V4.1-Flash-shaped layer of each
# kind, whole prefill on one GPU, inside a bundle made by
# `H20_BUNDLE_BENCH=1 scripts/gpu-bundle.sh` (which compiles the artifacts
# art/v41-flash-KIND.SN.h20 from --graph-only exports of
# models/deepseek_v41/configs: flash-layers --layers 1 (window only),
# flash-r2, flash-r1-candidates, flash-r1-reindex (two layers: the
# candidate source, then the reindex layer; its time is this model's minus
# flash-r1-candidates')).
# Usage: BUNDLE/bench/v41-layers.sh [BUNDLE]
#
# Weights: h20-run --dummy-weights (no checkpoint: 384 experts x 3 x 5120 x
# 2304 per layer are 27 GB in bf16). Each run: embedding, one layer (mHC,
# low-rank q, latent KV, compressor, indexer, sparse attention, output
# projection, shared + 384 routed experts top-6), final norm, last-position
# LM head; ids random. One warm-up prefill, then H20_V41_REPEAT (default 2)
# timed ones: TTFT median (ids on host to logits on host).
# Floor: the layer's FLOPs at the bf16 GEMM rate measured in the same run
# (torch.matmul 8192^3; skipped without torch): every gemm step's 2 m n k
# (grouped ones over all T x 6 routed rows), sparse attention 4 H D (W + K)
# per query row, indexer 2 Hi Di per scored (row, entry) pair (top-k: the
# visible half of T; within candidates: the candidate blocks' entries).
# Results: H20_BENCH_RESULTS (default /tmp/h20-bench/results) and
# $OUT/bench/ when OUT is set: v41-layers.json, logs, v41-layers.md (printed).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=${1:-$(dirname "$here")}
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
res=${H20_BENCH_RESULTS:-/tmp/h20-bench/results}
repeat=${H20_V41_REPEAT:-2}
mkdir -p "$res"
shopt -s nullglob
arts=("$bundle"/art/v41-flash-*.h20)
if [[ ${#arts[@]} == 0 ]]; then
  echo "v41-layers: no art/v41-flash-*.h20 in $bundle (make the bundle with H20_BUNDLE_BENCH=1)" >&2
  exit 2
fi
python3 - "$res" <<'PY'
import sys, numpy as np
for S in (131072, 524288):
    np.save(f"{sys.argv[1]}/v41-ids-{S}.npy",
            np.random.default_rng(S).integers(0, 129280, S).astype(np.int64))
PY
gemm_tflops=$(python3 - <<'PY' 2>/dev/null
import torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
for _ in range(3): a @ b
ts = []
for _ in range(20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); a @ b; e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
ts.sort(); print(f"{2 * 8192**3 / (ts[10] * 1e-3) / 1e12:.1f}")
PY
)
echo "bf16 GEMM rate (torch.matmul 8192^3): ${gemm_tflops:-n/a} TFLOP/s"
failed=0
for a in "${arts[@]}"; do
  name=$(basename "$a" .h20)
  S=${name##*.S}
  "$bin/artifact-info" "$a" >"$res/$name.program.json" 2>/dev/null
  timeout 300 "$bin/h20-run" "$a" --ids "$res/v41-ids-$S.npy" --dummy-weights --warmup 1 \
    --repeat "$repeat" --report "$res/$name.report.json" >"$res/$name.log" 2>&1 || {
    echo "v41-layers: $name failed (see $res/$name.log)" >&2; failed=1; }
done
python3 - "$res" "${gemm_tflops:-0}" <<'PY'
import glob, json, os, sys
res, rate = sys.argv[1], float(sys.argv[2])
def flops(prog):
    g = prog["gpu"]; f = {"gemm": 0.0, "attention": 0.0, "indexer": 0.0}
    for s in g["steps"]:
        if s["op"] == "gemm":
            c = lambda e: e if isinstance(e, int) else e.get("c", 0)
            f["gemm"] += 2.0 * c(s["batch"]) * c(s["m"]) * c(s["n"]) * c(s["k"])
        elif s["op"] == "launch" and s["kernel"].startswith("h20_sparse_attn"):
            q, idx = s["args"][0]["memref"]["sizes"], s["args"][4]["memref"]["sizes"]
            w = s["args"][7]["i64"]
            picks = idx[1] if "c" in s["kernel"].split("_")[6:] else 0  # _c or _c_wg
            f["attention"] += 4.0 * q[0] * q[1] * q[2] * (w + picks)
        elif s["op"] == "launch" and s["kernel"].startswith("h20_indexer"):
            q, k, cand = (s["args"][i]["memref"]["sizes"] for i in (0, 1, 3))
            block = s["args"][7]["i64"]
            inside = "_m1_" in s["kernel"]
            pairs = q[0] * (cand[1] * block if inside else k[0] / 2)
            f["indexer"] += 2.0 * q[1] * q[2] * pairs
    return f
rows = []
for p in sorted(glob.glob(f"{res}/v41-flash-*.report.json")):
    name = os.path.basename(p)[:-len(".report.json")]
    rep = json.load(open(p))
    f = flops(json.load(open(f"{res}/{name}.program.json")))
    total = sum(f.values())
    ms = rep.get("ttft_ms")
    floor = total / (rate * 1e12) * 1e3 if rate else None
    rows.append({"model": name, "ttft_ms": ms, "ttft_runs_ms": rep.get("ttft_runs_ms"),
                 "tflop": total / 1e12, "tflop_gemm": f["gemm"] / 1e12,
                 "tflop_attention": f["attention"] / 1e12, "tflop_indexer": f["indexer"] / 1e12,
                 "floor_ms": floor, "x_floor": ms / floor if ms and floor else None,
                 "peak_gpu_gib": rep.get("peak_gpu_memory_bytes", 0) / 2**30})
json.dump({"gemm_tflops": rate, "runs": rows}, open(f"{res}/v41-layers.json", "w"), indent=1)
with open(f"{res}/v41-layers.md", "w") as out:
    out.write(f"| model | TTFT ms | TFLOP (gemm / attn / indexer) | floor ms @ {rate} TFLOP/s | x floor |\n|---|---|---|---|---|\n")
    for r in rows:
        fl = f"{r['floor_ms']:.0f}" if r["floor_ms"] else "n/a"
        xf = f"{r['x_floor']:.2f}" if r["x_floor"] else "n/a"
        ms = f"{r['ttft_ms']:.0f}" if r["ttft_ms"] else "failed"
        out.write(f"| {r['model']} | {ms} | {r['tflop']:.1f} ({r['tflop_gemm']:.1f} / {r['tflop_attention']:.1f} / {r['tflop_indexer']:.1f}) | {fl} | {xf} |\n")
print(open(f"{res}/v41-layers.md").read())
PY
if [[ -n ${OUT:-} ]]; then mkdir -p "$OUT/bench" && cp "$res"/v41-layers.* "$res"/v41-flash-*.log "$res"/v41-flash-*.report.json "$OUT/bench/" 2>/dev/null; fi
exit $failed
