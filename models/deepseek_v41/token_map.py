#!/usr/bin/env python3
"""Derive engram_token_map.npy (what export.py needs for Engram layers) from
a tokenizer.

DeepSeek-V4.1's Engram hashes n-grams of *compressed* token ids: every token
id is mapped onto a smaller id space in which tokens whose text normalises
alike share one id (" The", "the" and "THE" hash the same). The rule, as
transformers' deepseek_v41 builds it (build_compressed_token_map):
  - the key of token t is its text decoded alone (special tokens kept),
    normalised: NFKC, NFD, accents stripped, lower-cased, each run of
    spaces / tabs / CR / LF made one space, stripped, except that a token
    that is exactly one space stays one space; an empty result keys by the
    decoded text itself;
  - a token that decodes to a partial UTF-8 sequence (the text holds
    U+FFFD) keys by its raw vocabulary string instead;
  - compressed ids are given in order of first appearance over token ids
    0, 1, 2, ...
The number of distinct keys must equal the config's
`engram_compressed_vocab_size`: every hash multiplier derives from it, so a
different tokenizer silently rehashes the whole table (exit 2 here).

Usage: token_map.py TOKENIZER OUT.npy [--config CONFIG_JSON]
  TOKENIZER: a tokenizer.json, or a directory holding one (a model
  directory). Needs the `tokenizers` package (installed with transformers).
Writes int64 [vocab] atomically and prints the compressed vocabulary size.
"""
import argparse
import json
import os
import sys

import numpy as np


class TokenMapError(Exception):
    pass


def build_token_map(vocab_size, decode, raw_token, normalize):
    """(int64 [vocab_size] compressed ids, number of distinct keys) for a
    tokenizer given as functions: decode(id) -> text of the token alone,
    raw_token(id) -> its vocabulary string, normalize(text) -> key text."""
    ids = np.empty(vocab_size, dtype=np.int64)
    keys = {}
    for t in range(vocab_size):
        text = decode(t)
        if "\ufffd" in text:
            key = raw_token(t)
        else:
            key = normalize(text) or text
        ids[t] = keys.setdefault(key, len(keys))
    return ids, len(keys)


def tokenizers_normalizer():
    """The key normalisation as a `tokenizers` normalizer (the same Rust
    implementation transformers' tokenizers use, so keys match exactly)."""
    from tokenizers import Regex, normalizers  # noqa: PLC0415

    keep = "\ue000"  # private use: protects a lone space from Strip()
    return normalizers.Sequence([
        normalizers.NFKC(), normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase(),
        normalizers.Replace(Regex(r"[ \t\r\n]+"), " "), normalizers.Replace(Regex(r"^ $"), keep),
        normalizers.Strip(), normalizers.Replace(keep, " "),
    ])


def load_tokenizer(path):
    try:
        from tokenizers import Tokenizer  # noqa: PLC0415
    except ImportError:
        raise TokenMapError("needs the `tokenizers` package (pip install tokenizers, or transformers)")
    if os.path.isdir(path):
        path = os.path.join(path, "tokenizer.json")
    if not os.path.isfile(path):
        raise TokenMapError(f"{path}: no tokenizer.json")
    try:
        return Tokenizer.from_file(path)
    except Exception as e:  # tokenizers raises its own exception type
        raise TokenMapError(f"{path}: not a tokenizer: {e}")


def compressed_vocab_size(config_path):
    with open(config_path) as f:
        cfg = json.load(f)
    cfg = cfg.get("text_config", cfg)
    if "engram_compressed_vocab_size" not in cfg:
        raise TokenMapError(f"{config_path}: no engram_compressed_vocab_size")
    return int(cfg["engram_compressed_vocab_size"])


def write_npy_atomically(path, array):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        np.save(f, array)
    os.replace(tmp, path)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tokenizer")
    ap.add_argument("out")
    ap.add_argument("--config", help="config.json whose engram_compressed_vocab_size must match")
    args = ap.parse_args(argv)
    try:
        tok = load_tokenizer(args.tokenizer)
        norm = tokenizers_normalizer()
        vocab = tok.get_vocab_size(with_added_tokens=True)
        ids, n = build_token_map(vocab, lambda t: tok.decode([t], skip_special_tokens=False),
                                 lambda t: tok.id_to_token(t) or "", norm.normalize_str)
        if args.config:
            want = compressed_vocab_size(args.config)
            if want != n:
                raise TokenMapError(f"{args.tokenizer}: {n} compressed ids, but {args.config} has "
                                    f"engram_compressed_vocab_size {want}: this tokenizer is not the "
                                    "model's (the Engram hashes would not match its table)")
        write_npy_atomically(args.out, ids)
    except (TokenMapError, OSError, ValueError) as e:
        print(f"token_map.py: error: {e}", file=sys.stderr)
        return 2
    print(f"{args.out}: {vocab} token ids -> {n} compressed ids")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
