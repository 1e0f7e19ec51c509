#!/usr/bin/env python3
"""Prints what scripts/demo.sh shows after a prefill: TTFT, tokens/s, memory,
the prefill's FLOP count and its floor on this GPU.

usage: demo_summary.py CONFIG.json TOKENS REPORT.json [--layers N]

CONFIG is a models/llama/configs/*.json model (the layer count overridden
by --layers as generate.py does), REPORT h20-run's --report JSON. FLOPs:
the linear layers for every token plus the LM head for the last position,
and causal attention at 4 S^2 d H / 2 per layer (bench/summarize.py's
flops_of, the convention of bench/run-bench.sh). The floor is FLOPs / the
GPU's datasheet dense bf16 rate (DESIGN.md section 1): a bound no
implementation beats, and a datasheet figure; bench/run-bench.sh measures
the GEMM peak instead.
Standard library only.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from summarize import flops_of  # noqa: E402

# Dense bf16 tensor-core FLOP/s by GPU name (datasheets, DESIGN.md 1).
PEAK_BF16 = {"H20": 148e12, "H100": 989e12, "H200": 989e12, "H800": 989e12}


def prefill_flops(cfg, S):
    """bench/summarize.py's count (the one the benchmark records use)."""
    return flops_of(cfg, S)["total"]


def peak_of(gpu_name):
    """("H200", 989e12) for "NVIDIA H200" and the like; (None, None) otherwise."""
    words = gpu_name.upper().split()
    for key, peak in PEAK_BF16.items():
        if key in words:
            return key, peak
    return None, None


def main(argv):
    if len(argv) < 4:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    cfg = json.load(open(argv[1]))
    if "--layers" in argv:
        cfg["num_hidden_layers"] = int(argv[argv.index("--layers") + 1])
    S = int(argv[2])
    rep = json.load(open(argv[3]))
    ttft = rep["ttft_ms"]
    flops = prefill_flops(cfg, S)
    print(f"demo: {cfg['name']} ({cfg['num_hidden_layers']} layers, hidden {cfg['hidden_size']}, "
          f"{cfg['num_attention_heads']} heads x {cfg.get('head_dim', cfg['hidden_size'] // cfg['num_attention_heads'])}), "
          f"{S} tokens, next token {rep['next_token_id']}")
    print(f"  TTFT            {ttft:10.1f} ms   ({S / (ttft / 1e3):,.0f} tokens/s)")
    if rep.get("device") == "gpu":
        print(f"  GPU             {rep.get('gpu', '?')}")
        print(f"  peak GPU memory {rep.get('peak_gpu_memory_bytes', 0) / 2**30:10.2f} GiB "
              f"(weights {rep.get('weight_bytes', 0) / 2**30:.2f} GiB)")
        key, peak = peak_of(rep.get("gpu", ""))
        print(f"  prefill work    {flops / 1e12:10.1f} TFLOP")
        if peak:
            floor = flops / peak * 1e3
            print(f"  FLOP floor      {floor:10.1f} ms   at the {key}'s datasheet "
                  f"{peak / 1e12:.0f} TFLOP/s bf16; h20 / floor = {ttft / floor:.2f}x "
                  f"({flops / (ttft / 1e3) / 1e12:.0f} TFLOP/s achieved)")
    else:
        print(f"  peak host memory {rep.get('peak_host_memory_bytes', 0) / 2**30:9.2f} GiB")
        print(f"  prefill work    {flops / 1e9:10.2f} GFLOP ({flops / (ttft / 1e3) / 1e9:.1f} GFLOP/s)")
        print("  (on the CPU, which is where h20 checks its numerics; the speed is on a "
              "Hopper GPU: run this on an H20/H100/H200/H800 for a 32K-token prefill)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
