#!/usr/bin/env python3
"""How far is a bf16 prefill of a V4.1 checkpoint from the float32 one,
whoever computes it? Runs reference.py twice on the same weights and ids:
once in float32, once with bf16 rounding (round to nearest even) of
  --round linear (default): the input and output of every Model.linear
      call (the q / kv / output / expert / compressor / indexer-query
      projections), the storage a bf16 prefill uses between GEMMs; the
      other products (mHC mixes, Engram, indexer keys, the grouped output
      projection, the LM head) and everything else stay float32;
  --round fp8: as linear, and the input of every linear whose weight the
      checkpoint stores in FP8 e4m3 (generate.py --quantize) also
      quantised to e4m3 per row and 128 consecutive inputs, scale
      max(amax, 1e-4) / 448, as h20's FP8 GEMMs do
      (lib/Target/GPU/kernels/fp8_quant.cuh): what FP8 activations cost
      any implementation;
  --round all: also the outputs of every block and helper (RMSNorm,
      sigmoid, softmax, RoPE, the mHC mixes, collapse and expand, Engram,
      compressor, attention, MoE), closer to a prefill that stores every
      activation in bf16 (still a lower bound: weights are taken as they
      are, exact for bf16 checkpoints, and intermediate values inside a
      block stay float32).
Prints, per prompt, the relative L2 of the logits and the share of
positions with the same next token, plus the rows of each layer's
attention and MoE outputs that moved by more than 5%: a discrete decision
(MoE top-k routing, indexer top-k) that flipped between the two runs.

With random weights the routing and top-k scores have near ties, so a
perturbation of bf16 size flips some of them and the flipped rows carry
O(1) differences; the relative L2 then measures how many decisions
flipped, not how accurate the arithmetic is: on tiny's bf16 checkpoint
the two emulations above land 0.093 (linear) and 0.012 (all) from the
float32 logits at S = 8, the same 0.13-0.21 at S = 129 and 1000. On
tiny-all-picks (every selection keeps all it chooses from) nothing can
flip and both stay within 1.1e-2 (bench/results/v41-tiny-bf16-sensitivity.json).
h20's bf16 GPU target is compared with the float32 reference in
scripts/gpu-test.sh; this script says what any bf16 implementation
should expect there.

Usage: bf16_sensitivity.py CHECKPOINT_DIR [--round linear|fp8|all] [--json OUT.json]
(CHECKPOINT_DIR as written by generate.py, with ids-*.npy prompts.)
"""
import argparse
import glob
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402

F32 = np.float32


def round_bf16(x):
    """float32 -> nearest bfloat16 (ties to even), returned as float32."""
    x = np.ascontiguousarray(x, dtype=F32)
    u = x.view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(F32).reshape(x.shape)


def quant_fp8_rows(x, block=128):
    """x [rows, k] float32 through e4m3 per row and `block` consecutive
    inputs (scale max(amax, 1e-4) / 448, saturating), returned dequantised."""
    x = np.ascontiguousarray(x, dtype=F32)
    shape = x.shape
    x2 = x.reshape(-1, shape[-1])
    out = np.empty_like(x2)
    for j in range(0, x2.shape[1], block):
        b = x2[:, j:j + block]
        s = (np.maximum(np.abs(b).max(axis=1, keepdims=True), F32(1e-4)) / F32(448)).astype(F32)
        q = np.clip(b / s, F32(-448), F32(448))
        out[:, j:j + block] = reference.round_e4m3(q) * s
    return out.reshape(shape)


class Recorder:
    """Keeps the outputs of Model.attention and Model.moe, per call."""

    def __init__(self, model):
        self.calls = {"attention": [], "moe": []}
        for name in self.calls:
            orig = getattr(model, name)

            def wrapped(*a, _orig=orig, _name=name, **k):
                out = _orig(*a, **k)
                self.calls[_name].append(out)
                return out
            setattr(model, name, wrapped)


# Block methods and module helpers whose outputs --round all rounds.
BLOCKS = ("hc_mixes", "hc_collapse", "hc_expand", "engram", "compressor", "attention", "moe")
HELPERS = ("rms_norm", "sigmoid", "softmax", "rope")


def rounded_outputs(fn):
    """fn with its array (or tuple of arrays) result rounded to bf16."""
    def wrapped(*a, **k):
        out = fn(*a, **k)
        if isinstance(out, tuple):
            return tuple(round_bf16(o) for o in out)
        return round_bf16(out) if isinstance(out, np.ndarray) else out
    return wrapped


class RoundedHelpers:
    """While active, reference.py's module helpers round their outputs."""

    def __enter__(self):
        self.saved = {n: getattr(reference, n) for n in HELPERS}
        for n, fn in self.saved.items():
            setattr(reference, n, rounded_outputs(fn))

    def __exit__(self, *exc):
        for n, fn in self.saved.items():
            setattr(reference, n, fn)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--round", choices=("linear", "fp8", "all"), default="linear")
    ap.add_argument("--json")
    args = ap.parse_args()
    exact = reference.load_model(args.checkpoint)
    rounded = reference.load_model(args.checkpoint)
    linear = reference.Model.linear
    rounded.linear = lambda x, name: round_bf16(linear(rounded, round_bf16(x), name))
    if args.round == "fp8":
        ckpt = rounded.ckpt
        fp8 = {}

        def is_fp8(name):
            if name not in fp8:
                fp8[name] = ckpt.scale_of(name) is not None and ckpt.info(name)[0] == "F8_E4M3"
            return fp8[name]
        rounded.linear = lambda x, name: round_bf16(linear(
            rounded, quant_fp8_rows(round_bf16(x)) if is_fp8(name) else round_bf16(x), name))
    if args.round == "all":
        for name in BLOCKS:
            setattr(rounded, name, rounded_outputs(getattr(rounded, name)))
    rec_exact, rec_rounded = Recorder(exact), Recorder(rounded)
    results = []
    for path in sorted(glob.glob(os.path.join(args.checkpoint, "ids-*.npy")),
                       key=lambda p: int(p.rsplit("-", 1)[1].split(".")[0])):
        ids = np.load(path).reshape(-1).astype(np.int64)
        for r in (rec_exact, rec_rounded):
            for v in r.calls.values():
                v.clear()
        a = exact.forward(ids).astype(np.float64)
        if args.round == "all":
            with RoundedHelpers():
                b = rounded.forward(ids).astype(np.float64)
        else:
            b = rounded.forward(ids).astype(np.float64)
        rel = float(np.linalg.norm(a - b) / np.linalg.norm(a))
        same = float((a.argmax(-1) == b.argmax(-1)).mean())
        moved = {}
        for name in ("attention", "moe"):
            per_layer = []
            for x, y in zip(rec_exact.calls[name], rec_rounded.calls[name]):
                rows = np.linalg.norm(x - y, axis=-1) / np.maximum(np.linalg.norm(x, axis=-1), 1e-30)
                per_layer.append(int((rows > 0.05).sum()))
            moved[name] = per_layer
        results.append({"S": int(ids.size), "rel_l2": rel, "same_next_token": same,
                        "rows_moved_over_5pct": moved})
        print(f"S={ids.size}: bf16 rounding ({args.round}) vs float32: rel L2 {rel:.3e}, same next token at "
              f"{same * 100:.1f}% of positions; rows moved > 5% per layer: attention "
              f"{moved['attention']}, MoE {moved['moe']}")
    if args.json:
        # One file holds several runs: this one replaces any earlier run of
        # the same config and rounding.
        runs = []
        if os.path.exists(args.json):
            with open(args.json) as f:
                runs = json.load(f).get("runs", [])
        with open(os.path.join(args.checkpoint, "config.json")) as f:
            config = json.load(f).get("name", os.path.basename(os.path.normpath(args.checkpoint)))
        runs = [r for r in runs if (r.get("config"), r.get("round")) != (config, args.round)]
        runs.append({"config": config, "round": args.round,
                     "rounded": {"linear": "linear inputs/outputs",
                                 "fp8": "linear inputs/outputs, FP8-stored linears' inputs in "
                                        "e4m3 per 1 x 128",
                                 "all": "linear inputs/outputs and every block's and helper's "
                                        "outputs"}[args.round],
                     "cases": results})
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"what": "reference.py float32 vs the same with bf16 rounding (bf16_sensitivity.py)",
                       "runs": runs}, f, indent=1)
        os.replace(tmp, args.json)

if __name__ == "__main__":
    main()
