#!/usr/bin/env python3
"""Check reference.py against transformers' own DeepSeek-V4.1 implementation
(the GPU machine has torch + transformers; the CPU machine does not).

For each CHECKPOINT_DIR (written by generate.py) and each ids file in it,
builds transformers' DeepseekV41ForCausalLM from the same config.json,
loads the same safetensors (parameters the prefill does not read, such as
the router's `bias_vl` and the Engram fp8 `scale`, get their init values),
binds the Engram hash state to the checkpoint's engram_token_map.npy
instead of a tokenizer, runs the prefill in float32 (eager attention, no
TF32, with a fresh DynamicCache, as `forward` builds by default) and
compares its logits with reference.py's: relative L2 and next-token
agreement per position. Prints one line per case; exits 1 if any case
exceeds --max-rel-l2 (default 1e-4), 2 if transformers has no deepseek_v41.

Usage: check_transformers.py CHECKPOINT_DIR... [--device cuda|cpu] [--max-rel-l2 X]
"""
import argparse
import dataclasses
import glob
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402


def build_transformers_model(dirname, device):
    import torch
    try:
        from transformers.models.deepseek_v41 import modeling_deepseek_v41 as mod
        from transformers.models.deepseek_v41.configuration_deepseek_v41 import DeepseekV41TextConfig
    except ImportError as e:
        print(f"check_transformers: this transformers has no deepseek_v41 ({e})")
        sys.exit(2)
    with open(os.path.join(dirname, "config.json")) as f:
        raw = json.load(f)
    names = {f.name for f in dataclasses.fields(DeepseekV41TextConfig)} if dataclasses.is_dataclass(
        DeepseekV41TextConfig) else set(raw)
    kwargs = {k: v for k, v in raw.items() if k in names and k not in ("layer_types", "rope_parameters")}
    config = DeepseekV41TextConfig(**kwargs)
    config._attn_implementation = "eager"
    model = mod.DeepseekV41ForCausalLM(config).to(device=device, dtype=torch.float32).eval()
    ours = reference.Checkpoint(dirname)
    state = {name: torch.from_numpy(np.array(ours.read(name))) for name in ours.where}
    missing, unexpected = model.load_state_dict(state, strict=False)
    allowed_missing = ("bias_vl", "engram.embed.scale", "inv_freq")
    bad = [m for m in missing if not any(a in m for a in allowed_missing)]
    if bad or unexpected:
        print(f"check_transformers: parameter names differ: missing {bad[:8]}, unexpected {list(unexpected)[:8]}")
        sys.exit(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias_vl"):
                p.zero_()
            if name.endswith("engram.embed.scale"):
                p.fill_(1.0)
    if config.engram_layer_ids:
        token_map = np.load(os.path.join(dirname, "engram_token_map.npy"))
        hs = mod.DeepseekV41NgramHashState.__new__(mod.DeepseekV41NgramHashState)
        hs.layout = mod.EngramLayout.from_config(config)
        hs.pad_id = int(token_map[config.engram_pad_id])
        hs.max_ngram_size = hs.layout.max_ngram_size
        hs.primes = torch.tensor(hs.layout.primes)
        offsets = []
        for layer in hs.layout.primes:
            flat = [p for per in layer for p in per]
            offsets.append([int(sum(flat[:k])) for k in range(len(flat))])
        hs.offsets = torch.tensor(offsets)
        hs.multipliers = mod.compute_hash_multipliers(hs.layout.layer_ids, hs.max_ngram_size,
                                                      config.engram_compressed_vocab_size)
        hs.token_map = torch.tensor(token_map)
        hs.history = None
        model.model.engram_hash_state = hs
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoints", nargs="+")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--max-rel-l2", type=float, default=1e-4)
    args = ap.parse_args()
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    failed = False
    for dirname in args.checkpoints:
        model = build_transformers_model(dirname, args.device)
        ours = reference.load_model(dirname)
        for ids_path in sorted(glob.glob(os.path.join(dirname, "ids-*.npy"))):
            ids = np.load(ids_path).reshape(1, -1).astype(np.int64)
            with torch.no_grad():
                theirs = model(input_ids=torch.from_numpy(ids).to(args.device), use_cache=True).logits
            theirs = theirs.float().cpu().numpy().astype(np.float64)
            mine = ours.forward(ids[0]).astype(np.float64)
            rel = np.linalg.norm(mine - theirs) / np.linalg.norm(theirs)
            same = float((mine.argmax(-1) == theirs.argmax(-1)).mean())
            ok = rel <= args.max_rel_l2
            failed |= not ok
            print(f"{os.path.basename(os.path.normpath(dirname))} S={ids.shape[1]}: rel L2 {rel:.3e}, "
                  f"next token agrees at {same * 100:.1f}% of positions {'OK' if ok else 'FAIL'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
