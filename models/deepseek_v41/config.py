"""DeepSeek-V4.1 text configuration: load, fill defaults, validate.

Reads a transformers-style `config.json` (flat, or composite with a
`text_config` section as the released checkpoint ships it) and applies the
defaults and schedule rules of transformers'
`models/deepseek_v41/configuration_deepseek_v41.py` (DeepseekV41TextConfig
.__post_init__): the compress-ratio schedule, KV-/index-source layers, the
candidate source of the two-level top-k, the two RoPE parameter sets (`main`:
rope_theta, no scaling; `compress`: compress_rope_theta + YaRN with
attention_factor 1), and Engram's prime bucket layout. Everything here is plain
Python (no numpy), so the exporter, the generator and the reference agree on one
normalised dict.

Errors are `ConfigError` with the offending field named.
"""
import json
import math
import os

CONFIG_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs")

# Field defaults of DeepseekV41TextConfig (released DeepSeek-V4.1-Flash values).
DEFAULTS = {
    "vocab_size": 129280, "hidden_size": 5120, "num_hidden_layers": 40,
    "num_attention_heads": 64, "num_key_value_heads": 1, "head_dim": 512,
    "q_lora_rank": 1280, "qk_rope_head_dim": 64, "rope_theta": 10000.0,
    "compress_rope_theta": 160000.0, "rope_scaling": None,
    "max_position_embeddings": 1048576, "sliding_window": 128,
    "compress_ratios": None, "kv_source_layer_ids": None,
    "index_source_layer_ids": None, "candidate_source_layer_id": None,
    "candidate_topk_blocks": 2048, "candidate_block_size": 8,
    "index_n_heads": 32, "index_head_dim": 128, "index_topk": 512,
    "o_groups": 8, "o_lora_rank": 1024, "moe_intermediate_size": 2304,
    "n_routed_experts": 384, "n_shared_experts": 1, "num_experts_per_tok": 6,
    "scoring_func": "sqrtsoftplus", "gate_temp": 1.0, "norm_topk_prob": True,
    "routed_scaling_factor": 1.5, "swiglu_limit": 10.0, "hc_mult": 4,
    "hc_sinkhorn_iters": 20, "hc_eps": 1e-6, "engram_layer_ids": None,
    "engram_vocab_size": 16000000, "engram_num_embeddings": None,
    "engram_max_ngram_size": 4, "engram_n_heads": 8, "engram_head_dim": 256,
    "engram_pad_id": 2, "engram_compressed_vocab_size": 99092,
    "hidden_act": "silu", "rms_norm_eps": 1e-20, "tie_word_embeddings": False,
    "initializer_range": 0.02,
}
RELEASED_RATIOS = [0, 0] + [2] * 18 + [1] * 20
RELEASED_KV_SOURCES = [2, 8, 14, 20]
RELEASED_INDEX_SOURCES = [2, 8, 14, 20, 24, 28, 32, 36]


class ConfigError(ValueError):
    pass


def _is_prime(n):
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    f = 3
    while f * f <= n:
        if n % f == 0:
            return False
        f += 2
    return True


def engram_primes(cfg):
    """Prime bucket sizes [layer][ngram-1][head], drawn in order above
    engram_vocab_size - 1 and never reused (transformers EngramLayout)."""
    primes, seen = [], set()
    for _ in cfg["engram_layer_ids"]:
        per_ngram = []
        for _ in range(cfg["engram_max_ngram_size"] - 1):
            sizes, current = [], cfg["engram_vocab_size"] - 1
            for _ in range(cfg["engram_n_heads"]):
                current += 1
                while not _is_prime(current) or current in seen:
                    current += 1
                seen.add(current)
                sizes.append(current)
            per_ngram.append(sizes)
        primes.append(per_ngram)
    return primes


def normalise(raw):
    """Return a new dict: DEFAULTS, then `raw` (its `text_config` if composite),
    then the derived schedule fields. Raises ConfigError naming the field."""
    src = raw.get("text_config", raw) if isinstance(raw.get("text_config"), dict) else raw
    cfg = dict(DEFAULTS)
    cfg.update({k: v for k, v in src.items() if v is not None or k not in DEFAULTS})
    n = cfg["num_hidden_layers"]
    if not isinstance(n, int) or n <= 0:
        raise ConfigError(f"num_hidden_layers must be a positive integer, got {n!r}")

    if cfg["compress_ratios"] is None:
        if n == len(RELEASED_RATIOS):
            cfg["compress_ratios"] = list(RELEASED_RATIOS)
        else:
            n_slide = min(2, n)
            n_enc = max(0, (n - n_slide + 1) // 2)
            cfg["compress_ratios"] = [0] * n_slide + [2] * n_enc + [1] * max(0, n - n_slide - n_enc)
    ratios = list(cfg["compress_ratios"])
    if len(ratios) < n:
        raise ConfigError(f"compress_ratios needs {n} entries (num_hidden_layers), got {len(ratios)}")
    ratios = ratios[:n]  # trailing DSpark draft-layer entries are not part of prefill
    if any((not isinstance(r, int)) or r < 0 for r in ratios):
        raise ConfigError(f"compress_ratios must be non-negative integers, got {ratios}")
    cfg["compress_ratios"] = ratios

    if cfg["kv_source_layer_ids"] is None:
        if ratios == RELEASED_RATIOS[:n] and n == len(RELEASED_RATIOS):
            cfg["kv_source_layer_ids"] = list(RELEASED_KV_SOURCES)
        else:
            cfg["kv_source_layer_ids"] = [i for i in range(n) if ratios[i] > 0 and (i == 0 or ratios[i - 1] != ratios[i])]
    if cfg["index_source_layer_ids"] is None:
        cfg["index_source_layer_ids"] = (list(RELEASED_INDEX_SOURCES)
                                         if cfg["kv_source_layer_ids"] == RELEASED_KV_SOURCES
                                         else list(cfg["kv_source_layer_ids"]))
    kv, idx = cfg["kv_source_layer_ids"], cfg["index_source_layer_ids"]
    if any(i < 0 or i >= n for i in kv + idx):
        raise ConfigError(f"kv_source_layer_ids {kv} / index_source_layer_ids {idx} out of range [0, {n})")
    if any(ratios[i] == 0 for i in kv):
        raise ConfigError(f"kv_source_layer_ids {kv} must have compress_ratios[i] > 0")
    if any(ratios[i] == 0 for i in idx):
        raise ConfigError(f"index_source_layer_ids {idx} must have compress_ratios[i] > 0")
    if any(i not in kv and not any(s < i for s in kv) for i in idx):
        raise ConfigError(f"index_source_layer_ids {idx}: each needs a kv_source_layer_ids entry before it")
    if cfg["candidate_source_layer_id"] is None:
        cfg["candidate_source_layer_id"] = kv[-1] if kv else -1
    if cfg["candidate_source_layer_id"] >= 0 and cfg["candidate_source_layer_id"] not in idx:
        raise ConfigError(f"candidate_source_layer_id {cfg['candidate_source_layer_id']} must be in "
                          f"index_source_layer_ids {idx}")
    if any(ratios[i] > 0 and not any(s <= i for s in kv) for i in range(n)):
        raise ConfigError("every layer with compress_ratios[i] > 0 needs a kv_source_layer_ids entry at or before it")

    hd, rd = cfg["head_dim"], cfg["qk_rope_head_dim"]
    if rd % 2 or rd > hd or rd > cfg["index_head_dim"]:
        raise ConfigError(f"qk_rope_head_dim {rd} must be even and <= head_dim {hd} and index_head_dim")
    if (cfg["num_attention_heads"] * hd) % cfg["o_groups"]:
        raise ConfigError(f"num_attention_heads * head_dim must divide into o_groups {cfg['o_groups']}")
    if cfg["scoring_func"] not in ("sqrtsoftplus", "softmax", "sigmoid"):
        raise ConfigError(f"scoring_func {cfg['scoring_func']!r} is not one of sqrtsoftplus, softmax, sigmoid")
    if cfg["hidden_act"] != "silu":
        raise ConfigError(f"hidden_act {cfg['hidden_act']!r}: only silu is supported")
    if cfg["n_shared_experts"] != 1:
        raise ConfigError(f"n_shared_experts {cfg['n_shared_experts']}: the V4.1 block has exactly one shared expert")

    # RoPE: `main` plain, `compress` + YaRN (attention_factor 1: cos/sin unscaled).
    yarn = {k: v for k, v in (cfg["rope_scaling"] or {}).items() if k not in ("main", "compress")}
    rope_type = yarn.get("rope_type", yarn.get("type", "default"))
    if rope_type not in ("default", "yarn"):
        raise ConfigError(f"rope_scaling.rope_type {rope_type!r}: only yarn (or none) is supported")
    cfg["rope_compress_yarn"] = yarn if rope_type == "yarn" else None

    if cfg["engram_layer_ids"] is None:
        cfg["engram_layer_ids"] = []
    if cfg["engram_layer_ids"]:
        cfg["engram_primes"] = engram_primes(cfg)
        sums = [sum(p for per in layer for p in per) for layer in cfg["engram_primes"]]
        if cfg["engram_num_embeddings"] is None:
            cfg["engram_num_embeddings"] = sums
        if list(cfg["engram_num_embeddings"]) != sums:
            raise ConfigError(f"engram_num_embeddings {cfg['engram_num_embeddings']} does not match the prime "
                              f"bucket layout {sums}")
        if any(i < 0 or i >= n for i in cfg["engram_layer_ids"]):
            raise ConfigError(f"engram_layer_ids {cfg['engram_layer_ids']} out of range [0, {n})")
    return cfg


def load(name_or_path, layers=None):
    """Load a config by name (models/deepseek_v41/configs/NAME.json) or path; a
    directory means its config.json. `layers` truncates the layer schedule."""
    path = name_or_path
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    elif not os.path.exists(path):
        path = os.path.join(CONFIG_DIR, name_or_path + ".json")
    try:
        with open(path) as f:
            raw = json.load(f)
    except OSError as e:
        raise ConfigError(f"{name_or_path}: cannot read config ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not JSON ({e})") from None
    if layers:
        src = raw.get("text_config", raw) if isinstance(raw.get("text_config"), dict) else raw
        src["num_hidden_layers"] = layers
        for key in ("compress_ratios",):
            if src.get(key) is not None:
                src[key] = src[key][:layers]
        for key in ("kv_source_layer_ids", "index_source_layer_ids", "engram_layer_ids"):
            if src.get(key) is not None:
                src[key] = [i for i in src[key] if i < layers]
        # One table size per Engram layer, drawn in layer order: the kept
        # layers' are a prefix.
        if src.get("engram_num_embeddings") is not None and src.get("engram_layer_ids") is not None:
            src["engram_num_embeddings"] = list(src["engram_num_embeddings"])[:len(src["engram_layer_ids"])]
        # A candidate source cut off with its layer: no two-level top-k.
        if src.get("candidate_source_layer_id") is not None and src["candidate_source_layer_id"] >= layers:
            src["candidate_source_layer_id"] = -1
    return normalise(raw)


def rope_inv_freq(cfg, kind):
    """Inverse frequencies (one per rotated pair, qk_rope_head_dim/2 of them) as
    Python floats computed in float64; callers cast to float32. `kind` is
    "main" (rope_theta, no scaling) or "compress" (compress_rope_theta + YaRN:
    transformers modeling_rope_utils._compute_yarn_parameters with truncate)."""
    dim = cfg["qk_rope_head_dim"]
    base = cfg["rope_theta"] if kind == "main" else cfg["compress_rope_theta"]
    pos_freqs = [base ** (i / dim) for i in range(0, dim, 2)]
    extrap = [1.0 / p for p in pos_freqs]
    yarn = cfg["rope_compress_yarn"] if kind == "compress" else None
    if not yarn:
        return extrap
    # transformers 5.17's rules (RotaryEmbeddingConfigMixin.standardize_rope_params
    # and _compute_yarn_parameters): a top-level original_max_position_embeddings
    # wins over rope_scaling's, which defaults to max_position_embeddings; an
    # explicit factor is used as given (its mismatch with max / original is
    # only warned about there), a missing or null one is that ratio; beta_fast
    # and beta_slow fall back to 32 and 1 when missing, null or 0.
    orig = (cfg.get("original_max_position_embeddings") or yarn.get("original_max_position_embeddings")
            or cfg["max_position_embeddings"])
    factor = yarn.get("factor")
    if factor is None:
        factor = cfg["max_position_embeddings"] / orig
    beta_fast, beta_slow = yarn.get("beta_fast") or 32, yarn.get("beta_slow") or 1

    def correction_dim(rot):
        return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if yarn.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    out = []
    for i in range(dim // 2):
        ramp = min(max((i - low) / (high - low), 0.0), 1.0)
        extrap_factor = 1.0 - ramp
        out.append(extrap[i] / factor * (1 - extrap_factor) + extrap[i] * extrap_factor)
    return out


def layer_kind(cfg, i):
    """Human-readable kind of layer i (for reports and tests)."""
    r = cfg["compress_ratios"][i]
    if r == 0:
        return "window"
    parts = [f"r{r}"]
    if i in cfg["kv_source_layer_ids"]:
        parts.append("kv-source")
    if i in cfg["index_source_layer_ids"]:
        parts.append("index-source")
    if i == cfg["candidate_source_layer_id"]:
        parts.append("candidate-source")
    return "+".join(parts)
