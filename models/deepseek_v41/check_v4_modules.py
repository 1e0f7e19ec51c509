#!/usr/bin/env python3
"""Check the parts of reference.py that DeepSeek-V4.1 shares with V4 against
transformers' DeepseekV4 modules (models/deepseek_v4), for a transformers
that has deepseek_v4 but no deepseek_v41 (5.17 on the GPU machine).

Each check feeds the same random float32 inputs and weights to one V4
module and to the matching reference.py function (numpy) and compares the
outputs (relative L2, float32 on the CPU; no GPU needed):
  rms_norm       DeepseekV4RMSNorm                 vs reference.rms_norm
  rope           apply_rotary_pos_emb (interleaved, trailing rope slice)
                                                   vs reference.rope, and its
                 inverse with -sin                 vs reference.rope(inverse=True)
  rope_inv_freq  DeepseekV4RotaryEmbedding's main / compress inverse
                 frequencies (V4's defaults)       vs config.rope_inv_freq
  rope_yarn      the same with the compress set under YaRN (factor 16 from
                 65536 positions, V4.1-Flash's)    vs config.rope_inv_freq
  compressor     DeepseekV4HCACompressor (non-overlapping gated softmax
                 pooling of r tokens, position_bias 0, RMSNorm, RoPE at
                 positions i * r)                  vs Model.compressor + rope
  indexer_score  DeepseekV4IndexerScorer (sum_h w_h ReLU(q_h . k) scaled)
                                                   vs reference.indexer_scores
What V4.1 does differently (candidate blocks, KV-source sharing, Engram,
mHC's V4.1 form, the overlapping CSA windows of V4) is not compared here.
Prints one line per check; exits 1 if any check exceeds --max-rel-l2
(default 1e-5), 2 if transformers has no deepseek_v4.

Usage: check_v4_modules.py [--max-rel-l2 X]
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import config as v41config  # noqa: E402
import reference  # noqa: E402

F32 = np.float32


def rel_l2(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


class Weights:
    """A reference.Checkpoint stand-in: named float32 arrays."""

    def __init__(self, tensors):
        self.tensors = tensors

    def read(self, name):
        return self.tensors[name]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-rel-l2", type=float, default=1e-5)
    args = ap.parse_args()
    try:
        import torch
        from transformers.models.deepseek_v4 import modeling_deepseek_v4 as m
        from transformers.models.deepseek_v4.configuration_deepseek_v4 import DeepseekV4Config
    except ImportError as e:
        print(f"check_v4_modules: no transformers deepseek_v4 here ({e})")
        return 2
    import transformers
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    rng = np.random.default_rng(0)
    results = []

    def check(name, fn):
        try:
            err, detail = fn()
            status = "PASS" if err <= args.max_rel_l2 else "FAIL"
            results.append(status)
            print(f"{name:14s} {status}  rel L2 {err:.2e}  {detail}")
        except Exception as e:  # report, keep checking the others
            results.append("FAIL")
            print(f"{name:14s} FAIL  {type(e).__name__}: {e}")

    cfg_t = DeepseekV4Config()
    eps = float(getattr(cfg_t, "rms_norm_eps", 1e-6))
    head_dim = int(cfg_t.head_dim)
    print(f"transformers {transformers.__version__}; DeepseekV4Config defaults: head_dim {head_dim}, "
          f"rms_norm_eps {eps}, rope_parameters {getattr(cfg_t, 'rope_parameters', None)}")

    def rms():
        x = rng.standard_normal((7, 96)).astype(F32)
        w = rng.standard_normal(96).astype(F32)
        mod = m.DeepseekV4RMSNorm(96, eps=eps)
        with torch.no_grad():
            mod.weight.copy_(torch.from_numpy(w))
            theirs = mod(torch.from_numpy(x)).numpy()
        return rel_l2(reference.rms_norm(x, w, eps), theirs), "x [7, 96]"

    def rope():
        s, h, d, pairs = 9, 3, 48, 8
        x = rng.standard_normal((s, h, d)).astype(F32)
        ang = rng.uniform(-np.pi, np.pi, (s, pairs)).astype(F32)
        cos, sin = np.cos(ang).astype(F32), np.sin(ang).astype(F32)
        xt = torch.from_numpy(x).transpose(0, 1)[None]  # [1, H, S, D]
        ct, st = torch.from_numpy(cos)[None], torch.from_numpy(sin)[None]
        fwd = m.apply_rotary_pos_emb(xt, ct, st)[0].transpose(0, 1).numpy()
        inv = m.apply_rotary_pos_emb(xt, ct, -st)[0].transpose(0, 1).numpy()
        e1 = rel_l2(reference.rope(x, cos, sin), fwd)
        e2 = rel_l2(reference.rope(x, cos, sin, inverse=True), inv)
        return max(e1, e2), f"[S 9, H 3, D 48], rope on the last 16 channels; forward {e1:.1e}, inverse {e2:.1e}"

    def inv_freq(cfg_t=cfg_t):
        rp = cfg_t.rope_parameters
        rotary = m.DeepseekV4RotaryEmbedding(cfg_t)
        comp, main = rp["compress"], rp["main"]
        rd = int(head_dim * comp.get("partial_rotary_factor", 1.0))
        yarn = None
        if comp.get("rope_type") == "yarn":
            yarn = {k: comp[k] for k in ("factor", "beta_fast", "beta_slow", "original_max_position_embeddings",
                                         "truncate") if k in comp and comp[k] is not None}
        ours_cfg = {"qk_rope_head_dim": rd, "rope_theta": main["rope_theta"],
                    "compress_rope_theta": comp["rope_theta"], "rope_compress_yarn": yarn,
                    "max_position_embeddings": cfg_t.max_position_embeddings}
        errs = []
        for kind in ("main", "compress"):
            theirs = getattr(rotary, f"{kind}_inv_freq").double().numpy()
            ours = np.array(v41config.rope_inv_freq(ours_cfg, kind), np.float64).astype(F32)
            errs.append(rel_l2(ours, theirs))
        scaling = getattr(rotary, "compress_attention_scaling", None)
        # V4's YaRN also scales cos/sin by its attention factor; V4.1 sets
        # attention_factor 1 (config.py), so only the frequencies are compared.
        return max(errs), (f"{rd // 2} pairs; main {errs[0]:.1e}, compress {errs[1]:.1e} "
                           f"(yarn {yarn}); V4's compress cos/sin scaling {scaling} "
                           f"(V4.1: 1, not compared)")

    def inv_freq_yarn():
        # V4.1-Flash's compress RoPE: YaRN factor 16 from 64K positions.
        import copy
        cfg_y = copy.deepcopy(cfg_t)
        cfg_y.max_position_embeddings = 1048576
        cfg_y.rope_parameters = dict(cfg_y.rope_parameters)
        cfg_y.rope_parameters["compress"] = dict(cfg_y.rope_parameters["compress"], rope_type="yarn", factor=16.0,
                                                 beta_fast=32.0, beta_slow=1.0,
                                                 original_max_position_embeddings=65536)
        return inv_freq(cfg_y)

    def compressor():
        r, hidden, s = 4, 64, 23  # 5 complete groups + 3 leftover tokens
        cfg_small = DeepseekV4Config()
        cfg_small.hidden_size = hidden
        cfg_small.compress_rates = dict(cfg_small.compress_rates)
        cfg_small.compress_rates["heavily_compressed_attention"] = r
        mod = m.DeepseekV4HCACompressor(cfg_small).eval()
        d = mod.head_dim
        wkv = (rng.standard_normal((d, hidden)) / np.sqrt(hidden)).astype(F32)
        wgate = (rng.standard_normal((d, hidden)) / np.sqrt(hidden)).astype(F32)
        wnorm = rng.uniform(0.5, 1.5, d).astype(F32)
        x = rng.standard_normal((s, hidden)).astype(F32)
        with torch.no_grad():
            mod.kv_proj.weight.copy_(torch.from_numpy(wkv))
            mod.gate_proj.weight.copy_(torch.from_numpy(wgate))
            mod.position_bias.zero_()
            mod.kv_norm.weight.copy_(torch.from_numpy(wnorm))
            out, _ = mod(torch.from_numpy(x)[None], None, torch.arange(s)[None], None, 0)
        theirs = out[0, 0].numpy()  # [T, head_dim], RoPE'd
        a = "model.layers.0.attn."
        model = reference.Model({"rms_norm_eps": float(cfg_small.rms_norm_eps)}, Weights({
            a + "compressor.wkv.weight": wkv, a + "compressor.wgate.weight": wgate,
            a + "compressor.norm.weight": wnorm}))
        latent = model.compressor(x, a, r)
        # The compressed entries' RoPE: the compress frequencies of this
        # config at positions i * r, taken from V4's own rotary so the check
        # is about the pooling, norm and rotation.
        ang = (np.arange(latent.shape[0]) * r)[:, None].astype(np.float64) * \
            mod.rotary_emb.compress_inv_freq.double().numpy()[None, :]
        scale = float(getattr(mod.rotary_emb, "compress_attention_scaling", 1.0))
        cos, sin = (np.cos(ang) * scale).astype(F32), (np.sin(ang) * scale).astype(F32)
        ours = reference.rope(latent, cos, sin)
        return rel_l2(ours, theirs), f"r {r}, S {s} (T {latent.shape[0]}), head_dim {d}"

    def indexer_score():
        s, t, hi, di, hidden = 11, 6, 4, 32, 48
        cfg_small = DeepseekV4Config()
        cfg_small.hidden_size, cfg_small.index_n_heads, cfg_small.index_head_dim = hidden, hi, di
        mod = m.DeepseekV4IndexerScorer(cfg_small)
        q = rng.standard_normal((s, hi, di)).astype(F32)
        k = rng.standard_normal((t, di)).astype(F32)
        x = rng.standard_normal((s, hidden)).astype(F32)
        wp = rng.standard_normal((hi, hidden)).astype(F32)
        with torch.no_grad():
            mod.weights_proj.weight.copy_(torch.from_numpy(wp))
            theirs = mod(torch.from_numpy(q)[None], torch.from_numpy(k)[None], torch.from_numpy(x)[None])[0].numpy()
        # reference.py's indexer scoring (as Model.indexer calls it, before
        # its causal mask and top-k).
        ours = reference.indexer_scores(q, k, (x @ wp.T).astype(F32) * F32(hi ** -0.5))
        return rel_l2(ours, theirs), f"S {s}, T {t}, {hi} heads x {di}"

    check("rms_norm", rms)
    check("rope", rope)
    check("rope_inv_freq", inv_freq)
    check("rope_yarn", inv_freq_yarn)
    check("compressor", compressor)
    check("indexer_score", indexer_score)
    failed = results.count("FAIL")
    print(f"V4 subset vs transformers DeepseekV4 modules: {len(results) - failed} of {len(results)} PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
