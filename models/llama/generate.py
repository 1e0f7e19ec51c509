#!/usr/bin/env python3
"""Llama-family decoder as ONNX (opset 23), with random weights.

The graph uses the fused opset-23 operators the way torch.onnx exports a
transformers LlamaForCausalLM (RMSNormalization, RotaryEmbedding fed by
cos/sin of inv_freq x positions computed in the graph, Attention with
is_causal, SiLU as x * Sigmoid(x)), input `input_ids: int64[1, seq]`,
output `logits: float32[1, seq, vocab]`. Weights are float32 in one
external-data file, `weights.bin`, laid out in graph order, each tensor at
a 4096-byte-aligned offset; `layout.json` lists name, shape and offset.

Two steps, so a model whose weights are gigabytes can be compiled on one
machine and run on another:
  --graph    writes model.onnx, layout.json and, unless the weights file
             already has the right size, a *sparse* weights.bin of that size
             (the compiler only stats it);
  --weights  fills weights.bin: N(0, std) with std = init_std (0.02), the
             LM head 1/sqrt(hidden), RMSNorm weights 1 + N(0, 0.02); a
             per-tensor seed (the config's seed + the tensor's index) makes
             the bytes reproducible on any machine with numpy (tensors are
             filled by parallel processes, `--jobs`; the bytes do not
             depend on their number).
Configs: models/llama/configs/*.json (seed-dense.json: DESIGN.md section 2),
or a path; `--layers N` overrides the layer count.
"""
import argparse
import json
import os
import sys

import numpy as np

ALIGN = 4096


def load_config(name, layers):
    path = name
    if not os.path.exists(path):
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs", name + ".json")
    with open(path) as f:
        cfg = json.load(f)
    if layers:
        cfg["num_hidden_layers"] = layers
    return cfg


def tensors(cfg):
    """(name, shape, kind) in weights.bin order; kind picks the init."""
    h, v = cfg["hidden_size"], cfg["vocab_size"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = cfg.get("head_dim", h // nh)
    f = cfg["intermediate_size"]
    out = [("model.embed_tokens.weight", [v, h], "normal")]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [
            (p + "input_layernorm.weight", [h], "norm"),
            (p + "self_attn.q_proj.weight", [h, nh * d], "normal"),
            (p + "self_attn.k_proj.weight", [h, nkv * d], "normal"),
            (p + "self_attn.v_proj.weight", [h, nkv * d], "normal"),
            (p + "self_attn.o_proj.weight", [nh * d, h], "normal"),
            (p + "post_attention_layernorm.weight", [h], "norm"),
            (p + "mlp.gate_proj.weight", [h, f], "normal"),
            (p + "mlp.up_proj.weight", [h, f], "normal"),
            (p + "mlp.down_proj.weight", [f, h], "normal"),
        ]
    out += [("model.norm.weight", [h], "norm"), ("lm_head.weight", [h, v], "head")]
    return out


def layout(cfg):
    entries, offset = [], 0
    for name, shape, kind in tensors(cfg):
        n = int(np.prod(shape)) * 4
        entries.append({"name": name, "shape": shape, "kind": kind, "offset": offset, "length": n})
        offset = (offset + n + ALIGN - 1) // ALIGN * ALIGN
    return entries, offset


def inv_freq(cfg):
    d = cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
    theta = cfg.get("rope_theta", 10000.0)
    f = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    scaling = cfg.get("rope_scaling") or {}
    if scaling.get("rope_type", scaling.get("type")) == "linear":
        f = f / scaling["factor"]
    return f.astype(np.float32)


def write_graph(cfg, out):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    entries, total = layout(cfg)
    h, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    nkv = cfg["num_key_value_heads"]
    d = cfg.get("head_dim", h // nh)
    eps = cfg.get("rms_norm_eps", 1e-6)
    inits, nodes = [], []
    for e in entries:
        t = TensorProto(name=e["name"], data_type=TensorProto.FLOAT, dims=e["shape"])
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", "weights.bin"), ("offset", str(e["offset"])),
                     ("length", str(e["length"]))):
            t.external_data.add(key=k, value=v)
        inits.append(t)

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    counter = [0]

    def node(op, ins, n_out=1, **attrs):
        counter[0] += 1
        outs = [f"{op.lower()}_{counter[0]}_{k}" for k in range(n_out)]
        nodes.append(helper.make_node(op, ins, outs, name=f"{op}_{counter[0]}", **attrs))
        return outs[0] if n_out == 1 else outs

    # Positions and the RoPE angles [1, S, d/2], as torch.onnx exports them.
    seq = node("Shape", ["input_ids"], start=1, end=2)
    seq0 = node("Squeeze", [seq])
    pos = node("Range", [const("zero", np.array(0, np.int64)), seq0, const("one", np.array(1, np.int64))])
    posf = node("Cast", [node("Unsqueeze", [pos, const("axes01", np.array([0, 1], np.int64))])],
                to=TensorProto.FLOAT)
    angles = node("Transpose", [node("MatMul", [const("inv_freq", inv_freq(cfg).reshape(1, -1, 1)), posf])],
                  perm=[0, 2, 1])
    cos, sin = node("Cos", [angles]), node("Sin", [angles])
    heads_q = const("shape_q", np.array([1, -1, nh, d], np.int64))
    heads_kv = const("shape_kv", np.array([1, -1, nkv, d], np.int64))
    merged = const("shape_merged", np.array([1, -1, nh * d], np.int64))

    x = node("Gather", ["model.embed_tokens.weight", "input_ids"], axis=0)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        hN = node("RMSNormalization", [x, p + "input_layernorm.weight"], axis=-1, epsilon=eps)

        def proj(w, shape):
            r = node("Reshape", [node("MatMul", [hN, p + w]), shape])
            return node("Transpose", [r], perm=[0, 2, 1, 3])

        q = node("RotaryEmbedding", [proj("self_attn.q_proj.weight", heads_q), cos, sin])
        k = node("RotaryEmbedding", [proj("self_attn.k_proj.weight", heads_kv), cos, sin])
        v = proj("self_attn.v_proj.weight", heads_kv)
        a = node("Attention", [q, k, v], is_causal=1, scale=float(d) ** -0.5)
        a = node("Reshape", [node("Transpose", [a], perm=[0, 2, 1, 3]), merged])
        x = node("Add", [x, node("MatMul", [a, p + "self_attn.o_proj.weight"])])
        hN = node("RMSNormalization", [x, p + "post_attention_layernorm.weight"], axis=-1, epsilon=eps)
        g = node("MatMul", [hN, p + "mlp.gate_proj.weight"])
        u = node("MatMul", [hN, p + "mlp.up_proj.weight"])
        m = node("Mul", [node("Mul", [g, node("Sigmoid", [g])]), u])
        x = node("Add", [x, node("MatMul", [m, p + "mlp.down_proj.weight"])])
    x = node("RMSNormalization", [x, "model.norm.weight"], axis=-1, epsilon=eps)
    nodes.append(helper.make_node("MatMul", [x, "lm_head.weight"], ["logits"], name="lm_head"))

    graph = helper.make_graph(
        nodes, cfg.get("name", "llama"),
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "seq"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "seq", cfg["vocab_size"]])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)],
                              producer_name="h20 models/llama/generate.py")
    model.ir_version = 10
    os.makedirs(out, exist_ok=True)
    tmp = os.path.join(out, "model.onnx.tmp")
    with open(tmp, "wb") as f:
        f.write(model.SerializeToString())
    os.replace(tmp, os.path.join(out, "model.onnx"))
    with open(os.path.join(out, "layout.json"), "w") as f:
        json.dump({"config": cfg, "tensors": entries, "bytes": total}, f, indent=1)
    wpath = os.path.join(out, "weights.bin")
    if not os.path.exists(wpath) or os.path.getsize(wpath) != total:
        with open(wpath, "wb") as f:
            f.truncate(total)


def _fill(wpath, i, e, seed, std):
    """Writes tensor i of the layout (its own seed: any order, any process)."""
    rng = np.random.default_rng(seed * 1000003 + i)
    n = int(np.prod(e["shape"]))
    fd = os.open(wpath, os.O_WRONLY)
    try:
        # In slices of 64M values: bounded host memory for big tensors.
        for start in range(0, n, 1 << 26):
            m = min(1 << 26, n - start)
            if e["kind"] == "norm":
                a = 1.0 + std * rng.standard_normal(m, dtype=np.float32)
            elif e["kind"] == "head":
                a = rng.standard_normal(m, dtype=np.float32) / np.float32(np.sqrt(e["shape"][0]))
            else:
                a = std * rng.standard_normal(m, dtype=np.float32)
            buf = memoryview(a.astype("<f4", copy=False)).cast("B")
            pos = e["offset"] + start * 4
            while buf:
                k = os.pwrite(fd, buf, pos)
                buf, pos = buf[k:], pos + k
    finally:
        os.close(fd)
    return i


def write_weights(cfg, out, jobs=0):
    entries, total = layout(cfg)
    wpath = os.path.join(out, "weights.bin")
    seed = cfg.get("seed", 0)
    std = cfg.get("initializer_range", 0.02)
    with open(wpath, "r+b" if os.path.exists(wpath) else "w+b") as f:
        f.truncate(total)
    # Tensors are independent (one seed each), so processes fill them in
    # parallel with the same bytes as a sequential run; largest first.
    jobs = jobs or min(16, os.cpu_count() or 1)
    order = sorted(range(len(entries)), key=lambda i: -entries[i]["length"])
    if jobs <= 1:
        for i in order:
            _fill(wpath, i, entries[i], seed, std)
        return
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for _ in pool.map(_fill, [wpath] * len(order), order, [entries[i] for i in order],
                          [seed] * len(order), [std] * len(order)):
            pass


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", help="config name (models/llama/configs/NAME.json) or path")
    ap.add_argument("out", help="output directory")
    ap.add_argument("--layers", type=int, default=0, help="override num_hidden_layers")
    ap.add_argument("--graph", action="store_true", help="write model.onnx + layout.json")
    ap.add_argument("--weights", action="store_true", help="write weights.bin")
    ap.add_argument("--jobs", type=int, default=0,
                    help="--weights: processes (default min(16, CPUs)); same bytes for any count")
    a = ap.parse_args()
    if not (a.graph or a.weights):
        a.graph = a.weights = True
    cfg = load_config(a.config, a.layers)
    if a.graph:
        write_graph(cfg, a.out)
    if a.weights:
        write_weights(cfg, a.out, a.jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
