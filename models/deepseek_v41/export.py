#!/usr/bin/env python3
"""Export a DeepSeek-V4.1 checkpoint to ONNX (opset 23, external data).

Input: a directory with a transformers-style config.json (flat or with a
`text_config` section) and model.safetensors (or a sharded index) using
transformers' DeepseekV41ForCausalLM parameter names; float32, float16, bf16
or float8 e4m3 tensors (all widened exactly to float32). With Engram layers
the directory also needs engram_token_map.npy (int64 [vocab]: the tokenizer-
normalised token id, transformers build_compressed_token_map; token_map.py
derives it from the model's tokenizer).

Output: DIR/model.onnx + DIR/model.onnx.data. Graph input `input_ids`
int64 [1, S] (S symbolic: one prompt, positions 0..S-1), output `logits`
float32 [1, S, vocab] (or [1, 1, vocab] with --logits last). Standard ONNX
ops everywhere except the `ai.h20` functions of h20_ops.py (sparse / sink
attention, indexer top-k, routed experts), each shipped with its body.
Weights are streamed: read, converted and written one tensor at a time.
With --fp8-linears, the linear weights an FP8 checkpoint stores as e4m3
with 128 x 128 block scales (quant.is_fp8_linear; all of them in a
--graph-only export) stay FP8: each runs as ai.h20 BlockScaledMatMul on
the stored codes and float32 scales (h20's GPU target: FP8 GEMMs), not as a
MatMul on a widened copy. With --fp4-experts, routed experts stored as FP4
(e2m1 pairs + ue8m0 scales per 32 inputs) stay FP4: ai.h20
RoutedExpertsMxfp4 on the stored bytes (h20's GPU target dequantises them
inside its grouped GEMM). The grouped wo_a is still widened. With
--fp8-engram, Engram tables stored as FP8 rows (e4m3 with a scale per row
and 32 channels, as the released checkpoint stores them; all of them in a
--graph-only export whose Engram head dim is a multiple of 32) stay FP8:
the graph gathers a token's e4m3 rows and their scales and dequantises
them (written as Cast, Gather, Mul, standard ONNX: Gather takes no float8;
h20 gathers before it casts, so only those rows are widened), half the
bytes of a bf16 table in memory and per lookup.

Prefill semantics: reference.py (this exporter's graph computes the same
thing op for op; tests compare both, and ONNX Runtime on the file).
"""
import argparse
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import config as v41config  # noqa: E402
import h20_ops  # noqa: E402
import quant  # noqa: E402
import weights  # noqa: E402
from onnx_builder import H20_DOMAIN, OPSET, ExternalData, Graph  # noqa: E402
from reference import engram_multipliers, engram_offsets  # noqa: E402
from safetensors_io import Checkpoint, CheckpointError  # noqa: E402

F32 = np.float32
NEG_INF = F32(-np.inf)
LN2_INV = F32(1.0 / math.log(2.0))


class ExportError(ValueError):
    pass


class Exporter:
    def __init__(self, cfg, ckpt, data, token_map):
        self.cfg, self.ckpt, self.data, self.token_map = cfg, ckpt, data, token_map
        self.shapes = {name: shape for name, shape, _ in weights.tensors(cfg)}
        self.g = Graph()
        self.eps = float(cfg["rms_norm_eps"])
        self._ones = {}
        self.fp8_linears = False  # FP8-stored linears as BlockScaledMatMul (module docstring)
        self.fp4_experts = False  # FP4-stored routed experts as RoutedExpertsMxfp4
        self.fp8_engram = False  # FP8-stored Engram rows gathered as FP8 (engram_rows)
        self.intermediates = False  # also output streams.{i} [S, hc, D] after every layer
        self.debug_outputs = []  # (name, value, dtype, rank) graph outputs for debugging

    # ------------------------------------------------------------ weights
    def weight(self, name, transform=None, shape_of=None):
        """Stream checkpoint tensor `name` (optionally transformed; `shape_of`
        maps its shape to the transformed one) into the external data file;
        returns the initializer name. Without a checkpoint (graph-only export)
        only the space is reserved."""
        if self.ckpt is None:
            shape = self.shapes.get(name)
            if shape is None:
                raise ExportError(f"no parameter {name!r} in this config")
            shape = shape_of(shape) if shape_of else shape
            self.g.initializers.append(self.data.reserve(name, shape, F32))
            return name
        if name not in self.ckpt:
            raise ExportError(f"checkpoint has no tensor {name!r} (needed by the config)")
        arr = self.ckpt.read(name).astype(F32)
        if transform is not None:
            arr = transform(arr)
        self.g.initializers.append(self.data.add(name, np.ascontiguousarray(arr, dtype=F32)))
        return name

    def linear_t(self, name):
        """[out, in] Linear weight as the [in, out] MatMul operand."""
        return self.weight(name, lambda w: w.T, lambda s: s[::-1])

    def linear(self, x, name):
        """x [..., in] times Linear weight `name` [out, in]: a MatMul on the
        widened weight, or with fp8_linears and an FP8-stored weight an
        ai.h20 BlockScaledMatMul on its e4m3 codes and float32 scales."""
        fp8 = self.fp8_weight(name) if self.fp8_linears and name.endswith(".weight") else None
        if fp8 is None:
            return self.matmul(x, self.linear_t(name))
        codes, scale = fp8
        return self.g.op("BlockScaledMatMul", [x, codes, scale], domain=H20_DOMAIN, name=name[: -len(".weight")],
                         block_n=quant.FP8_BLOCK, block_k=quant.FP8_BLOCK)

    def fp8_weight(self, name):
        """(codes, scale) initializers of FP8-stored weight `name` [out, in]:
        e4m3 codes as FLOAT8E4M3FN (17) and float32 scales [ceil(out / 128),
        ceil(in / 128)]; None when the checkpoint stores it otherwise. A
        graph-only export reserves them for every weight quant.is_fp8_linear
        names, as DeepSeek's checkpoints store them."""
        scale_name = name[: -len(".weight")] + ".scale"
        if self.ckpt is None:
            shape = self.shapes.get(name)
            if shape is None:
                raise ExportError(f"no parameter {name!r} in this config")
            if not quant.is_fp8_linear(name, len(shape)):
                return None
            blocks = quant.fp8_scale_shape(shape)
            self.g.initializers.append(self.data.reserve(name, shape, np.uint8, onnx_type=17))
            self.g.initializers.append(self.data.reserve(scale_name, blocks, F32))
            return name, scale_name
        if name not in self.ckpt:
            raise ExportError(f"checkpoint has no tensor {name!r} (needed by the config)")
        dtype, shape = self.ckpt.info(name)
        stored = self.ckpt.scale_of(name)
        if dtype != "F8_E4M3" or stored is None or self.ckpt.info(stored)[0] not in ("F32", "BF16", "F16"):
            return None
        scale = self.ckpt.read(stored)
        blocks = quant.fp8_scale_shape(shape)
        if list(scale.shape) != blocks:
            raise ExportError(f"{name}: FP8 weight {shape} needs block scales {blocks}, got {list(scale.shape)}")
        self.g.initializers.append(self.data.add(name, self.ckpt.raw(name), onnx_type=17))
        self.g.initializers.append(self.data.add(scale_name, np.ascontiguousarray(scale, dtype=F32)))
        return name, scale_name

    def fp8_engram_table(self, name):
        """(codes, scale) initializers of Engram table `name` [R, ehd] stored
        as FP8 rows: e4m3 codes as FLOAT8E4M3FN [R, ehd] and float32 scales
        [R, ehd / 32] (ue8m0 bytes decoded, exactly); None when the
        checkpoint stores float rows. A graph-only export reserves them
        whenever ehd is a multiple of 32, as the released checkpoint stores
        them."""
        scale_name = name[: -len(".weight")] + ".scale"
        block = quant.FP4_BLOCK
        if self.ckpt is None:
            shape = self.shapes.get(name)
            if shape is None:
                raise ExportError(f"no parameter {name!r} in this config")
            if shape[1] % block:
                return None
            self.g.initializers.append(self.data.reserve(name, shape, np.uint8, onnx_type=17))
            self.g.initializers.append(self.data.reserve(scale_name, [shape[0], shape[1] // block], F32))
            return name, scale_name
        if name not in self.ckpt:
            raise ExportError(f"checkpoint has no tensor {name!r} (needed by the config)")
        dtype, shape = self.ckpt.info(name)
        stored = self.ckpt.scale_of(name)
        if dtype != "F8_E4M3" or stored is None:
            return None
        sshape = self.ckpt.info(stored)[1]
        scale = self.ckpt.engram_scales(stored)
        if len(shape) != 2 or shape[1] % block or list(sshape) != [shape[0], shape[1] // block]:
            raise ExportError(f"{name}: FP8 Engram table {list(shape)} needs scales [rows, {block}-channel "
                              f"blocks], got {list(sshape)}")
        self.g.initializers.append(self.data.add(name, self.ckpt.raw(name), onnx_type=17))
        self.g.initializers.append(self.data.add(scale_name, np.ascontiguousarray(scale, dtype=F32)))
        return name, scale_name

    def engram_rows(self, name, ids):
        """Rows `ids` [S, cols] of Engram table `name` [R, ehd] as float32
        [S, cols, ehd]: a Gather of the widened table, or with fp8_engram and
        an FP8-stored table its e4m3 rows (written Cast, then Gather; h20
        gathers first) times their gathered scales (exact: e4m3 times a
        power of two)."""
        fp8 = self.fp8_engram_table(name) if self.fp8_engram else None
        if fp8 is None:
            return self.g.op("Gather", [self.weight(name), ids], axis=0)
        g, cfg = self.g, self.cfg
        codes, scale = fp8
        ehd, block = cfg["engram_head_dim"], quant.FP4_BLOCK
        ncols = (cfg["engram_max_ngram_size"] - 1) * cfg["engram_n_heads"]
        # Cast, then Gather: standard ONNX (Gather-13 takes no float8); h20
        # gathers first (h20-gather-before-cast), so the table stays FP8.
        rows = g.op("Gather", [g.op("Cast", [codes], to=TensorProto.FLOAT), ids], axis=0)
        scales = g.op("Gather", [scale, ids], axis=0)  # [S, cols, ehd / 32]
        blocks = g.op("Reshape", [rows, g.i64(-1, ncols, ehd // block, block)])
        scaled = g.op("Mul", [blocks, g.op("Unsqueeze", [scales, g.i64(3)])])
        return g.op("Reshape", [scaled, g.i64(-1, ncols, ehd)])

    def stacked_t(self, names, out_name):
        """Linear weights [out, in] written back to back as one [len(names), in, out]."""
        if self.ckpt is None:
            shape = self.shapes.get(names[0])
            if shape is None:
                raise ExportError(f"no parameter {names[0]!r} in this config")
            self.g.initializers.append(self.data.reserve(out_name, [len(names)] + shape[::-1], F32))
            return out_name
        for n in names:
            if n not in self.ckpt:
                raise ExportError(f"checkpoint has no tensor {n!r} (needed by the config)")
            self.require_scales_of_packed(n)
        parts = (np.ascontiguousarray(self.ckpt.read(n).astype(F32).T, dtype=F32) for n in names)
        self.g.initializers.append(self.data.add_stacked(out_name, parts, len(names)))
        return out_name

    # ------------------------------------------------------------ small ops
    def ones(self, n):
        if n not in self._ones:
            self._ones[n] = self.g.const(np.ones(n, F32), hint=f"ones{n}")
        return self._ones[n]

    def rms(self, x, weight_name=None, n=None):
        scale = self.weight(weight_name) if weight_name else self.ones(n)
        return self.g.op("RMSNormalization", [x, scale], axis=-1, epsilon=self.eps, name="rms")

    def matmul(self, x, w):
        return self.g.op("MatMul", [x, w])

    def rope_tables(self, kind, positions):
        """cos, sin [1, P, pairs] for int64 positions [P]."""
        g = self.g
        inv = g.const(np.array(v41config.rope_inv_freq(self.cfg, kind), dtype=np.float64).astype(F32),
                      hint=f"inv_freq_{kind}")
        ang = g.op("Mul", [g.op("Unsqueeze", [g.op("Cast", [positions], to=TensorProto.FLOAT), g.i64(1)]), inv])
        ang = g.op("Unsqueeze", [ang, g.i64(0)])
        return g.op("Cos", [ang]), g.op("Sin", [ang])

    def rope(self, x, heads, tables, inverse=False):
        """Interleaved RoPE on the last qk_rope_head_dim channels of x [P, heads, D]
        (heads = 0 for x [P, D]) through ONNX RotaryEmbedding (interleaved=1)."""
        g = self.g
        rd = self.cfg["qk_rope_head_dim"]
        cos, sin = tables
        if inverse:
            sin = g.op("Neg", [sin])
        # ONNX RotaryEmbedding's 4-D layout is [batch, heads, seq, dim].
        if heads:
            x4 = g.op("Unsqueeze", [g.op("Transpose", [x], perm=[1, 0, 2]), g.i64(0)])
        else:
            x4 = g.op("Unsqueeze", [x, g.i64(0, 1)])
        nope_w = g.op("Sub", [g.dim(x4, 3), g.i64(rd)])
        nope, rot = g.op("Split", [x4, g.op("Concat", [nope_w, g.i64(rd)], axis=0)], n_out=2, axis=3)
        rot = g.op("RotaryEmbedding", [rot, cos, sin], interleaved=1, name="rope")
        out = g.op("Concat", [nope, rot], axis=3)
        if heads:
            return g.op("Transpose", [g.op("Squeeze", [out, g.i64(0)])], perm=[1, 0, 2])
        return g.op("Squeeze", [out, g.i64(0, 1)])

    def pow2_ceil(self, t):
        """2^ceil(log2 t), exact for normal t > 0: a log2 estimate, then one
        correction step each way (powers of two are exact in Pow)."""
        g = self.g
        two = g.const(F32(2.0))
        p = g.op("Pow", [two, g.op("Ceil", [g.op("Mul", [g.op("Log", [t]), g.const(LN2_INV)])])])
        p = g.op("Where", [g.op("Less", [p, t]), g.op("Mul", [p, two]), p])
        half = g.op("Mul", [p, g.const(F32(0.5))])
        return g.op("Where", [g.op("GreaterOrEqual", [half, t]), half, p])

    def round_e4m3(self, q):
        """Round-to-nearest-even onto the e4m3 grid (|q| <= 448): step
        2^(max(floor(log2|q|), -6) - 3), floor(log2) corrected to be exact."""
        g = self.g
        m = g.op("Max", [g.op("Abs", [q]), g.const(F32(2.0 ** -7))])
        e = g.op("Floor", [g.op("Mul", [g.op("Log", [m]), g.const(LN2_INV)])])
        two = g.const(F32(2.0))
        p = g.op("Pow", [two, e])
        one = g.const(F32(1.0))
        e = g.op("Where", [g.op("Greater", [p, m]), g.op("Sub", [e, one]), e])
        e = g.op("Where", [g.op("LessOrEqual", [g.op("Mul", [g.op("Pow", [two, e]), two]), m]),
                           g.op("Add", [e, one]), e])
        step = g.op("Pow", [two, g.op("Sub", [g.op("Max", [e, g.const(F32(-6.0))]), g.const(F32(3.0))])])
        return g.op("Mul", [g.op("Round", [g.op("Div", [q, step])]), step])

    def round_e2m1(self, q):
        g = self.g
        m = g.op("Abs", [q])
        step = g.op("Where", [g.op("Less", [m, g.const(F32(2.0))]), g.const(F32(0.5)),
                              g.op("Where", [g.op("Less", [m, g.const(F32(4.0))]), g.const(F32(1.0)),
                                             g.const(F32(2.0))])])
        return g.op("Mul", [g.op("Round", [g.op("Div", [q, step])]), step])

    def blocks(self, x, width, block):
        """x [..., width] -> [..., width/block, block] (and the original shape)."""
        g = self.g
        shape = g.op("Shape", [x])
        lead = g.op("Shape", [x], end=-1)
        return g.op("Reshape", [x, g.op("Concat", [lead, g.i64(width // block, block)], axis=0)]), shape

    def fake_quant_fp8(self, x, width, block=32):
        """reference.fake_quant_fp8: per-block ue8m0 scale, e4m3 values."""
        if width % block:
            return x
        g = self.g
        b, shape = self.blocks(x, width, block)
        amax = g.op("Max", [g.op("ReduceMax", [g.op("Abs", [b]), g.i64(-1)], keepdims=1), g.const(F32(1e-4))])
        scale = self.pow2_ceil(g.op("Mul", [amax, g.const(F32(1.0 / 448.0))]))
        q = g.op("Clip", [g.op("Div", [b, scale]), g.const(F32(-448.0)), g.const(F32(448.0))])
        return g.op("Reshape", [g.op("Mul", [self.round_e4m3(q), scale]), shape])

    def fake_quant_fp4(self, x, width, block, e4m3_scales=False):
        """reference.fake_quant_fp4: e2m1 values, ue8m0 or e4m3 block scales."""
        if width % block:
            return x
        g = self.g
        b, shape = self.blocks(x, width, block)
        amax = g.op("ReduceMax", [g.op("Abs", [b]), g.i64(-1)], keepdims=1)
        if e4m3_scales:
            scale = self.round_e4m3(g.op("Div", [g.op("Max", [amax, g.const(F32(6.0 * 2.0 ** -9))]),
                                                 g.const(F32(6.0))]))
        else:
            scale = self.pow2_ceil(g.op("Mul", [g.op("Max", [amax, g.const(F32(6.0 * 2.0 ** -126))]),
                                                g.const(F32(1.0 / 6.0))]))
        q = g.op("Clip", [g.op("Div", [b, scale]), g.const(F32(-6.0)), g.const(F32(6.0))])
        return g.op("Reshape", [g.op("Mul", [self.round_e2m1(q), scale]), shape])

    # ------------------------------------------------------------ blocks
    def hc_mixes(self, streams, p, site):
        g, cfg = self.g, self.cfg
        hc, d = cfg["hc_mult"], cfg["hidden_size"]
        eps = g.const(F32(cfg["hc_eps"]))
        flat = self.rms(g.op("Reshape", [streams, g.i64(-1, hc * d)]), n=hc * d)
        mixes = self.linear(flat, p + f"hc_{site}_fn")
        scale = self.weight(p + f"hc_{site}_scale")
        base = self.weight(p + f"hc_{site}_base")

        def part(k, lo, hi):
            sk = g.op("Gather", [scale, g.const(np.int64(k))], axis=0)
            m = g.op("Slice", [mixes, g.i64(lo), g.i64(hi), g.i64(1)])
            return g.op("Add", [g.op("Mul", [m, sk]), g.op("Slice", [base, g.i64(lo), g.i64(hi), g.i64(0)])])

        pre = g.op("Add", [g.op("Sigmoid", [part(0, 0, hc)]), eps])
        post = g.op("Mul", [g.op("Sigmoid", [part(1, hc, 2 * hc)]), g.const(F32(2.0))])
        comb = g.op("Reshape", [part(2, 2 * hc, (2 + hc) * hc), g.i64(-1, hc, hc)])
        comb = g.op("Add", [g.op("Softmax", [comb], axis=-1), eps])

        def normalise(c, axis):
            return g.op("Div", [c, g.op("Add", [g.op("ReduceSum", [c, g.i64(axis)], keepdims=1), eps])])

        comb = normalise(comb, -2)
        for _ in range(cfg["hc_sinkhorn_iters"] - 1):
            comb = normalise(normalise(comb, -1), -2)
        return pre, post, comb

    def hc_collapse(self, streams, pre):
        g = self.g
        return g.op("ReduceSum", [g.op("Mul", [g.op("Unsqueeze", [pre, g.i64(2)]), streams]), g.i64(1)],
                    keepdims=0)

    def hc_expand(self, x, residual, post, comb):
        g = self.g
        mixed = g.op("MatMul", [g.op("Transpose", [comb], perm=[0, 2, 1]), residual])  # [S,k,D]
        placed = g.op("Mul", [g.op("Unsqueeze", [post, g.i64(2)]), g.op("Unsqueeze", [x, g.i64(1)])])
        return g.op("Add", [placed, mixed])

    def engram_hash_ids(self, ids):
        """[S, L, cols] int64 (reference.Model.engram_hash_ids)."""
        g, cfg = self.g, self.cfg
        n = cfg["engram_max_ngram_size"]
        mult = engram_multipliers(cfg["engram_layer_ids"], n, cfg["engram_compressed_vocab_size"])
        primes = np.array(cfg["engram_primes"], dtype=np.int64)
        token_map = g.const(self.token_map.astype(np.int64), hint="engram_token_map")
        comp = g.op("Gather", [token_map, ids], axis=0)  # [S]
        pad = g.const(np.int64(self.token_map[cfg["engram_pad_id"]]))
        s = g.op("Squeeze", [g.dim(ids, 0), g.i64(0)])
        pos = g.op("Range", [g.const(np.int64(0)), s, g.const(np.int64(1))])
        prods = []
        for sh in range(n):
            shv = g.const(np.int64(sh))
            src = g.op("Gather", [comp, g.op("Max", [g.op("Sub", [pos, shv]), g.const(np.int64(0))])], axis=0)
            tok = g.op("Where", [g.op("GreaterOrEqual", [pos, shv]), src, pad])
            prods.append(g.op("Mul", [g.op("Unsqueeze", [tok, g.i64(1)]), g.const(mult[:, sh].copy())]))  # [S,L]
        rolling, hashes = prods[0], []
        for i in range(1, n):
            rolling = g.op("BitwiseXor", [rolling, prods[i]])
            hashes.append(g.op("Mod", [g.op("Unsqueeze", [rolling, g.i64(2)]), g.const(primes[:, i - 1, :].copy())]))
        return g.op("Add", [g.op("Concat", hashes, axis=2), g.const(engram_offsets(cfg))])

    def engram(self, streams, hash_ids, i, p):
        g, cfg = self.g, self.cfg
        hc, d = cfg["hc_mult"], cfg["hidden_size"]
        li = cfg["engram_layer_ids"].index(i)
        ids = g.op("Gather", [hash_ids, g.const(np.int64(li))], axis=1)  # [S, cols]
        rows = self.engram_rows(p + "engram.embed.weight", ids)  # [S, cols, ehd]
        ncols = (cfg["engram_max_ngram_size"] - 1) * cfg["engram_n_heads"]
        kv = self.linear(g.op("Reshape", [rows, g.i64(-1, ncols * cfg["engram_head_dim"])]),
                         p + "engram.wkv.weight")
        key, value = g.op("Split", [kv, g.i64(hc * d, d)], n_out=2, axis=1)
        key = g.op("Reshape", [key, g.i64(-1, hc, d)])
        qw = self.weight(p + "engram.q_weight")
        kw = self.weight(p + "engram.k_weight")
        eps = g.const(F32(cfg["rms_norm_eps"]))

        def rstd(x):
            ms = g.op("ReduceMean", [g.op("Mul", [x, x]), g.i64(-1)], keepdims=0)
            return g.op("Reciprocal", [g.op("Sqrt", [g.op("Add", [ms, eps])])])

        dot = g.op("ReduceSum", [g.op("Mul", [g.op("Mul", [streams, g.op("Mul", [qw, kw])]), key]), g.i64(-1)],
                   keepdims=0)
        dot = g.op("Mul", [g.op("Mul", [dot, g.op("Mul", [rstd(streams), rstd(key)])]), g.const(F32(d ** -0.5))])
        mag = g.op("Sqrt", [g.op("Max", [g.op("Abs", [dot]), g.const(F32(1e-6))])])
        gate = g.op("Sigmoid", [g.op("Where", [g.op("Less", [dot, g.const(F32(0))]), g.op("Neg", [mag]), mag])])
        return g.op("Add", [streams, g.op("Mul", [g.op("Unsqueeze", [gate, g.i64(2)]),
                                                  g.op("Unsqueeze", [value, g.i64(1)])])])

    def compressor(self, x, a, ratio):
        """Pre-RoPE latents [G, head_dim] of the complete groups, G = S // ratio."""
        g, hd = self.g, self.cfg["head_dim"]
        if ratio == 1:
            return self.rms(self.linear(x, a + "compressor.wkv.weight"), a + "compressor.norm.weight")
        r = g.i64(ratio)
        usable = g.op("Mul", [g.op("Div", [g.dim(x, 0), r]), r])
        xs = g.op("Slice", [x, g.i64(0), usable, g.i64(0)])
        kv = g.op("Reshape", [self.linear(xs, a + "compressor.wkv.weight"), g.i64(-1, ratio, hd)])
        gate = g.op("Reshape", [self.linear(xs, a + "compressor.wgate.weight"),
                                g.i64(-1, ratio, hd)])
        latent = g.op("ReduceSum", [g.op("Mul", [kv, g.op("Softmax", [gate], axis=1)]), g.i64(1)], keepdims=0)
        return self.rms(latent, a + "compressor.norm.weight")

    def indexer(self, x, q_res, latent, i, a, shared, pos_tables):
        g, cfg = self.g, self.cfg
        ratio = cfg["compress_ratios"][i]
        hi, di = cfg["index_n_heads"], cfg["index_head_dim"]
        if i in cfg["kv_source_layer_ids"]:
            k = self.rms(self.linear(latent, a + "indexer.wk.weight"), a + "indexer.k_norm.weight")
            k = self.rope(k, 0, self.compressed_tables(latent, ratio))
            shared["index_k"] = self.fake_quant_fp4(k, di, 32)
        q = g.op("Reshape", [self.linear(q_res, a + "indexer.wq_b.weight"), g.i64(-1, hi, di)])
        q = self.fake_quant_fp4(self.rope(q, hi, pos_tables), di, 32)
        w = g.op("Mul", [self.linear(x, a + "indexer.weights_proj.weight"), g.const(F32(hi ** -0.5))])
        attrs = dict(ratio=ratio, topk=cfg["index_topk"], scale=float(di ** -0.5))
        inputs = [q, shared["index_k"], w]
        if i == cfg["candidate_source_layer_id"]:
            shared["topk_idx"], shared["candidates"] = g.op(
                "IndexerTopKCandidates", inputs, n_out=2, domain=H20_DOMAIN, name=f"layer{i}_indexer",
                blocks=cfg["candidate_topk_blocks"], block_size=cfg["candidate_block_size"], **attrs)
        elif 0 <= cfg["candidate_source_layer_id"] < i and "candidates" in shared:
            shared["topk_idx"] = g.op("IndexerTopKInCandidates", inputs + [shared["candidates"]], domain=H20_DOMAIN,
                                      name=f"layer{i}_indexer", block_size=cfg["candidate_block_size"], **attrs)
        else:
            shared["topk_idx"] = g.op("IndexerTopK", inputs, domain=H20_DOMAIN, name=f"layer{i}_indexer", **attrs)

    def compressed_tables(self, latent, ratio):
        g = self.g
        n = g.op("Squeeze", [g.dim(latent, 0), g.i64(0)])
        positions = g.op("Mul", [g.op("Range", [g.const(np.int64(0)), n, g.const(np.int64(1))]),
                                 g.const(np.int64(ratio))])
        return self.rope_tables("compress", positions)

    def attention(self, x, i, shared, tables):
        g, cfg = self.g, self.cfg
        a = f"model.layers.{i}.attn."
        h, hd = cfg["num_attention_heads"], cfg["head_dim"]
        ratio = cfg["compress_ratios"][i]
        rope_tables = tables["compress" if ratio else "main"]
        q_res = self.rms(self.linear(x, a + "wq_a.weight"), a + "q_norm.weight")
        q = g.op("Reshape", [self.linear(q_res, a + "wq_b.weight"), g.i64(-1, h, hd)])
        q = self.rope(q, h, rope_tables)
        kv = self.rms(self.linear(x, a + "wkv.weight"), a + "kv_norm.weight")
        kv = self.fake_quant_fp8(self.rope(kv, 0, rope_tables), hd, 32)
        sink = self.weight(a + "attn_sink")
        attrs = dict(scale=float(hd ** -0.5), window=cfg["sliding_window"])
        if ratio:
            latent = self.compressor(x, a, ratio) if i in cfg["kv_source_layer_ids"] else None
            if i in cfg["index_source_layer_ids"]:
                self.indexer(x, q_res, latent, i, a, shared, tables["compress"])
            if latent is not None:
                rotated = self.rope(latent, 0, self.compressed_tables(latent, ratio))
                shared["compress_kv"] = self.fake_quant_fp4(rotated, hd, 16, e4m3_scales=True)
                if self.intermediates:
                    self.debug_outputs.append((f"latent.{i}", latent, TensorProto.FLOAT, 2))
                    self.debug_outputs.append((f"compress_kv.{i}", shared["compress_kv"], TensorProto.FLOAT, 2))
        if ratio and "topk_idx" in shared:
            out = g.op("SparseSinkAttention", [q, kv, sink, shared["compress_kv"], shared["topk_idx"]],
                       domain=H20_DOMAIN, name=f"layer{i}_attention", **attrs)
        else:  # no index source yet: every compressed entry is masked off, i.e. window only
            out = g.op("SinkAttention", [q, kv, sink], domain=H20_DOMAIN, name=f"layer{i}_attention", **attrs)
        out = self.rope(out, h, rope_tables, inverse=True)
        grp, r_o = cfg["o_groups"], cfg["o_lora_rank"]
        per = h * hd // grp
        grouped = g.op("Transpose", [g.op("Reshape", [out, g.i64(-1, grp, per)])], perm=[1, 0, 2])  # [G,S,per]
        wo_a = self.weight(a + "wo_a.weight", lambda w: w.reshape(grp, r_o, per).transpose(0, 2, 1),
                           lambda _: [grp, per, r_o])
        y = g.op("Transpose", [g.op("MatMul", [grouped, wo_a])], perm=[1, 0, 2])  # [S,G,R]
        return self.linear(g.op("Reshape", [y, g.i64(-1, grp * r_o)]), a + "wo_b.weight")

    def require_scales_of_packed(self, name):
        """Refuse checkpoint tensor `name` stored as bytes (packed FP4)
        without its scales: widening would read the bytes as numbers."""
        dtype = self.ckpt.info(name)[0]
        if dtype in ("U8", "I8") and self.ckpt.scale_of(name) is None:
            raise ExportError(f"{name}: stored as {dtype} bytes (packed FP4) but the checkpoint has no "
                              f"scales for it ({name[: -len('.weight')]}.scale)")

    def fp4_experts_stacked(self, f, e):
        """With fp4_experts: [(packed, scale)] initializer pairs for w1, w3, w2
        of the routed experts under prefix `f` when the checkpoint stores all
        of them as FP4 (packed e2m1 [out, in / 2] + ue8m0 [out, in / 32]
        bytes), each stacked over the `e` experts as stored (ONNX INT8: MLIR's
        signless bytes; the op reads them as unsigned); None otherwise. A
        graph-only export reserves them as DeepSeek's V4 checkpoints store
        the routed experts (FP4 wherever `in` is a multiple of 32)."""
        if not self.fp4_experts:
            return None
        # Decide for all three first (a partly FP4 layer is widened whole),
        # then write: no orphan initializers.
        plan = []
        for w in ("w1", "w3", "w2"):
            names = [f + f"experts.{k}.{w}.weight" for k in range(e)]
            rows, cols = self.shapes[names[0]]
            if self.ckpt is None:
                if cols % quant.FP4_BLOCK:
                    return None
                plan.append((w, names, None, rows, cols))
                continue
            for n in names:
                if n not in self.ckpt:
                    raise ExportError(f"checkpoint has no tensor {n!r} (needed by the config)")
                self.require_scales_of_packed(n)
            stored = [self.ckpt.scale_of(n) for n in names]
            if any(self.ckpt.info(n)[0] not in ("U8", "I8") or
                   self.ckpt.info(s)[0] not in ("F8_E8M0", "U8") for n, s in zip(names, stored)):
                return None  # not (all) FP4: widened as before
            want = ([rows, cols // 2], [rows, cols // quant.FP4_BLOCK])
            for n, s in zip(names, stored):
                if cols % quant.FP4_BLOCK or (self.ckpt.info(n)[1], self.ckpt.info(s)[1]) != want:
                    raise ExportError(f"{n}: an FP4 expert weight of [{rows}, {cols}] is stored as {want[0]} "
                                      f"bytes with ue8m0 scales {want[1]} (inputs a multiple of "
                                      f"{quant.FP4_BLOCK}), got {self.ckpt.info(n)[1]} and {self.ckpt.info(s)[1]}")
            plan.append((w, names, stored, rows, cols))
        out = []
        for w, names, stored, rows, cols in plan:
            wq, sq = f + f"experts.{w}.fp4", f + f"experts.{w}.scale"
            if stored is None:
                self.g.initializers.append(self.data.reserve(wq, [e, rows, cols // 2], np.int8))
                self.g.initializers.append(self.data.reserve(sq, [e, rows, cols // quant.FP4_BLOCK], np.int8))
            else:
                self.g.initializers.append(self.data.add_stacked(
                    wq, (self.ckpt.raw(n).view(np.int8) for n in names), e))
                self.g.initializers.append(self.data.add_stacked(
                    sq, (self.ckpt.raw(s).view(np.int8) for s in stored), e))
            out.append((wq, sq))
        return out

    def moe(self, x, i):
        cfg = self.cfg
        f = f"model.layers.{i}.ffn."
        e = cfg["n_routed_experts"]
        attrs = dict(top_k=cfg["num_experts_per_tok"], scaling=float(cfg["routed_scaling_factor"]),
                     limit=float(cfg["swiglu_limit"]), temp=float(cfg["gate_temp"]))
        router = [x, self.linear_t(f + "gate.weight"), self.weight(f + "gate.bias")]
        fp4 = self.fp4_experts_stacked(f, e)
        if fp4 is not None:
            routed = self.g.op("RoutedExpertsMxfp4", router + [t for pair in fp4 for t in pair],
                               domain=H20_DOMAIN, name=f"layer{i}_experts", **attrs)
            return self.g.op("Add", [routed, self.shared_expert(x, f + "shared_experts.")])
        w1 = self.stacked_t([f + f"experts.{k}.w1.weight" for k in range(e)], f + "experts.w1")
        w3 = self.stacked_t([f + f"experts.{k}.w3.weight" for k in range(e)], f + "experts.w3")
        w2 = self.stacked_t([f + f"experts.{k}.w2.weight" for k in range(e)], f + "experts.w2")
        routed = self.g.op("RoutedExperts", router + [w1, w3, w2], domain=H20_DOMAIN,
                           name=f"layer{i}_experts", **attrs)
        return self.g.op("Add", [routed, self.shared_expert(x, f + "shared_experts.")])

    def shared_expert(self, x, pre):
        g = self.g
        lim = F32(self.cfg["swiglu_limit"])
        gate = self.linear(x, pre + "w1.weight")
        up = self.linear(x, pre + "w3.weight")
        if lim > 0:
            up = g.op("Clip", [up, g.const(-lim), g.const(lim)])
            gate = g.op("Min", [gate, g.const(lim)])
        act = g.op("Mul", [g.op("Mul", [gate, g.op("Sigmoid", [gate])]), up])
        return self.linear(act, pre + "w2.weight")

    # ------------------------------------------------------------ model
    def build(self, logits):
        g, cfg = self.g, self.cfg
        hc, d = cfg["hc_mult"], cfg["hidden_size"]
        ids = g.op("Reshape", ["input_ids", g.i64(-1)], name="ids")  # one prompt: [S]
        x = g.op("Gather", [self.weight("model.embed.weight"), ids], axis=0)  # [S, D]
        streams = g.op("Expand", [g.op("Unsqueeze", [x, g.i64(1)]), g.i64(1, hc, 1)])  # [S, hc, D]
        s = g.op("Squeeze", [g.dim(ids, 0), g.i64(0)])
        pos = g.op("Range", [g.const(np.int64(0)), s, g.const(np.int64(1))])
        tables = {"main": self.rope_tables("main", pos), "compress": self.rope_tables("compress", pos)}
        hash_ids = self.engram_hash_ids(ids) if cfg["engram_layer_ids"] else None
        onehot = np.zeros(hc, F32)
        onehot[0] = 1
        pre_mix = g.op("Mul", [g.op("Unsqueeze", [g.op("ReduceSum", [x, g.i64(1)], keepdims=0), g.i64(1)]),
                               g.const(F32(0))])
        pre_mix = g.op("Add", [pre_mix, g.const(onehot)])  # [S, hc] one-hot on stream 0
        shared = {}
        for i in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{i}."
            if i in cfg["engram_layer_ids"]:
                streams = self.engram(streams, hash_ids, i, p)
            residual = streams
            attn_pre, attn_post, attn_comb = self.hc_mixes(streams, p, "attn")
            collapsed = self.hc_collapse(streams, pre_mix)
            out = self.attention(self.rms(collapsed, p + "attn_norm.weight"), i, shared, tables)
            streams = self.hc_expand(out, residual, attn_post, attn_comb)
            residual = streams
            ffn_pre, ffn_post, ffn_comb = self.hc_mixes(streams, p, "ffn")
            collapsed = self.hc_collapse(streams, attn_pre)
            out = self.moe(self.rms(collapsed, p + "ffn_norm.weight"), i)
            streams = self.hc_expand(out, residual, ffn_post, ffn_comb)
            pre_mix = ffn_pre
            if self.intermediates:
                g.op("Identity", [streams], outs=[f"streams.{i}"])
        hidden = self.rms(self.hc_collapse(streams, pre_mix), "model.norm.weight")
        if logits == "last":
            # [1, S, H] -> Slice(starts -1, axis 1) -> MatMul: the form of a
            # last-position LM head compilers match (h20's chunked prefill
            # computes it on the prompt's last real row).
            hidden = g.op("Unsqueeze", [hidden, g.i64(0)])
            hidden = g.op("Slice", [hidden, g.i64(-1), g.i64(2 ** 62), g.i64(1)])
            g.op("MatMul", [hidden, self.linear_t("lm_head.weight")], outs=["logits"])
            return
        out = self.linear(hidden, "lm_head.weight")
        g.op("Unsqueeze", [out, g.i64(0)], outs=["logits"])


def check_supported(cfg):
    if cfg["scoring_func"] != "sqrtsoftplus":
        raise ExportError(f"scoring_func {cfg['scoring_func']!r}: only sqrtsoftplus (V4.1) is exported")
    if cfg["num_experts_per_tok"] > cfg["n_routed_experts"]:
        raise ExportError(f"num_experts_per_tok {cfg['num_experts_per_tok']} exceeds n_routed_experts "
                          f"{cfg['n_routed_experts']}")
    if not cfg["norm_topk_prob"] or cfg["num_experts_per_tok"] < 2:
        raise ExportError("RoutedExperts normalises the top-k weights: needs norm_topk_prob and top-k >= 2")


def export(src, out_dir, logits="all", intermediates=False, graph_only=False, layers=None,
           fp8_linears=False, fp4_experts=False, fp8_engram=False):
    """Write out_dir/model.onnx(+.data) for checkpoint directory `src`; with
    graph_only, `src` is a config (name, file or directory) and the weights'
    bytes are left as a hole of the right size (compilers only need shapes)."""
    cfg = v41config.load(src, layers)
    check_supported(cfg)
    ckpt = None if graph_only else Checkpoint(src)
    token_map = None
    if cfg["engram_layer_ids"]:
        if not os.path.isdir(src):
            raise ExportError(f"{src}: Engram layers {cfg['engram_layer_ids']} need the checkpoint directory's "
                              "engram_token_map.npy")
        path = os.path.join(src, "engram_token_map.npy")
        if not os.path.exists(path):
            raise ExportError(f"{path}: missing (Engram layers {cfg['engram_layer_ids']} need the tokenizer's "
                              "compressed token map: models/deepseek_v41/token_map.py TOKENIZER "
                              f"{path} --config CONFIG makes it)")
        token_map = np.load(path)
        if token_map.shape != (cfg["vocab_size"],) or token_map.min() < 0 or \
                token_map.max() >= cfg["engram_compressed_vocab_size"]:
            raise ExportError(f"{path}: expected int64 [{cfg['vocab_size']}] in [0, "
                              f"{cfg['engram_compressed_vocab_size']})")
    os.makedirs(out_dir, exist_ok=True)
    data = ExternalData(os.path.join(out_dir, "model.onnx.data"))
    try:
        ex = Exporter(cfg, ckpt, data, token_map)
        ex.intermediates = intermediates
        ex.fp8_linears = fp8_linears
        ex.fp4_experts = fp4_experts
        ex.fp8_engram = fp8_engram
        ex.build(logits)
        for name, value, _, _ in ex.debug_outputs:
            ex.g.op("Identity", [value], outs=[name])
    except BaseException:
        data.abandon()
        raise
    data.close()
    s = "S"
    graph = helper.make_graph(
        ex.g.nodes, "deepseek_v41",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, s])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, s if logits == "all" else 1,
                                                                     cfg["vocab_size"]])]
        + [helper.make_tensor_value_info(f"streams.{i}", TensorProto.FLOAT, [s, cfg["hc_mult"], cfg["hidden_size"]])
           for i in range(cfg["num_hidden_layers"]) if intermediates]
        + [helper.make_tensor_value_info(name, dt, [None] * rank) for name, _, dt, rank in ex.debug_outputs],
        ex.g.initializers)
    model = helper.make_model(graph, producer_name="h20 models/deepseek_v41/export.py",
                              opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(H20_DOMAIN, 1)],
                              functions=h20_ops.all_functions())
    model.ir_version = 10
    path = os.path.join(out_dir, "model.onnx")
    with open(path + ".tmp", "wb") as f:
        f.write(model.SerializeToString())
    os.replace(path + ".tmp", path)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", help="directory with config.json and model.safetensors (with --graph-only: "
                    "a config name under configs/, a config.json, or a directory)")
    ap.add_argument("out", help="output directory (model.onnx, model.onnx.data)")
    ap.add_argument("--logits", choices=["all", "last"], default="all")
    ap.add_argument("--intermediates", action="store_true",
                    help="also output streams.{i} [S, hc_mult, hidden] after every layer (debugging)")
    ap.add_argument("--graph-only", action="store_true",
                    help="no checkpoint: reserve the weights' bytes as a sparse hole (compile-only exports)")
    ap.add_argument("--layers", type=int, default=0, help="export only the first N layers")
    ap.add_argument("--fp8-linears", action="store_true",
                    help="keep FP8-stored linear weights FP8 (ai.h20 BlockScaledMatMul; with --graph-only: "
                         "every linear DeepSeek stores in FP8)")
    ap.add_argument("--fp4-experts", action="store_true",
                    help="keep FP4-stored routed experts FP4 (ai.h20 RoutedExpertsMxfp4; with --graph-only: "
                         "every MoE layer, as DeepSeek's V4 checkpoints store them)")
    ap.add_argument("--fp8-engram", action="store_true",
                    help="keep FP8-stored Engram tables FP8 (rows and their scales gathered, then "
                         "dequantised; with --graph-only: every table whose head dim is a multiple of 32, "
                         "as the released checkpoint stores them)")
    args = ap.parse_args()
    try:
        print(export(args.checkpoint, args.out, args.logits, args.intermediates, args.graph_only,
                     args.layers or None, args.fp8_linears, args.fp4_experts, args.fp8_engram))
    except (v41config.ConfigError, CheckpointError, ExportError) as e:
        print(f"export.py: {e}", file=sys.stderr)
        sys.exit(2)  # bad input


if __name__ == "__main__":
    main()
