#!/usr/bin/env bash
# Issue 8: context-parallel scaling of seed-dense TTFT on the GPUs of one
# host, measured in one run: h20-run on 1 GPU, then --gpus N (one process
# per GPU, K/V over NCCL) for N = 2, 4, 8 up to the GPUs visible.
#   bench/cp-scaling.sh BENCH_BUNDLE [S]
# BENCH_BUNDLE: made by H20_BUNDLE_BENCH=only H20_BENCH_TTFT_S=S
# scripts/gpu-bundle.sh (seed-dense-8l/ and art/seed-dense-8l.S$S.c8192.h20,
# compiled with --chunk=8192: N ranks need S in whole multiples of 2N
# chunks, which the default chunk of 8448 tokens does not give S = 2^k);
# S defaults to 524288. The weights are generated here (numpy, seed 0, as
# run-bench.sh does) and removed afterwards.
# Per N: TTFT (h20-run's ttft_ms: ids on the host -> logits on the host,
# one run after a one-chunk warm-up), peak GPU memory of the rank holding
# the logits, logits vs N = 1 (relative L2, argmax), and the scaling
# efficiency T1 / (N * TN). Results: $OUT/cp-scaling.json (else
# BENCH_BUNDLE/results/), the table on stdout.
set -uo pipefail
bundle=${1:?usage: cp-scaling.sh BENCH_BUNDLE [S]}
S=${2:-524288}
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0
res=${OUT:-$bundle/results}/cp-scaling
mkdir -p "$res"
log=$res/cp-scaling.log
: >"$log"
art=$bundle/art/seed-dense-8l.S$S.c8192.h20
sd=$bundle/seed-dense-8l
[[ -f $art && -d $sd ]] || { echo "cp-scaling: no $art or $sd" >&2; exit 2; }
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
echo "cp-scaling: S = $S, $gpus GPU(s); generating the weights" | tee -a "$log"
python3 "$bundle/models/llama/generate.py" seed-dense "$sd" --layers 8 --weights >>"$log" 2>&1 ||
  { echo "cp-scaling: generate.py failed (see $log)" >&2; exit 1; }
python3 -c "import json, numpy as np; v = json.load(open('$sd/layout.json'))['config']['vocab_size']; np.save('$sd/ids-$S.npy', np.random.default_rng(0).integers(0, v, (1, $S), dtype=np.int64))"
failed=0
for n in 1 2 4 8; do
  ((n <= gpus)) || continue
  gp=()
  ((n > 1)) && gp=(--gpus "$n")
  echo "cp-scaling: N = $n" | tee -a "$log"
  if ! timeout -s KILL 400 "$bin/h20-run" "$art" --ids "$sd/ids-$S.npy" --weights-dir "$sd" "${gp[@]}" \
      --dump-logits "$res/logits-n$n.npy" --report "$res/report-n$n.json" >>"$log" 2>&1; then
    echo "cp-scaling: N = $n failed: $(grep -m1 -o 'error: .*' "$log" | cut -c1-160)" | tee -a "$log"
    failed=1
  fi
done
rm -f "$sd/weights.bin" "$sd/ids-$S.npy"
python3 - "$res" "$S" "$gpus" <<'PY' | tee -a "$log"
import json, os, subprocess, sys
import numpy as np
res, S, gpus = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                     capture_output=True, text=True).stdout.strip().splitlines()
rows, base, t1 = [], None, None
for n in (1, 2, 4, 8):
    rp = os.path.join(res, f"report-n{n}.json")
    if not os.path.exists(rp):
        continue
    r = json.load(open(rp))
    logits = np.load(os.path.join(res, f"logits-n{n}.npy")).astype(np.float64).ravel()
    if n == 1:
        base, t1 = logits, r["ttft_ms"]
    rel = float(np.linalg.norm(logits - base) / np.linalg.norm(base)) if base is not None else None
    row = {"gpus": n, "ttft_ms": r["ttft_ms"], "peak_gpu_memory_gib": round(r["peak_gpu_memory_bytes"] / 2**30, 2),
           "next_token_id": r["next_token_id"], "rel_l2_vs_1gpu": rel,
           "efficiency": (t1 / (n * r["ttft_ms"])) if t1 else None}
    cp = r.get("context_parallel")
    if cp:
        row["ring_bytes"] = cp.get("ring_bytes")
        row["ring_ms_this_rank"] = cp.get("ring_ms")
    rows.append(row)
out = {"benchmark": "seed-dense 8 layers, bf16, --logits=last, context parallel over NCCL",
       "S": S, "gpus_visible": gpus, "gpu": gpu, "runs": rows}
json.dump(out, open(os.path.join(res, "cp-scaling.json"), "w"), indent=2)
print(f"{'GPUs':>4} {'TTFT ms':>10} {'efficiency':>10} {'peak GiB':>9} {'rel L2':>9} next")
for r in rows:
    eff = f"{100 * r['efficiency']:.1f}%" if r["efficiency"] else "-"
    rel = f"{r['rel_l2_vs_1gpu']:.1e}" if r["rel_l2_vs_1gpu"] is not None else "-"
    print(f"{r['gpus']:>4} {r['ttft_ms']:>10.1f} {eff:>10} {r['peak_gpu_memory_gib']:>9} {rel:>9} {r['next_token_id']}")
PY
exit $failed
