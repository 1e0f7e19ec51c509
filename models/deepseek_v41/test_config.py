#!/usr/bin/env python3
"""Checks of config.py's RoPE scaling rules against transformers 5.17's
(RotaryEmbeddingConfigMixin.standardize_rope_params and
modeling_rope_utils._compute_yarn_parameters; run by
test/Models/deepseek-v41-rope-scaling.test). The expected values are
written from those rules directly: in YaRN, the frequencies past the ramp
are extrapolation / factor and those before it are unchanged, with the
ramp placed by original_max_position_embeddings and beta_fast / beta_slow.
Exit 1 on failure."""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import config  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def tiny(**rope):
    raw = config.load("tiny")
    raw = {k: v for k, v in raw.items() if k not in ("rope_compress_yarn", "engram_primes")}
    raw["max_position_embeddings"] = 65536
    raw["rope_scaling"] = dict(rope)
    return config.normalise(raw)


def expected(cfg, factor, orig, beta_fast=32, beta_slow=1, truncate=True):
    dim = cfg["qk_rope_head_dim"]
    base = cfg["compress_rope_theta"]
    extrap = [1.0 / base ** (i / dim) for i in range(0, dim, 2)]

    def corr(rot):
        return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))

    low, high = corr(beta_fast), corr(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    out = []
    for i in range(dim // 2):
        ramp = min(max((i - low) / (high - low), 0.0), 1.0)
        out.append(extrap[i] / factor * ramp + extrap[i] * (1 - ramp))
    return out


def close(a, b):
    return len(a) == len(b) and all(abs(x - y) <= 1e-12 * max(abs(y), 1e-30) for x, y in zip(a, b))


# An explicit factor is used as given, even where max / original differs
# (65536 / 4096 = 16 here): the lowest frequency is extrapolation / 4.
c = tiny(rope_type="yarn", factor=4, original_max_position_embeddings=4096)
got = config.rope_inv_freq(c, "compress")
check(close(got, expected(c, 4, 4096)), f"explicit factor 4: {got[-1]} vs {expected(c, 4, 4096)[-1]}")
extrap = config.rope_inv_freq(dict(c, rope_compress_yarn=None), "compress")
check(abs(got[-1] - extrap[-1] / 4) <= 1e-12 * extrap[-1], "the last frequency is extrapolation / factor")

# A missing or null factor is max_position_embeddings / original.
for rope in ({"rope_type": "yarn", "original_max_position_embeddings": 4096},
             {"rope_type": "yarn", "factor": None, "original_max_position_embeddings": 4096}):
    c = tiny(**rope)
    check(close(config.rope_inv_freq(c, "compress"), expected(c, 16, 4096)), f"implicit factor: {rope}")

# The legacy `type` key, beta_fast / beta_slow of 0 (transformers: `or 32`,
# `or 1`), and truncate off.
c = tiny(type="yarn", factor=8, original_max_position_embeddings=8192, beta_fast=0, beta_slow=0)
check(close(config.rope_inv_freq(c, "compress"), expected(c, 8, 8192)), "legacy type key, betas 0")
c = tiny(rope_type="yarn", factor=8, original_max_position_embeddings=8192, truncate=False)
check(close(config.rope_inv_freq(c, "compress"), expected(c, 8, 8192, truncate=False)), "truncate off")

# A top-level original_max_position_embeddings wins over rope_scaling's
# (standardize_rope_params: Phi-3 style configs).
raw = config.load("tiny")
raw = {k: v for k, v in raw.items() if k not in ("rope_compress_yarn", "engram_primes")}
raw.update(max_position_embeddings=65536, original_max_position_embeddings=2048,
           rope_scaling={"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 4096})
c = config.normalise(raw)
check(close(config.rope_inv_freq(c, "compress"), expected(c, 4, 2048)), "top-level original wins")

# No rope_scaling: plain frequencies.
c = tiny()
check(c["rope_compress_yarn"] is None, "no rope_scaling: no YaRN")

print("test_config:", "FAIL" if failures else "PASS")
sys.exit(1 if failures else 0)
