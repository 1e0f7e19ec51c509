#!/usr/bin/env python3
"""Random-weight DeepSeek-V4.1 checkpoints for tests and benchmarks.

Writes DIR/config.json (the normalised text config), DIR/model.safetensors
(float32 or bf16), and, when the config has Engram layers,
DIR/engram_token_map.npy (int64 [vocab]: the tokenizer-normalised
"compressed" token id of every token; a real checkpoint derives it from its
tokenizer, here it is random in [0, engram_compressed_vocab_size)). Tensors are
drawn one at a time from a per-tensor seed (config seed + tensor index), so the
bytes are reproducible and do not depend on what else is generated.

Inits (chosen so a few random layers keep activations O(1) and every gate,
softmax and top-k has something to decide): linear weights N(0, 1/fan_in);
embeddings N(0, 1); norm weights, hc scales, Engram q/k weights 1 + N(0, 0.1);
biases, hc bases and attention sinks N(0, 0.5); router bias N(0, 0.1).

Usage: generate.py CONFIG DIR [--dtype f32|bf16] [--layers N] [--ids S ...]
                   [--quantize none|fp8|fp8-fp4-experts]
(CONFIG: a name under configs/ or a path; --ids also writes DIR/ids-S.npy,
uniform random token ids, for each S.)
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import config as v41config  # noqa: E402
import quant  # noqa: E402
import safetensors_io  # noqa: E402
import weights  # noqa: E402


def draw(shape, init, seed):
    rng = np.random.default_rng(seed)
    if init == "linear":
        return (rng.standard_normal(shape, dtype=np.float32) / np.float32(np.sqrt(shape[-1]))).astype(np.float32)
    if init == "unit":
        return rng.standard_normal(shape, dtype=np.float32)
    if init == "one":
        return (1 + 0.1 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
    if init == "bias":
        return (0.5 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
    if init == "small":
        return (0.1 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
    raise ValueError(init)


def quantized(tensors, fp4_experts):
    """As DeepSeek's FP8/FP4 checkpoints store them (quant.py): every 2-D
    `.weight` of a linear layer (attention, compressor, indexer, experts)
    in FP8 e4m3 + `.scale` 128 x 128 block scales; with `fp4_experts` the
    routed experts' w1/w2/w3 in FP4 e2m1 + ue8m0 `.scale` per 32 inputs.
    Embeddings (the Engram table too), the LM head, norms, the router gate
    and mHC stay as they are."""
    out = {}
    for name, w in tensors.items():
        if not quant.is_fp8_linear(name, w.ndim):
            out[name] = w
            continue
        prefix = name[: -len(".weight")]
        if fp4_experts and ".ffn.experts." in name and w.shape[1] % quant.FP4_BLOCK == 0:
            packed, scale = quant.quantize_fp4(w)
            out[name], out[prefix + ".scale"] = packed, (scale, "F8_E8M0")
        else:
            codes, scale = quant.quantize_fp8(w)
            out[name], out[prefix + ".scale"] = (codes, "F8_E4M3"), scale
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config")
    ap.add_argument("out")
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--layers", type=int, default=0)
    ap.add_argument("--ids", type=int, nargs="*", default=[])
    ap.add_argument("--quantize", choices=["none", "fp8", "fp8-fp4-experts"], default="none",
                    help="store linear weights as FP8 e4m3 with 128 x 128 block scales "
                         "(fp8-fp4-experts: routed experts as FP4 e2m1 with ue8m0 scales per 32); "
                         "quant.py")
    args = ap.parse_args()
    try:
        cfg = v41config.load(args.config, args.layers or None)
    except v41config.ConfigError as e:
        sys.exit(f"generate.py: {e}")
    os.makedirs(args.out, exist_ok=True)
    seed = int(cfg.get("seed", 0))
    tensors = {}
    for k, (name, shape, init) in enumerate(weights.tensors(cfg)):
        tensors[name] = draw(shape, init, seed * 100003 + k)
    if args.quantize != "none":
        tensors = quantized(tensors, fp4_experts=args.quantize == "fp8-fp4-experts")
    safetensors_io.write(os.path.join(args.out, "model.safetensors"), tensors,
                         "F32" if args.dtype == "f32" else "BF16")
    saved = {k: v for k, v in cfg.items() if k not in ("engram_primes", "rope_compress_yarn")}
    tmp = os.path.join(args.out, "config.json.tmp")
    with open(tmp, "w") as f:
        json.dump(saved, f, indent=1)
    os.replace(tmp, os.path.join(args.out, "config.json"))
    rng = np.random.default_rng(seed + 7)
    if cfg["engram_layer_ids"]:
        token_map = rng.integers(0, cfg["engram_compressed_vocab_size"], size=cfg["vocab_size"], dtype=np.int64)
        np.save(os.path.join(args.out, "engram_token_map.npy"), token_map)
    for s in args.ids:
        ids = rng.integers(0, cfg["vocab_size"], size=(1, s), dtype=np.int64)
        np.save(os.path.join(args.out, f"ids-{s}.npy"), ids)


if __name__ == "__main__":
    main()
