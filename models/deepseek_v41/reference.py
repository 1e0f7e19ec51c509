#!/usr/bin/env python3
"""float32 numpy reference of DeepSeek-V4.1 prefill (one prompt, positions
0..S-1, one shot), written from transformers' models/deepseek_v41 modular file
(DeepseekV41ForCausalLM with a fresh DynamicCache, which is what `forward`
builds by default): mHC streams with Sinkhorn-normalised combine; low-rank
query; one shared latent K = V per layer; interleaved RoPE on the last
qk_rope_head_dim channels (main / compress+YaRN); FP8 fake quantisation of the
window KV; per-head sink in the softmax denominator; inverse RoPE on the
output; grouped low-rank output projection; 128-token (config) sliding window;
compressors (gated softmax pooling of r tokens, leftovers wait for a full
group); KV-source layers publishing compressed KV (FP4 fake-quantised) that
the following layers reuse; the lightning indexer (ReLU scores, head-weighted,
FP4 fake-quantised q and k) with top-k, reindex sources and the two-level
candidate-block top-k; Engram n-gram hash memory; MoE with sqrt-softplus
scores, selection bias, top-k, one shared expert, clamped SwiGLU; final norm
and LM head.

Ties in every top-k are broken towards the lower index (ONNX TopK's rule),
so the ONNX export and this reference select the same entries.
`Model.record_decisions` makes a forward also record how far every top-k
decision is from flipping (`topk_margin`), so a comparison with another
float32 implementation can pick prompts whose choices rounding cannot flip.
`Model.record_quant_margins` does the same for the FP8 / FP4 fake
quantisations (`quant_margin`): an element within ~1e-7 of a rounding
midpoint quantises differently under another evaluation order, and every
later position sees it (BENCHMARKS.md, issue 31: tiny-wide).

Usage: reference.py CHECKPOINT_DIR IDS.npy OUT.npy [--logits all|last]
[--quant-margins JSON] (CHECKPOINT_DIR as written by generate.py; logits
float32 [1, S or 1, vocab]; JSON: every fake quantisation's smallest margin
and row, closest first).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import config as v41config  # noqa: E402
from safetensors_io import Checkpoint  # noqa: E402

F32 = np.float32


# ---------------------------------------------------------------- numerics
def rms_norm(x, w, eps):
    x = x.astype(F32)
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + F32(eps))
    return y if w is None else y * w


def sigmoid(x):
    return F32(1) / (F32(1) + np.exp(-x))


def softmax(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def topk_indices(scores, k):
    """Indices of the k largest along the last axis, ties -> lower index."""
    order = np.argsort(-scores, axis=-1, kind="stable")
    return order[..., :k]


def topk_margin(scores, k, fragile=None, scale=None):
    """How close `topk_indices(scores, k)` ([rows, n]) is to choosing
    differently, as one number per row, relative to `scale` ([rows]: the
    size of the terms the scores are sums of, which sets their rounding
    error; default the row's largest finite |score|); np.inf where the row
    decides nothing (k >= n, or fewer than k + 1 finite candidates: -inf
    entries are never kept).

    * kth > next (the k-th and (k+1)-th largest): (kth - next) / scale.
      Another implementation whose scores differ by less than that keeps
      the same set.
    * kth == next, an exact tie, broken by the lower-index rule: only a
      tie at 0 (ReLU zeros of the indexer) can be reproduced exactly by
      another implementation, and it is when none of the row's zeros is
      `fragile` (bool [rows, n]: rounding might move it off 0) and no
      nonzero value is within rounding of 0. Its margin is then the
      smallest |nonzero| / scale; a fragile zero, or a tie at any other
      value, has margin 0.

    Returns float64 [rows]."""
    rows, n = scores.shape
    if k >= n:
        return np.full(rows, np.inf)
    v = -np.sort(-scores, axis=-1)
    kth, nxt = v[:, k - 1].astype(np.float64), v[:, k].astype(np.float64)
    absf = np.where(np.isfinite(scores), np.abs(scores), 0).astype(np.float64)
    scale = np.maximum(absf.max(-1) if scale is None else scale, np.finfo(F32).tiny)
    with np.errstate(invalid="ignore"):
        margin = (kth - nxt) / scale
    tie = np.isfinite(nxt) & (kth == nxt)
    if tie.any():
        zeros = scores == 0
        nonzero = np.where(zeros | ~np.isfinite(scores), np.inf, absf).min(-1) / scale
        robust = (kth == 0) & ~(zeros & fragile).any(-1) if fragile is not None else kth == 0
        margin = np.where(tie, np.where(robust, nonzero, 0.0), margin)
    return np.where(nxt == -np.inf, np.inf, margin)


def pow2_ceil(t):
    """2^ceil(log2 t) for float32 t > 0 (normal): the ue8m0 scale rounding."""
    bits = np.ascontiguousarray(t, dtype=F32).view(np.int32)
    k = ((bits >> 23) & 0xFF) - 127 + ((bits & 0x7FFFFF) != 0)
    return np.exp2(k.astype(F32))


def e4m3_step(q):
    """The float8 e4m3fn grid spacing at each q (2^-9 below 2^-6)."""
    _, e = np.frexp(np.maximum(np.abs(q), F32(2.0 ** -7)))
    return np.exp2((np.maximum(e - 1, -6) - 3).astype(F32))


def e2m1_step(q):
    """The float4 e2m1 grid spacing at each q (|q| <= 6)."""
    m = np.abs(q)
    return np.where(m < 2, F32(0.5), np.where(m < 4, F32(1.0), F32(2.0)))


def round_e4m3(q):
    """Round-to-nearest-even onto the float8 e4m3fn grid (|q| <= 448)."""
    step = e4m3_step(q)
    return (np.round(q / step) * step).astype(F32)


def round_e2m1(q):
    """Round-to-nearest-even onto the float4 e2m1 grid (|q| <= 6)."""
    step = e2m1_step(q)
    return (np.round(q / step) * step).astype(F32)


def _block_scales(b, kind, e4m3_scales=False):
    """The per-block scales of fake_quant_fp8 (kind "fp8": ue8m0 of
    amax / 448, amax floored at 1e-4) or fake_quant_fp4 (kind "fp4": ue8m0
    or, with e4m3_scales, e4m3 of amax / 6) for blocks b [..., blocks,
    block]: (amax, its floor, the scale's input t, scale, the code limit),
    amax unfloored, the others [..., blocks, 1]."""
    amax = np.max(np.abs(b), axis=-1, keepdims=True)
    if kind == "fp8":
        floor = 1e-4
        t = np.maximum(amax, F32(floor)) * F32(1.0 / 448.0)
        return amax, floor, t, pow2_ceil(t), 448
    if e4m3_scales:
        floor = 6.0 * 2.0 ** -9
        t = np.maximum(amax, F32(floor)) / F32(6.0)
        return amax, floor, t, round_e4m3(t), 6
    floor = 6.0 * 2.0 ** -126
    t = np.maximum(amax, F32(floor)) * F32(1.0 / 6.0)
    return amax, floor, t, pow2_ceil(t), 6


def fake_quant_fp8(x, block=32):
    n = x.shape[-1]
    if n % block:
        return x
    b = x.reshape(*x.shape[:-1], n // block, block)
    scale = _block_scales(b, "fp8")[3]
    q = np.clip(b / scale, -448, 448).astype(F32)
    return (round_e4m3(q) * scale).reshape(x.shape)


def _midpoint_margin(v, step, ref):
    """Distance of each v from the nearest rounding midpoint of the grid of
    spacing `step` (round-to-nearest: at a midpoint the last bit of v
    decides), relative to `ref`: |frac(v / step) - 1/2| x step / ref."""
    r = v.astype(np.float64) / step
    d = np.abs(r - np.floor(r) - 0.5) * step
    return d / np.maximum(np.asarray(ref, np.float64), 1e-300)


def _scale_margin(amax, floor, t, pow2):
    """Relative distance of a block's scale input t (from amax, floored at
    `floor`) from the boundary where its rounding changes: the nearest
    power of two (pow2_ceil) or e4m3 midpoint. A floored amax moves the
    scale only once it reaches the floor: its margin is its distance to it."""
    t64 = t.astype(np.float64)
    if pow2:
        m = np.abs(t64 / np.exp2(np.round(np.log2(t64))) - 1.0)
    else:
        m = _midpoint_margin(t, e4m3_step(t).astype(np.float64), t64)
    a = amax.astype(np.float64)
    return np.where(a < floor, (floor - a) / floor, m)


def quant_margin(x, block, kind, e4m3_scales=False):
    """Per row of x ([rows, ..., D], D a multiple of block; axis 0 the
    rows): the smallest distance, over the row's blocks, from a rounding
    boundary of fake_quant_fp8(x, block) (kind "fp8") or fake_quant_fp4(x,
    block, e4m3_scales) (kind "fp4"), relative to the block's largest
    magnitude (another evaluation order moves every element by about an
    ulp of that, not of itself): the e4m3 / e2m1 midpoints of the scaled
    values, and the power-of-two (ue8m0) or e4m3 scale's own boundary. A
    margin within a few float32 ulps (~1e-7 to 1e-6) means an evaluation
    in another order may quantise the row differently: a decision as
    fragile as a top-k near a tie. inf for every row when D is not a
    multiple of block (nothing is quantised). A scale boundary is counted
    even where both scales would give the same codes (a conservative
    margin)."""
    n = x.shape[-1]
    if n % block:
        return np.full(x.shape[0], np.inf)
    b = x.reshape(*x.shape[:-1], n // block, block)
    amax, floor, t, scale, limit = _block_scales(b, kind, e4m3_scales)
    scale_margin = _scale_margin(amax, floor, t, kind == "fp8" or not e4m3_scales)
    q = np.clip(b / scale, -limit, limit).astype(F32)
    step = (e4m3_step(q) if kind == "fp8" else e2m1_step(q)).astype(np.float64)
    qmax = np.max(np.abs(q), axis=-1, keepdims=True).astype(np.float64)
    elem = np.where((np.abs(q) < limit) & (q != 0), _midpoint_margin(q, step, qmax), np.inf)
    per_block = np.minimum(elem.min(-1), scale_margin[..., 0])
    return per_block.reshape(x.shape[0], -1).min(-1)


def fake_quant_fp4(x, block, e4m3_scales=False):
    n = x.shape[-1]
    if n % block:
        return x
    b = x.reshape(*x.shape[:-1], n // block, block)
    scale = _block_scales(b, "fp4", e4m3_scales)[3]
    q = np.clip(b / scale, -6, 6).astype(F32)
    return (round_e2m1(q) * scale).reshape(x.shape)


def rope(x, cos, sin, inverse=False):
    """Interleaved-pair RoPE on the trailing 2*cos.shape[-1] channels of x
    ([S, D] or [S, H, D]); cos/sin are [S, pairs]."""
    if inverse:
        sin = -sin
    rd = cos.shape[-1] * 2
    nope, r = x[..., :-rd], x[..., -rd:]
    if x.ndim == 3:
        cos, sin = cos[:, None, :], sin[:, None, :]
    even, odd = r[..., 0::2], r[..., 1::2]
    rot = np.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1).reshape(r.shape)
    return np.concatenate([nope, rot], axis=-1).astype(F32)


def indexer_scores(q, k, weights):
    """Lightning-indexer scores [S, T]: sum over heads h of weights[s, h] *
    ReLU(<q[s, h, :], k[t, :]>) * Di^-0.5, for q [S, H, Di], k [T, Di] and
    the per-token head weights [S, H] (already scaled by H^-0.5)."""
    di = q.shape[-1]
    scores = np.maximum(np.einsum("shd,td->sht", q, k), 0) * F32(di ** -0.5)
    return np.sum(scores * weights[:, :, None], axis=1)


def rope_table(cfg, kind, positions):
    inv = np.array(v41config.rope_inv_freq(cfg, kind), dtype=np.float64).astype(F32)
    ang = positions.astype(F32)[:, None] * inv[None, :]
    return np.cos(ang).astype(F32), np.sin(ang).astype(F32)


# ---------------------------------------------------------------- blocks
class Model:
    def __init__(self, cfg, ckpt, token_map=None):
        self.cfg, self.ckpt, self.token_map = cfg, ckpt, token_map
        self._cache = {}
        self.intermediates = {}  # streams.{i} after every layer, for debugging
        self.decisions = None  # record_decisions: [(site, margins [rows])] per top-k
        self.quant_margins = None  # record_quant_margins: [(site, margins [rows])]
        self.fragile_tol = 0.0

    def record_decisions(self, tol):
        """Make forward() append (site, topk_margin per row) for every top-k
        it takes to self.decisions ("indexer.i", "candidates.i", "moe.i").
        An indexer score whose ReLU input (any head) is within tol x |q_h| |k|
        of 0 counts as fragile (topk_margin). Costs an S x H x T product per
        indexer; the logits are unchanged."""
        self.decisions, self.fragile_tol = [], tol

    def record_quant_margins(self):
        """Make forward() append (site, quant_margin per row) for every fake
        quantisation it applies to self.quant_margins ("fp8.kv.i",
        "fp4.index_k.i", "fp4.index_q.i", "fp4.compress_kv.i"; i the
        layer): where a float32 evaluation in another order may round
        differently. Kept apart from the top-k decisions, whose margins
        check_transformers.py gates prompts on; the logits are unchanged."""
        self.quant_margins = []

    def quant(self, x, block, kind, site, e4m3_scales=False):
        """fake_quant_fp8 / fake_quant_fp4 of x, recording (site, its
        quant_margin per row) when recording and x is quantised (its last
        dim a multiple of block)."""
        if self.quant_margins is not None and x.shape[-1] % block == 0:
            self.quant_margins.append((site, quant_margin(x, block, kind, e4m3_scales)))
        if kind == "fp8":
            return fake_quant_fp8(x, block)
        return fake_quant_fp4(x, block, e4m3_scales)

    def topk(self, scores, k, site, fragile=None, scale=None):
        if self.decisions is not None:
            self.decisions.append((site, topk_margin(scores, k, fragile, scale)))
        return topk_indices(scores, k)

    def w(self, name):
        if name not in self._cache:
            t = self.ckpt.read(name)
            self._cache[name] = t.astype(F32) if t.dtype.kind == "f" else t
        return self._cache[name]

    def linear(self, x, name):
        return (x @ self.w(name).T).astype(F32)

    # -- mHC
    def hc_mixes(self, streams, p, site):
        cfg = self.cfg
        hc, eps = cfg["hc_mult"], F32(cfg["hc_eps"])
        s = streams.shape[0]
        flat = rms_norm(streams.reshape(s, -1), None, cfg["rms_norm_eps"])
        mixes = flat @ self.w(p + f"hc_{site}_fn").T
        scale, base = self.w(p + f"hc_{site}_scale"), self.w(p + f"hc_{site}_base")
        pre = sigmoid(mixes[:, :hc] * scale[0] + base[:hc]) + eps
        post = F32(2) * sigmoid(mixes[:, hc:2 * hc] * scale[1] + base[hc:2 * hc])
        comb = softmax((mixes[:, 2 * hc:] * scale[2] + base[2 * hc:]).reshape(s, hc, hc), -1) + eps
        comb = comb / (comb.sum(axis=-2, keepdims=True) + eps)
        for _ in range(cfg["hc_sinkhorn_iters"] - 1):
            comb = comb / (comb.sum(axis=-1, keepdims=True) + eps)
            comb = comb / (comb.sum(axis=-2, keepdims=True) + eps)
        return pre.astype(F32), post.astype(F32), comb.astype(F32)

    @staticmethod
    def hc_collapse(streams, pre):
        return np.sum(pre[:, :, None] * streams, axis=1).astype(F32)

    @staticmethod
    def hc_expand(x, residual, post, comb):
        mixed = np.einsum("sjk,sjd->skd", comb, residual)
        return (post[:, :, None] * x[:, None, :] + mixed).astype(F32)

    # -- Engram
    def engram_hash_ids(self, ids):
        """[S, n_engram_layers, n_cols] int64 bucket ids (DeepseekV41NgramHashState
        for a fresh prompt: no DEAD tokens, look-back stops at position 0)."""
        cfg = self.cfg
        n = cfg["engram_max_ngram_size"]
        layers = cfg["engram_layer_ids"]
        cvs = cfg["engram_compressed_vocab_size"]
        comp = self.token_map[ids]
        pad = self.token_map[cfg["engram_pad_id"]]
        s = ids.shape[0]
        pos = np.arange(s)
        toks = np.stack([np.where(pos >= sh, comp[np.maximum(pos - sh, 0)], pad) for sh in range(n)], -1)
        mult = engram_multipliers(layers, n, cvs)  # [L, n]
        prod = toks[:, None, :] * mult[None, :, :]  # [S, L, n]
        primes = np.array(cfg["engram_primes"], dtype=np.int64)  # [L, n-1, heads]
        offsets = engram_offsets(cfg)  # [L, cols]
        rolling, hashes = prod[..., 0], []
        for i in range(1, n):
            rolling = np.bitwise_xor(rolling, prod[..., i])
            hashes.append(rolling[..., None] % primes[None, :, i - 1, :])
        return np.concatenate(hashes, -1) + offsets[None]

    def engram(self, streams, hash_ids, p):
        cfg = self.cfg
        hc, d = cfg["hc_mult"], cfg["hidden_size"]
        rows = self.w(p + "engram.embed.weight")[hash_ids]  # [S, cols, ehd]
        kv = rows.reshape(rows.shape[0], -1) @ self.w(p + "engram.wkv.weight").T
        key = kv[:, :hc * d].reshape(-1, hc, d)
        value = kv[:, hc * d:]
        weight = self.w(p + "engram.q_weight") * self.w(p + "engram.k_weight")
        eps = F32(cfg["rms_norm_eps"])
        rstd = (F32(1) / np.sqrt(np.mean(streams * streams, -1) + eps)) * \
               (F32(1) / np.sqrt(np.mean(key * key, -1) + eps))
        dot = np.sum(streams * weight[None] * key, -1) * rstd * F32(d ** -0.5)
        mag = np.sqrt(np.maximum(np.abs(dot), F32(1e-6)))
        gate = sigmoid(np.where(dot < 0, -mag, mag))
        return (streams + gate[:, :, None] * value[:, None, :]).astype(F32)

    # -- attention
    def compressor(self, x, a, ratio):
        """Pre-RoPE latents [G, head_dim] of the complete groups (G = S // r)."""
        if ratio == 1:
            return rms_norm(self.linear(x, a + "compressor.wkv.weight"), self.w(a + "compressor.norm.weight"),
                            self.cfg["rms_norm_eps"])
        g = x.shape[0] // ratio
        # (The width spelled out: a prompt shorter than one group has g = 0,
        # and numpy cannot infer a -1 dim of an empty array.)
        kv = self.linear(x[:g * ratio], a + "compressor.wkv.weight")
        kv = kv.reshape(g, ratio, kv.shape[-1])
        gate = self.linear(x[:g * ratio], a + "compressor.wgate.weight")
        gate = gate.reshape(g, ratio, gate.shape[-1])
        latent = np.sum(kv * softmax(gate, 1), axis=1)
        return rms_norm(latent, self.w(a + "compressor.norm.weight"), self.cfg["rms_norm_eps"])

    def indexer(self, x, q_res, latent, i, a, shared):
        cfg = self.cfg
        ratio = cfg["compress_ratios"][i]
        s = x.shape[0]
        hi, di = cfg["index_n_heads"], cfg["index_head_dim"]
        if i in cfg["kv_source_layer_ids"]:
            if latent is None or latent.shape[0] == 0:
                shared["index_k"] = None
            else:
                k = rms_norm(latent @ self.w(a + "indexer.wk.weight").T, self.w(a + "indexer.k_norm.weight"),
                             cfg["rms_norm_eps"])
                cos, sin = rope_table(cfg, "compress", ratio * np.arange(k.shape[0]))
                shared["index_k"] = self.quant(rope(k, cos, sin), 32, "fp4", f"fp4.index_k.{i}")
        index_k = shared.get("index_k")
        t = 0 if index_k is None else index_k.shape[0]
        if t == 0:
            return
        cos, sin = rope_table(cfg, "compress", np.arange(s))
        q = rope(self.linear(q_res, a + "indexer.wq_b.weight").reshape(s, hi, di), cos, sin)
        q = self.quant(q, 32, "fp4", f"fp4.index_q.{i}")
        weights = self.linear(x, a + "indexer.weights_proj.weight") * F32(hi ** -0.5)
        index_scores = indexer_scores(q, index_k, weights)  # [S, T]
        lens = (np.arange(s) + 1) // ratio
        index_scores = np.where(np.arange(t)[None, :] >= lens[:, None], -np.inf, index_scores).astype(F32)
        fragile = scale = None
        if self.decisions is not None:
            # A score is a sum over heads of w_h * ReLU(q_h . k) / sqrt(Di): its
            # rounding error scales with sum_h |w_h| |q_h| |k|, not with the
            # (possibly cancelling) sum itself.
            dots = np.einsum("shd,td->sht", q, index_k)
            qn, kn = np.linalg.norm(q, axis=-1), np.linalg.norm(index_k, axis=-1)
            fragile = (np.abs(dots) <= self.fragile_tol * qn[:, :, None] * kn[None, None, :]).any(1)  # [S, T]
            scale = np.sum(np.abs(weights) * qn, axis=1) * kn.max() * di ** -0.5
        if i == cfg["candidate_source_layer_id"]:
            block = cfg["candidate_block_size"]

            def note(bscore, kb):
                frag = None
                if fragile is not None:
                    frag = np.zeros(bscore.shape, bool)
                    for b in range(bscore.shape[1]):
                        frag[:, b] = fragile[:, b * block:(b + 1) * block].any(-1)
                self.decisions.append((f"candidates.{i}", topk_margin(bscore, kb, frag, scale)))

            shared["candidates"] = candidate_blocks(index_scores, lens, cfg["candidate_topk_blocks"], block,
                                                    note if self.decisions is not None else None)
        elif 0 <= cfg["candidate_source_layer_id"] < i and shared.get("candidates") is not None:
            index_scores = np.where(shared["candidates"], index_scores, -np.inf).astype(F32)
        k = min(cfg["index_topk"], t)
        top = self.topk(index_scores, k, f"indexer.{i}", fragile, scale)
        valid = np.take_along_axis(index_scores, top, -1) > -np.inf
        bias = np.full((s, t + 1), -np.inf, dtype=F32)
        np.put_along_axis(bias, np.where(valid, top, t), F32(0), -1)
        shared["topk_bias"] = bias[:, :t]

    def attention(self, x, i, shared):
        cfg = self.cfg
        a = f"model.layers.{i}.attn."
        s = x.shape[0]
        h, hd = cfg["num_attention_heads"], cfg["head_dim"]
        ratio = cfg["compress_ratios"][i]
        eps = cfg["rms_norm_eps"]
        cos, sin = rope_table(cfg, "compress" if ratio else "main", np.arange(s))
        q_res = rms_norm(self.linear(x, a + "wq_a.weight"), self.w(a + "q_norm.weight"), eps)
        q = rope(self.linear(q_res, a + "wq_b.weight").reshape(s, h, hd), cos, sin)
        kv = rms_norm(self.linear(x, a + "wkv.weight"), self.w(a + "kv_norm.weight"), eps)
        kv = self.quant(rope(kv, cos, sin), 32, "fp8", f"fp8.kv.{i}")
        pos = np.arange(s)
        mask = np.where((pos[None, :] <= pos[:, None]) & (pos[:, None] - pos[None, :] < cfg["sliding_window"]),
                        F32(0), F32(-np.inf))
        keys = kv
        if ratio:
            latent = None
            if i in cfg["kv_source_layer_ids"]:
                latent = self.compressor(x, a, ratio)
            if i in cfg["index_source_layer_ids"]:
                self.indexer(x, q_res, latent, i, a, shared)
            if i in cfg["kv_source_layer_ids"]:
                if latent.shape[0]:
                    c_cos, c_sin = rope_table(cfg, "compress", ratio * np.arange(latent.shape[0]))
                    shared["compress_kv"] = self.quant(rope(latent, c_cos, c_sin), 16, "fp4",
                                                       f"fp4.compress_kv.{i}", e4m3_scales=True)
                    self.intermediates[f"latent.{i}"] = latent
                    self.intermediates[f"compress_kv.{i}"] = shared["compress_kv"]
                else:
                    shared["compress_kv"] = None
            comp = shared.get("compress_kv")
            if comp is not None:
                keys = np.concatenate([kv, comp], 0)
                bias = shared.get("topk_bias")
                if bias is None or bias.shape[1] != comp.shape[0]:
                    bias = np.full((s, comp.shape[0]), -np.inf, dtype=F32)
                mask = np.concatenate([mask, bias], 1)
        scores = np.einsum("shd,td->hst", q, keys) * F32(hd ** -0.5) + mask[None]
        sink = self.w(a + "attn_sink")[:, None, None] * np.ones((1, s, 1), F32)
        full = np.concatenate([scores, sink], -1)
        probs = softmax(full, -1)[..., :-1]
        out = np.einsum("hst,td->shd", probs, keys).astype(F32)
        out = rope(out, cos, sin, inverse=True)
        g = cfg["o_groups"]
        grouped = out.reshape(s, g, -1)  # [S, G, H*hd/G]
        wo_a = self.w(a + "wo_a.weight").reshape(g, cfg["o_lora_rank"], -1)  # [G, R, in]
        y = np.einsum("sgi,gri->sgr", grouped, wo_a).reshape(s, -1)
        return self.linear(y, a + "wo_b.weight")

    # -- MoE
    def expert(self, x, pre, weight=None):
        lim = F32(self.cfg["swiglu_limit"])
        gate = self.linear(x, pre + "w1.weight")
        up = self.linear(x, pre + "w3.weight")
        if lim > 0:
            up = np.clip(up, -lim, lim)
            gate = np.minimum(gate, lim)
        y = gate * sigmoid(gate) * up
        if weight is not None:
            y = weight * y
        return self.linear(y.astype(F32), pre + "w2.weight")

    def moe(self, x, i):
        cfg = self.cfg
        f = f"model.layers.{i}.ffn."
        logits = self.linear(x, f + "gate.weight") / F32(cfg["gate_temp"])
        sf = cfg["scoring_func"]
        if sf == "sqrtsoftplus":
            scores = np.sqrt(np.logaddexp(F32(0), logits)).astype(F32)
        elif sf == "sigmoid":
            scores = sigmoid(logits)
        else:
            scores = softmax(logits, -1)
        k = cfg["num_experts_per_tok"]
        idx = self.topk(scores + self.w(f + "gate.bias"), k, f"moe.{i}")
        wts = np.take_along_axis(scores, idx, -1)
        if cfg["norm_topk_prob"] and k > 1:
            wts = wts / (wts.sum(-1, keepdims=True) + F32(1e-20))
        wts = (wts * F32(cfg["routed_scaling_factor"])).astype(F32)
        y = np.zeros_like(x)
        for e in range(cfg["n_routed_experts"]):
            rows, slot = np.nonzero(idx == e)
            if rows.size:
                y[rows] += self.expert(x[rows], f + f"experts.{e}.", wts[rows, slot][:, None])
        return (y + self.expert(x, f + "shared_experts.")).astype(F32)

    # -- model
    def forward(self, ids, logits="all"):
        cfg = self.cfg
        eps = cfg["rms_norm_eps"]
        x = self.w("model.embed.weight")[ids]  # [S, D]
        s, hc = x.shape[0], cfg["hc_mult"]
        streams = np.repeat(x[:, None, :], hc, axis=1).astype(F32)
        hash_ids = self.engram_hash_ids(ids) if cfg["engram_layer_ids"] else None
        pre_mix = np.zeros((s, hc), F32)
        pre_mix[:, 0] = 1
        shared = {}
        for i in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{i}."
            if i in cfg["engram_layer_ids"]:
                streams = self.engram(streams, hash_ids[:, cfg["engram_layer_ids"].index(i)], p)
            residual = streams
            attn_pre, attn_post, attn_comb = self.hc_mixes(streams, p, "attn")
            collapsed = self.hc_collapse(streams, pre_mix)
            out = self.attention(rms_norm(collapsed, self.w(p + "attn_norm.weight"), eps), i, shared)
            streams = self.hc_expand(out, residual, attn_post, attn_comb)
            residual = streams
            ffn_pre, ffn_post, ffn_comb = self.hc_mixes(streams, p, "ffn")
            collapsed = self.hc_collapse(streams, attn_pre)
            out = self.moe(rms_norm(collapsed, self.w(p + "ffn_norm.weight"), eps), i)
            streams = self.hc_expand(out, residual, ffn_post, ffn_comb)
            pre_mix = ffn_pre
            self.intermediates[f"streams.{i}"] = streams
        hidden = rms_norm(self.hc_collapse(streams, pre_mix), self.w("model.norm.weight"), eps)
        if logits == "last":
            hidden = hidden[-1:]
        return (hidden @ self.w("lm_head.weight").T).astype(F32)[None]


def candidate_blocks(index_scores, lens, topk_blocks, block, note=None):
    """Level one of the two-level top-k: bool [S, T] of the positions inside
    the topk_blocks best blocks (block score = max), the block holding the
    newest visible entry pinned in (transformers select_candidate_blocks).
    `note(block_scores, k)`, if given, sees the top-k decision."""
    s, t = index_scores.shape
    nb = -(-t // block)
    padded = np.full((s, nb * block), -np.inf, F32)
    padded[:, :t] = index_scores
    bscore = padded.reshape(s, nb, block).max(-1)
    last = (lens - 1) // block  # floor division: -1 when nothing is visible
    bscore = np.where(np.arange(nb)[None, :] == last[:, None], np.inf, bscore).astype(F32)
    k = min(topk_blocks, nb)
    if note is not None:
        note(bscore, k)
    top = topk_indices(bscore, k)
    keep = np.zeros((s, nb), bool)
    np.put_along_axis(keep, top, np.take_along_axis(bscore, top, -1) > -np.inf, -1)
    return np.repeat(keep, block, -1)[:, :t]


def engram_multipliers(layer_ids, max_ngram, compressed_vocab):
    """[L, max_ngram] odd int64 multipliers from a per-layer numpy RNG
    (transformers compute_hash_multipliers)."""
    bound = max(1, (np.iinfo(np.int64).max // compressed_vocab) // 2)
    rows = []
    for lid in layer_ids:
        gen = np.random.default_rng(10007 * lid)
        rows.append(gen.integers(low=0, high=bound, size=(max_ngram,), dtype=np.int64) * 2 + 1)
    return np.stack(rows)


def engram_offsets(cfg):
    """[L, cols] first row of each (n-gram, head) bucket range in its layer's table."""
    out = []
    for layer in cfg["engram_primes"]:
        flat = [p for per in layer for p in per]
        out.append(np.concatenate([[0], np.cumsum(flat)[:-1]]).astype(np.int64))
    return np.stack(out)


def load_model(dirname):
    cfg = v41config.load(dirname)
    token_map = None
    if cfg["engram_layer_ids"]:
        token_map = np.load(os.path.join(dirname, "engram_token_map.npy"))
    return Model(cfg, Checkpoint(dirname), token_map)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("ids")
    ap.add_argument("out")
    ap.add_argument("--logits", choices=["all", "last"], default="all")
    ap.add_argument("--quant-margins", metavar="JSON",
                    help="also write every fake quantisation's smallest quant_margin and its row, "
                         "closest to flipping first")
    args = ap.parse_args()
    ids = np.load(args.ids).reshape(-1).astype(np.int64)
    model = load_model(args.checkpoint)
    if args.quant_margins:
        model.record_quant_margins()
    out = model.forward(ids, args.logits)
    if args.quant_margins:
        rows = sorted(({"site": site, "margin": float(m.min()), "row": int(m.argmin())}
                       for site, m in model.quant_margins), key=lambda r: r["margin"])
        with open(args.quant_margins + ".tmp", "w") as f:
            json.dump(rows, f, indent=1)
        os.replace(args.quant_margins + ".tmp", args.quant_margins)
    tmp = args.out + ".tmp.npy"
    np.save(tmp, out)
    os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
