#!/usr/bin/env python3
"""A Llama-3.1-8B-shaped decoder with random bf16 weights, exported as a user would.

transformers' LlamaForCausalLM with Llama-3.1-8B's configuration (32 layers,
hidden 4096, GQA 32/8, head_dim 128, SwiGLU 14336, vocab 128256, llama3 RoPE
scaling factor 8 over 8192 positions, theta 5e5), random weights from
transformers' own initialisation under a fixed seed (made on the GPU when
present: the same seed gives the same bytes on the same kind of GPU), cast to
bfloat16, exported by torch.onnx.export(dynamo=True) with the exporter's
defaults (its default opset) into OUT/model.onnx + OUT/model.onnx.data.

  export_8b.py OUT export            the export (about 16 GB of data)
  export_8b.py OUT weights           (re)writes OUT/model.onnx.data for the graph
                                     OUT/model.onnx from build()'s weights, without
                                     exporting again (seconds, not minutes): each
                                     external initializer is a parameter by name or,
                                     for the exporter's pre-transposed linear weights
                                     (val_N), the weight of the nn.Linear named in
                                     its MatMul's `namespace` metadata, transposed
  export_8b.py OUT reference IDS.npy LOGITS.npy [--float32 LOGITS32.npy] [--repeat N]
                   [--variants flash,cudnn,efficient,export-scale]
                                     PyTorch eager (SDPA) prefill of the same
                                     weights: last-position logits, TTFT (median
                                     of N, CUDA-synchronised), peak memory
                                     (OUT/torch-report.json)
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch

SEED = 8
CONFIG = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
              num_attention_heads=32, num_key_value_heads=8, head_dim=128,
              max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0,
              rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
              tie_word_embeddings=False, bos_token_id=128000, eos_token_id=128001)


def build(layers=None):
    import transformers
    cfg = transformers.LlamaConfig(**dict(CONFIG, **({"num_hidden_layers": layers} if layers else {})))
    cfg._attn_implementation = "sdpa"
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(SEED)
    with torch.device(device):
        model = transformers.LlamaForCausalLM(cfg)
    return model.to(torch.bfloat16).eval()


def do_export(out):
    os.makedirs(out, exist_ok=True)
    t = time.time()
    model = build()
    print(f"built in {time.time() - t:.1f} s", flush=True)
    ids = torch.randint(0, CONFIG["vocab_size"], (1, 16), device=next(model.parameters()).device)
    seq = torch.export.Dim("seq", min=2, max=131072)
    t = time.time()
    from export import LogitsOnly  # models/exports/export.py, beside this file
    torch.onnx.export(LogitsOnly(model), (ids,), os.path.join(out, "model.onnx"), dynamo=True,
                      dynamic_shapes=({1: seq},), input_names=["input_ids"],
                      output_names=["logits"], external_data=True)
    print(f"exported in {time.time() - t:.1f} s", flush=True)


def do_weights(out):
    import onnx
    path = os.path.join(out, "model.onnx")
    m = onnx.load(path, load_external_data=False)
    model = build()
    params = dict(model.named_parameters())
    # Initializer -> the Linear whose MatMul reads it (namespace metadata:
    # ".../model.model.layers.0.self_attn.q_proj: torch.nn.modules.linear.Linear/...").
    consumer = {}
    for n in m.graph.node:
        if n.op_type != "MatMul" or len(n.input) < 2:
            continue
        ns = {p.key: p.value for p in n.metadata_props}.get("namespace", "")
        mods = [part.split(":")[0].strip() for part in ns.split("/") if "Linear" in part]
        if mods:
            consumer[n.input[1]] = mods[-1]
    data = os.path.join(out, "model.onnx.data")
    t = time.time()
    written = 0
    with open(data, "r+b" if os.path.exists(data) else "w+b") as f:
        for init in m.graph.initializer:
            if init.data_location != onnx.TensorProto.EXTERNAL:
                continue
            info = {e.key: e.value for e in init.external_data}
            dims = tuple(init.dims)
            name = init.name[len("model."):] if init.name.startswith("model.") else init.name
            if name in params and tuple(params[name].shape) == dims:
                w = params[name]
            elif init.name in consumer:
                lin = consumer[init.name]
                lin = lin[len("model."):] if lin.startswith("model.") else lin
                w = params[lin + ".weight"].t()
                if tuple(w.shape) != dims:
                    sys.exit(f"export_8b.py: {init.name}: {lin}.weight^T is {tuple(w.shape)}, "
                             f"the graph says {dims}")
            else:
                sys.exit(f"export_8b.py: initializer '{init.name}' {dims} matches no parameter")
            b = w.detach().contiguous().to(torch.bfloat16).view(torch.int16).cpu().numpy().tobytes()
            if len(b) != int(info["length"]):
                sys.exit(f"export_8b.py: {init.name}: {len(b)} bytes, the graph says {info['length']}")
            f.seek(int(info.get("offset", 0)))
            f.write(b)
            written += len(b)
    print(f"wrote {written / 2**30:.1f} GiB of weights in {time.time() - t:.1f} s", flush=True)


SDPA_BACKENDS = ("flash", "cudnn", "efficient")
# "export-scale": SDPA (default kernels) with the softmax scale the ONNX
# export spells, bf16(head_dim^-1/4)^2 applied to Q and K^T (0.29% below
# 1/sqrt(128)), instead of PyTorch's exact 1/sqrt(head_dim).
VARIANTS = SDPA_BACKENDS + ("export-scale",)


def forward_last(model, ids, dtype, backends=SDPA_BACKENDS, exact_angles=False, scaling=None):
    """Last-position logits [1, vocab] of `model` with its weights in `dtype`,
    one decoder layer at a time (a float32 copy of one layer at a time, so
    32 GB of float32 weights are never resident), attention_mask=None so
    transformers' SDPA runs is_causal (flash/cuDNN/efficient kernels; a
    materialised [S, S] mask sends SDPA to its math kernel: 128 GiB at 32K).
    `scaling` replaces every attention's softmax scale when given."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import transformers.integrations.sdpa_attention as sdpa_mod
    # transformers passes enable_gqa=True when it can; no fused kernel of
    # torch 2.11 takes that here ("No available kernel"): expand K/V
    # (repeat_kv) as transformers does otherwise.
    sdpa_mod.use_gqa_in_sdpa = lambda *args, **kwargs: False
    body, head = model.model, model.lm_head
    kernels = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
               "efficient": SDPBackend.EFFICIENT_ATTENTION}
    with torch.no_grad(), sdpa_kernel([kernels[b] for b in backends]):
        hs = body.embed_tokens(ids).to(dtype)
        pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
        cos, sin = body.rotary_emb(hs, pos)
        if exact_angles:
            # RoPE angles p * f in float64 (transformers forms them in
            # float32: up to p * 2^-24 rad off, 2e-3 rad at 32K).
            rot = body.rotary_emb
            ang = pos.double()[..., None] * rot.inv_freq.double()[None, None, :]
            emb = torch.cat((ang, ang), dim=-1)
            cos = (emb.cos() * rot.attention_scaling).to(dtype)
            sin = (emb.sin() * rot.attention_scaling).to(dtype)
        for layer in body.layers:
            l = layer.to(dtype) if dtype != torch.bfloat16 else layer
            saved = l.self_attn.scaling
            if scaling is not None:
                l.self_attn.scaling = scaling
            hs = l(hs, position_embeddings=(cos, sin), attention_mask=None, position_ids=pos)
            hs = hs[0] if isinstance(hs, tuple) else hs
            l.self_attn.scaling = saved
            if dtype != torch.bfloat16:
                layer.to(torch.bfloat16)
        last = body.norm.to(dtype)(hs[:, -1:, :])
        body.norm.to(torch.bfloat16)
        out = head.to(dtype)(last).float()
        head.to(torch.bfloat16)
    return out


def do_reference(out, ids_path, logits_path, f32_path, repeat, variants=()):
    model = build()
    ids = torch.from_numpy(np.load(ids_path).reshape(1, -1)).cuda()
    times = []
    torch.cuda.reset_peak_memory_stats()
    for i in range(repeat + 1):
        torch.cuda.synchronize()
        t = time.time()
        logits = forward_last(model, ids, torch.bfloat16)
        torch.cuda.synchronize()
        if i:
            times.append((time.time() - t) * 1e3)
    np.save(logits_path, logits.cpu().numpy().reshape(1, 1, -1))
    rep = {"S": int(ids.shape[1]), "ttft_ms": sorted(times)[len(times) // 2], "runs_ms": times,
           "peak_gib": torch.cuda.max_memory_allocated() / 2**30, "torch": torch.__version__,
           "gpu": torch.cuda.get_device_name(), "attention": "SDPA is_causal (flash/cuDNN)"}
    if f32_path:
        l32 = forward_last(model, ids, torch.float32)
        np.save(f32_path, l32.cpu().numpy().reshape(1, 1, -1))
        if variants:  # the attribution also weighs the reference's own RoPE rounding
            l64 = forward_last(model, ids, torch.float32, exact_angles=True)
            np.save(f32_path[:-len(".npy")] + "-exact.npy", l64.cpu().numpy().reshape(1, 1, -1))
    # bf16 with one SDPA kernel each: the spread of equally valid bf16
    # implementations, to weigh h20's distance from float32 against.
    for v in variants:
        if v == "export-scale":
            c = float(torch.tensor(model.config.head_dim ** -0.25, dtype=torch.bfloat16))
            lv = forward_last(model, ids, torch.bfloat16, scaling=c * c)
        else:
            lv = forward_last(model, ids, torch.bfloat16, backends=(v,))
        np.save(logits_path[:-len(".npy")] + f"-{v}.npy", lv.cpu().numpy().reshape(1, 1, -1))
    with open(os.path.join(out, f"torch-report-{rep['S']}.json"), "w") as f:
        json.dump(rep, f, indent=1)
    print(json.dumps({k: v for k, v in rep.items() if k != "runs_ms"}), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("what", choices=["export", "weights", "reference"])
    ap.add_argument("ids", nargs="?")
    ap.add_argument("logits", nargs="?")
    ap.add_argument("--float32")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--variants", default="",
                    help="comma-separated SDPA kernels (flash, cudnn, efficient) to run the bf16 "
                         "reference with one at a time, and export-scale (the export's bf16-rounded "
                         "softmax scale), into LOGITS-<variant>.npy")
    a = ap.parse_args()
    if a.what == "export":
        do_export(a.out)
    elif a.what == "weights":
        do_weights(a.out)
    else:
        variants = [v for v in a.variants.split(",") if v]
        for v in variants:
            if v not in VARIANTS:
                sys.exit(f"export_8b.py: --variants: unknown variant '{v}' ({', '.join(VARIANTS)})")
        do_reference(a.out, a.ids, a.logits, a.float32, a.repeat, variants)


if __name__ == "__main__":
    main()
