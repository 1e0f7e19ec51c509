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
                   [--quantize none|fp8|fp8-fp4-experts] [--engram-fp8] [--jobs N]
(CONFIG: a name under configs/ or a path; --ids also writes DIR/ids-S.npy,
uniform random token ids, for each S. --jobs N > 1 draws and quantises in N
processes, each writing one shard, model-0000J-of-0000N.safetensors, with
model.safetensors.index.json naming each tensor's shard: the tensors are
the same bytes as with one process, and a Flash-shaped checkpoint of
several GB is made in seconds instead of minutes. --engram-fp8 stores the
Engram tables as the released checkpoint does: FP8 e4m3 rows with a ue8m0
scale per row and 32 channels, `P.scale` beside `P.weight`; the head dim
must be a multiple of 32.)
"""
import argparse
import json
import multiprocessing
import os
import re
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


def fp8_engram(tensors):
    """Engram tables (`*.engram.embed.weight`) as FP8 e4m3 rows with ue8m0
    scales per row and 32 channels (quant.quantize_fp8_rows), the format of
    the released V4.1 checkpoint; other tensors as they are."""
    out = {}
    for name, w in tensors.items():
        if not name.endswith("engram.embed.weight") or isinstance(w, tuple):
            out[name] = w
            continue
        codes, scale = quant.quantize_fp8_rows(w)
        out[name] = (codes, "F8_E4M3")
        out[name[: -len(".weight")] + ".scale"] = (scale, "F8_E8M0")
    return out


def make(cfg, specs, quantize, engram_fp8=False):
    """{name: array} of the parameters `specs` ((index, name, shape, init)
    from weights.tensors) as generate.py stores them: drawn from their
    per-tensor seeds, then quantised (`quantized`) unless quantize is
    "none", the Engram tables as FP8 rows with `engram_fp8`."""
    seed = int(cfg.get("seed", 0))
    tensors = {}
    for k, name, shape, init in specs:
        t = {name: draw(shape, init, seed * 100003 + k)}
        # One tensor at a time: a float32 copy of every weight would be
        # 17 GB for flash-e16, whose FP8 / FP4 checkpoint is 7.
        t = quantized(t, fp4_experts=quantize == "fp8-fp4-experts") if quantize != "none" else t
        tensors.update(fp8_engram(t) if engram_fp8 else t)
    return tensors


def shard_name(j, jobs):
    return f"model-{j + 1:05d}-of-{jobs:05d}.safetensors"


def _write_shard(job):
    """Worker of --jobs: make one shard's tensors and write them; returns
    the names written (scales included)."""
    cfg, specs, quantize, engram_fp8, dtype, path = job
    tensors = make(cfg, specs, quantize, engram_fp8)
    safetensors_io.write(path, tensors, dtype)
    return list(tensors)


def write_sharded(cfg, out, jobs, quantize, dtype, engram_fp8=False):
    """The checkpoint as `jobs` shards made in as many processes, plus
    model.safetensors.index.json. Parameters go to shards largest first,
    each to the shard with the fewest elements so far: a deterministic
    balance (in flash-e16 the embedding and the LM head are 31% of the
    elements, two of 600 tensors)."""
    specs = [(k, name, shape, init) for k, (name, shape, init) in enumerate(weights.tensors(cfg))]
    size = {k: int(np.prod(shape, dtype=np.int64)) for k, _, shape, _ in specs}
    load, parts = [0] * jobs, [[] for _ in range(jobs)]
    for spec in sorted(specs, key=lambda sp: (-size[sp[0]], sp[0])):
        j = load.index(min(load))
        parts[j].append(spec)
        load[j] += size[spec[0]]
    work = [(cfg, sorted(part), quantize, engram_fp8, dtype, os.path.join(out, shard_name(j, jobs)))
            for j, part in enumerate(parts)]
    # fork: the workers inherit the modules; each holds only its shard.
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        names = pool.map(_write_shard, work, chunksize=1)
    weight_map = {name: shard_name(j, jobs) for j, part in enumerate(names) for name in part}
    tmp = os.path.join(out, "model.safetensors.index.json.tmp")
    with open(tmp, "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=1)
    os.replace(tmp, os.path.join(out, "model.safetensors.index.json"))


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
    ap.add_argument("--engram-fp8", action="store_true",
                    help="store the Engram tables as FP8 e4m3 rows with ue8m0 scales per row and 32 "
                         "channels, as the released checkpoint does (head dim a multiple of 32)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="processes drawing and quantising, one shard each (default 1: one "
                         "model.safetensors)")
    args = ap.parse_args()
    if args.jobs < 1:
        sys.exit("generate.py: --jobs must be at least 1")
    try:
        cfg = v41config.load(args.config, args.layers or None)
    except v41config.ConfigError as e:
        sys.exit(f"generate.py: {e}")
    if args.engram_fp8 and cfg["engram_layer_ids"] and cfg["engram_head_dim"] % quant.FP4_BLOCK:
        sys.exit(f"generate.py: --engram-fp8 needs engram_head_dim a multiple of {quant.FP4_BLOCK} (a scale "
                 f"per 32 channels), got {cfg['engram_head_dim']}")
    os.makedirs(args.out, exist_ok=True)
    seed = int(cfg.get("seed", 0))
    dtype = "F32" if args.dtype == "f32" else "BF16"
    # A checkpoint left from an earlier run in the other layout would win
    # (an index) or linger (a single file or shards): remove it first.
    for old in os.listdir(args.out):
        if re.fullmatch(r"model(\.safetensors\.index\.json|\.safetensors|-\d{5}-of-\d{5}\.safetensors)", old):
            os.unlink(os.path.join(args.out, old))
    if args.jobs > 1:
        write_sharded(cfg, args.out, args.jobs, args.quantize, dtype, args.engram_fp8)
    else:
        specs = [(k, name, shape, init) for k, (name, shape, init) in enumerate(weights.tensors(cfg))]
        safetensors_io.write(os.path.join(args.out, "model.safetensors"),
                             make(cfg, specs, args.quantize, args.engram_fp8), dtype)
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
