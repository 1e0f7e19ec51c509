"""ms_contrib_cases.py ORT_RUN OUT_DIR

Writes single-node graphs of ONNX Runtime's com.microsoft contrib ops as
ORT's optimizer and model builders emit them (GroupQueryAttention in the
prompt phase: seqlens_k / total_sequence_length, do_rotary with cos/sin
caches, packed QKV; MultiHeadAttention with key_padding_mask;
RotaryEmbedding; SkipSimplifiedLayerNormalization), each as a backend-test
case OUT_DIR/<case>/model.onnx + test_data_set_0/input_J.pb, with random
inputs, and runs ONNX Runtime (ORT_RUN, scripts/ort-run.sh) to write its
outputs as the references test_data_set_0/output_J.pb. Prints one line per
case ("<case> REF" or "<case> ORT-FAIL <why>"). Needs onnx and numpy."""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MS = "com.microsoft"
F, I32, I64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64


def rope_caches(rng, max_pos, half):
    theta = rng.uniform(0, 3, size=(max_pos, half)).astype(np.float32)
    inv = 1.0 / (10000 ** (np.arange(half, dtype=np.float32) / half))
    ang = np.arange(max_pos, dtype=np.float32)[:, None] * inv[None, :]
    del theta
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def gqa(rng, name, B=1, S=5, N=4, NKV=2, D=16, packed=False, rotary=False, interleaved=False,
        seqlens=None, window=None):
    inputs = []
    if packed:
        inputs.append(("query", rng.standard_normal((B, S, (N + 2 * NKV) * D)).astype(np.float32)))
        inputs += [("", None), ("", None)]
    else:
        inputs.append(("query", rng.standard_normal((B, S, N * D)).astype(np.float32)))
        inputs.append(("key", rng.standard_normal((B, S, NKV * D)).astype(np.float32)))
        inputs.append(("value", rng.standard_normal((B, S, NKV * D)).astype(np.float32)))
    inputs += [("", None), ("", None)]  # past_key, past_value
    lens = np.full((B,), S - 1, np.int32) if seqlens is None else np.array(seqlens, np.int32)
    inputs.append(("seqlens_k", lens))
    inputs.append(("total_sequence_length", np.array(S, np.int32)))
    attrs = {"num_heads": N, "kv_num_heads": NKV}
    if window is not None:
        attrs["local_window_size"] = window
    if rotary:
        cos, sin = rope_caches(rng, 16, D // 2)
        inputs += [("cos_cache", cos), ("sin_cache", sin)]
        attrs["do_rotary"] = 1
        attrs["rotary_interleaved"] = int(interleaved)
    node = helper.make_node("GroupQueryAttention", [n for n, _ in inputs],
                            ["output", "present_key", "present_value"], domain=MS, **attrs)
    outs = [("output", F, (B, S, N * D)), ("present_key", F, (B, NKV, S, D)),
            ("present_value", F, (B, NKV, S, D))]
    return name, node, inputs, outs[:1]


def mha(rng, name, B=2, S=5, N=2, D=8, mask=True, lengths=False, causal=False, bias=False):
    inputs = [("query", rng.standard_normal((B, S, N * D)).astype(np.float32)),
              ("key", rng.standard_normal((B, S, N * D)).astype(np.float32)),
              ("value", rng.standard_normal((B, S, N * D)).astype(np.float32))]
    if bias:
        inputs.append(("bias", rng.standard_normal((3 * N * D,)).astype(np.float32)))
    if mask:
        m = np.ones((B, S), np.int32)
        m[0, S - 2:] = 0
        if lengths:  # 1-D: key lengths per batch (right padding)
            m = np.array([S - 2] + [S] * (B - 1), np.int32)
        inputs += [] if bias else [("", None)]
        inputs += [("key_padding_mask", m)]
    node = helper.make_node("MultiHeadAttention", [n for n, _ in inputs], ["output"],
                            domain=MS, num_heads=N, unidirectional=int(causal))
    return name, node, inputs, [("output", F, (B, S, N * D))]


def rope(rng, name, B=2, S=4, N=2, D=8, interleaved=0, rd=0, layout="bsh"):
    cos, sin = rope_caches(rng, 16, (rd or D) // 2)
    x = rng.standard_normal((B, S, N * D) if layout == "bsh" else (B, N, S, D)).astype(np.float32)
    pos = np.tile(np.arange(S, dtype=np.int64), (B, 1)) + np.arange(B, dtype=np.int64)[:, None]
    attrs = {"interleaved": interleaved}
    if layout == "bsh":
        attrs["num_heads"] = N
    if rd:
        attrs["rotary_embedding_dim"] = rd
    inputs = [("input", x), ("position_ids", pos), ("cos_cache", cos), ("sin_cache", sin)]
    node = helper.make_node("RotaryEmbedding", [n for n, _ in inputs], ["output"], domain=MS, **attrs)
    return name, node, inputs, [("output", F, x.shape)]


def skip_sln(rng, name, B=2, S=3, H=16, bias=False, sum_out=False):
    inputs = [("input", rng.standard_normal((B, S, H)).astype(np.float32)),
              ("skip", rng.standard_normal((B, S, H)).astype(np.float32)),
              ("gamma", rng.standard_normal((H,)).astype(np.float32))]
    if bias:
        inputs.append(("bias", rng.standard_normal((H,)).astype(np.float32)))
    outs = ["output"] + (["", "", "input_skip_bias_sum"] if sum_out else [])
    node = helper.make_node("SkipSimplifiedLayerNormalization", [n for n, _ in inputs], outs,
                            domain=MS, epsilon=1e-6)
    return name, node, inputs, [(o, F, (B, S, H)) for o in outs if o]


def cases(rng):
    yield gqa(rng, "gqa_prompt")
    yield gqa(rng, "gqa_packed_qkv", packed=True)
    yield gqa(rng, "gqa_rotary", rotary=True)
    yield gqa(rng, "gqa_rotary_interleaved", rotary=True, interleaved=True)
    yield gqa(rng, "gqa_packed_rotary", packed=True, rotary=True)
    # Right padding: batch 1 holds S - 2 real tokens (its padded rows are
    # compared too: they see the real keys up to their position).
    yield gqa(rng, "gqa_padded", B=2, seqlens=[4, 2])
    yield gqa(rng, "gqa_window", window=2)
    yield gqa(rng, "gqa_window_rotary", rotary=True, window=3)
    yield mha(rng, "mha_plain", mask=False)
    yield mha(rng, "mha_key_padding_mask")
    yield mha(rng, "mha_key_lengths", lengths=True)
    yield mha(rng, "mha_causal_key_padding_mask", causal=True)
    yield mha(rng, "mha_bias", bias=True)  # not supported yet: refused, node named
    yield rope(rng, "ms_rope_bsh")
    yield rope(rng, "ms_rope_interleaved", interleaved=1)
    yield rope(rng, "ms_rope_bnsd", layout="bnsd")
    yield rope(rng, "ms_rope_rotary_dim", rd=4)
    yield skip_sln(rng, "skip_sln")
    yield skip_sln(rng, "skip_sln_bias_sum", bias=True, sum_out=True)


def dtype_of(a):
    return {np.float32: F, np.int32: I32, np.int64: I64}[a.dtype.type]


def main(argv):
    ort_run, out = argv[1], argv[2]
    rng = np.random.default_rng(28)
    for name, node, inputs, outs in cases(rng):
        real = [(n, v) for n, v in inputs if n]
        g = helper.make_graph([node], name,
                              [helper.make_tensor_value_info(n, dtype_of(v), v.shape) for n, v in real],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outs])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
        m.ir_version = 8
        d = os.path.join(out, name)
        data = os.path.join(d, "test_data_set_0")
        os.makedirs(data, exist_ok=True)
        onnx.save(m, os.path.join(d, "model.onnx"))
        args = [ort_run, os.path.join(d, "model.onnx"), "--output-dir", os.path.join(d, "ort")]
        for j, (n, v) in enumerate(real):
            onnx.save_tensor(numpy_helper.from_array(v, n), os.path.join(data, "input_%d.pb" % j))
            np.save(os.path.join(d, n + ".npy"), v)
            args += ["--input", "%s=%s" % (n, os.path.join(d, n + ".npy"))]
        run = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if run.returncode != 0:
            print(name, "ORT-FAIL", (run.stdout.strip().splitlines() or [""])[-1][:200])
            continue
        for j, (n, _, _) in enumerate(outs):
            y = np.load(os.path.join(d, "ort", n + ".npy"))
            onnx.save_tensor(numpy_helper.from_array(y, n), os.path.join(data, "output_%d.pb" % j))
        print(name, "REF")


if __name__ == "__main__":
    main(sys.argv)
