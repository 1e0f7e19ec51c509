"""Minimal safetensors reader/writer in numpy (no `safetensors` package on the
CPU machine), streaming: tensors are memory-mapped one at a time, never the
whole checkpoint.

Format (huggingface/safetensors README, "Format"): 8-byte little-endian u64 N,
N bytes of JSON header {name: {"dtype", "shape", "data_offsets": [begin, end]},
optional "__metadata__"}, then the byte buffer; offsets are relative to the
buffer start. Dtypes read: F32, F16, BF16 (-> float32), F8_E4M3 (-> float32,
exact), F8_E8M0 / U8 / I64 / I32 as stored. A checkpoint may be one file or an
index (`model.safetensors.index.json` with a "weight_map").
"""
import json
import os
import struct

import numpy as np

_NP = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
       "U8": np.uint8, "I8": np.int8, "BF16": np.uint16, "F8_E4M3": np.uint8, "F8_E8M0": np.uint8}


class CheckpointError(ValueError):
    pass


def bf16_to_f32(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    """Round-to-nearest-even float32 -> bf16 bits (uint16); NaN stays NaN."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = bits + 0x7FFF + ((bits >> 16) & 1)
    out = (rounded >> 16).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        out[nan] = 0x7FC0
    return out


def e4m3_to_f32(u8):
    """OCP float8 e4m3fn bytes -> float32 (exact): bias 7, no infinities,
    0x7F/0xFF are NaN."""
    u = u8.astype(np.int32)
    sign = np.where(u & 0x80, -1.0, 1.0).astype(np.float32)
    exp = (u >> 3) & 0xF
    man = (u & 0x7).astype(np.float32)
    val = np.where(exp == 0, man / 8.0 * 2.0 ** -6, (1.0 + man / 8.0) * np.exp2(exp.astype(np.float32) - 7))
    val = np.where((u & 0x7F) == 0x7F, np.nan, val)
    return (sign * val).astype(np.float32)


class SafetensorsFile:
    """One .safetensors file: `names()`, `info(name)`, `read(name)`."""

    def __init__(self, path):
        self.path = path
        try:
            with open(path, "rb") as f:
                head = f.read(8)
                if len(head) != 8:
                    raise CheckpointError(f"{path}: too short for a safetensors header")
                (n,) = struct.unpack("<Q", head)
                size = os.fstat(f.fileno()).st_size
                if n > size - 8:
                    raise CheckpointError(f"{path}: header length {n} exceeds the file size {size}")
                self.header = json.loads(f.read(n))
        except OSError as e:
            raise CheckpointError(f"{path}: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise CheckpointError(f"{path}: header is not JSON ({e})") from None
        self.header.pop("__metadata__", None)
        self.base = 8 + n
        self.size = size
        for name, meta in self.header.items():
            b, e = meta["data_offsets"]
            if meta["dtype"] not in _NP:
                raise CheckpointError(f"{path}: tensor {name}: dtype {meta['dtype']} is not supported")
            want = int(np.prod(meta["shape"], dtype=np.int64)) * np.dtype(_NP[meta["dtype"]]).itemsize
            if e - b != want or self.base + e > size:
                raise CheckpointError(f"{path}: tensor {name}: byte range [{b}, {e}) does not hold "
                                      f"{meta['dtype']}{meta['shape']} inside the file")

    def names(self):
        return list(self.header)

    def info(self, name):
        meta = self.header[name]
        return meta["dtype"], list(meta["shape"])

    def raw(self, name):
        meta = self.header[name]
        b, _ = meta["data_offsets"]
        return np.memmap(self.path, dtype=_NP[meta["dtype"]], mode="r", offset=self.base + b,
                         shape=tuple(meta["shape"]))

    def read(self, name):
        """The tensor as float32 for float dtypes (exact widening), else as stored."""
        dtype, _ = self.info(name)
        raw = self.raw(name)
        if dtype == "BF16":
            return bf16_to_f32(np.asarray(raw))
        if dtype == "F8_E4M3":
            return e4m3_to_f32(np.asarray(raw))
        if dtype in ("F16", "F32"):
            return np.asarray(raw, dtype=np.float32)
        return np.asarray(raw)


class Checkpoint:
    """A directory with model.safetensors or an index of shards."""

    def __init__(self, dirname):
        index = os.path.join(dirname, "model.safetensors.index.json")
        self.files, self.where = {}, {}
        if os.path.exists(index):
            with open(index) as f:
                weight_map = json.load(f)["weight_map"]
            for name, shard in weight_map.items():
                if shard not in self.files:
                    self.files[shard] = SafetensorsFile(os.path.join(dirname, shard))
                self.where[name] = self.files[shard]
        else:
            single = os.path.join(dirname, "model.safetensors")
            if not os.path.exists(single):
                raise CheckpointError(f"{dirname}: no model.safetensors or model.safetensors.index.json")
            f = SafetensorsFile(single)
            self.files["model.safetensors"] = f
            for name in f.names():
                self.where[name] = f

    def __contains__(self, name):
        return name in self.where

    def info(self, name):
        return self._file(name).info(name)

    def raw(self, name):
        """The tensor's stored elements as they are (SafetensorsFile.raw)."""
        return self._file(name).raw(name)

    def read(self, name):
        """The tensor as float32 (SafetensorsFile.read); a block-quantised
        `P.weight` with its scales `P.scale` / `P.weight_scale_inv` (FP8 e4m3
        with float32 128 x 128 block scales, or packed FP4 e2m1 with ue8m0
        scales per 32 inputs: quant.py) comes back dequantised, [out, in]."""
        dtype, _ = self.info(name)
        if name.endswith("engram.embed.weight"):
            return self._read_engram_table(name, dtype)
        if name.endswith(".weight"):
            scale = self.scale_of(name)
            if scale is not None:
                import quant  # noqa: PLC0415 (quant imports this module)
                sdtype, _ = self.info(scale)
                try:
                    if dtype == "F8_E4M3" and sdtype in ("F32", "BF16", "F16"):
                        return quant.dequant_fp8(self._file(name).read(name), self.read(scale), name)
                    if dtype in ("U8", "I8") and sdtype in ("F8_E8M0", "U8"):
                        return quant.dequant_fp4(self._file(name).raw(name), self._file(scale).raw(scale), name)
                except quant.QuantError as e:
                    raise CheckpointError(str(e)) from None
                raise CheckpointError(
                    f"{name}: a {dtype} weight with scales {scale!r} ({sdtype}) is neither FP8 e4m3 "
                    f"with float32 128 x 128 block scales nor packed FP4 e2m1 with ue8m0 scales per 32")
        return self._file(name).read(name)

    def scale_of(self, name):
        """The scales stored beside weight `P.weight`: `P.scale` (DeepSeek's
        naming) or `P.weight_scale_inv` (transformers'), or None."""
        prefix = name[: -len(".weight")]
        return next((s for s in (prefix + ".scale", prefix + ".weight_scale_inv") if s in self.where), None)

    def _read_engram_table(self, name, dtype):
        """An Engram n-gram table (quant.py): float rows as they are (the F32
        `engram.embed.scale` transformers saves beside them is unused), or
        FP8 e4m3 rows with a scale per row and 32 channels, dequantised."""
        if dtype in ("F32", "BF16", "F16"):
            return self._file(name).read(name)
        prefix = name[: -len(".weight")]
        scale = self.scale_of(name)
        if dtype != "F8_E4M3" or scale is None:
            raise CheckpointError(
                f"{name}: an Engram table is float rows, or FP8 e4m3 rows with scales "
                f"{prefix}.scale per 32 channels; got {dtype}" + ("" if scale else " without scales"))
        import quant  # noqa: PLC0415 (quant imports this module)
        try:
            return quant.dequant_fp8_rows(self._file(name).read(name), self.engram_scales(scale), name)
        except quant.QuantError as e:
            raise CheckpointError(str(e)) from None

    def engram_scales(self, scale):
        """An FP8 Engram table's scales `scale` as float32 (ue8m0 bytes
        decoded exactly, or float values as stored)."""
        import quant  # noqa: PLC0415 (quant imports this module)
        sdtype, _ = self.info(scale)
        if sdtype in ("F8_E8M0", "U8"):
            return quant.e8m0_to_f32(self._file(scale).raw(scale))
        if sdtype in ("F32", "BF16", "F16"):
            return self._file(scale).read(scale)
        raise CheckpointError(f"{scale}: Engram table scales are ue8m0 or float, got {sdtype}")

    def _file(self, name):
        if name not in self.where:
            raise CheckpointError(f"checkpoint has no tensor {name!r}")
        return self.where[name]


def write(path, tensors, dtype="F32"):
    """Write {name: ndarray} (float arrays stored as `dtype`, F32 or BF16; integer
    arrays as stored; a (uint8 ndarray, "F8_E4M3" | "F8_E8M0") pair as those
    bytes under that dtype) to `path` atomically (temp file + rename), tensor
    by tensor."""
    header, offset, items = {}, 0, []
    for name, arr in tensors.items():
        if isinstance(arr, tuple):  # (uint8 codes, "F8_E4M3" | "F8_E8M0"): stored as is
            arr, st = arr
            header[name] = {"dtype": st, "shape": list(arr.shape),
                            "data_offsets": [offset, offset + arr.nbytes]}
            items.append((np.ascontiguousarray(arr, dtype=np.uint8), st))
            offset += arr.nbytes
            continue
        if arr.dtype.kind == "f":
            st = dtype
            nbytes = arr.size * (4 if dtype == "F32" else 2)
        else:
            st = {np.dtype(np.int64): "I64", np.dtype(np.int32): "I32", np.dtype(np.uint8): "U8"}[arr.dtype]
            nbytes = arr.nbytes
        header[name] = {"dtype": st, "shape": list(arr.shape), "data_offsets": [offset, offset + nbytes]}
        items.append((arr, st))
        offset += nbytes
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for arr, st in items:
            if st == "F32":
                f.write(np.ascontiguousarray(arr, dtype=np.float32).tobytes())
            elif st == "BF16":
                f.write(f32_to_bf16(arr).tobytes())
            else:
                f.write(np.ascontiguousarray(arr).tobytes())
    os.replace(tmp, path)
