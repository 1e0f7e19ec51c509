#!/usr/bin/env python3
"""Checks of reference.topk_margin and Model.record_decisions (what
check_transformers.py uses to pick prompts whose top-k decisions are not
near a tie): margins of hand-made rows, exact ties only at a robust 0, and a
recording forward of the tiny config giving the same logits bit for bit;
and of quant_margin / Model.record_quant_margins (how close a fake FP8 / FP4
quantisation is to rounding the other way): hand-made rows, and tiny-wide's
known fragile element. Exit 1 on failure."""
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import reference  # noqa: E402

failures = []
inf = np.inf


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def margin(row, k, fragile=None, scale=None):
    scores = np.array([row], np.float32)
    frag = None if fragile is None else np.array([fragile], bool)
    return float(reference.topk_margin(scores, k, frag, None if scale is None else np.array([scale]))[0])


check(abs(margin([3, 2, 1, 0], 2) - 1 / 3) < 1e-12, "gap over the row's largest |score|")
check(abs(margin([3, 2, 1, 0], 2, scale=10) - 0.1) < 1e-12, "gap over a given scale")
check(margin([3, 2, 1], 3) == inf, "k = n decides nothing")
check(margin([1, -inf, -inf], 2) == inf, "fewer finite candidates than k + 1 decide nothing")
check(margin([-inf, 2, -inf], 1) == inf, "one finite candidate decides nothing")
check(margin([inf, 5, 4, 0], 2) == 0.2, "the pinned +inf block does not set the scale")
check(margin([1, 0, 0, -2], 2) == 0.5, "a tie at a robust 0: the smallest |nonzero|")
check(margin([1, 0, 0, -2], 2, fragile=[0, 0, 1, 0]) == 0, "a tie at a fragile 0")
check(margin([1, 0, 0, -2], 2, fragile=[0, 0, 0, 1]) == 0.5, "a fragile nonzero does not matter")
check(abs(margin([1, 0, -0.0, 1e-7], 3) - 1e-7) < 1e-12, "a tie at 0 next to a near-zero value")
check(margin([1, 0.5, 0.5, -2], 2) == 0, "a tie at a nonzero value")
check(margin([0, 0, 0], 1) == inf, "an all-zero row: no nonzero to move")

with tempfile.TemporaryDirectory() as d:
    subprocess.run([sys.executable, os.path.join(HERE, "generate.py"), "tiny", d], check=True)
    model = reference.load_model(d)
    ids = np.random.default_rng(1000003 * 129).integers(0, model.cfg["vocab_size"], 129)
    plain = model.forward(ids)
    model.record_decisions(1e-5)
    recorded = model.forward(ids)
    check(np.array_equal(plain, recorded), "recording changes the logits")
    sites = [site for site, _ in model.decisions]
    check(sites[:3] == ["moe.0", "indexer.1", "moe.1"], f"sites in order ({sites[:3]})")
    check({s.split(".")[0] for s in sites} == {"moe", "indexer", "candidates"}, "every kind of top-k recorded")
    check(all(m.shape == (129,) for _, m in model.decisions), "one margin per query row")
    n = sum(int(np.isfinite(m).sum()) for _, m in model.decisions)
    worst = min(float(m.min()) for _, m in model.decisions)
    # generate.py's weights are fixed by the config's seed: this prompt is the
    # one check_transformers.py --prompts 129 takes first on tiny.
    check(n == 1456 and worst >= 1e-5, f"tiny S=129 prompt 0: {n} decisions, min margin {worst:.2e}")

# quant_margin: the relative distance from a rounding boundary of the FP8
# (e4m3, power-of-two scale per block of 32) fake quantisation, per row.
# Distances are relative to the block's largest magnitude: another
# evaluation order moves every element by about an ulp of that.
row = np.zeros((2, 32), np.float32)
row[:, 0] = 300  # scale 1 (300 / 448 = 0.67: 0.34 from a power of two); 300 is 4 from a midpoint
row[0, 1], row[1, 1] = 1.0, 1.0625  # on the grid (1/16 off); exactly between 1 and 1.125
qm = reference.quant_margin(row, 32, "fp8")
check(abs(qm[0] - 0.0625 / 300) < 1e-12 and qm[1] == 0, f"fp8 margins of hand-made rows ({qm})")
small = np.zeros((1, 32), np.float32)
small[0, 0] = 2.25  # scale 2^-7: a small element's e4m3 subnormal midpoint is 2^-10 x 2^-7
small[0, 1] = np.float32(2.0 ** -17 + 3e-8)  # 3e-8 past it: 1.3e-8 of the block's maximum
qs = reference.quant_margin(small, 32, "fp8")[0]
check(1e-8 < qs < 2e-8, f"a small element near a midpoint counts against the block maximum ({qs:.2e})")
zero = np.zeros((2, 32), np.float32)
zero[1, :16] = 1  # scale 0.25: q = 4, 1 from the midpoint 5 of 4 and 6, a quarter of the maximum
check(reference.quant_margin(zero, 16, "fp4").tolist() == [1.0, 0.25],
      f"fp4: an all-zero block is its floor's width from moving the scale "
      f"({reference.quant_margin(zero, 16, 'fp4')})")
check(reference.quant_margin(np.ones((3, 40), np.float32), 32, "fp8").tolist() == [inf] * 3,
      "a row the block does not divide is not quantised")
# FP4 (e2m1, power-of-two scale per block): 0.7 / 6 = 0.1167 -> scale 0.125,
# 1 / 15 from the power of two; 0.7 / 0.125 = 5.6 is 0.6 / 5.6 from a midpoint.
fp4 = reference.quant_margin(np.full((1, 16), 0.7, np.float32), 16, "fp4")[0]
check(abs(fp4 - abs(0.7 / 6 / 0.125 - 1)) < 1e-6, f"fp4: the scale's margin ({fp4})")
check(reference.quant_margin(np.full((1, 16), 0.75, np.float32), 16, "fp4")[0] == 0,
      "fp4: a block maximum / 6 exactly a power of two is on pow2_ceil's boundary")

with tempfile.TemporaryDirectory() as d:
    # tiny-wide from a bf16 checkpoint and prompts as gpu-bundle.sh makes them
    # (--ids 8 129 1000): its 128-wide KV
    # rows are FP8 fake-quantised, and at this S = 129 prompt layer 4's row
    # 83 holds an element within 1e-7 (relative) of an e4m3 midpoint: the
    # element that made h20's float32 run drift by 2.0e-4 (BENCHMARKS.md).
    subprocess.run([sys.executable, os.path.join(HERE, "generate.py"), "tiny-wide", d, "--dtype", "bf16",
                    "--ids", "8", "129", "1000"], check=True, stdout=subprocess.DEVNULL)
    model = reference.load_model(d)
    ids = np.load(os.path.join(d, "ids-129.npy")).reshape(-1)
    plain = model.forward(ids)
    model.record_quant_margins()
    recorded = model.forward(ids)
    check(np.array_equal(plain, recorded), "recording quantisation margins changes the logits")
    sites = dict(model.quant_margins)
    check(sorted(sites) == sorted([f"fp8.kv.{i}" for i in range(7)] + ["fp4.compress_kv.1", "fp4.compress_kv.3",
                                                                    "fp4.compress_kv.4"]),
          f"tiny-wide's quantised sites ({sorted(sites)})")
    kv4 = sites.get("fp8.kv.4", np.array([inf]))
    check(kv4.shape == (129,) and int(kv4.argmin()) == 83 and kv4.min() < 1e-7,
          f"tiny-wide S=129: fp8.kv.4 row {int(kv4.argmin())} margin {kv4.min():.2e}")
    others = min(float(m.min()) for s, m in model.quant_margins if s != "fp8.kv.4")
    check(others > kv4.min(), f"the prompt's closest rounding ({others:.2e} elsewhere)")

print("test_margin:", "FAIL" if failures else "PASS", f"({len(failures)} failure(s))")
sys.exit(1 if failures else 0)
