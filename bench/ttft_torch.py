#!/usr/bin/env python3
"""Issue 7, benchmark B (PyTorch side): the GEMM peak of this GPU and the
PyTorch prefill of the same seed-dense model h20 ran, on the same weights.

  ttft_torch.py --model-dir DIR --S 32768 131072 --results RES [--runs 5]
                [--long-from 262144 --long-runs 1] [--gemm-only] [--no-gemm]
                [--compile]

GEMM peak: torch.matmul of bf16 N x N by N x N (N = 8192 and 16384), 3
warm-ups, median of 10 (CUDA events); RES/gemm-peak.json. The floor of a
prefill is its FLOPs over the best of these.

Prefill: models/llama/reference.py's prefill (bf16 weights and activations,
RMSNorm/RoPE in float32, SDPA limited to cuDNN first, cuBLAS GEMMs, LM head
for the last position), weights loaded once from DIR (layout.json +
weights.bin, the bytes h20 reads). Per S: the ids DIR/ids-S.npy, one
warm-up prefill of 1024 tokens, then `--runs` timed prefills (`--long-runs`
from S >= --long-from), each timed by CUDA events from the ids on the host
to the logits on the host (h20-run's TTFT definition); median reported.
Whole prompt per layer; if that runs out of memory, again with the
per-token parts in 65536-token rows (the mode is recorded). Peak memory:
torch.cuda.max_memory_allocated (the allocator's own allocations, like
h20's peak_gpu_memory_bytes) and max_memory_reserved.
If RES/ttft-h20-S{S}.npy (h20's last-position logits) exists, records the
relative L2 of h20 against PyTorch and whether the next token agrees.
Writes RES/ttft-torch-S{S}.json per S.

--compile: the same prefill with every layer through torch.compile
(TorchInductor, static shapes: reference.compiled_layer), the baseline a
user would try before h20 (issue 33): SDPA's default backend choice (no
backend list), whole prompt only (out of memory is recorded, not retried
in rows), the first prefill at each S the warm-up that compiles (its time,
compilation included, recorded as compile_and_first_run_s). Writes
RES/ttft-torch-compile-S{S}.json / .npy.
"""
import contextlib
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch

from cuda_timing import cuda_ms

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "models", "llama"))
import reference  # noqa: E402


def dump(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def gemm_peak(res):
    rows = []
    for n in (8192, 16384):
        x = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        y = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        runs = cuda_ms(lambda: torch.matmul(x, y), 3, 10)
        ms = statistics.median(runs)
        rows.append({"m": n, "n": n, "k": n, "ms": ms, "runs_ms": runs,
                     "tflops": 2.0 * n ** 3 / (ms * 1e-3) / 1e12})
        print(f"gemm bf16 {n}^3: {ms:.3f} ms, {rows[-1]['tflops']:.1f} TFLOP/s", flush=True)
        del x, y
    torch.cuda.empty_cache()
    rec = {"what": "torch.matmul bf16 N x N x N, median of 10 after 3 warm-ups (CUDA events)",
           "shapes": rows, "peak_tflops": max(r["tflops"] for r in rows)}
    dump(os.path.join(res, "gemm-peak.json"), rec)
    return rec


def prefill_flops(cfg, S):
    """Linear layers (last-position LM head) and causal attention, 4 S^2 D H / 2
    per layer (the convention of benchmark A)."""
    h, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = cfg.get("head_dim", h // nh)
    f, L, V = cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    per_token = 2 * (h * nh * d + 2 * h * nkv * d + nh * d * h + 3 * h * f)
    linear = L * S * per_token + 2 * h * V
    attention = L * 4.0 * S * S * d * nh / 2
    return {"linear": float(linear), "attention": attention, "total": linear + attention}


def compare_logits(h20_npy, logits):
    """h20's logits (a .npy) against PyTorch's: relative L2 and next tokens."""
    h = np.load(h20_npy).astype(np.float64).reshape(-1)
    r = logits.astype(np.float64).reshape(-1)
    if h.shape != r.shape:
        return {"error": f"shapes differ: h20 {h.shape}, pytorch {r.shape}"}
    return {"rel_l2": float(np.linalg.norm(h - r) / np.linalg.norm(r)),
            "h20_next_token_id": int(h.argmax()),
            "same_next_token": bool(h.argmax() == r.argmax())}


def env_info():
    p = torch.cuda.get_device_properties(0)
    return {"gpu": p.name, "gpu_memory_bytes": p.total_memory, "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-dir")
    ap.add_argument("--S", type=int, nargs="*", default=[])
    ap.add_argument("--results", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--long-from", type=int, default=262144)
    ap.add_argument("--long-runs", type=int, default=1)
    ap.add_argument("--rows-on-oom", type=int, default=65536)
    ap.add_argument("--gemm-only", action="store_true")
    ap.add_argument("--no-gemm", action="store_true")
    ap.add_argument("--compile", action="store_true",
                    help="every layer through torch.compile (TorchInductor)")
    a = ap.parse_args()
    impl, tag = ("pytorch-compile", "ttft-torch-compile") if a.compile else ("pytorch", "ttft-torch")
    layer_fn = reference.compiled_layer() if a.compile else None
    os.makedirs(a.results, exist_ok=True)
    env = env_info()
    dump(os.path.join(a.results, "torch-env.json"), env)
    if not a.no_gemm:
        gemm_peak(a.results)
    if a.gemm_only or not a.S:
        return 0
    t0 = time.perf_counter()
    cfg, W = reference.load(a.model_dir, "cuda", torch.bfloat16)
    torch.cuda.synchronize()
    load_s = time.perf_counter() - t0
    print(f"torch: weights loaded in {load_s:.1f} s", flush=True)
    status = 0
    for S in a.S:
        ids_np = np.load(os.path.join(a.model_dir, f"ids-{S}.npy")).astype(np.int64).reshape(1, -1)
        runs_n = a.long_runs if S >= a.long_from else a.runs
        rec = {"impl": impl, "S": S, "layers": cfg["num_hidden_layers"], "env": env,
               "weights_load_s": load_s, "flops": prefill_flops(cfg, S)}
        rows = 0
        while True:
            try:
                # Eager: SDPA cuDNN first; compiled: SDPA's own choice.
                with contextlib.nullcontext() if a.compile else reference.sdpa_backends():
                    ids_gpu = torch.from_numpy(ids_np).cuda()
                    t_warm = time.perf_counter()
                    # Warm-up: 1024 tokens; compiled: all S (it compiles).
                    warm = S if a.compile else min(S, 1024)
                    reference.prefill(cfg, W, ids_gpu[:, :warm], rows, layer_fn)
                    del ids_gpu
                    torch.cuda.synchronize()
                    if a.compile:
                        rec["compile_and_first_run_s"] = time.perf_counter() - t_warm
                    torch.cuda.reset_peak_memory_stats()
                    runs, logits = [], None
                    for _ in range(runs_n):
                        ev0, ev1 = (torch.cuda.Event(enable_timing=True),
                                    torch.cuda.Event(enable_timing=True))
                        ev0.record()
                        ids_gpu = torch.from_numpy(ids_np).cuda()
                        out = reference.prefill(cfg, W, ids_gpu, rows, layer_fn)
                        logits = out.cpu().numpy().astype(np.float32)
                        ev1.record()
                        ev1.synchronize()
                        runs.append(ev0.elapsed_time(ev1))
                        del ids_gpu, out
                break
            except torch.cuda.OutOfMemoryError as e:
                oom = str(e).splitlines()[0]
            # Outside the handler: the traceback no longer pins the tensors.
            torch.cuda.empty_cache()
            if rows or not a.rows_on_oom or a.compile:
                rec["error"] = "out of memory: " + oom
                break
            rows = a.rows_on_oom
            print(f"torch S={S}: out of memory on the whole prompt; rows of {rows}", flush=True)
        if "error" in rec:
            print(f"{impl} S={S}: {rec['error']}", flush=True)
            dump(os.path.join(a.results, f"{tag}-S{S}.json"), rec)
            status = 1
            continue
        rec.update({
            "mode": f"per-token parts in rows of {rows}" if rows else "whole prompt per layer",
            "runs_ms": runs, "ttft_ms": statistics.median(runs),
            "peak_gpu_memory_bytes": torch.cuda.max_memory_allocated(),
            "peak_gpu_reserved_bytes": torch.cuda.max_memory_reserved(),
            "next_token_id": int(logits.reshape(-1).argmax()),
        })
        if a.compile:
            rec["sdpa"] = "default backend choice (torch.compile)"
        np.save(os.path.join(a.results, f"{tag}-S{S}.npy"), logits)
        # h20 with its linears as FP8 GEMMs (issue 33): compared, not gated
        # (FP8 activations: the V4.1 FP8 gate is 1e-1).
        fp8_npy = os.path.join(a.results, f"ttft-h20fp8-S{S}.npy")
        if os.path.exists(fp8_npy):
            rec["vs_h20_fp8"] = compare_logits(fp8_npy, logits)
        h20_npy = os.path.join(a.results, f"ttft-h20-S{S}.npy")
        if os.path.exists(h20_npy):
            rec["vs_h20"] = compare_logits(h20_npy, logits)
            c = rec["vs_h20"]
            if c.get("rel_l2", 1.0) > 2e-2 or not c.get("same_next_token", False):
                # DESIGN.md section 6: bf16 within 2e-2 and the same next token.
                print(f"{impl} S={S}: WARNING: h20 and PyTorch disagree ({c}); "
                      "the time of a wrong result is no benchmark", flush=True)
                status = 1
        print(f"{impl} S={S}: {rec['ttft_ms']:.1f} ms (median of {len(runs)}; {rec['mode']}), "
              f"peak {rec['peak_gpu_memory_bytes'] / 2**30:.1f} GiB"
              + (f", h20 rel L2 {rec['vs_h20'].get('rel_l2', float('nan')):.2e}"
                 f" same token {rec['vs_h20'].get('same_next_token')}" if "vs_h20" in rec else ""),
              flush=True)
        dump(os.path.join(a.results, f"{tag}-S{S}.json"), rec)
        torch.cuda.empty_cache()
    return status


if __name__ == "__main__":
    sys.exit(main())
