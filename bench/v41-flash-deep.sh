#!/usr/bin/env bash
# Issue 30 benchmark: the deepest DeepSeek-V4.1-Flash-shaped model of the
# bundle on one GPU with its weights as DeepSeek's checkpoints store them
# (FP8 e4m3 linears with 128 x 128 block scales, MXFP4 routed experts),
# chunked prefill at 128K and 512K tokens.
# Usage: BUNDLE/bench/v41-flash-deep.sh [BUNDLE]
#
# Artifacts: art/v41-flash-deep-CONFIG.SN.h20 (gpu-bundle.sh with
# H20_BUNDLE_BENCH=1 or v41: a --graph-only export of configs/CONFIG.json,
# H20_V41_DEEP_CONFIG, default flash-16 for a 141 GB H200, flash-8 for 80 GB
# cards, flash-16e for flash-16 with an Engram layer, with --fp8-linears
# --fp4-experts --fp8-engram, compiled --compute-type=bf16; each model has
# every layer kind of the released 40 layers in about its share; Engram's
# table stays in pinned host memory, h20-opt --host-tables=auto).
# Weights: h20-run --dummy-weights (FP8 codes and FP4 bytes of the right
# scale, see h20-run --help) with H20_DUMMY_SHARE=0: every layer its own
# weights, so the peak memory is the model's; ids random (seed S).
# Per artifact: one warm-up prefill and H20_V41_REPEAT (default 2) timed
# ones (TTFT median, CUDA graphs), then one --profile-steps run (no graphs:
# not the TTFT) whose step times are summed per layer (a layer ends with
# its routed experts' combine) and per step kind.
# Floors, from the artifact's steps and the rates measured in the same run
# (torch, 8192^3): bf16 floor = all FLOPs at the bf16 GEMM rate; FP8 floor
# = the FP8 GEMMs' FLOPs at the FP8 rate (torch._scaled_mm, per-tensor
# scales), the rest at the bf16 rate. FLOPs: GEMM steps 2 m n k per token,
# the MXFP4 expert GEMMs 2 N K per routed row (top-k rows per token), sparse
# attention 4 H D (window + picks) per query, indexer 2 Hi Di per scored
# (query, entry) pair (all visible entries; within candidates: the
# candidate blocks' entries), each over the S real tokens.
# Results: H20_BENCH_RESULTS (default /tmp/h20-bench/results), and
# $OUT/bench/ when OUT is set: v41-flash-deep.json and .md (printed), logs.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=${1:-$(dirname "$here")}
bin=$bundle/bin
export H20_DUMMY_SHARE=0
export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
res=${H20_BENCH_RESULTS:-/tmp/h20-bench/results}
repeat=${H20_V41_REPEAT:-2}
mkdir -p "$res"
shopt -s nullglob
arts=("$bundle"/art/v41-flash-deep*.S*.h20)
if [[ ${#arts[@]} == 0 ]]; then
  echo "v41-flash-deep: no art/v41-flash-deep*.S*.h20 in $bundle" >&2
  exit 2
fi
rates=$(python3 - <<'PY' 2>/dev/null
import torch
def med(f):
    for _ in range(3): f()
    ts = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); f(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort(); return 2 * 8192**3 / (ts[10] * 1e-3) / 1e12
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
bf16 = med(lambda: a @ b)
a8 = a.to(torch.float8_e4m3fn); b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()
one = torch.ones((), device="cuda")
fp8 = med(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
print(f"{bf16:.1f} {fp8:.1f}")
PY
)
read -r bf16_rate fp8_rate <<<"${rates:-0 0}"
echo "GEMM rates (torch, 8192^3): bf16 $bf16_rate, FP8 $fp8_rate TFLOP/s"
failed=0
for a in "${arts[@]}"; do
  name=$(basename "$a" .h20)
  S=${name##*.S}
  python3 -c "import sys, numpy as np; np.save(sys.argv[1], np.random.default_rng(int(sys.argv[2])).integers(0, 129280, int(sys.argv[2])).astype(np.int64))" \
    "$res/ids-$S.npy" "$S"
  "$bin/artifact-info" "$a" --program >"$res/$name.program.json" 2>/dev/null
  timeout 600 "$bin/h20-run" "$a" --ids "$res/ids-$S.npy" --dummy-weights --warmup 1 \
    --repeat "$repeat" --report "$res/$name.report.json" >"$res/$name.log" 2>&1 || {
    echo "v41-flash-deep: $name failed (see $res/$name.log)" >&2; failed=1; continue; }
  # H20_V41_PROFILE_MAX_S: profile only prompts up to this many tokens
  # (default: all; a 16-layer 512K profile run costs another ~90 s).
  [[ $S -gt ${H20_V41_PROFILE_MAX_S:-$S} ]] && continue
  timeout 600 "$bin/h20-run" "$a" --ids "$res/ids-$S.npy" --dummy-weights --warmup 0 \
    --profile-steps --report "$res/$name.profile.json" >"$res/$name.profile.log" 2>&1 || {
    echo "v41-flash-deep: $name profile failed (see $res/$name.profile.log)" >&2; failed=1; }
done
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
python3 - "$res" "${bf16_rate:-0}" "${fp8_rate:-0}" "$here" "$gpu" <<'PY'
import glob, json, os, sys
res, bf16, fp8 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])

sys.path.insert(0, sys.argv[4])  # bench/, for v41_flops.py
from v41_flops import flops, model_table, rates_for  # noqa: E402
# The cost model's rates for this GPU (gpu-bundle.sh writes cost-model.json).
target, rates = rates_for(os.path.join(sys.argv[4], "cost-model.json"), sys.argv[5])

def per_layer(prog, profile):
    """Profiled ms per layer (a layer ends at its experts' last combine) and per step kind."""
    steps = prog["gpu"]["steps"]
    ms = {p["step"]: p["ms"] for p in profile["step_profile"]["steps"]}
    layers, kinds, cur = [0.0], {}, 0
    for i, s in enumerate(steps):
        t = ms.get(i, 0.0)
        layers[cur] += t
        k = s["kernel"] if s["op"] == "launch" else "gemm " + s["dtype_a"] if s["op"] == "gemm" else s["op"]
        k = k.split("_m1_")[0].split("_m0_")[0].split("_m2_")[0] if "indexer" in k else k
        kinds[k] = kinds.get(k, 0.0) + t
        if s["op"] == "launch" and s["kernel"].startswith("h20_moe_combine"):
            nxt = next((x for x in steps[i + 1:] if x["op"] == "launch"), None)
            if nxt is None or not nxt["kernel"].startswith("h20_moe_route"):
                cur += 1
                layers.append(0.0)
    return layers, dict(sorted(kinds.items(), key=lambda kv: -kv[1]))

rows = []
for p in sorted(glob.glob(f"{res}/v41-flash-deep*.S*.report.json")):
    name = os.path.basename(p)[:-len(".report.json")]
    S = int(name.split(".S")[-1])
    rep = json.load(open(p))
    prog = json.load(open(f"{res}/{name}.program.json"))
    f = flops(prog, S)
    total = sum(f.values())
    floor_bf16 = total / (bf16 * 1e12) * 1e3 if bf16 else None
    floor_fp8 = ((total - f["gemm_fp8"]) / (bf16 * 1e12) + f["gemm_fp8"] / (fp8 * 1e12)) * 1e3 if bf16 and fp8 else None
    row = {"model": name, "tokens": S, "chunk": prog["gpu"].get("chunking", {}).get("chunk"),
           "ttft_ms": rep.get("ttft_ms"), "ttft_runs_ms": rep.get("ttft_runs_ms"),
           "peak_gpu_gib": rep.get("peak_gpu_memory_bytes", 0) / 2**30,
           "tflop": {k: v / 1e12 for k, v in f.items()}, "floor_bf16_ms": floor_bf16,
           "floor_fp8_ms": floor_fp8}
    prof = f"{res}/{name}.profile.json"
    if os.path.exists(prof):
        profile = json.load(open(prof))
        row["profile_layer_ms"], row["profile_kind_ms"] = per_layer(prog, profile)
        if rates:
            row["model_table"] = model_table(prog, S, profile, rates, target)
    rows.append(row)
json.dump({"gemm_tflops_bf16": bf16, "gemm_tflops_fp8": fp8, "runs": rows},
          open(f"{res}/v41-flash-deep.json", "w"), indent=1)

def fmt(v, spec=".0f"):
    return format(v, spec) if isinstance(v, (int, float)) else "n/a"

with open(f"{res}/v41-flash-deep.md", "w") as out:
    out.write(f"GEMM rates (same run): bf16 {bf16} TFLOP/s, FP8 {fp8} TFLOP/s\n\n")
    out.write("| model | TTFT ms | peak GiB | TFLOP (bf16 gemm / FP8 gemm / FP4 experts / attn / indexer) "
              "| bf16 floor ms | x | FP8 floor ms | x |\n|---|---|---|---|---|---|---|---|\n")
    for r in rows:
        t, ms = r["tflop"], r["ttft_ms"]
        xb = ms / r["floor_bf16_ms"] if ms and r["floor_bf16_ms"] else None
        x8 = ms / r["floor_fp8_ms"] if ms and r["floor_fp8_ms"] else None
        out.write(f"| {r['model']} | {fmt(ms)} | {r['peak_gpu_gib']:.1f} | {sum(t.values()):.0f} "
                  f"({t['gemm_bf16']:.1f} / {t['gemm_fp8']:.1f} / {t['experts_fp4']:.1f} / "
                  f"{t['attention']:.1f} / {t['indexer']:.1f}) | {fmt(r['floor_bf16_ms'])} | {fmt(xb, '.2f')} "
                  f"| {fmt(r['floor_fp8_ms'])} | {fmt(x8, '.2f')} |\n")
    for r in rows:
        if "profile_layer_ms" in r:
            out.write(f"\n{r['model']} step profile (ms, no CUDA graphs): per layer "
                      + ", ".join(f"{v:.0f}" for v in r["profile_layer_ms"]) + " (last: norm + head)\n")
            out.write("by kind: " + ", ".join(f"{k} {v:.0f}" for k, v in list(r["profile_kind_ms"].items())[:12]) + "\n")
        if "model_table" in r:
            out.write("\n" + r["model_table"] + "\n")
print(open(f"{res}/v41-flash-deep.md").read())
PY
# One archive (the device tool returns a limited number of files).
if [[ -n ${OUT:-} ]]; then
  mkdir -p "$OUT/bench" && cp "$res"/v41-flash-deep.{json,md} "$OUT/bench/" 2>/dev/null
  tar czf "$OUT/bench/v41-flash-deep-logs.tgz" -C "$res" . 2>/dev/null
fi
exit $failed
