#!/usr/bin/env bash
# Issue 9 kernel benchmarks: DeepSeek-V4.1-Flash-shaped sparse attention and
# lightning indexer on one GPU, inside a bundle made by scripts/gpu-bundle.sh.
# Usage: BUNDLE/bench/v41-kernels.sh [BUNDLE]
#
# sparse-attention-check first runs its correctness cases (sparse attention
# and indexer vs float64), then times, with bf16 inputs generated on the
# device and 48 rows of every timed shape checked against float64:
#   - attn.sparse_attention: 64 heads x 512 (one latent KV head), window 128,
#     top-512 picks out of T = S / ratio, ratio 2 and 1 (the Flash layers'
#     compress ratios), S in H20_V41_S (default 131072 524288); median of 5;
#     both kernels (mma.sync and the Hopper wgmma one), a row each;
#   - attn.indexer_topk: 32 heads x 128, top 512, the same S and ratios,
#     attn.indexer_candidates (the 2048 best blocks of 8 entries) and the
#     top-512 within those blocks (attn.indexer_topk with candidates, the
#     reindex layer; its blocks come from a candidates call on the same
#     inputs); one warm-up and one timed call each (a 512K ratio-1 call is
#     ~7 s).
# The floor of each is its FLOPs at the bf16 GEMM rate measured in the same
# run (torch.matmul 8192^3, cuBLAS, median of 20; skipped without torch).
# ~2 min on an H200. Results: H20_BENCH_RESULTS (default
# /tmp/h20-bench/results) and $OUT/bench/ when OUT is set:
# v41-kernels.json, the logs, and the table (v41-kernels.md), printed last.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=${1:-$(dirname "$here")}
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
sizes=${H20_V41_S:-131072 524288}
res=${H20_BENCH_RESULTS:-/tmp/h20-bench/results}
mkdir -p "$res"
failed=0
csv=$(tr ' ' ',' <<<"$sizes")
pairs=""
for S in $sizes; do pairs+="${pairs:+,}$S:2,$S:1"; done

"$bin/sparse-attention-check" >"$res/v41-check.log" 2>&1 || failed=1
grep -E '^(PASS|FAIL|SKIP)' "$res/v41-check.log" | tail -3
for r in 2 1; do
  "$bin/sparse-attention-check" --no-check --time "$csv" --ratio $r --reps 5 \
    --json "$res/v41-sparse-r$r.json" >"$res/v41-sparse-r$r.log" 2>&1 || failed=1
done
"$bin/sparse-attention-check" --no-check --indexer-time "$pairs" --candidates-time "$pairs" \
  --within-time "$pairs" --reps 2 \
  --json "$res/v41-indexer.json" >"$res/v41-indexer.log" 2>&1 || failed=1
python3 - "$res" <<'PY' || failed=1
import json, os, subprocess, sys
res = sys.argv[1]
rows = []
for name in ("v41-sparse-r2.json", "v41-sparse-r1.json", "v41-indexer.json"):
    p = os.path.join(res, name)
    if os.path.exists(p):
        rows += json.load(open(p))
gemm = None
try:
    import torch
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    for _ in range(5):
        a @ b
    ts = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); a @ b; e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    gemm = 2 * 8192 ** 3 / ts[len(ts) // 2] / 1e9
    gpu = torch.cuda.get_device_name()
except Exception as e:  # no torch or no GPU: no floor
    gpu = f"unknown ({e})"
for r in rows:
    if gemm:
        r["gemm_tflops"] = round(gemm, 1)
        r["floor_ms"] = round(r["flops"] / (gemm * 1e12) * 1e3, 3)
        r["vs_floor"] = round(r["ms"] / r["floor_ms"], 2)
json.dump({"gpu": gpu, "gemm_bf16_tflops": gemm, "rows": rows},
          open(os.path.join(res, "v41-kernels.json"), "w"), indent=1)
lines = [f"GPU: {gpu}; bf16 GEMM {gemm:.0f} TFLOP/s (torch.matmul 8192^3)" if gemm else f"GPU: {gpu}", "",
         "| kernel | S | ratio | ms | TFLOP/s | floor ms | x floor |", "|---|---|---|---|---|---|---|"]
for r in rows:
    lines.append(f"| {r['kernel']} | {r['S']} | {r['ratio']} | {r['ms']:.1f} | {r['tflops']:.0f} | "
                 f"{r.get('floor_ms', float('nan')):.1f} | {r.get('vs_floor', float('nan')):.2f} |")
open(os.path.join(res, "v41-kernels.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
if [[ -n ${OUT:-} ]]; then mkdir -p "$OUT/bench" && cp "$res"/v41-* "$OUT/bench/"; fi
exit $failed
