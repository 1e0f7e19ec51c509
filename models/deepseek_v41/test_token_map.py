#!/usr/bin/env python3
"""Checks of token_map.py's grouping rule without a tokenizer library (run
by test/Models/deepseek-v41-token-map.test): first-appearance numbering,
normalised keys, the raw-string key of partial UTF-8 tokens, the empty-key
fallback, the config check and atomic output. With the `tokenizers` package
present, also the real normaliser on a few texts. Exit 1 on failure."""
import json
import os
import sys
import tempfile
import re
import unicodedata

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import token_map  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def simple_normalize(text):
    """NFKC/NFD/strip accents/lower/collapse whitespace/strip, in Python."""
    t = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", text))
    t = "".join(c for c in t if unicodedata.category(c) != "Mn").lower()
    t = re.sub(r"[ \t\r\n]+", " ", t)
    return t if t == " " else t.strip()


texts = [" The", "the", "THE", "\xe9t\xe9", "ete", "\ufffd", "\ufffd", "  ", "\t", "", "x"]
raw = ["\u0120The", "the", "THE", "\xe9t\xe9", "ete", "<0xE2>", "<0x80>", "\u0120\u0120", "\t", "<s>", "x"]
ids, n = token_map.build_token_map(len(texts), lambda t: texts[t], lambda t: raw[t], simple_normalize)
check(list(ids[:3]) == [0, 0, 0], f"' The', 'the', 'THE' share id 0 ({list(ids[:3])})")
check(ids[3] == ids[4] == 1, f"accents stripped: 'été' == 'ete' ({ids[3]}, {ids[4]})")
check(ids[5] != ids[6] and ids[5] == 2 and ids[6] == 3, "partial UTF-8 tokens key by their raw string")
check(ids[7] == ids[8] == 4, "whitespace runs collapse to one space")
check(ids[9] == 5, "an empty token keys by its own text (first appearance numbering)")
check(ids[10] == 6 and n == 7, f"7 distinct keys ({n})")
check(ids.dtype == np.int64, "int64 ids")

with tempfile.TemporaryDirectory() as d:
    cfg = os.path.join(d, "config.json")
    with open(cfg, "w") as f:
        json.dump({"text_config": {"engram_compressed_vocab_size": 7}}, f)
    check(token_map.compressed_vocab_size(cfg) == 7, "config: text_config section read")
    out = os.path.join(d, "m.npy")
    token_map.write_npy_atomically(out, ids)
    check(np.array_equal(np.load(out), ids) and not os.path.exists(out + ".tmp"), "atomic write")
    rc = token_map.main([os.path.join(d, "missing"), out])
    check(rc == 2, "a missing tokenizer (or library) exits 2")

try:
    import tokenizers  # noqa: F401
    norm = token_map.tokenizers_normalizer()
    for text, want in ((" The", "the"), (" ", " "), ("A\t\tB", "a b"), ("\xc9T\xc9", "ete"), ("\uff21", "a")):
        got = norm.normalize_str(text)
        check(got == want, f"tokenizers normaliser: {text!r} -> {got!r}, want {want!r}")
    print("test_token_map: tokenizers normaliser checked")
except ImportError:
    print("test_token_map: no tokenizers package; the normaliser itself not checked")

print("test_token_map:", "FAIL" if failures else "PASS", f"({len(failures)} failure(s))")
sys.exit(1 if failures else 0)
