#!/usr/bin/env python3
"""Issue 32: an 8-GPU V4.1-Flash TTFT projected from one rank measured alone.

Input: the v41-solo-rank.json that bench/v41-solo-rank.sh writes (rank 0 of
the 8-GPU program run alone on one GPU: its TTFT, its all-reduce bytes per
chunk, and a step profile summed by kernel kind). Output: a projection of
the same rank on other GPUs, plus its all-reduces, labelled a model:

  rank time on GPU X = sum over kinds of (measured ms of the kind, scaled to
      the TTFT) x (the measured GPU's rate / X's rate), the rate being the
      dense bf16 peak for tensor-core kinds (GEMMs, the MXFP4 expert GEMM,
      sparse attention, indexers), the FP8 peak for FP8 GEMMs, and the HBM
      bandwidth for everything else (generated kernels, quantisation,
      routing, memsets); i.e. today's kernels keep their share of each peak
  all-reduce time = bytes x 2 (N - 1) / N at half the bidirectional NVLink
      rate (the cost model's assumption; no all-reduce rate was measured)
  TTFT = rank time + all-reduce time (nothing overlapped)

With --program (the rank's `artifact-info ART --program`), also the rank's
FLOP floor on each GPU (bench/v41_flops.py's counts at the datasheet
rates): all of it at the bf16 rate; the FP8 GEMMs at the FP8 rate and the
rest at bf16 (today's kernels); and everything at the FP8 rate (FP8 experts,
attention and indexer too). A projection below a floor is wrong; a goal
below a floor needs that precision's kernels.

Rates: the datasheet figures h20's cost model uses
(lib/Analysis/TargetDescription.cpp). Printed beside vLLM's published
17.3 s for V4.1-Flash on 8 x H20 at 128K (issue 32).
Usage: bench/v41-project.py v41-solo-rank.json [--measured-on h100|h200|h20]
           [--program RANK-PROGRAM.json]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from v41_flops import flops  # noqa: E402

# HBM bytes/s, dense bf16 and FP8 FLOP/s, NVLink bytes/s (bidirectional).
GPUS = {
    "h20": (4.0e12, 148e12, 296e12, 900e9),
    "h100": (3.35e12, 989e12, 1979e12, 900e9),
    "h200": (4.8e12, 989e12, 1979e12, 900e9),
}
VLLM_8XH20_128K_S = 17.3


def kind_rate(kind):
    """Which rate bounds a kernel kind: 'fp8', 'bf16' or 'hbm'."""
    if kind.startswith("gemm float8"):
        return "fp8"
    if kind.startswith("gemm ") or "moe_fp4_gemm" in kind or "sparse_attn" in kind or \
            "indexer" in kind:
        return "bf16"
    return "hbm"


def project(report, measured_on, gpus=8):
    prof = report["profile"]
    run = next(r for r in report["runs"] if r["S"] == prof["S"] and r["attention_rows"])
    scale = run["ttft_ms"] / prof["total_ms"]  # profile mode runs step by step
    kinds = {k["kind"]: k["ms"] * scale for k in prof["top"]}
    kinds.pop("all_reduce", None)  # a solo rank's copy; priced below instead
    kinds["other (memory-bound)"] = max(0.0, run["ttft_ms"] - sum(kinds.values()))
    hbm0, bf0, fp0, _ = GPUS[measured_on]
    rows = []
    for gpu, (hbm, bf, fp, nvlink) in GPUS.items():
        ratio = {"hbm": hbm0 / hbm, "bf16": bf0 / bf, "fp8": fp0 / fp}
        by = {"hbm": 0.0, "bf16": 0.0, "fp8": 0.0}
        for k, ms in kinds.items():
            by[kind_rate(k)] += ms * ratio[kind_rate(k)]
        rank_ms = sum(by.values())
        ar_bytes = run["all_reduce_bytes_per_chunk"] * run["chunks"]
        ar_ms = ar_bytes * 2 * (gpus - 1) / gpus / (nvlink / 2) * 1e3
        rows.append({"gpu": gpu, "gpus": gpus, "S": run["S"], "rank_ms": rank_ms,
                     "rank_ms_by_rate": by, "all_reduce_ms": ar_ms, "ttft_ms": rank_ms + ar_ms})
    return run, rows


def floors(program, S):
    """The rank's FLOP floor in seconds per GPU: (TFLOP by kind, {gpu: (bf16, fp8 GEMMs, all fp8)})."""
    f = flops(program, S)
    total = sum(f.values())
    out = {}
    for gpu, (_, bf, fp, _) in GPUS.items():
        out[gpu] = (total / bf, f["gemm_fp8"] / fp + (total - f["gemm_fp8"]) / bf, total / fp)
    return {k: v / 1e12 for k, v in f.items()}, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("--measured-on", choices=sorted(GPUS),
                    help="the GPU the rank ran on (default: read off the report's GPU name)")
    ap.add_argument("--program", help="the rank's program (artifact-info ART --program)")
    a = ap.parse_args()
    report = json.load(open(a.report))
    if not a.measured_on:
        name = report.get("gpu", "").upper().replace("NVIDIA", "")
        a.measured_on = next((g for g in ("h200", "h100", "h20") if g.upper() in name), None)
        if not a.measured_on:
            sys.exit(f"v41-project: cannot tell the GPU from '{report.get('gpu')}': pass --measured-on")
    if not report.get("profile"):
        sys.exit("v41-project: the report has no step profile (run bench/v41-solo-rank.sh)")
    run, rows = project(report, a.measured_on)
    print(f"A MODEL, not a measurement: 8-GPU V4.1-Flash TTFT at S = {run['S']}, from rank 0 "
          f"measured alone on {report.get('gpu', a.measured_on)} ({run['ttft_ms'] / 1e3:.2f} s, "
          f"{run['all_reduce_bytes_per_chunk'] / 1e9:.2f} GB of all-reduce a chunk)\n")
    print("| 8 x | rank: tensor-core (bf16) | rank: FP8 GEMMs | rank: memory-bound | all-reduces "
          "(NVLink / 2) | TTFT |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        b = r["rank_ms_by_rate"]
        print(f"| {r['gpu'].upper()} | {b['bf16'] / 1e3:.2f} s | {b['fp8'] / 1e3:.2f} s | "
              f"{b['hbm'] / 1e3:.2f} s | {r['all_reduce_ms'] / 1e3:.2f} s | "
              f"{r['ttft_ms'] / 1e3:.2f} s |")
    if a.program:
        tflop, fl = floors(json.load(open(a.program)), run["S"])
        print(f"\nThe rank's FLOP floor at S = {run['S']} (bench/v41_flops.py; TFLOP: "
              + ", ".join(f"{k} {v:.1f}" for k, v in tflop.items()) + "), datasheet rates:\n")
        print("| 8 x | all at bf16 | FP8 GEMMs at FP8, the rest bf16 | all at FP8 |")
        print("| --- | --- | --- | --- |")
        for gpu, (b, m, e) in fl.items():
            print(f"| {gpu.upper()} | {b:.2f} s | {m:.2f} s | {e:.2f} s |")
    if run["S"] == 131072:
        print(f"\nvLLM, published, 8 x H20 at 128K: {VLLM_8XH20_128K_S} s (issue 32's goal: 4 s)")
    json.dump({"model": "bench/v41-project.py", "measured": run, "projected": rows},
              open(a.report.replace(".json", "") + ".projection.json", "w"), indent=1)


if __name__ == "__main__":
    main()
