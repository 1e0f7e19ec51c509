#!/usr/bin/env python3
"""Real exports: tiny random-weight transformers decoders, exported as users do.

Runs where torch (2.11) and transformers (5.17) are installed (the GPU machine;
CUDA is used for the references when present). For every architecture in
ARCHS, every weight dtype (float32, bfloat16, float16) and every exporter
setting (torch.onnx.export(dynamo=True) with its default opset, and opset 23)
it writes

  OUT/<arch>.<dtype>.<setting>.onnx      the export, weights inline
  OUT/<arch>.<dtype>.ids<S>.npy          int64 [1, S] token ids
  OUT/<arch>.<dtype>.ref<S>.npy          PyTorch logits in the weights' dtype
                                         (stored as float32) [1, S, vocab]
  OUT/<arch>.<dtype>.ref32_<S>.npy       PyTorch float32 logits of the same
                                         (dtype-rounded) weights
  OUT/matrix.<archs>.json                per cell: export status, opset, op
                                         histogram, ONNX Runtime's relative L2
                                         against the reference

Weights: transformers' own initialisation under torch.manual_seed(SEED), made
in float32 and cast to the cell's dtype. Nothing here is hand-written ONNX.

Usage: export.py OUT [--archs a,b] [--dtypes float32,...] [--settings default,op23]
"""
import argparse
import collections
import copy
import json
import os
import sys
import time
import traceback

import numpy as np
import torch

SEED = 20261204
VOCAB = 128
SEQS = (8, 64)


def archs():
    """name -> (transformers config class name, model class name, kwargs).

    Tiny shapes; every architecture keeps the feature the matrix tests
    (README.md beside this file lists them)."""
    base = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                rms_norm_eps=1e-6)
    return {
        # llama3 scaling, theta 5e5: head_dim 16 gives frequencies on both
        # sides of the smooth band.
        "llama3": ("LlamaConfig", "LlamaForCausalLM", dict(
            base, rope_theta=500000.0, max_position_embeddings=131072,
            rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
            tie_word_embeddings=False)),
        # q/k/v bias, tied embeddings, theta 1e6.
        "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(
            base, rope_theta=1000000.0, tie_word_embeddings=True, use_sliding_window=False)),
        # per-head q/k RMSNorm.
        "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(
            base, head_dim=16, rope_theta=1000000.0, tie_word_embeddings=False)),
        # sliding window 16 < S = 64.
        "mistral": ("MistralConfig", "MistralForCausalLM", dict(
            base, sliding_window=16, rope_theta=1000000.0)),
        # partial rotary (half the head), fused qkv_proj and gate_up_proj.
        "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(
            base, partial_rotary_factor=0.5, rope_theta=10000.0, pad_token_id=0,
            sliding_window=None)),
        # head_dim 256, attention and final logit softcaps, alternating
        # sliding/global layers, GeGLU (tanh GELU), embedding scale, (1 + w) norms.
        "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", dict(
            base, num_attention_heads=2, num_key_value_heads=1, head_dim=256,
            query_pre_attn_scalar=256, attn_logit_softcapping=50.0,
            final_logit_softcapping=30.0, sliding_window=16,
            hidden_activation="gelu_pytorch_tanh", rope_theta=10000.0)),
        # Gemma-3: q/k norms, local (theta 1e4) and global (theta 1e6) RoPE.
        "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(
            base, num_attention_heads=2, num_key_value_heads=1, head_dim=256,
            query_pre_attn_scalar=256, sliding_window=16, rope_theta=1000000.0,
            rope_local_base_freq=10000.0, layer_types=["sliding_attention", "full_attention"],
            hidden_activation="gelu_pytorch_tanh")),
    }


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
SETTINGS = {"default": None, "op23": 23}


class LogitsOnly(torch.nn.Module):
    """input_ids [1, S] int64 -> logits [1, S, vocab] (no cache, no mask input)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False).logits


def build(name):
    import transformers
    cfg_cls, model_cls, kwargs = archs()[name]
    cfg = getattr(transformers, cfg_cls)(**kwargs)
    cfg._attn_implementation = "sdpa" if name not in ("gemma2",) else "eager"
    torch.manual_seed(SEED)
    model = getattr(transformers, model_cls)(cfg).eval()
    # Norm weights start at 1 (or 0 for Gemma's 1 + w): perturb every
    # parameter a little so that a norm weight read wrongly shows.
    with torch.no_grad():
        g = torch.Generator().manual_seed(SEED + 1)
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.02)
    return cfg, model


def ids_for(S):
    rng = np.random.default_rng(SEED + S)
    return rng.integers(0, VOCAB, size=(1, S), dtype=np.int64)


def run_torch(model, ids, device):
    with torch.no_grad():
        m = model.to(device)
        out = m(input_ids=torch.from_numpy(ids).to(device), use_cache=False).logits
        return out.float().cpu().numpy()


def rel_l2(a, b):
    return float(np.linalg.norm((a - b).ravel()) / max(np.linalg.norm(b.ravel()), 1e-30))


def export(model, path, opset):
    wrap = LogitsOnly(model.cpu()).eval()
    ids = torch.from_numpy(ids_for(8))
    seq = torch.export.Dim("seq", min=2, max=4096)
    kwargs = dict(dynamo=True, dynamic_shapes=({1: seq},), input_names=["input_ids"],
                  output_names=["logits"], external_data=False)
    if opset is not None:
        kwargs["opset_version"] = opset
    torch.onnx.export(wrap, (ids,), path, **kwargs)


def histogram(path):
    import onnx
    m = onnx.load(path)
    ops = collections.Counter((n.domain or "") + "::" + n.op_type if n.domain else n.op_type
                              for n in m.graph.node)
    # Functions (onnxscript-defined ops) count too.
    for f in m.functions:
        for n in f.node:
            ops["fn:" + n.op_type] += 1
    opset = {o.domain or "ai.onnx": o.version for o in m.opset_import}
    return dict(sorted(ops.items())), opset, len(m.functions)


def ort_check(path, out, stem):
    import onnxruntime as ort
    res = {}
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for S in SEQS:
        ids = ids_for(S)
        got = sess.run(None, {"input_ids": ids})[0].astype(np.float32)
        ref = np.load(os.path.join(out, f"{stem}.ref{S}.npy"))
        res[str(S)] = rel_l2(got, ref)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--archs", default=",".join(archs()))
    ap.add_argument("--dtypes", default=",".join(DTYPES))
    ap.add_argument("--settings", default=",".join(SETTINGS))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    import transformers
    matrix = {"torch": torch.__version__, "transformers": transformers.__version__,
              "seed": SEED, "seqs": list(SEQS), "device": device, "cells": {}}
    for name in a.archs.split(","):
        try:
            cfg, model32 = build(name)
        except Exception as e:
            matrix["cells"][name] = {"status": "config-failed", "error": repr(e)[:2000]}
            traceback.print_exc()
            continue
        matrix.setdefault("configs", {})[name] = json.loads(cfg.to_json_string())
        for dname in a.dtypes.split(","):
            dt = DTYPES[dname]
            model = copy.deepcopy(model32).to(dt)
            stem = f"{name}.{dname}"
            for S in SEQS:
                ids = ids_for(S)
                np.save(os.path.join(a.out, f"{stem}.ids{S}.npy"), ids)
                np.save(os.path.join(a.out, f"{stem}.ref{S}.npy"), run_torch(model, ids, device))
                if dt != torch.float32:
                    m32 = copy.deepcopy(model).float()
                    np.save(os.path.join(a.out, f"{stem}.ref32_{S}.npy"), run_torch(m32, ids, device))
            for sname in a.settings.split(","):
                cell = f"{stem}.{sname}"
                path = os.path.join(a.out, cell + ".onnx")
                info = {}
                t = time.time()
                try:
                    export(model, path, SETTINGS[sname])
                    info["status"] = "exported"
                    info["export_s"] = round(time.time() - t, 1)
                    info["ops"], info["opset"], info["functions"] = histogram(path)
                    info["bytes"] = os.path.getsize(path)
                except Exception as e:
                    info["status"] = "export-failed"
                    info["error"] = repr(e)[-3000:]
                    traceback.print_exc()
                if info["status"] == "exported":
                    try:
                        info["ort_rel_l2"] = ort_check(path, a.out, stem)
                    except Exception as e:
                        info["ort_error"] = repr(e)[-1500:]
                print(cell, json.dumps({k: v for k, v in info.items() if k != "ops"}), flush=True)
                matrix["cells"][cell] = info
    tag = "all" if a.archs == ",".join(archs()) else a.archs.replace(",", "+")
    with open(os.path.join(a.out, f"matrix.{tag}.json"), "w") as f:
        json.dump(matrix, f, indent=1)
    print("done")


if __name__ == "__main__":
    main()
