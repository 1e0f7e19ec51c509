#!/usr/bin/env python3
"""Check reference.py against transformers' own DeepSeek-V4.1 implementation
(the GPU machine has torch + transformers; the CPU machine does not).

For each CHECKPOINT_DIR (written by generate.py) builds transformers'
DeepseekV41ForCausalLM from the same config.json, loads the same safetensors
(parameters the prefill does not read, such as the router's `bias_vl` and the
Engram fp8 `scale`, get their init values), binds the Engram hash state to the
checkpoint's engram_token_map.npy instead of a tokenizer, runs the prefill in
float32 (eager attention, no TF32) and compares its logits with reference.py's:
relative L2 and next-token agreement per position. Prints one line per case
and a final PASS / FAIL; exits 1 if a gated case exceeds --max-rel-l2 (default
1e-4) or fails to run, 2 if no DeepseekV41ForCausalLM can be imported.

Where the model comes from (`--model`, the output names it): transformers'
own `models/deepseek_v41` when the installed release has it, else the copy
vendor_transformers.sh put in the git-ignored .hf_deepseek_v41/ (transformers
5.17 has none), imported as `transformers.models.deepseek_v41` so its relative
imports resolve against the installed transformers. Helpers the copy imports
that the installed release lacks are shimmed at import time, each only when
missing and each named in the output (`install_shims`).

The cache: `forward(use_cache=True)` builds `DynamicCache(config=...)`, and
transformers 5.17's DynamicCache constructs the layer class registered for
each `config.layer_types` entry with the layer kwargs only, so the copy's
DeepseekV41CSACache (the KV-source layers' cache, `__init__(config)`) fails
with "missing 1 required positional argument: 'config'". `build_cache` builds
the model's own cache instead and passes it as `past_key_values`; the prefill
also runs without any cache (`use_cache=False`), reported but not gated:
upstream's cache-less path appends every KV-source layer's compressed entries
and indexer keys to one per-forward `shared` dict, so a later group attends
over earlier groups' entries too (0.35 relative L2 from its own default
forward on the tiny configs, H200 at a660af3).

Top-k decisions (indexer top-k, candidate blocks, MoE routing) are where two
correct float32 implementations can part: a rounding-level difference flips a
choice whose margin is at rounding level, and a flipped choice moves whole
rows. So:
  * one tie rule on both sides: reference.py keeps the lower index on exact
    ties (ONNX TopK's rule); torch.topk promises no order among equal values,
    so the transformers forward runs with `lower_index_topk`, a stable sort
    that keeps the lower index too (exact ties are real: indexer scores are
    ReLU sums, and rows whose head weights are all negative tie at 0);
  * prompts whose decisions are not near a boundary: `--prompts S...` draws
    random prompts of S tokens (attempt a of length S uses
    numpy.random.default_rng(1000003 * S + a)) and keeps the first whose every
    decision has a margin >= --min-margin (default 1e-5) in reference.py
    (reference.topk_margin: the gap between the k-th and (k+1)-th score over
    the size of the terms the scores sum; an exact tie only when it is at a
    robust 0), up to --tries attempts. Two float32 paths of the reference
    itself (float32 vs float64-accumulated linears) move the scores by <= 1.4e-6
    of that size on tiny, so 1e-5 leaves about 7x. With ~10^4 decisions (tiny,
    S = 1000) no random prompt clears it, so long prompts are compared on a
    config whose top-k keep everything (tiny-all-picks); tiny is compared at
    S <= 129. The tolerance itself is not loosened.
Without --prompts, the ids-S.npy files in each CHECKPOINT_DIR are compared as
given; one whose decisions are within the margin is reported and not gated.

Usage: check_transformers.py CHECKPOINT_DIR... [--prompts S...] [--tries N]
       [--min-margin M] [--max-rel-l2 X] [--device cuda|cpu]
       [--model auto|installed|vendored] [--report-only]
"""
import argparse
import contextlib
import dataclasses
import glob
import importlib
import importlib.util
import json
import os
import sys
import time
import traceback
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import reference  # noqa: E402

VENDORED = os.path.join(HERE, ".hf_deepseek_v41")
CSA_LAYER_TYPE = "shared_compressed_attention"


class Unavailable(Exception):
    """No DeepseekV41ForCausalLM could be imported (exit 2)."""


# ------------------------------------------------------------- importing
def _has(module, name=None):
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return False
    return name is None or hasattr(mod, name)


def install_shims():
    """Give the installed transformers what the vendored modeling file imports
    and a newer transformers has, when it is missing. Each shim is harmless for
    this check's calls (every argument is passed explicitly, no optional
    outputs are requested); anything else missing surfaces as an ImportError
    naming it. Returns the names of the shims installed."""
    import torch
    from torch import nn

    shims = []
    generic = importlib.import_module("transformers.utils.generic")
    # merge_with_config_defaults fills arguments left None from the config;
    # this check passes use_cache and past_key_values explicitly.
    if not hasattr(generic, "merge_with_config_defaults"):
        generic.merge_with_config_defaults = lambda fn: fn
        shims.append("utils.generic.merge_with_config_defaults (identity)")
    # maybe_autocast(enabled=False) is only used to turn autocast off.
    if not hasattr(generic, "maybe_autocast"):
        generic.maybe_autocast = lambda device_type, enabled=True, **kw: torch.autocast(
            device_type=device_type, enabled=enabled, **kw)
        shims.append("utils.generic.maybe_autocast (torch.autocast)")
    # capture_outputs collects hidden states / attentions on request; the
    # logits do not depend on it.
    if not _has("transformers.utils.output_capturing"):
        oc = types.ModuleType("transformers.utils.output_capturing")
        oc.OutputRecorder = getattr(generic, "OutputRecorder", None) or (lambda *a, **k: None)
        oc.capture_outputs = lambda fn: fn
        sys.modules[oc.__name__] = oc
        shims.append("utils.output_capturing (OutputRecorder, identity capture_outputs)")
    # `**kwargs: Unpack[TransformersKwargs]` is evaluated when the file loads.
    utils = importlib.import_module("transformers.utils")
    if not hasattr(utils, "TransformersKwargs"):
        from typing import TypedDict

        class TransformersKwargs(TypedDict, total=False):
            pass

        utils.TransformersKwargs = TransformersKwargs
        shims.append("utils.TransformersKwargs (empty TypedDict)")
    # The `init` module's copy_ rebuilds the RoPE buffers in _init_weights.
    if not _has("transformers.initialization"):
        ini = types.ModuleType("transformers.initialization")
        for name in ("normal_", "zeros_", "ones_"):
            setattr(ini, name, getattr(nn.init, name))
        sys.modules[ini.__name__] = ini
        import transformers
        transformers.initialization = ini
        shims.append("initialization (torch.nn.init)")
    ini = importlib.import_module("transformers.initialization")
    if not hasattr(ini, "copy_"):
        def copy_(tensor, other):
            with torch.no_grad():
                return tensor.copy_(other)
        ini.copy_ = copy_
        shims.append("initialization.copy_")
    # The router's score function; reference.py: sqrt(softplus(x)).
    activations = importlib.import_module("transformers.activations")
    try:
        activations.ACT2FN["sqrtsoftplus"]
    except KeyError:
        class SqrtSoftplus(nn.Module):
            def forward(self, x):
                return torch.sqrt(nn.functional.softplus(x))

        # ACT2FN is a copy of ACT2CLS made at import: give both the entry.
        activations.ACT2CLS["sqrtsoftplus"] = SqrtSoftplus
        activations.ACT2FN["sqrtsoftplus"] = SqrtSoftplus
        shims.append('activations.ACT2FN["sqrtsoftplus"]')
    # The attention picks eager_attention_forward through get_interface.
    mu = importlib.import_module("transformers.modeling_utils")
    attn = mu.ALL_ATTENTION_FUNCTIONS
    if not hasattr(attn, "get_interface"):
        type(attn).get_interface = lambda self, name, default: (
            default if name in (None, "eager") else self[name])
        shims.append("AttentionInterface.get_interface")
    # Type-annotation-only names.
    rope = importlib.import_module("transformers.modeling_rope_utils")
    if not hasattr(rope, "RopeParameters"):
        rope.RopeParameters = dict
        shims.append("modeling_rope_utils.RopeParameters (dict)")
    cu = importlib.import_module("transformers.configuration_utils")
    if not hasattr(cu, "PreTrainedConfig") and hasattr(cu, "PretrainedConfig"):
        cu.PreTrainedConfig = cu.PretrainedConfig
        shims.append("configuration_utils.PreTrainedConfig (PretrainedConfig)")
    return shims


def import_vendored():
    """Import .hf_deepseek_v41/deepseek_v41 as transformers.models.deepseek_v41.
    The package is registered as a plain package (its upstream __init__, a lazy
    module over the folder, is not run: the submodules are imported by name),
    so nothing of the installed transformers changes but sys.modules."""
    pkg_dir = os.path.join(VENDORED, "deepseek_v41")
    if not os.path.isfile(os.path.join(pkg_dir, "modeling_deepseek_v41.py")):
        raise Unavailable(f"no vendored model files in {pkg_dir}: run models/deepseek_v41/vendor_transformers.sh "
                          "(and carry models/deepseek_v41/.hf_deepseek_v41 to the GPU machine)")
    importlib.import_module("transformers.models")
    name = "transformers.models.deepseek_v41"
    spec = importlib.util.spec_from_loader(name, loader=None, is_package=True)
    spec.submodule_search_locations.append(pkg_dir)
    pkg = importlib.util.module_from_spec(spec)
    pkg.__file__ = os.path.join(pkg_dir, "__init__.py")
    sys.modules[name] = pkg
    importlib.invalidate_caches()
    try:
        cfg = importlib.import_module(name + ".configuration_deepseek_v41")
        mod = importlib.import_module(name + ".modeling_deepseek_v41")
    except ImportError as e:
        raise Unavailable(f"the vendored model needs {e.name or e} which this transformers lacks ({e}); "
                          "add a shim to check_transformers.install_shims") from e
    upstream = "unknown commit"
    with contextlib.suppress(OSError):
        with open(os.path.join(VENDORED, "UPSTREAM")) as f:
            upstream = f.readline().split()[-1][:12]
    return mod, cfg, f"vendored copy ({os.path.relpath(VENDORED, os.getcwd())}, transformers commit {upstream})"


def load_transformers_model_code(which):
    """Returns (modeling module, configuration module, description, shims)."""
    import transformers
    if which in ("auto", "installed"):
        try:
            from transformers.models.deepseek_v41 import configuration_deepseek_v41 as cfg
            from transformers.models.deepseek_v41 import modeling_deepseek_v41 as mod
            return mod, cfg, f"transformers {transformers.__version__}'s own models/deepseek_v41", []
        except ImportError as e:
            if which == "installed":
                raise Unavailable(f"transformers {transformers.__version__} has no deepseek_v41 ({e})") from e
            sys.modules.pop("transformers.models.deepseek_v41", None)
    shims = install_shims()
    mod, cfg, what = import_vendored()
    return mod, cfg, what, shims


# ------------------------------------------------------------- the model
def build_config(cfgmod, dirname):
    with open(os.path.join(dirname, "config.json")) as f:
        raw = json.load(f)
    cls = cfgmod.DeepseekV41TextConfig
    names = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set(raw)
    kwargs = {k: v for k, v in raw.items() if k in names and k not in ("layer_types", "rope_parameters")}
    # The DSpark draft layers are not in the modeling code and prefill never
    # runs them; their noise token (default 128799) must still be a valid id of
    # the tiny vocabularies for the config to validate.
    kwargs["num_nextn_predict_layers"] = 0
    kwargs["dspark_noise_token_id"] = min(getattr(cls, "dspark_noise_token_id", 0), raw["vocab_size"] - 1)
    config = cls(**kwargs)
    config._attn_implementation = "eager"
    return config


def build_transformers_model(mod, config, dirname, device):
    import torch
    model = mod.DeepseekV41ForCausalLM(config).to(device=device, dtype=torch.float32).eval()
    ours = reference.Checkpoint(dirname)
    state = {name: torch.from_numpy(np.array(ours.read(name))) for name in ours.where}
    missing, unexpected = model.load_state_dict(state, strict=False)
    allowed_missing = ("bias_vl", "engram.embed.scale", "inv_freq")
    bad = [m for m in missing if not any(a in m for a in allowed_missing)]
    if bad or unexpected:
        raise RuntimeError(f"parameter names differ: missing {bad[:8]}, unexpected {list(unexpected)[:8]}")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias_vl"):
                p.zero_()
            if name.endswith("engram.embed.scale"):
                p.fill_(1.0)
    if config.engram_layer_ids:
        # DeepseekV41NgramHashState.__init__ derives the compressed token map
        # from a tokenizer; the checkpoint ships the map (engram_token_map.npy),
        # so the state is filled in as __init__ would from it.
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


def build_cache(mod, config):
    """A fresh cache as `forward` means to build it: DeepseekV41CSACache for the
    KV-source layers, sliding-window layers elsewhere. First as the model does,
    DynamicCache(config=config); where that fails for want of `config` (5.17
    builds registered layer classes from the layer kwargs alone), the class
    registered for "shared_compressed_attention" is, for that one call, a
    subclass that supplies the config, and restored afterwards. Returns
    (cache, how)."""
    from transformers import cache_utils
    how = "DynamicCache(config=config)"
    try:
        cache = cache_utils.DynamicCache(config=config)
    except TypeError as e:
        if "config" not in str(e):
            raise
        registries = [m for m in vars(cache_utils).values()
                      if isinstance(m, dict) and m.get(CSA_LAYER_TYPE) is mod.DeepseekV41CSACache]
        if not registries:
            raise RuntimeError(f"DynamicCache(config=...) failed ({e}) and no cache_utils mapping registers "
                               f"{CSA_LAYER_TYPE!r} to replace") from e

        class CSACacheWithConfig(mod.DeepseekV41CSACache):
            # Defining it re-registers "shared_compressed_attention" to this
            # class (CacheLayerMixin.__init_subclass__); the finally restores it.
            def __init__(self, **kwargs):
                super().__init__(config, **kwargs)

        try:
            for m in registries:
                m[CSA_LAYER_TYPE] = CSACacheWithConfig
            cache = cache_utils.DynamicCache(config=config)
        finally:
            for m in registries:
                m[CSA_LAYER_TYPE] = mod.DeepseekV41CSACache
        how = (f"DynamicCache(config=config) with {CSA_LAYER_TYPE!r} built as DeepseekV41CSACache(config) "
               f"(its own construction failed: {e})")
    kinds = [isinstance(layer, mod.DeepseekV41CSACache) for layer in cache.layers]
    want = [t == CSA_LAYER_TYPE for t in config.layer_types]
    if kinds != want:
        raise RuntimeError(f"the cache's layers {[type(x).__name__ for x in cache.layers]} do not follow "
                           f"config.layer_types {config.layer_types}")
    return cache, how


@contextlib.contextmanager
def lower_index_topk(torch):
    """torch.topk / Tensor.topk keeping the lower index among equal values, as
    reference.topk_indices does: a stable descending sort. -0.0 is first made
    +0.0 (a GPU radix sort orders the two zeros by their bits; numpy's sort
    compares them equal). Only the largest=True form the model uses is
    replaced."""
    method, function = torch.Tensor.topk, torch.topk

    def topk(x, k, dim=-1, largest=True, sorted=True, *, out=None):
        if not largest or out is not None:
            return method(x, k, dim, largest, sorted, out=out)
        order = torch.sort(x + 0.0, dim=dim, descending=True, stable=True).indices.narrow(dim, 0, k)
        return torch.return_types.topk((x.gather(dim, order), order))

    torch.Tensor.topk, torch.topk = topk, topk
    try:
        yield
    finally:
        torch.Tensor.topk, torch.topk = method, function


# ------------------------------------------------------------- prompts
def decisions_summary(model_ref):
    """(decisions, min margin, where) of the last recorded forward."""
    n, worst, where = 0, np.inf, "-"
    for site, margins in model_ref.decisions:
        finite = np.isfinite(margins)
        n += int(finite.sum())
        if margins.size and margins.min() < worst:
            worst, where = float(margins.min()), f"{site} row {int(margins.argmin())}"
    return n, worst, where


def candidate_prompts(args, ours, dirname):
    """Yields (label, ids [S], reference logits, decisions, min margin, where,
    conditioned) per case: --prompts searches, else the ids-*.npy files."""
    vocab = ours.cfg["vocab_size"]
    if args.prompts:
        for s in args.prompts:
            best = None
            for attempt in range(args.tries):
                ids = np.random.default_rng(1000003 * s + attempt).integers(0, vocab, s).astype(np.int64)
                ours.record_decisions(args.min_margin)
                logits = ours.forward(ids)
                n, worst, where = decisions_summary(ours)
                if best is None or worst > best[4]:
                    best = (f"S={s} prompt {attempt}", ids, logits, n, worst, where)
                if worst >= args.min_margin:
                    break
            np.save(os.path.join(dirname, f"prompt-{s}.npy"), best[1].reshape(1, -1))
            label, ids, logits, n, worst, where = best
            tries = f" (best of {args.tries})" if worst < args.min_margin else ""
            yield label + tries, ids, logits, n, worst, where, worst >= args.min_margin
    else:
        for ids_path in sorted(glob.glob(os.path.join(dirname, "ids-*.npy"))):
            ids = np.load(ids_path).reshape(-1).astype(np.int64)
            ours.record_decisions(args.min_margin)
            logits = ours.forward(ids)
            n, worst, where = decisions_summary(ours)
            label = f"S={ids.shape[0]} {os.path.basename(ids_path)}"
            yield label, ids, logits, n, worst, where, worst >= args.min_margin


# ------------------------------------------------------------- main
def rel_l2(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def check_checkpoint(args, mod, cfgmod, dirname, torch):
    """Prints one line per case; returns (cases, gated cases, failed gated cases)."""
    name = os.path.basename(os.path.normpath(dirname))
    config = build_config(cfgmod, dirname)
    model = build_transformers_model(mod, config, dirname, args.device)
    ours = reference.load_model(dirname)
    cases = gated = failed = 0
    cache_note = None
    for label, ids, mine, n, worst, where, conditioned in candidate_prompts(args, ours, dirname):
        t0 = time.time()
        cases += 1
        x = torch.from_numpy(ids.reshape(1, -1)).to(args.device)
        cache, how = build_cache(mod, config)
        if cache_note is None:
            cache_note = how
            print(f"  {name}: cache {how}")
        with torch.no_grad(), lower_index_topk(torch):
            theirs = model(input_ids=x, past_key_values=cache, use_cache=True).logits
            if model.model.engram_hash_state is not None:
                model.model.engram_hash_state.history = None  # a fresh prompt: no n-gram history
            nocache = model(input_ids=x, use_cache=False).logits
            if model.model.engram_hash_state is not None:
                model.model.engram_hash_state.history = None
        theirs = theirs.float().cpu().numpy().astype(np.float64)[0]
        nocache = nocache.float().cpu().numpy().astype(np.float64)[0]
        mine = mine.astype(np.float64)[0]
        rel, rel_nc = rel_l2(mine, theirs), rel_l2(nocache, theirs)
        same = float((mine.argmax(-1) == theirs.argmax(-1)).mean())
        # Gated against the default forward (use_cache=True, as model(ids)
        # and generate() run it). Upstream's use_cache=False path is only
        # reported: it concatenates every compressing layer's entries into
        # one shared["compress_kv"] (and shared["index_k"]) per forward
        # (modeling_deepseek_v41.py, the `cache_layer is None` branches), so
        # later groups attend over other groups' entries; it differs from
        # its own default by ~0.35 on the tiny configs (H200, a660af3).
        ok = rel <= args.max_rel_l2
        margin = f"{n} decisions, min margin {worst:.1e}" + (f" at {where}" if np.isfinite(worst) else "")
        if not n:
            margin = "no top-k decisions (every choice keeps all)"
        if args.report_only:
            verdict = "reported, not gated (--report-only)"
        elif not conditioned:
            verdict = f"not gated: a decision is within {args.min_margin:.0e} of flipping"
        else:
            gated += 1
            failed += not ok
            verdict = "OK" if ok else f"FAIL (> {args.max_rel_l2:.0e})"
        print(f"{name} {label}: rel L2 {rel:.2e} (transformers' use_cache=False vs its default, not gated: {rel_nc:.1e}), "
              f"next token agrees at {same * 100:.1f}% of positions; {margin}; {time.time() - t0:.1f} s: {verdict}",
              flush=True)
    return cases, gated, failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoints", nargs="+")
    ap.add_argument("--prompts", type=int, nargs="*", default=[],
                    help="compare prompts of these lengths whose top-k decisions are all >= --min-margin "
                         "from flipping (default: the ids-*.npy files, as given)")
    ap.add_argument("--tries", type=int, default=16, help="random prompts tried per length (--prompts)")
    ap.add_argument("--min-margin", type=float, default=1e-5,
                    help="smallest top-k margin (reference.topk_margin) a gated prompt may have")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--max-rel-l2", type=float, default=1e-4)
    ap.add_argument("--model", choices=["auto", "installed", "vendored"], default="auto",
                    help="transformers' own deepseek_v41, the vendored copy, or the first that exists")
    ap.add_argument("--report-only", action="store_true",
                    help="print the comparisons, never fail on them (e.g. tiny-qat: FP8/FP4 rounding "
                         "boundaries are not top-k decisions, so no prompt choice steers clear of them)")
    args = ap.parse_args()
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"check_transformers: FAIL: {e}")
        sys.exit(2)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("check_transformers: FAIL: --device cuda but torch sees no CUDA device")
        sys.exit(1)
    try:
        mod, cfgmod, what, shims = load_transformers_model_code(args.model)
    except Unavailable as e:
        print(f"check_transformers: FAIL: {e}")
        sys.exit(2)
    except Exception as e:  # an import that fails for another reason: say where
        traceback.print_exc()
        print(f"check_transformers: FAIL: importing DeepseekV41ForCausalLM: {type(e).__name__}: {e}")
        sys.exit(2)
    dev = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU"
    print(f"check_transformers: DeepseekV41ForCausalLM from the {what}; transformers {transformers.__version__}, "
          f"torch {torch.__version__}, numpy {np.__version__}, {dev}, float32")
    print(f"  shims: {', '.join(shims) if shims else 'none'}")
    print(f"  ties: lower index on both sides; gated prompts keep every top-k decision >= {args.min_margin:.0e} "
          f"from flipping; tolerance rel L2 <= {args.max_rel_l2:.0e}")
    cases = gated = failed = 0
    broken = []
    for dirname in args.checkpoints:
        try:
            c, g, f = check_checkpoint(args, mod, cfgmod, dirname, torch)
            cases, gated, failed = cases + c, gated + g, failed + f
        except Exception as e:
            traceback.print_exc()
            print(f"{os.path.basename(os.path.normpath(dirname))}: FAIL: {type(e).__name__}: {e}", flush=True)
            broken.append(dirname)
    summary = f"{cases} cases, {gated} gated"
    if broken or failed:
        print(f"check_transformers: FAIL ({summary}, {failed} over tolerance"
              f"{', errors in ' + ', '.join(broken) if broken else ''})")
        sys.exit(1)
    if not gated and not args.report_only:
        # Nothing was compared under the tolerance: not a pass.
        print(f"check_transformers: FAIL ({summary}: no case was well-conditioned enough to gate; "
              "use --prompts, or more --tries)")
        sys.exit(1)
    print(f"check_transformers: PASS ({summary})")


if __name__ == "__main__":
    main()
