"""A small token-id model of block-scaled FP8 linears (ai.h20
BlockScaledMatMul), the way DeepSeek-V3/V4.1 checkpoints store their linear
layers: float8 e4m3fn weights [out, in] with one float32 scale per 128 x 128
block. No attention: every token is computed by itself.

    x = E[ids] [1, S, K] (float32 table E [V, K]),
    logits = H(W2(silu(W1 x))) [1, S, V],  W1 [N, K], W2 [K, N], H [V, K]

Writes OUT/model.onnx (weights inline; the ai.h20 function bodies ship in
the model, so ONNX Runtime runs it as it is), OUT/ids-S.npy for each S, and
two reference logits per S:
  ref-S.npy      float64 of the exact dequantised weights (what the CPU
                 target computes, in float32)
  ref-fp8-S.npy  what h20's bf16 FP8 path computes: each linear's input
                 quantised as the GPU's FP8 GEMM does (linear_bf16: only
                 where K and N are multiples of 16; 1 x 128 blocks, scale
                 max(amax, 1e-4) / 448, e4m3 round to nearest even:
                 kernels/fp8_quant.cuh), every stored activation rounded to
                 bf16, float64 otherwise: h20 should match it but for its
                 GEMMs' accumulation (Hopper's FP8 tensor cores keep about
                 14 bits within a 128-deep block, DeepSeek-V3 report 3.3.2),
                 which moves a bf16 and then an e4m3 rounding now and then:
                 about 1e-2 over three linears

Usage: fp8_linear.py OUT [--k K] [--n N] [--vocab V] [--tokens S ...] [--seed N]
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import h20_ops  # noqa: E402
import quant  # noqa: E402
from onnx_builder import H20_DOMAIN, OPSET  # noqa: E402
from safetensors_io import bf16_to_f32, e4m3_to_f32, f32_to_bf16  # noqa: E402

FP8_MAX = 448.0


def quantize_activations(x):
    """x [S, K] -> x with each 1 x 128 block quantised and dequantised as the
    GPU's quantising kernel does (float32 scale, e4m3 RNE, saturating)."""
    s, k = x.shape
    kb = -(-k // 128)
    pad = np.zeros((s, kb * 128), np.float32)
    pad[:, :k] = x
    blocks = pad.reshape(s, kb, 128)
    scale = (np.maximum(np.abs(blocks).max(axis=2), np.float32(1e-4)) / np.float32(FP8_MAX)).astype(np.float32)
    q = np.clip(blocks / scale[:, :, None], -FP8_MAX, FP8_MAX).astype(np.float32)
    deq = e4m3_to_f32(quant.encode_e4m3(q)).astype(np.float64) * scale[:, :, None]
    return deq.reshape(s, kb * 128)[:, :k]


def silu(h):
    return h / (1.0 + np.exp(-h))


def round_bf16(x):
    """float -> the nearest bfloat16 (ties to even), as float32."""
    return bf16_to_f32(f32_to_bf16(np.asarray(x, dtype=np.float32)))


def linear_bf16(x, w):
    """What h20's bf16 GPU path computes for x [S, K] . W^T, W [N, K]
    dequantised: the FP8 GEMM (input quantised per 1 x 128 block) when K
    and N are multiples of 16, else a bf16 GEMM on W rounded to bf16 (the
    lowering's fallback, Fp8ToLinalg.cpp); the output rounded to bf16."""
    if w.shape[0] % 16 == 0 and w.shape[1] % 16 == 0:
        return round_bf16(quantize_activations(x) @ w.T)
    return round_bf16(x.astype(np.float64) @ round_bf16(w).astype(np.float64).T)


def forward(x, w1, w2, head, fp8_bf16):
    if not fp8_bf16:
        return silu(x.astype(np.float64) @ w1.T) @ w2.T @ head.T
    h = linear_bf16(round_bf16(x), w1)
    a = round_bf16(silu(h.astype(np.float64)))
    return linear_bf16(linear_bf16(a, w2), head)


def build(args):
    rng = np.random.default_rng(args.seed)
    k, n, v = args.k, args.n, args.vocab
    embed = rng.standard_normal((v, k)).astype(np.float32)
    w1 = (rng.standard_normal((n, k)) * k ** -0.5).astype(np.float32)
    w2 = (rng.standard_normal((k, n)) * n ** -0.5).astype(np.float32)
    head = (rng.standard_normal((v, k)) * k ** -0.5).astype(np.float32)
    inits, deq = [numpy_helper.from_array(embed, "embed.weight")], []
    for name, w in (("w1", w1), ("w2", w2), ("head", head)):
        q, scale = quant.quantize_fp8(w)
        # FLOAT8E4M3FN = 17 (onnx.proto); set by number, since Debian 12's
        # onnx 1.12 predates the float8 types.
        t = onnx.TensorProto()
        t.name, t.data_type, t.raw_data = f"{name}.weight", 17, q.tobytes()
        t.dims.extend(q.shape)
        inits += [t, numpy_helper.from_array(scale, f"{name}.scale")]
        deq.append(quant.dequant_fp8(e4m3_to_f32(q), scale).astype(np.float64))
    attrs = dict(block_n=128, block_k=128, domain=H20_DOMAIN)
    nodes = [
        helper.make_node("Gather", ["embed.weight", "input_ids"], ["x"], name="embed", axis=0),
        helper.make_node("BlockScaledMatMul", ["x", "w1.weight", "w1.scale"], ["h"], name="w1", **attrs),
        helper.make_node("Sigmoid", ["h"], ["gate"], name="sigmoid"),
        helper.make_node("Mul", ["h", "gate"], ["a"], name="silu"),
        helper.make_node("BlockScaledMatMul", ["a", "w2.weight", "w2.scale"], ["y"], name="w2", **attrs),
        helper.make_node("BlockScaledMatMul", ["y", "head.weight", "head.scale"], ["logits"],
                         name="head", **attrs),
    ]
    graph = helper.make_graph(
        nodes, "fp8_linear",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "S"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "S", v])], inits)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(H20_DOMAIN, 1)],
        functions=[h20_ops.block_scaled_matmul()])
    model.ir_version = 10
    os.makedirs(args.out, exist_ok=True)
    onnx.save(model, os.path.join(args.out, "model.onnx"))
    for s in args.tokens:
        ids = rng.integers(0, v, size=(1, s), dtype=np.int64)
        np.save(os.path.join(args.out, f"ids-{s}.npy"), ids)
        x = embed[ids[0]]
        for name, fp8 in (("ref", False), ("ref-fp8", True)):
            logits = forward(x, *deq, fp8).astype(np.float32)[None]
            np.save(os.path.join(args.out, f"{name}-{s}.npy"), logits)
    print(f"fp8_linear: K {k}, N {n}, V {v}, tokens {args.tokens} -> {args.out}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--k", type=int, default=512)
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--tokens", type=int, nargs="+", default=[8, 129, 1000])
    p.add_argument("--seed", type=int, default=7)
    build(p.parse_args())


if __name__ == "__main__":
    main()
