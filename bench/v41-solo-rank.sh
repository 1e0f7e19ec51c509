#!/usr/bin/env bash
# Issue 32 benchmark: one rank of the full DeepSeek-V4.1-Flash 8-GPU
# program (40 layers, FP8 linears, MXFP4 experts: transformers' default
# config, export.py --graph-only --fp8-linears --fp4-experts), run alone on
# one GPU at its full shapes: h20-run --gpus 8 --solo-rank 0
# --dummy-weights. The rank holds 1/8 of the routed experts (expert
# parallelism) and, with the attention split by query rows, attends 1/8 of
# each chunk's queries; its all-reduces are counted, not run (the logits
# are not the model's), so the TTFT is this rank's compute, without the
# NCCL time (priced separately by the cost model).
# Usage, on the build machine (needs h20-opt and python3 with onnx):
#   bench/v41-solo-rank.sh compile BUNDLE    # art/v41-solo.S{131072,524288}.rows-{true,false}.h20
# and on the GPU machine:
#   BUNDLE/bench/v41-solo-rank.sh run BUNDLE
# (gpu-bundle.sh with H20_BUNDLE_BENCH=v41 runs the compile step.)
# H20_SOLO_FLAGS: more h20-opt flags for the compile step (e.g.
# --expert-gemm=fp8). H20_SOLO_S: prompt lengths (default 131072 524288); rows-false: the same
# program with --split-attention-rows=false (every rank attends every
# query), the baseline of the split.
# Run: per artifact one warm-up (the first chunk) and one timed prefill,
# then a --profile-steps prefill of the split program at the first S whose
# step times are summed per kernel (generated kernels, named kernels, GEMM
# shapes), and bench/v41-project.py's projection of the 8-GPU TTFT on H20,
# H100 and H200 from them (a model). Results: H20_BENCH_RESULTS (default
# /tmp/h20-bench/results), and $OUT/bench/ when OUT is set:
# v41-solo-rank.json, .md and .projection.md (printed), logs.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mode=${1:?usage: v41-solo-rank.sh compile|run BUNDLE}
bundle=${2:-$(dirname "$here")}
sizes=${H20_SOLO_S:-131072 524288}
if [[ $mode == compile ]]; then
  root=$(cd "$here/.." && pwd)
  bin=${H20_BUILD_DIR:-$root/build}/bin
  # A Python with onnx and numpy (Debian's when the first on PATH has not).
  py=${PYTHON:-python3}
  [[ -n ${PYTHON:-} ]] || "$py" -c "import onnx, numpy" 2>/dev/null || py=/usr/bin/python3
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  echo '{"name": "flash-full"}' >"$work/config.json"
  "$py" "$root/models/deepseek_v41/export.py" --graph-only --logits last "$work/config.json" \
    "$work/onnx" --fp8-linears --fp4-experts >/dev/null || exit 1
  mkdir -p "$bundle/art" "$bundle/bench"
  for S in $sizes; do
    for rows in true false; do
      "$bin/h20-opt" "$work/onnx/model.onnx" --target=h200 --compute-type=bf16 --logits=last \
        --max-positions="$S" --gpus 8 --split-attention-rows=$rows --print-memory --quiet \
        ${H20_SOLO_FLAGS:-} \
        -o "$bundle/art/v41-solo.S$S.rows-$rows.h20" >"$bundle/art/v41-solo.S$S.rows-$rows.log" 2>&1 ||
        { cat "$bundle/art/v41-solo.S$S.rows-$rows.log" >&2; exit 1; }
    done
  done
  cp "$0" "$here/v41-project.py" "$here/v41_flops.py" "$bundle/bench/"
  # The cost model's kernel rates per target (a module without work).
  echo 'module {}' >"$work/empty.mlir"
  "$bin/h20-opt" "$work/empty.mlir" -o /dev/null \
    --h20-predict-prefill="targets=h20,h100,h200,h800 gpus=1 output=$bundle/bench/cost-model.json" >/dev/null
  exit 0
fi
[[ $mode == run ]] || { echo "v41-solo-rank.sh: mode must be compile or run" >&2; exit 2; }
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
res=${H20_BENCH_RESULTS:-/tmp/h20-bench/results}
mkdir -p "$res"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
first=
for S in $sizes; do
  python3 -c "import numpy as np; np.save('$res/ids$S.npy', np.random.default_rng($S).integers(0, 129280, (1, $S), dtype=np.int64))"
  for rows in true false; do
    art=$bundle/art/v41-solo.S$S.rows-$rows.h20
    [[ -f $art ]] || continue
    "$bin/h20-run" "$art" --ids "$res/ids$S.npy" --gpus 8 --solo-rank 0 --dummy-weights \
      --warmup 1 --repeat 1 --report "$res/v41-solo.S$S.rows-$rows.json" \
      >"$res/v41-solo.S$S.rows-$rows.log" 2>&1 || echo "S=$S rows=$rows: h20-run failed" >&2
  done
  if [[ -z $first && -f $bundle/art/v41-solo.S$S.rows-true.h20 ]]; then
    first=$S
    "$bin/h20-run" "$bundle/art/v41-solo.S$S.rows-true.h20" --ids "$res/ids$S.npy" --gpus 8 \
      --solo-rank 0 --dummy-weights --warmup 0 --profile-steps \
      --report "$res/v41-solo.S$S.profile.json" >"$res/v41-solo.S$S.profile.log" 2>&1 ||
      echo "S=$S profile: h20-run failed" >&2
  fi
done
python3 - "$res" "$gpu" "$sizes" <<'PY'
import json, os, re, sys, collections
res, gpu, sizes = sys.argv[1], sys.argv[2], sys.argv[3].split()
def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return None
out = {"gpu": gpu, "rank": "0 of 8", "runs": [], "profile": None}
lines = ["| S | attention | TTFT (rank 0 alone) | chunks | all-reduces skipped | their bytes a chunk | peak memory |",
         "| --- | --- | --- | --- | --- | --- | --- |"]
for S in sizes:
    for rows in ("true", "false"):
        r = load(f"{res}/v41-solo.S{S}.rows-{rows}.json")
        if not r:
            continue
        tp = r.get("tensor_parallel", {})
        chunks = r.get("chunks", 1) or 1
        row = {"S": int(S), "attention_rows": rows == "true", "ttft_ms": r.get("ttft_ms"),
               "chunks": chunks, "all_reduces": tp.get("all_reduces"),
               "all_reduce_bytes_per_chunk": (tp.get("all_reduce_bytes") or 0) / chunks,
               "peak_gpu_memory_bytes": r.get("peak_gpu_memory_bytes")}
        out["runs"].append(row)
        lines.append(f"| {S} | {'split by rows' if rows == 'true' else 'whole on every rank'} | "
                     f"{row['ttft_ms'] / 1e3:.2f} s | {chunks} | {row['all_reduces']} | "
                     f"{row['all_reduce_bytes_per_chunk'] / 2**20:.0f} MiB | "
                     f"{(row['peak_gpu_memory_bytes'] or 0) / 2**30:.2f} GiB |")
prof = None
for S in sizes:
    prof = load(f"{res}/v41-solo.S{S}.profile.json")
    if prof:
        break
if prof:
    agg, calls = collections.defaultdict(float), collections.Counter()
    for s in prof["step_profile"]["steps"]:
        k = s.get("name") or s.get("op")
        k = re.sub(r"^h20_main_kernel.*", "generated kernels (memory-bound)", k)
        agg[k] += s.get("ms", 0)
        calls[k] += s.get("calls", 1)
    total = sum(agg.values())
    top = sorted(agg.items(), key=lambda kv: -kv[1])[:12]
    out["profile"] = {"S": prof.get("tokens"), "total_ms": total,
                      "top": [{"kind": k, "ms": v, "share": v / total} for k, v in top]}
    lines += ["", f"Step profile (S = {prof.get('tokens')}, --profile-steps, steps summed by kind; "
              f"{total / 1e3:.2f} s):", "", "| kind | ms | share |", "| --- | --- | --- |"]
    lines += [f"| {k} | {v:.0f} | {100 * v / total:.1f}% |" for k, v in top]
json.dump(out, open(f"{res}/v41-solo-rank.json", "w"), indent=1)
md = "\n".join([f"One rank of the full V4.1-Flash 8-GPU program alone on {gpu}", ""] + lines)
open(f"{res}/v41-solo-rank.md", "w").write(md + "\n")
print(md)
PY
# The 8-GPU projection from this rank (a model: bench/v41-project.py).
# With the profiled program, also the rank's FLOP floor on each GPU.
if [[ -f $here/v41-project.py ]]; then
  prog=()
  [[ -n $first ]] && "$bin/artifact-info" "$bundle/art/v41-solo.S$first.rows-true.h20" --program \
    >"$res/v41-solo.program.json" 2>/dev/null && prog=(--program "$res/v41-solo.program.json")
  python3 "$here/v41-project.py" "$res/v41-solo-rank.json" "${prog[@]}" |
    tee "$res/v41-solo-rank.projection.md"
fi
# The profiled rank beside h20's cost model, by kernel kind (cost-model.json
# from the compile step; bench/v41_flops.py).
if [[ -n $first && -s $res/v41-solo.program.json && -f $res/v41-solo.S$first.profile.json ]]; then
  python3 - "$here" "$res/v41-solo.program.json" "$res/v41-solo.S$first.profile.json" "$first" \
    "$gpu" <<'PY' | tee "$res/v41-solo-rank.model.md"
import json, os, sys
sys.path.insert(0, sys.argv[1])
from v41_flops import model_table, rates_for
target, rates = rates_for(os.path.join(sys.argv[1], "cost-model.json"), sys.argv[5])
if rates:
    prog, prof = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
    print(model_table(prog, int(sys.argv[4]), prof, rates, target))
PY
fi
if [[ -n ${OUT:-} ]]; then
  mkdir -p "$OUT/bench"
  cp "$res"/v41-solo-rank.* "$res"/v41-solo.*.log "$OUT/bench/" 2>/dev/null
fi
