#!/usr/bin/env python3
"""Issue 32: an 8-GPU V4.1-Flash TTFT projected from one rank measured alone.

Input: the v41-solo-rank.json that bench/v41-solo-rank.sh writes (rank 0 of
the 8-GPU program run alone on one GPU: its TTFT, its all-reduce bytes per
chunk, and a step profile summed by kernel kind). Output: a projection of
the same rank on other GPUs, plus its all-reduces, labelled a model:

  rank time on GPU X = sum over kinds of (measured ms of the kind, scaled to
      the TTFT) x (the measured GPU's rate / X's rate), the rate being the
      dense bf16 peak for tensor-core kinds (GEMMs, the MXFP4 expert GEMM,
      sparse attention, indexers), the FP8 peak for FP8 GEMMs and the FP8
      form of the expert GEMM (--expert-gemm=fp8), and the HBM
      bandwidth for everything else (generated kernels, quantisation,
      routing, memsets); i.e. today's kernels keep their share of each peak
  all-reduce time = bytes x 2 (N - 1) / N at half the bidirectional NVLink
      rate (the cost model's assumption; no all-reduce rate was measured)
  TTFT = rank time + all-reduce time (nothing overlapped)

With --program, also a second projection for the tensor-core kinds, since
an H20 has a sixth of an H100's tensor-core rate but 78 of its 132 SMs
(DESIGN.md section 1): a kernel far below the tensor peak is bound by its
SMs' other work (dequantisation, softmax, loads, top-k), which an H20 runs
at the SM ratio, not the tensor ratio. Per kind (bench/v41_flops.py's
FLOPs F, measured time T on GPU M):

  time on X = F / X's peak  +  max(0, T - F / M's peak) x M's SMs / X's SMs

(the tensor-core work at X's peak, then the rest of the kernel's time
scaled by the SM count, not overlapped; equal clocks assumed). The first
table is the bound where today's kernels keep their share of the tensor
peak; this one, where their non-tensor time moves with the SMs. Neither is
a measurement on an H20.

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
SMS = {"h20": 78, "h100": 132, "h200": 132}
# bench/v41_flops.py's kinds: which profiled kernels run them, at which peak.
# The MXFP4 expert GEMMs run on bf16 tensor cores, or on FP8 ones under
# h20-opt --expert-gemm=fp8 (kernel h20_moe_fp4_gemm_fp8_wg): flop_kinds
# picks the peak from the kernel the rank ran.
FLOP_KINDS = {"gemm_fp8": ("fp8", lambda k: k.startswith("gemm float8")),
              "gemm_bf16": ("bf16", lambda k: k.startswith("gemm ") and
                            not k.startswith("gemm float8")),
              "experts_fp4": ("bf16", lambda k: "moe_fp4_gemm" in k),
              "attention": ("bf16", lambda k: "sparse_attn" in k),
              "indexer": ("bf16", lambda k: "indexer" in k)}
VLLM_8XH20_128K_S = 17.3


def fp8_experts(kind):
    """Whether a profiled kernel kind is the FP8 form of the MXFP4 expert GEMM."""
    return "moe_fp4_gemm_fp8" in kind


def flop_kinds(kinds_ms):
    """FLOP_KINDS with the experts' peak of the kernel the rank ran."""
    out = dict(FLOP_KINDS)
    if any(fp8_experts(k) for k in kinds_ms):
        out["experts_fp4"] = ("fp8", FLOP_KINDS["experts_fp4"][1])
    return out


def kind_rate(kind):
    """Which rate bounds a kernel kind: 'fp8', 'bf16' or 'hbm'."""
    if kind.startswith("gemm float8") or fp8_experts(kind):
        return "fp8"
    if kind.startswith("gemm ") or "moe_fp4_gemm" in kind or "sparse_attn" in kind or \
            "indexer" in kind:
        return "bf16"
    return "hbm"


def profiled_run(report):
    prof = report["profile"]
    return next(r for r in report["runs"] if r["S"] == prof["S"] and r["attention_rows"])


def measured_kinds(report):
    """ms per profiled kind, scaled to the run's TTFT (profile mode runs step by step)."""
    run = profiled_run(report)
    prof = report["profile"]
    scale = run["ttft_ms"] / prof["total_ms"]
    return {k["kind"]: k["ms"] * scale for k in prof["top"]}


def project(report, measured_on, gpus=8):
    run = profiled_run(report)
    kinds = measured_kinds(report)
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


def project_sm_bound(run, rows, kinds_ms, tflop, measured_on):
    """Per GPU: the rank's tensor-core kinds as F / peak + (T - F / peak_M) x SMs_M / SMs_X
    (see the module doc), the other kinds as in `rows`; {gpu: (tensor ms, TTFT ms)}."""
    _, bf0, fp0, _ = GPUS[measured_on]
    peak0 = {"bf16": bf0, "fp8": fp0}
    out = {}
    for r in rows:
        _, bf, fp, _ = GPUS[r["gpu"]]
        peak = {"bf16": bf, "fp8": fp}
        tensor = 0.0
        for key, (rate, match) in flop_kinds(kinds_ms).items():
            t = sum(ms for k, ms in kinds_ms.items() if match(k)) / 1e3
            f = tflop.get(key, 0.0) * 1e12
            tensor += f / peak[rate] + max(0.0, t - f / peak0[rate]) * SMS[measured_on] / SMS[r["gpu"]]
        b = r["rank_ms_by_rate"]
        out[r["gpu"]] = (tensor * 1e3, tensor * 1e3 + b["hbm"] + r["all_reduce_ms"])
    return out


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
        sm = project_sm_bound(run, rows, measured_kinds(report), tflop, a.measured_on)
        print(f"\nThe same rank with each tensor-core kind's time beyond its tensor floor "
              f"scaled by the SM count ({SMS[a.measured_on]} on the measured GPU), not the "
              f"tensor peak (a model; the first table is the other bound):\n")
        print("| 8 x | rank: tensor-core kinds | TTFT |")
        print("| --- | --- | --- |")
        for gpu, (t, ttft) in sm.items():
            print(f"| {gpu.upper()} | {t / 1e3:.2f} s | {ttft / 1e3:.2f} s |")
    if run["S"] == 131072:
        print(f"\nvLLM, published, 8 x H20 at 128K: {VLLM_8XH20_128K_S} s (issue 32's goal: 4 s)")
    out = {"model": "bench/v41-project.py", "measured": run, "projected": rows}
    if a.program:
        out["projected_sm_bound"] = {g: {"tensor_ms": t, "ttft_ms": v} for g, (t, v) in sm.items()}
    json.dump(out,
              open(a.report.replace(".json", "") + ".projection.json", "w"), indent=1)


if __name__ == "__main__":
    main()
