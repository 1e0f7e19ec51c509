#!/usr/bin/env python3
"""PyTorch reference prefill of a models/llama/generate.py model.

Reads layout.json + weights.bin from DIR (the same bytes h20 reads), runs
the prefill of the token ids in IDS (.npy, int64 [1, S]) on the GPU in
`--dtype` (bf16 by default: weights and activations; RMSNorm and RoPE in
float32 like transformers' Llama; attention through
torch.nn.functional.scaled_dot_product_attention, cuDNN backend when
available; GEMMs through cuBLAS) and writes the float32 logits of the last
position, [1, 1, vocab], to OUT (.npy). Prints the time of the prefill
(CUDA events, after one warm-up run unless --no-warmup).

Semantics follow the ONNX graph generate.py writes: RMSNormalization
(x / sqrt(mean(x^2) + eps) * w), rotate-half RoPE on cos/sin of
positions x inv_freq (linear scaling divides inv_freq), causal attention
with scale 1/sqrt(head_dim) and GQA, SiLU-gated MLP, final norm, LM head.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def load(dirname, device, dtype):
    with open(os.path.join(dirname, "layout.json")) as f:
        lay = json.load(f)
    raw = np.memmap(os.path.join(dirname, "weights.bin"), dtype=np.uint8, mode="r")
    W = {}
    for e in lay["tensors"]:
        a = np.frombuffer(raw, dtype="<f4", count=int(np.prod(e["shape"])), offset=e["offset"])
        W[e["name"]] = torch.from_numpy(a.reshape(e["shape"]).copy()).to(device=device, dtype=dtype)
    return lay["config"], W


def inv_freq(cfg, device):
    d = cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
    f = 1.0 / cfg.get("rope_theta", 10000.0) ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    sc = cfg.get("rope_scaling") or {}
    if sc.get("rope_type", sc.get("type")) == "linear":
        f = f / sc["factor"]
    return f.to(torch.float32).to(device)


def rms(x, w, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    xf = x.float()
    x1, x2 = xf[..., :half], xf[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).to(x.dtype)


LAYER_WEIGHTS = ("input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                 "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                 "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
                 "mlp.down_proj.weight")


def layer(x, cos, sin, ln1, wq, wk, wv, wo, ln2, wg, wu, wd, nh: int, nkv: int, d: int,
          eps: float):
    """One decoder layer on the whole prompt x [S, hidden] (prefill's rows = 0
    path), the weights in LAYER_WEIGHTS order; a function of tensors alone,
    so that torch.compile (compiled_layer) traces it once for every layer."""
    S = x.shape[0]
    hN = rms(x, ln1, eps)
    q = (hN @ wq).view(S, nh, d).transpose(0, 1)
    k = (hN @ wk).view(S, nkv, d).transpose(0, 1)
    v = (hN @ wv).view(S, nkv, d).transpose(0, 1)
    q, k = rope(q, cos, sin), rope(k, cos, sin)
    del hN
    a = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True,
                                       scale=d ** -0.5, enable_gqa=nh != nkv)[0]
    del q, k, v
    x = x + a.transpose(0, 1).reshape(S, nh * d) @ wo
    del a
    hN = rms(x, ln2, eps)
    g = hN @ wg
    return x + (F.silu(g) * (hN @ wu)) @ wd


def compiled_layer():
    """`layer` through torch.compile (TorchInductor, static shapes: one
    compilation per prompt length, reused by every layer): the baseline a
    user would try before h20 (issue 33). Its first call at a length
    compiles; time the calls after it."""
    return torch.compile(layer, dynamic=False)


@torch.no_grad()
def prefill(cfg, W, ids, rows=0, layer_fn=None):
    """Last-position logits [1, 1, vocab] (float32) of the prompt `ids` [1, S].

    rows = 0: every layer on the whole prompt at once (fastest; at S = 512K
    the largest temporaries, the MLP's [S, 11008] products and RoPE's float32
    copies, peak at ~70 GiB), through `layer_fn` (default `layer`; e.g.
    compiled_layer()). rows > 0: the per-token parts (projections,
    RoPE, MLP) run `rows` tokens at a time into preallocated Q/K/V and
    residual buffers, attention still on the whole prompt: the same
    arithmetic on each row, far less memory at 512K (eager only).
    """
    h, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = cfg.get("head_dim", h // nh)
    eps = cfg.get("rms_norm_eps", 1e-6)
    S = ids.shape[1]
    pos = torch.arange(S, device=ids.device, dtype=torch.float32)
    ang = pos[:, None] * inv_freq(cfg, ids.device)[None, :]
    cos, sin = torch.cos(ang), torch.sin(ang)
    x = W["model.embed_tokens.weight"][ids[0]]
    blocks = [(r, min(S, r + rows)) for r in range(0, S, rows)] if rows > 0 else [(0, S)]
    chunked = len(blocks) > 1
    if chunked and layer_fn is not None:
        raise ValueError("a layer_fn runs the whole prompt (rows = 0) only")
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        if not chunked:
            x = (layer_fn or layer)(x, cos, sin, *[W[p + n] for n in LAYER_WEIGHTS], nh, nkv, d, eps)
            continue
        q = torch.empty(nh, S, d, device=x.device, dtype=x.dtype)
        k = torch.empty(nkv, S, d, device=x.device, dtype=x.dtype)
        v = torch.empty(nkv, S, d, device=x.device, dtype=x.dtype)
        for r0, r1 in blocks:
            n, c, s = r1 - r0, cos[r0:r1], sin[r0:r1]
            hN = rms(x[r0:r1], W[p + "input_layernorm.weight"], eps)
            q[:, r0:r1] = rope((hN @ W[p + "self_attn.q_proj.weight"]).view(n, nh, d).transpose(0, 1), c, s)
            k[:, r0:r1] = rope((hN @ W[p + "self_attn.k_proj.weight"]).view(n, nkv, d).transpose(0, 1), c, s)
            v[:, r0:r1] = (hN @ W[p + "self_attn.v_proj.weight"]).view(n, nkv, d).transpose(0, 1)
            del hN
        a = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True,
                                           scale=d ** -0.5, enable_gqa=nh != nkv)[0]
        del q, k, v
        for r0, r1 in blocks:
            xr = x[r0:r1] + a[:, r0:r1].transpose(0, 1).reshape(r1 - r0, nh * d) @ W[p + "self_attn.o_proj.weight"]
            hN = rms(xr, W[p + "post_attention_layernorm.weight"], eps)
            g = hN @ W[p + "mlp.gate_proj.weight"]
            xr = xr + (F.silu(g) * (hN @ W[p + "mlp.up_proj.weight"])) @ W[p + "mlp.down_proj.weight"]
            del hN, g
            x[r0:r1] = xr
            del xr
        del a
    last = rms(x[-1:], W["model.norm.weight"], eps)
    return (last.float() @ W["lm_head.weight"].float()).view(1, 1, -1)


def sdpa_backends():
    """SDPA limited to cuDNN first, then FlashAttention, then the
    memory-efficient kernel (never the math fallback, which materialises S x S)."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        return sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION,
                            SDPBackend.EFFICIENT_ATTENTION])
    except Exception:  # older torch: default backend choice
        import contextlib
        return contextlib.nullcontext()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("ids")
    ap.add_argument("out")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
    ap.add_argument("--no-warmup", action="store_true")
    ap.add_argument("--rows", type=int, default=0,
                    help="projections, RoPE and MLP this many tokens at a time (0: whole prompt)")
    a = ap.parse_args()
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[a.dtype]
    cfg, W = load(a.dir, "cuda", dtype)
    ids = torch.from_numpy(np.load(a.ids).astype(np.int64)).cuda()
    ctx = sdpa_backends()
    with ctx:
        if not a.no_warmup:
            prefill(cfg, W, ids[:, :min(ids.shape[1], 1024)], a.rows)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        logits = prefill(cfg, W, ids, a.rows)
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1e3
    np.save(a.out, logits.cpu().numpy().astype(np.float32))
    print(f"reference: S={ids.shape[1]} {a.dtype} prefill {ms:.1f} ms, "
          f"next token {int(logits[0, 0].argmax())}, peak {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
