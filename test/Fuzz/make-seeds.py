#!/usr/bin/env python3
"""Regenerates the fuzz seeds in test/Fuzz/corpus/ (small and few: the corpus
a run grows lives in the fuzz build directory, not in the repository).

Usage: make-seeds.py BUILD_BIN_DIR   (needs h20-opt there, protoc on PATH and
the fixtures in ../shared/fixtures/onnx)

onnx-import: the demo and fixture models with metadata dropped and every
  initializer over 64 elements moved to external data "data.bin" (the fuzz
  target provides a 16 MiB sparse data.bin), plus the importer's test models.
artifact: the demo model's CPU artifact (payload = an ABI table that matches),
  its GPU artifact's header and manifest (payload declared, not included) and
  a small hand-written GPU program with one step of each op.
tensor-io: token ids (.npy v1/v2, int64/int32, text) and TensorProtos.
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import zlib

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
fixtures = os.path.join(root, "..", "shared", "fixtures", "onnx")
demo = os.path.join(root, "models", "demo", "llama_gqa_op23.onnx")
corpus = os.path.join(here, "corpus")
bindir = sys.argv[1]
proto = ["-I/usr/include", "onnx/onnx.proto"]


def write(target, name, data):
    with open(os.path.join(corpus, target, name), "wb") as f:
        f.write(data)


def decode(path):
    return subprocess.run(["protoc", "--decode=onnx.ModelProto"] + proto, stdin=open(path, "rb"),
                          capture_output=True, check=True).stdout.decode("latin-1")


def encode(text, message="onnx.ModelProto"):
    return subprocess.run(["protoc", "--encode=" + message] + proto, input=text.encode("latin-1"),
                          capture_output=True, check=True).stdout


def slim(text):
    """Drops fields this onnx.proto does not know (metadata) and moves big
    initializers' raw_data to external data."""
    out, skip, depth = [], 0, 0
    block = None
    for line in text.splitlines():
        stripped = line.strip()
        if skip:
            skip += stripped.endswith("{") - (stripped == "}")
            continue
        if re.match(r"^\d+ \{$", stripped):
            skip = 1
            continue
        if re.match(r"^\d+: ", stripped):
            continue
        if line == "  initializer {":
            block = {"dims": [], "type": 1}
        elif block is not None and line.startswith("    dims: "):
            block["dims"].append(int(line.split(": ")[1]))
        elif block is not None and line.startswith("    data_type: "):
            block["type"] = int(line.split(": ")[1])
        elif block is not None and line.startswith("    raw_data: "):
            n = 1
            for d in block["dims"]:
                n *= d
            if n > 64:
                width = {1: 4, 7: 8, 6: 4, 10: 2, 16: 2, 11: 8, 9: 1}.get(block["type"], 4)
                out += ['    data_location: EXTERNAL',
                        '    external_data { key: "location" value: "data.bin" }',
                        '    external_data { key: "offset" value: "0" }',
                        '    external_data { key: "length" value: "%d" }' % (n * width)]
                continue
        elif line == "  }":
            block = None
        out.append(line)
    return "\n".join(out) + "\n"


def header(manifest, payload_size, payload=b""):
    crc = zlib.crc32(payload, zlib.crc32(manifest))
    return (b"H20-ART\n" + struct.pack("<II", 1, 0) +
            struct.pack("<QQ", len(manifest), payload_size) + struct.pack("<II", crc, 0))


def artifact_parts(path):
    data = open(path, "rb").read()
    m, p = struct.unpack_from("<QQ", data, 16)
    return json.loads(data[40:40 + m]), p


# --- onnx-import -------------------------------------------------------------
for name, path in [("demo-op23", demo),
                   ("fixture-op18", os.path.join(fixtures, "llama_gqa_op18.onnx")),
                   ("fixture-mha-op23", os.path.join(fixtures, "llama_mha_op23.onnx"))]:
    write("onnx-import", name, encode(slim(decode(path))))
inputs = os.path.join(root, "test", "Import", "Onnx", "Inputs")
for name in ["inline_weights", "external", "unknown_ops", "cycle"]:
    text = open(os.path.join(inputs, name + ".textproto")).read()
    write("onnx-import", "test-" + name.replace("_", "-"), encode(text))

# --- artifact ------------------------------------------------------------------
with tempfile.TemporaryDirectory() as tmp:
    cpu, gpu = os.path.join(tmp, "cpu.h20"), os.path.join(tmp, "gpu.h20")
    subprocess.run([os.path.join(bindir, "h20-opt"), demo, "--target=cpu", "-o", cpu], check=True)
    subprocess.run([os.path.join(bindir, "h20-opt"), demo, "--target=h200",
                    "--compute-type=f32", "-o", gpu], check=True)
    man, _ = artifact_parts(cpu)
    man["model_dir"] = "."
    shapes = [t["shape"] for t in man["inputs"]] + [w["shape"] for w in man["weights"]] + \
             [t["shape"] for t in man["outputs"]]
    abi = [len(shapes)]
    for s in shapes:
        abi += [len(s)] + s
    payload = b"".join(struct.pack("<q", x) for x in abi)
    man["blobs"][0]["size"] = len(payload)
    text = json.dumps(man).encode()
    write("artifact", "cpu-demo", header(text, len(payload), payload) + text + payload)
    man, p = artifact_parts(gpu)
    man["model_dir"] = "."
    text = json.dumps(man, separators=(",", ":")).encode()
    write("artifact", "gpu-demo-manifest-only", header(text, p) + text)

mat = lambda b, rs: {"buffer": b, "offset": 0, "batch_stride": 0, "row_stride": rs, "col_stride": 1}
# The attention's H20AttnParams (AttentionParams.h) as struct fields: Q and
# O [1, 2, n, 2] in buffer 6, K and V [1, 1, p0 + n, 2] in the state buffer
# 5, their strides and sizes, scale, causal, and a tensor map of Q.
def view(b, off, strides, heads, seq):
    return {"buffer": b, "offset": off, "sizes": [1, heads, seq, 2], "strides": strides,
            "dtype": "bfloat16"}
n, skv = {"n": 1}, {"p0": 1, "n": 1}
qv, kv = [0, 2, 4, 1], [0, 0, 4, 1]
attention_fields = [
    {"at": 0, "pointer": view(6, 0, qv, 2, n), "written": False},
    {"at": 8, "pointer": view(5, 0, kv, 1, skv), "written": False, "kv": True},
    {"at": 16, "pointer": view(5, 2, kv, 1, skv), "written": False, "kv": True},
    {"at": 24, "pointer": view(6, 0, qv, 2, n)}]
for i, st in enumerate([qv, kv, kv, qv]):
    attention_fields += [{"at": 32 + 32 * i + 8 * d, "i64": st[d]} for d in range(4)]
attention_fields += [{"at": 160, "i64": 1}, {"at": 168, "i64": 2}, {"at": 176, "i64": 1},
                     {"at": 184, "i64": n}, {"at": 192, "i64": skv}, {"at": 200, "i64": -1},
                     {"at": 208, "f32": 0.7}, {"at": 216, "i32": 1},
                     {"at": 220, "tensor_maps_valid": True},
                     {"at": 256, "tensor_map": dict(view(6, 0, qv, 2, n), box=[1, 1, 64, 64],
                                                    swizzle=128), "written": False}]
small = {
    "format": "h20-artifact", "target": "h200", "max_positions": 64,
    "inputs": [{"name": "ids", "dtype": "int64", "shape": [1, -1]}],
    "outputs": [{"name": "logits", "dtype": "float32", "shape": [1, 1, 8]},
                {"name": "hidden", "dtype": "float32", "shape": [1, -1, 4],
                 "dims_from": [None, {"input": 0, "dim": 1}, None]}],
    "weights": [{"name": "w0", "file": "m.bin", "dtype": "float32", "shape": [4, 8], "offset": 0, "length": 128},
                {"name": "w1", "file": "m.bin", "dtype": "float16", "shape": [8], "offset": 128, "length": 16}],
    "blobs": [{"name": "kernels.ptx", "kind": "ptx", "offset": 0, "size": 100},
              {"name": "consts.bin", "kind": "data", "offset": 128, "size": 64}],
    "gpu": {
        "arch": "sm_90", "symbols": ["p0", "n"],
        "chunking": {"chunk": 16, "input": 0, "dim": 1, "pad_value": 0},
        "outputs": [{"mode": "last"}, {"mode": "rows", "dim": 1}],
        "modules": [{"name": "kernels", "ptx_blob": "kernels.ptx", "cubin_blob": None}],
        "arena_bytes": 4096,
        "buffers": [{"kind": "input", "index": 0, "bytes": 128},
                    {"kind": "output", "index": 0, "bytes": 32},
                    {"kind": "output", "index": 1, "bytes": 256},
                    {"kind": "weight", "index": 0, "bytes": 64, "dtype": "bfloat16"},
                    {"kind": "weight", "index": 1, "bytes": 32, "dtype": "float32"},
                    {"kind": "state", "bytes": 512, "dtype": "bfloat16"},
                    {"kind": "temp", "bytes": 1024, "offset": 0, "dtype": "bfloat16"},
                    {"kind": "temp", "bytes": 1024, "offset": 512},
                    {"kind": "const", "blob": "consts.bin", "blob_offset": 0, "bytes": 64}],
        "steps": [
            {"op": "launch", "module": 0, "kernel": "embed", "grid": [{"n": 1}, 1, 1],
             "block": [128, 1, 1], "smem": 0,
             "args": [{"memref": {"buffer": 0, "offset": 0, "sizes": [1, {"n": 1}], "strides": [16, 1]}},
                      {"i64": {"p0": 1}}, {"i32": 7}, {"f32": 0.5}, {"bf16": 1.5},
                      {"memref": {"buffer": 5, "offset": {"p0": 4}, "sizes": [{"n": 1}, 4],
                                  "strides": [4, 1], "dtype": "bfloat16"}}]},
            {"op": "gemm", "dtype_a": "bfloat16", "dtype_b": "bfloat16", "dtype_c": "float32",
             "batch": 1, "m": {"n": 1}, "n": 8, "k": 4, "alpha": 1.0, "beta": 0.0,
             "a": mat(6, 4), "b": mat(3, 8), "c": mat(7, 8)},
            {"op": "launch", "module": 0, "kernel": "attn", "grid": [{"n": 1}, 2, 1],
             "grid_div": [64, 1, 1], "block": [128, 1, 1], "smem": 100000, "role": "attention",
             "args": [{"struct": {"bytes": 640, "align": 64, "fields": attention_fields}}]},
            {"op": "memset", "buffer": 1, "offset_bytes": 0, "bytes": 32, "value": 0},
            {"op": "copy", "src": 7, "src_offset_bytes": 0, "dst": 2, "dst_offset_bytes": 0,
             "bytes": {"n": 16}}]}}
text = json.dumps(small, separators=(",", ":")).encode()
payload = bytes(256)
write("artifact", "gpu-small", header(text, len(payload), payload) + text + payload)

# --- tensor-io -----------------------------------------------------------------
def npy(descr, shape, data, version=1):
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    h = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    pre = 10 if version == 1 else 12
    h += " " * ((64 - (pre + len(h) + 1) % 64) % 64) + "\n"
    size = struct.pack("<H", len(h)) if version == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes([version, 0]) + size + h.encode() + data


write("tensor-io", "ids8-fixture.npy", open(os.path.join(fixtures, "llama_gqa_op18.ids8.npy"), "rb").read())
write("tensor-io", "ids-i32-1x4.npy", npy("<i4", [1, 4], struct.pack("<4i", 1, 2, 3, 4)))
write("tensor-io", "f2-2x2-v2.npy", npy("<f2", [2, 2], bytes(8), version=2))
write("tensor-io", "b1-3.npy", npy("|b1", [3], b"\x01\x00\x01"))
write("tensor-io", "ids.txt", b"1 2 3\n40 5\n")
write("tensor-io", "raw-f32.pb", encode('name: "x" data_type: 1 dims: 2 dims: 2 raw_data: "\\000\\000\\200?\\000\\000\\000@\\000\\000@@\\000\\000\\200@"', "onnx.TensorProto"))
write("tensor-io", "int64-data.pb", encode('name: "ids" data_type: 7 dims: 1 dims: 3 int64_data: 5 int64_data: 6 int64_data: 7', "onnx.TensorProto"))
write("tensor-io", "bool-int32-data.pb", encode('name: "m" data_type: 9 dims: 2 int32_data: 1 int32_data: 0', "onnx.TensorProto"))
write("tensor-io", "float-data.pb", encode('name: "f" data_type: 1 dims: 2 float_data: 1.5 float_data: -2', "onnx.TensorProto"))
