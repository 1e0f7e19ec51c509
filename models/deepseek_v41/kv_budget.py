#!/usr/bin/env python3
"""Analytic KV-cache size of a DeepSeek-V4.1 prefill, per the cache layout of
transformers' models/deepseek_v41 (DeepseekV41CSACache): what a fused cache
plan for S tokens must hold, to compare with h20's plan.

Per layer: a sliding-window ring of `sliding_window` latents (head_dim each;
every layer). Per KV-source layer (the group's one compressed slot, shared by
the layers up to the next source): floor(S / r) compressed latents
(head_dim) and as many indexer keys (index_head_dim), r = its compress
ratio. Nothing per token for the other layers: that is the point of V4.1's
sharing. Bytes at `--bytes` per element (2: bf16; the released model stores
FP8/FP4 with scales, shown as a second column from the block formats:
window FP8 + one ue8m0 scale per 32, compressed FP4 + one e4m3 scale per 16,
indexer keys FP4 + one ue8m0 scale per 32).

Usage: kv_budget.py [CONFIG] [--tokens N] [--bytes B] [--json]
(CONFIG: a name under configs/ or a path; default the full Flash defaults.)
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import config as v41config  # noqa: E402


def budget(cfg, tokens, elem_bytes):
    hd, idx, w = cfg["head_dim"], cfg["index_head_dim"], cfg["sliding_window"]
    fp8 = lambda n: n + n // 32  # e4m3 values + ue8m0 scale per 32
    fp4 = lambda n, blk: n / 2 + n // blk  # e2m1 nibbles + one byte scale per block
    rows = []
    for i in range(cfg["num_hidden_layers"]):
        r = cfg["compress_ratios"][i]
        entry = {"layer": i, "kind": v41config.layer_kind(cfg, i),
                 "window_bytes": min(w, tokens) * hd * elem_bytes,
                 "window_bytes_quantised": min(w, tokens) * fp8(hd),
                 "compressed_entries": 0, "compressed_bytes": 0, "compressed_bytes_quantised": 0}
        if i in cfg["kv_source_layer_ids"]:
            n = tokens // r
            entry["compressed_entries"] = n
            entry["compressed_bytes"] = n * (hd + idx) * elem_bytes
            entry["compressed_bytes_quantised"] = n * (fp4(hd, 16) + fp4(idx, 32))
        rows.append(entry)
    total = sum(e["window_bytes"] + e["compressed_bytes"] for e in rows)
    total_q = sum(e["window_bytes_quantised"] + e["compressed_bytes_quantised"] for e in rows)
    # The growth rate: (head_dim + index_head_dim) bytes every r tokens per
    # KV-source layer (floor(S / r) rows at S tokens).
    per_token = sum((hd + idx) * elem_bytes / cfg["compress_ratios"][i]
                    for i in cfg["kv_source_layer_ids"])
    dense = cfg["num_hidden_layers"] * tokens * hd * elem_bytes  # one latent per token per layer
    return {"tokens": tokens, "element_bytes": elem_bytes, "layers": rows, "total_bytes": total,
            "total_bytes_quantised": total_q, "bytes_per_token": per_token,
            "dense_latent_cache_bytes": dense}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config", nargs="?", default=None)
    ap.add_argument("--tokens", type=int, default=1 << 20)
    ap.add_argument("--bytes", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    try:
        cfg = v41config.normalise({}) if args.config is None else v41config.load(args.config)
    except v41config.ConfigError as e:
        sys.exit(f"kv_budget.py: {e}")
    b = budget(cfg, args.tokens, args.bytes)
    if args.json:
        print(json.dumps(b, indent=1))
        return
    gib = 2.0 ** 30
    print(f"{args.tokens} tokens, {args.bytes} bytes per element")
    print("layer  kind                                   window KiB  compressed entries  compressed MiB")
    for e in b["layers"]:
        if e["compressed_entries"] or e["layer"] < 3:
            print(f"{e['layer']:5d}  {e['kind']:38s} {e['window_bytes'] / 1024:10.0f}  "
                  f"{e['compressed_entries']:18d}  {e['compressed_bytes'] / 2**20:14.1f}")
    print(f"total {b['total_bytes'] / gib:.2f} GiB ({b['bytes_per_token']:.0f} bytes per token + windows); "
          f"stored as FP8/FP4 with scales: {b['total_bytes_quantised'] / gib:.2f} GiB; "
          f"one latent per token per layer would be {b['dense_latent_cache_bytes'] / gib:.1f} GiB")


if __name__ == "__main__":
    main()
