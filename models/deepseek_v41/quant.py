"""Block-quantised checkpoint weights: decoding (what the exporter and
reference.py read) and encoding (generate.py --quantize, for tests).

Two formats, as DeepSeek ships its checkpoints (V3's FP8 release; V4's FP4
routed experts):
- FP8: `P.weight` float8 e4m3fn [out, in] plus one float32 scale per
  128 x 128 block, `P.scale` (DeepSeek's inference naming) or
  `P.weight_scale_inv` (transformers' naming) of shape
  [ceil(out / 128), ceil(in / 128)]: w[i, j] = q[i, j] * s[i // 128, j // 128]
  (DeepSeek-V3 inference/fp8_cast_bf16.py, weight_dequant).
- FP4: `P.weight` uint8/int8 [out, in / 2], two e2m1 values per byte (element
  2j in the low nibble, 2j + 1 in the high one, as torch.float4_e2m1fn_x2),
  plus one ue8m0 scale per 32 consecutive inputs, `P.scale` (F8_E8M0 or U8)
  of shape [out, in / 32]: w[i, j] = e2m1(q[i, j]) * 2^(s[i, j // 32] - 127)
  (OCP Microscaling Formats v1.0, MXFP4: e2m1 elements, E8M0 scale, block 32).
- Engram tables (the released V4.1 checkpoint's n-gram hash tables): `P.weight`
  float8 e4m3fn [rows, d] plus one scale per row and 32 consecutive channels,
  `P.scale` / `P.weight_scale_inv` [rows, d / 32], ue8m0 (F8_E8M0 or U8) or a
  float dtype: w[r, j] = q[r, j] * s[r, j // 32] (transformers'
  DeepseekV41EngramEmbedding, which dequantises on lookup). A table stored in
  a float dtype is used as it is: its scales, which transformers' save_pretrained
  writes beside it, are unused.
Decoding is exact in float32. Encoding rounds to nearest, ties to the even
code (FP8 scale: block amax / 448; FP4 scale: the power of two 2^ceil(log2
(amax / 6)), so no value saturates).
"""
import numpy as np

from safetensors_io import e4m3_to_f32

FP8_BLOCK = 128
FP4_BLOCK = 32
# e2m1 magnitudes by code 0..7 (sign in bit 3): OCP MX v1.0, table 5.
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float32)


class QuantError(ValueError):
    pass


def e8m0_to_f32(u8):
    """ue8m0 bytes -> float32 powers of two 2^(e - 127); 0xFF is NaN."""
    e = np.asarray(u8).astype(np.int32)
    with np.errstate(over="ignore"):  # 0xFF: replaced by NaN below
        out = np.ldexp(np.float32(1.0), e - 127).astype(np.float32)
    return np.where(e == 0xFF, np.float32(np.nan), out).astype(np.float32)


def fp8_scale_shape(shape):
    """[ceil(out / 128), ceil(in / 128)]: the block scales of an FP8 weight
    [out, in]."""
    return [-(-d // FP8_BLOCK) for d in shape]


def dequant_fp8(q_f32, scale, name="weight"):
    """float32 values of e4m3 codes [out, in] times their 128 x 128 block's
    float32 scale [ceil(out/128), ceil(in/128)] -> float32 [out, in]."""
    q = np.asarray(q_f32, dtype=np.float32)
    s = np.asarray(scale, dtype=np.float32)
    if q.ndim != 2:
        raise QuantError(f"{name}: FP8 block scales need a 2-D weight, got shape {list(q.shape)}")
    want = fp8_scale_shape(q.shape)
    if list(s.shape) != want:
        raise QuantError(f"{name}: FP8 weight {list(q.shape)} needs block scales {want}, got {list(s.shape)}")
    full = np.repeat(np.repeat(s, FP8_BLOCK, axis=0), FP8_BLOCK, axis=1)[: q.shape[0], : q.shape[1]]
    return (q * full).astype(np.float32)


def unpack_e2m1(packed):
    """uint8 [..., n/2] (low nibble first) -> float32 e2m1 values [..., n]."""
    p = np.asarray(packed).astype(np.uint8)
    codes = np.stack([p & 0xF, p >> 4], axis=-1).reshape(*p.shape[:-1], p.shape[-1] * 2)
    mag = E2M1[codes & 0x7]
    return np.where(codes & 0x8, -mag, mag).astype(np.float32)


def dequant_fp4(packed, scale_u8, name="weight"):
    """Packed e2m1 [out, in/2] with ue8m0 scales [out, in/32] -> float32 [out, in]."""
    p = np.asarray(packed)
    s = np.asarray(scale_u8)
    if p.ndim != 2:
        raise QuantError(f"{name}: FP4 weights are 2-D [out, in/2], got shape {list(p.shape)}")
    n = p.shape[1] * 2
    if n % FP4_BLOCK or list(s.shape) != [p.shape[0], n // FP4_BLOCK]:
        raise QuantError(f"{name}: FP4 weight of {n} inputs per row needs ue8m0 scales "
                         f"{[p.shape[0], n // FP4_BLOCK]} (inputs a multiple of {FP4_BLOCK}), "
                         f"got {list(s.shape)}")
    vals = unpack_e2m1(p).reshape(p.shape[0], n // FP4_BLOCK, FP4_BLOCK)
    return (vals * e8m0_to_f32(s)[:, :, None]).reshape(p.shape[0], n).astype(np.float32)


def dequant_fp8_rows(q_f32, scale, name="weight", block=FP4_BLOCK):
    """float32 values of e4m3 codes [rows, d] times their row's scale for each
    `block` channels [rows, d / block] (float32 values: decode ue8m0 bytes
    with e8m0_to_f32 first) -> float32 [rows, d]. d must be a multiple of
    `block`."""
    q = np.asarray(q_f32, dtype=np.float32)
    s = np.asarray(scale, dtype=np.float32)
    if q.ndim != 2 or q.shape[1] % block:
        raise QuantError(f"{name}: an FP8 table with a scale per {block} channels needs 2-D rows "
                         f"whose width is a multiple of {block}, got shape {list(q.shape)}")
    want = [q.shape[0], q.shape[1] // block]
    if list(s.shape) != want:
        raise QuantError(f"{name}: FP8 table {list(q.shape)} needs scales {want} (one per row and "
                         f"{block} channels), got {list(s.shape)}")
    return (q.reshape(want[0], want[1], block) * s[:, :, None]).reshape(q.shape).astype(np.float32)


# ---------------------------------------------------------------- encoding

def is_fp8_linear(name, ndim):
    """Whether DeepSeek's FP8 checkpoints store tensor `name` (of rank
    `ndim`) as an FP8 linear weight: every 2-D `.weight` but the
    embeddings (the Engram table too), the LM head, norms and the router
    gate (DeepSeek-V3 inference/convert.py keeps those in bf16)."""
    return (name.endswith(".weight") and ndim == 2 and "norm" not in name
            and not name.startswith(("model.embed", "lm_head"))
            and not name.endswith((".gate.weight", ".embed.weight")))


def _nearest_code(x, grid):
    """Index into ascending `grid` of the value nearest |x| (ties: even index)."""
    a = np.abs(x)
    hi = np.clip(np.searchsorted(grid, a), 1, len(grid) - 1)
    lo = hi - 1
    dlo, dhi = a - grid[lo], grid[hi] - a
    pick_hi = (dhi < dlo) | ((dhi == dlo) & (hi % 2 == 0))
    return np.where(pick_hi, hi, lo)


_E4M3_POS = e4m3_to_f32(np.arange(0x7F, dtype=np.uint8))  # codes 0..126: ascending, finite


def encode_e4m3(x):
    """float32 (|x| <= 448) -> e4m3fn bytes, nearest, ties to even."""
    x = np.asarray(x, dtype=np.float32)
    code = _nearest_code(x, _E4M3_POS).astype(np.uint8)
    return np.where(np.signbit(x) & (code != 0), code | 0x80, code).astype(np.uint8)


def quantize_fp8(w):
    """float32 [out, in] -> (e4m3 bytes [out, in], float32 scales per 128 x 128 block)."""
    w = np.asarray(w, dtype=np.float32)
    rb, cb = fp8_scale_shape(w.shape)
    pad = np.zeros((rb * FP8_BLOCK, cb * FP8_BLOCK), np.float32)
    pad[: w.shape[0], : w.shape[1]] = w
    amax = np.abs(pad.reshape(rb, FP8_BLOCK, cb, FP8_BLOCK)).max(axis=(1, 3))
    scale = np.where(amax > 0, amax / np.float32(448.0), np.float32(1.0)).astype(np.float32)
    full = np.repeat(np.repeat(scale, FP8_BLOCK, axis=0), FP8_BLOCK, axis=1)[: w.shape[0], : w.shape[1]]
    return encode_e4m3(w / full), scale


def _pow2_exponents(blocks, largest):
    """ue8m0 exponents (int32, in [-127, 127]) of the last axis' blocks: the
    power of two 2^ceil(log2(amax / largest)), so no value exceeds the
    format's `largest` magnitude; 0 for an all-zero block."""
    amax = np.abs(blocks).max(axis=-1)
    e = np.where(amax > 0, np.ceil(np.log2(np.maximum(amax, 1e-30) / largest)), 0).astype(np.int32)
    return np.clip(e, -127, 127)


def quantize_fp8_rows(w, block=FP4_BLOCK):
    """float32 [rows, d] (d a multiple of `block`) -> (e4m3 bytes [rows, d],
    ue8m0 scale bytes [rows, d / block]): the power of two 2^ceil(log2(amax /
    448)) per row and block, so no value saturates (the Engram table format)."""
    w = np.asarray(w, dtype=np.float32)
    if w.ndim != 2 or w.shape[1] % block:
        raise QuantError(f"FP8 rows need 2-D [rows, d] with d a multiple of {block}, got {list(w.shape)}")
    blocks = w.reshape(w.shape[0], -1, block)
    e = _pow2_exponents(blocks, 448.0)
    q = blocks / np.ldexp(np.float32(1.0), e)[:, :, None]
    return encode_e4m3(q.reshape(w.shape)), (e + 127).astype(np.uint8)


def quantize_fp4(w):
    """float32 [out, in] (in a multiple of 32) -> (packed e2m1 uint8 [out, in/2],
    ue8m0 scale bytes [out, in/32])."""
    w = np.asarray(w, dtype=np.float32)
    if w.shape[1] % FP4_BLOCK:
        raise QuantError(f"FP4 needs inputs a multiple of {FP4_BLOCK}, got {w.shape[1]}")
    blocks = w.reshape(w.shape[0], -1, FP4_BLOCK)
    e = _pow2_exponents(blocks, 6.0)
    q = blocks / np.ldexp(np.float32(1.0), e)[:, :, None]
    code = _nearest_code(q, E2M1).astype(np.uint8)
    code = np.where(np.signbit(q) & (code != 0), code | 0x8, code).reshape(w.shape)
    packed = (code[:, 0::2] | (code[:, 1::2] << 4)).astype(np.uint8)
    return packed, (e + 127).astype(np.uint8)
