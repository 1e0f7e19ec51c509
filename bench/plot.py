#!/usr/bin/env python3
"""Issue 7: one PNG from the merged record (summarize.py --record).

  plot.py issue7.json OUT.png

Left: attention alone, TFLOP/s against S (h20, cuDNN, FlashAttention-2).
Right: seed-dense TTFT against S, log-log (h20 and PyTorch measured, the
FLOP floor, and the cost model's predictions drawn dashed and labelled as
a model). Needs matplotlib; without it, says so and exits 0.
"""
import json
import sys


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot.py: matplotlib is not installed; no plot (the tables have every number)")
        return 0
    rec = json.load(open(sys.argv[1]))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    att = rec.get("attention", [])
    kernels = sorted({r["kernel"] for e in att for r in e.get("h20_kernels", [])})
    for name in kernels:
        pts = [(e["S"], r["tflops"]) for e in att for r in e.get("h20_kernels", [])
               if r["kernel"] == name]
        ax1.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f"h20 {name}")
    for key, label, style in (("cudnn", "PyTorch SDPA cuDNN", "s-"),
                              ("flash2", "PyTorch SDPA FlashAttention-2", "^-")):
        pts = [(e["S"], e[key]["tflops"]) for e in att if "tflops" in e.get(key, {})]
        if pts:
            ax1.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
    ax1.set_xscale("log", base=2)
    ax1.set_xlabel("S (tokens)")
    ax1.set_ylabel("TFLOP/s (4·S²·D·H/2 FLOPs)")
    ax1.set_title("A. causal attention, bf16, H=32, D=128")
    ax1.set_ylim(bottom=0)
    ax1.grid(True, alpha=0.3)
    ax1.legend(fontsize=8)
    tt = rec.get("ttft", [])
    for label, get, style in (
            ("h20 (measured)", lambda e: e.get("h20", {}).get("ttft_ms"), "o-"),
            ("PyTorch (measured)", lambda e: e.get("pytorch", {}).get("ttft_ms"), "s-"),
            ("FLOP floor (measured GEMM peak)", lambda e: e.get("floor_ms"), "k:")):
        pts = [(e["S"], get(e) / 1e3) for e in tt if get(e) is not None]
        if pts:
            ax2.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
    for target, gpus, style in (("h20", 1, "x--"), ("h20", 8, "+--"), ("h200", 1, "d--")):
        pts = []
        for p in rec.get("predicted", []):
            for q in p["predictions"]:
                if q["target"] == target and q["gpus"] == gpus and q.get("predicted_ms") is not None:
                    pts.append((p["seq_len"], q["predicted_ms"] / 1e3))
        if pts:
            ax2.plot([p[0] for p in pts], [p[1] for p in pts], style, alpha=0.7,
                     label=f"cost model (not measured): {gpus}x {target.upper()}")
    ax2.set_xscale("log", base=2)
    ax2.set_yscale("log")
    ax2.set_xlabel("S (tokens)")
    ax2.set_ylabel("TTFT (s)")
    gpu = (rec.get("torch_env") or {}).get("gpu", "")
    ax2.set_title(f"B/C. seed-dense 8 layers TTFT ({gpu})")
    ax2.grid(True, which="both", alpha=0.3)
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)
    print(f"plot.py: wrote {sys.argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
