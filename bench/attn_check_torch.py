#!/usr/bin/env python3
"""Issue 7, benchmark A's correctness step: h20's attention output at each
benchmarked shape against PyTorch SDPA on the same inputs.

attention-check --time ... --dump DIR writes, after timing h20's wgmma kernel
at S, DIR/attn-S<S>.{q,k,v,o}.npy ([1, H, S, D], bf16 bits as uint16, or
float16). This script loads q, k, v onto the GPU, runs causal
torch.nn.functional.scaled_dot_product_attention with the cuDNN backend
(FlashAttention-2 if cuDNN refuses), and reports the relative L2 error
||o - ref|| / ||ref|| (float32 sums) and the largest absolute difference.
PASS when rel. L2 <= --tol (default 1e-2, the issue's bound).

  attn_check_torch.py DIR --out attn-check-torch.json
Writes a JSON list of {"S", "H", "D", "backend", "rel_l2", "max_abs", "pass"};
exit 1 if any shape fails or none was found.
"""
import argparse
import glob
import json
import os
import re
import sys

import numpy as np
import torch
import torch.nn.functional as F


def load(path, dtype):
    a = np.load(path, mmap_mode="r")
    t = torch.from_numpy(np.ascontiguousarray(a).view(np.int16))
    return t.view(dtype).cuda()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tol", type=float, default=1e-2)
    a = ap.parse_args()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    rows, ok = [], True
    files = sorted(glob.glob(os.path.join(a.dir, "attn-S*.o.npy")),
                   key=lambda p: int(re.search(r"attn-S(\d+)", p)[1]))
    for fo in files:
        S = int(re.search(r"attn-S(\d+)", fo)[1])
        stem = fo[: -len(".o.npy")]
        dtype = torch.bfloat16 if np.load(fo, mmap_mode="r").dtype == np.uint16 else torch.float16
        q, k, v, o = (load(f"{stem}.{n}.npy", dtype) for n in "qkvo")
        ref, used = None, None
        for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash2", SDPBackend.FLASH_ATTENTION)):
            try:
                with sdpa_kernel(be):
                    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                used = name
                break
            except RuntimeError:
                continue
        if ref is None:
            print(f"S={S}: no SDPA backend ran", file=sys.stderr)
            ok = False
            continue
        d = o.float() - ref.float()
        rel = (d.norm() / ref.float().norm()).item()
        mx = d.abs().max().item()
        passed = bool(rel <= a.tol)
        ok &= passed
        H, D = q.shape[1], q.shape[3]
        rows.append({"S": S, "H": H, "D": D, "backend": used, "rel_l2": rel, "max_abs": mx, "pass": passed})
        print(f"{'PASS' if passed else 'FAIL'} S={S} H={H} D={D}: h20 vs SDPA ({used}) rel_l2={rel:.3e} max_abs={mx:.3e}")
        del q, k, v, o, ref, d
        torch.cuda.empty_cache()
    json.dump(rows, open(a.out, "w"), indent=1)
    if not rows:
        print("no attn-S*.o.npy in " + a.dir, file=sys.stderr)
    sys.exit(0 if ok and rows else 1)


if __name__ == "__main__":
    main()
