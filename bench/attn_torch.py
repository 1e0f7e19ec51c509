#!/usr/bin/env python3
"""Issue 7, benchmark A (PyTorch side): causal bf16 attention, B=1, H=32,
D=128, through torch.nn.functional.scaled_dot_product_attention restricted
to one backend at a time: cuDNN (SDPBackend.CUDNN_ATTENTION) and
FlashAttention-2 (SDPBackend.FLASH_ATTENTION, torch's built-in FA2).
Inputs [1, H, S, D] contiguous, N(0, 1). CUDA events around each call,
`--warmup` calls first, median of `--runs`. TFLOP/s counts 4 S^2 D H / 2
FLOPs (causal: half of QK^T and PV), as attention-check does.

  attn_torch.py --S 8192 32768 131072 --out attn-torch.json
Writes a JSON list of {"impl", "backend", "S", "H", "D", "ms", "runs_ms",
"tflops"} ({"impl", "S", "error"} where a backend refuses the shape), and
torch-env.json (GPU, torch, CUDA, cuDNN versions) beside it.
"""
import argparse
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F

from cuda_timing import cuda_ms


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--S", type=int, nargs="+", default=[8192, 32768, 131072])
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash2", SDPBackend.FLASH_ATTENTION)]
    H, D = a.heads, a.dim
    rows = []
    for S in a.S:
        g = torch.Generator(device="cuda").manual_seed(S)
        q, k, v = (torch.randn(1, H, S, D, device="cuda", dtype=torch.bfloat16, generator=g)
                   for _ in range(3))
        flops = 4.0 * S * S * D * H / 2
        for name, be in backends:
            try:
                with sdpa_kernel([be]):
                    runs = cuda_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                      a.warmup, a.runs)
            except RuntimeError as e:  # backend refuses the shape / GPU
                rows.append({"impl": name, "backend": str(be), "S": S, "error": str(e).splitlines()[0]})
                print(f"attn {name:7s} S={S}: error: {rows[-1]['error']}", flush=True)
                continue
            ms = statistics.median(runs)
            rows.append({"impl": name, "backend": str(be), "S": S, "H": H, "D": D, "ms": ms,
                         "runs_ms": runs, "tflops": flops / (ms * 1e-3) / 1e12})
            print(f"attn {name:7s} S={S}: {ms:.3f} ms, {rows[-1]['tflops']:.1f} TFLOP/s", flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    p = torch.cuda.get_device_properties(0)
    with open(os.path.join(os.path.dirname(os.path.abspath(a.out)), "torch-env.json"), "w") as f:
        json.dump({"gpu": p.name, "gpu_memory_bytes": p.total_memory, "torch": torch.__version__,
                   "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}, f, indent=1)
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(rows, f, indent=1)
    os.replace(tmp, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
