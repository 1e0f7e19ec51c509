#!/usr/bin/env python3
"""Checks of quant.py and the checkpoint reader's dequantisation (run by
test/Models/deepseek-v41-quantized.test): known codes, round trips within
half a step, dequantisation against an element-by-element loop written from
the format definitions, and errors that name the tensor. Exit 1 on failure."""
import math
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quant  # noqa: E402
import safetensors_io  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def e2m1_loop(code):
    """e2m1 from its definition: sign, 2 exponent bits (bias 1), 1 mantissa bit."""
    s, e, m = (code >> 3) & 1, (code >> 1) & 3, code & 1
    v = m * 0.5 if e == 0 else (1 + m / 2) * 2.0 ** (e - 1)
    return -v if s else v


# Known codes.
check(list(quant.e8m0_to_f32(np.array([127, 128, 126, 0], np.uint8))) == [1.0, 2.0, 0.5, 2.0 ** -127],
      "ue8m0 127/128/126/0")
check(math.isnan(quant.e8m0_to_f32(np.array([255], np.uint8))[0]), "ue8m0 0xFF is NaN")
check(list(quant.unpack_e2m1(np.array([[0x7F, 0x21]], np.uint8))[0]) == [-6.0, 6.0, 0.5, 1.0],
      "e2m1 nibbles: low first")
check(all(quant.unpack_e2m1(np.array([[c | (c << 4)]], np.uint8))[0, 0] == e2m1_loop(c) for c in range(16)),
      "e2m1 table = definition")
check(list(quant.encode_e4m3(np.array([1.0, 1.0625, 1.1875, -448.0, 0.0], np.float32))) ==
      [0x38, 0x38, 0x3A, 0xFE, 0x00], "e4m3 encode: exact, ties to even, max, zero")

rng = np.random.default_rng(1)
# FP8 128 x 128 blocks, ragged edges.
w = (rng.standard_normal((200, 300)) * np.exp(rng.standard_normal((200, 1)))).astype(np.float32)
codes, scale = quant.quantize_fp8(w)
check(scale.shape == (2, 3), "FP8 scale grid [ceil(200/128), ceil(300/128)]")
dq = quant.dequant_fp8(safetensors_io.e4m3_to_f32(codes), scale)
loop = np.empty_like(w)
vals = safetensors_io.e4m3_to_f32(codes)
for i in range(w.shape[0]):
    for j in range(w.shape[1]):
        loop[i, j] = vals[i, j] * scale[i // 128, j // 128]
check(np.array_equal(dq, loop), "FP8 dequant = element loop")
blk = np.repeat(np.repeat(scale, 128, 0), 128, 1)[:200, :300]
normal = np.abs(w) >= blk * 2.0 ** -6
check(np.all(np.abs(dq - w)[normal] <= np.abs(w)[normal] * 2.0 ** -4 * (1 + 1e-6)),
      "FP8 round trip within half an e4m3 step")
# FP4 ue8m0 blocks of 32.
w4 = (rng.standard_normal((16, 96)) * 0.05).astype(np.float32)
packed, s8 = quant.quantize_fp4(w4)
check(packed.shape == (16, 48) and s8.shape == (16, 3), "FP4 packed [16, 48], scales [16, 3]")
dq4 = quant.dequant_fp4(packed, s8)
loop4 = np.empty_like(w4)
for i in range(16):
    for j in range(96):
        byte = packed[i, j // 2]
        code = (byte & 0xF) if j % 2 == 0 else (byte >> 4)
        loop4[i, j] = e2m1_loop(int(code)) * 2.0 ** (int(s8[i, j // 32]) - 127)
check(np.array_equal(dq4, loop4), "FP4 dequant = element loop")
step = np.repeat(2.0 ** (s8.astype(np.float64) - 127), 32, axis=1)  # largest e2m1 gap is 2 units
check(np.all(np.abs(dq4 - w4) <= step * 1.0 + 1e-12), "FP4 round trip within half the widest step")
check(np.all(np.abs(w4).reshape(16, 3, 32).max(2) <= 6 * 2.0 ** (s8.astype(np.float64) - 127)),
      "FP4 scale: no block saturates")

# The checkpoint reader: scales found by name, dequantised on read; errors name the tensor.
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "model.safetensors")
    safetensors_io.write(path, {
        "a.weight": (codes, "F8_E4M3"), "a.scale": scale,
        "b.weight": packed, "b.scale": (s8, "F8_E8M0"),
        "c.weight": (codes, "F8_E4M3"), "c.weight_scale_inv": scale,
        "bad.weight": (codes, "F8_E4M3"), "bad.scale": scale[:1],
        "plain.weight": w})
    ck = safetensors_io.Checkpoint(d)
    check(np.array_equal(ck.read("a.weight"), dq), "reader: FP8 + .scale")
    check(np.array_equal(ck.read("c.weight"), dq), "reader: FP8 + .weight_scale_inv")
    check(np.array_equal(ck.read("b.weight"), dq4), "reader: FP4 + ue8m0 .scale")
    check(np.array_equal(ck.read("plain.weight"), w), "reader: float32 unchanged")
    try:
        ck.read("bad.weight")
        check(False, "reader: wrong scale grid is an error")
    except safetensors_io.CheckpointError as e:
        check("bad.weight" in str(e) and "[2, 3]" in str(e), f"reader: error names the tensor ({e})")

# Engram tables: FP8 rows with a ue8m0 scale per row and 32 channels (the
# released format), against an element loop; a float table with the F32
# `engram.embed.scale` transformers' save_pretrained writes beside it is read
# as it is (the scales are unused there).
we = (rng.standard_normal((10, 64)) * 3.0).astype(np.float32)
eq, es = quant.quantize_fp8_rows(we)
check(eq.shape == (10, 64) and es.shape == (10, 2), "FP8 rows: codes [10, 64], scales [10, 2]")
dqe = quant.dequant_fp8_rows(safetensors_io.e4m3_to_f32(eq), quant.e8m0_to_f32(es))
loope = np.empty_like(we)
for i in range(10):
    for j in range(64):
        loope[i, j] = safetensors_io.e4m3_to_f32(eq[i:i + 1, j])[0] * 2.0 ** (int(es[i, j // 32]) - 127)
check(np.array_equal(dqe, loope), "FP8 rows dequant = element loop")
check(np.all(np.abs(we).reshape(10, 2, 32).max(2) <= 448 * 2.0 ** (es.astype(np.float64) - 127)),
      "FP8 rows scale: no block saturates")
check(np.all(np.abs(dqe - we) <= np.abs(we) * 2.0 ** -4 + 2.0 ** -9 * np.repeat(
    2.0 ** (es.astype(np.float64) - 127), 32, axis=1)), "FP8 rows round trip within half a step")
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "model.safetensors")
    p = "model.layers.1.engram.embed"
    safetensors_io.write(path, {
        p + ".weight": we, p + ".scale": np.ones((10, 2), np.float32),  # save_pretrained
        "l2.engram.embed.weight": (eq, "F8_E4M3"), "l2.engram.embed.scale": (es, "F8_E8M0"),
        "l3.engram.embed.weight": (eq, "F8_E4M3"),
        "l3.engram.embed.weight_scale_inv": quant.e8m0_to_f32(es),
        "l4.engram.embed.weight": (eq, "F8_E4M3"), "l4.engram.embed.scale": (es[:, :1], "F8_E8M0"),
        "l5.engram.embed.weight": (eq, "F8_E4M3")})
    ck = safetensors_io.Checkpoint(d)
    check(np.array_equal(ck.read(p + ".weight"), we), "reader: float Engram table, its scale unused")
    check(np.array_equal(ck.read("l2.engram.embed.weight"), dqe), "reader: FP8 Engram rows + ue8m0")
    check(np.array_equal(ck.read("l3.engram.embed.weight"), dqe), "reader: FP8 Engram rows + float scales")
    for bad, want in (("l4", "[10, 2]"), ("l5", "without scales")):
        try:
            ck.read(bad + ".engram.embed.weight")
            check(False, f"reader: {bad} is an error")
        except safetensors_io.CheckpointError as e:
            check(bad + ".engram.embed.weight" in str(e) and want in str(e),
                  f"reader: {bad} error names the tensor and the cause ({e})")

print("test_quant:", "FAIL" if failures else "PASS", f"({len(failures)} failure(s))")
sys.exit(1 if failures else 0)
