#!/usr/bin/env python3
"""Writes ONNX's function-body ("_expanded") spellings of the conformance cases.

gen_expanded.py SRC_DIR OUT_DIR [--layernorm]

For every case in SRC_DIR (../shared/conformance/onnx-node: one fused
Attention / RotaryEmbedding / RMSNormalization node per model) this writes
OUT_DIR/<case>_expanded/model.onnx: the same graph inputs and outputs, the
node replaced by the primitive ops of the operator's function body as the
ONNX spec defines it (onnx/defs/nn: Attention-23/24, RotaryEmbedding-23,
RMSNormalization-23; what ONNX's own `_expanded` node tests and
onnxscript-based exporters write), and copies test_data_set_0 (the body is
exact, so the fused case's reference outputs are the expanded one's too).
Opset-25 Attention cases (sliding windows) are skipped.

With --layernorm it also writes LayerNormalization-17 cases (fused and
expanded), random inputs and numpy reference outputs, since the fused
conformance set has none.
"""
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

INT64, FLOAT = TensorProto.INT64, TensorProto.FLOAT


class Body:
    """Collects the nodes of one function body with local names prefixed."""

    def __init__(self, formals, prefix):
        self.map = dict(formals)  # formal name -> graph value name ('' if absent)
        self.prefix = prefix
        self.nodes = []
        self.outputs = {}

    def name(self, n):
        if n in self.map:
            return self.map[n]
        return self.prefix + n

    def add(self, outs, op, ins, **attrs):
        outs = [o.strip() for o in outs.split(",")]
        ins = [self.name(i.strip()) for i in ins.split(",")] if ins else []
        self.nodes.append(helper.make_node(op, ins, [self.name(o) for o in outs],
                                           name=self.prefix + outs[0], **attrs))

    def const(self, out, value, dtype):
        arr = np.array(value, dtype=dtype)
        self.nodes.append(helper.make_node(
            "Constant", [], [self.name(out)], name=self.prefix + out,
            value=numpy_helper.from_array(arr, self.prefix + out)))

    def const1d(self, out, v, dtype=np.int64):
        self.const(out, [v], dtype)


def rms_norm(b, attrs, ttype):
    axis = attrs.get("axis", -1)
    eps = attrs.get("epsilon", 1e-5)
    u = attrs.get("stash_type", FLOAT)
    b.const("FloatEpsilon", eps, np.float32)
    b.add("Epsilon", "Cast", "FloatEpsilon", to=u)
    b.add("XShape", "Shape", "X")
    b.add("Rank", "Size", "XShape")
    b.const("Axis", axis, np.int64)
    b.add("PosAxis", "Identity" if axis >= 0 else "Add", "Axis" if axis >= 0 else "Rank, Axis")
    b.const("One", 1, np.int64)
    b.add("ReduceAxes", "Range", "PosAxis, Rank, One")
    b.add("XU", "Cast", "X", to=u)
    b.add("XSquared", "Mul", "XU, XU")
    b.add("XSquaredMean", "ReduceMean", "XSquared, ReduceAxes")
    b.add("MeanSquareEpsilon", "Add", "XSquaredMean, Epsilon")
    b.add("RMS", "Sqrt", "MeanSquareEpsilon")
    b.add("Normalized", "Div", "XU, RMS")
    b.add("NormalizedT", "Cast", "Normalized", to=ttype)
    b.add("Y", "Mul", "NormalizedT, scale")


def layer_norm(b, attrs, ttype, has_bias):
    axis = attrs.get("axis", -1)
    eps = attrs.get("epsilon", 1e-5)
    u = attrs.get("stash_type", FLOAT)
    b.const("FloatEpsilon", eps, np.float32)
    b.add("Epsilon", "Cast", "FloatEpsilon", to=u)
    b.add("XShape", "Shape", "X")
    b.add("Rank", "Size", "XShape")
    b.const1d("Zero1D", 0)
    b.const1d("Axis1D", axis)
    b.add("PrefixShape", "Slice", "XShape, Zero1D, Axis1D")
    b.add("NumReducedAxes", "Sub" if axis >= 0 else "Neg", "Rank, Axis1D" if axis >= 0 else "Axis1D")
    b.nodes.append(helper.make_node(
        "ConstantOfShape", [b.name("NumReducedAxes")], [b.name("SuffixShape")],
        name=b.prefix + "SuffixShape", value=numpy_helper.from_array(np.array([1], np.int64))))
    b.add("ReducedShape", "Concat", "PrefixShape, SuffixShape", axis=0)
    b.add("X2D", "Flatten", "X", axis=axis)
    b.add("XU", "Cast", "X2D", to=u)
    b.add("Mean2D", "ReduceMean", "XU", axes=[1])
    b.add("Square", "Mul", "XU, XU")
    b.add("MeanOfSquare", "ReduceMean", "Square", axes=[1])
    b.add("SquareOfMean", "Mul", "Mean2D, Mean2D")
    b.add("Var", "Sub", "MeanOfSquare, SquareOfMean")
    b.add("VarPlusEpsilon", "Add", "Var, Epsilon")
    b.add("StdDev", "Sqrt", "VarPlusEpsilon")
    b.add("Deviation", "Sub", "XU, Mean2D")
    b.add("Normalized", "Div", "Deviation, StdDev")
    b.add("NormalizedT", "Cast", "Normalized", to=ttype)
    b.add("Scale2D", "Flatten", "Scale", axis=0)
    b.add("Scaled", "Mul", "NormalizedT, Scale2D")
    if has_bias:
        b.add("B2D", "Flatten", "B", axis=0)
        b.add("Biased", "Add", "Scaled, B2D")
    else:
        b.add("Biased", "Identity", "Scaled")
    b.add("Y", "Reshape", "Biased, XShape")
    b.add("InvStdDev2D", "Reciprocal", "StdDev")
    if b.map.get("Mean"):
        b.add("Mean", "Reshape", "Mean2D, ReducedShape")
    if b.map.get("InvStdDev"):
        b.add("InvStdDev", "Reshape", "InvStdDev2D, ReducedShape")


def rope(b, attrs, rank, has_pos):
    interleaved = attrs.get("interleaved", 0)
    rdim = attrs.get("rotary_embedding_dim", 0)
    num_heads = attrs.get("num_heads", 0)
    b.const1d("Zero1D", 0)
    b.const1d("NumHeads", num_heads)
    b.const1d("NegOne", -1)
    if rank == 3:
        b.add("NewShape", "Concat", "Zero1D, Zero1D, NumHeads, NegOne", axis=0)
        b.add("XIn", "Reshape", "X, NewShape")
    else:
        b.add("XIn", "Transpose", "X", perm=[0, 2, 1, 3])
    b.add("HeadSize", "Shape", "XIn", start=3, end=4)
    if rdim > 0:
        b.const1d("RotaryEmbedDim", rdim)
    else:
        b.add("RotaryEmbedDim", "Identity", "HeadSize")
    b.const1d("Two1D", 2)
    b.add("NoRotateLength", "Sub", "HeadSize, RotaryEmbedDim")
    b.add("RotateSplitLengths", "Concat", "RotaryEmbedDim, NoRotateLength", axis=0)
    b.add("XToRotate, XNoRotate", "Split", "XIn, RotateSplitLengths", axis=-1)
    if has_pos:
        b.add("CosCacheGather", "Gather", "cos_cache, position_ids")
        b.add("SinCacheGather", "Gather", "sin_cache, position_ids")
    else:
        b.add("CosCacheGather", "Identity", "cos_cache")
        b.add("SinCacheGather", "Identity", "sin_cache")
    b.add("RotaryEmbedDimHalf", "Div", "RotaryEmbedDim, Two1D")
    b.add("RotaryEmbedDimHalfInt", "Cast", "RotaryEmbedDimHalf", to=INT64)
    b.add("CosCacheSliced", "Slice", "CosCacheGather, Zero1D, RotaryEmbedDimHalfInt, Two1D")
    b.add("SinCacheSliced", "Slice", "SinCacheGather, Zero1D, RotaryEmbedDimHalfInt, Two1D")
    b.add("CosCacheUnsqueezed", "Unsqueeze", "CosCacheSliced, Two1D")
    b.add("SinCacheUnsqueezed", "Unsqueeze", "SinCacheSliced, Two1D")
    if interleaved == 0:
        b.add("X1, X2", "Split", "XToRotate", axis=-1, num_outputs=2)
    else:
        b.const1d("One1D", 1)
        b.const1d("AxesRotaryDim", 3)
        b.add("RotaryEmbedDimInclusive", "Add", "RotaryEmbedDim, One1D")
        b.add("X1", "Slice", "XToRotate, Zero1D, RotaryEmbedDim, AxesRotaryDim, Two1D")
        b.add("X2", "Slice", "XToRotate, One1D, RotaryEmbedDimInclusive, AxesRotaryDim, Two1D")
    b.add("CosX1", "Mul", "CosCacheUnsqueezed, X1")
    b.add("SinX2", "Mul", "SinCacheUnsqueezed, X2")
    b.add("Real", "Sub", "CosX1, SinX2")
    b.add("SinX1", "Mul", "SinCacheUnsqueezed, X1")
    b.add("CosX2", "Mul", "CosCacheUnsqueezed, X2")
    b.add("Imaginary", "Add", "SinX1, CosX2")
    if interleaved == 0:
        b.add("XRotated", "Concat", "Real, Imaginary", axis=-1)
    else:
        b.add("RealInterleave", "Unsqueeze", "Real, NegOne")
        b.add("ImaginaryInterleave", "Unsqueeze", "Imaginary, NegOne")
        b.add("XRotatedInterleavedConcat", "Concat", "RealInterleave, ImaginaryInterleave", axis=-1)
        b.add("XRotatedShape", "Shape", "XToRotate")
        b.add("XRotated", "Reshape", "XRotatedInterleavedConcat, XRotatedShape")
    b.add("XConcat", "Concat", "XRotated, XNoRotate", axis=-1)
    if rank == 3:
        b.add("YTransposed", "Identity", "XConcat")
    else:
        b.add("YTransposed", "Transpose", "XConcat", perm=[0, 2, 1, 3])
    b.add("XShape", "Shape", "X")
    b.add("Y", "Reshape", "YTransposed, XShape")


def causal_mask(b, attrs, has, mask_is_bool, padding, cast_mask_to_bias):
    b.add("NewKVSeqLen", "Shape", "PresentKey", start=-2, end=-1)
    b.add("AttnBiasShape", "Concat", "QSeqLen, NewKVSeqLen", axis=0)
    b.const1d("FloatNegInf", -np.inf, np.float32)
    b.const1d("ScalarZero", 0.0, np.float32)
    if has(3):
        if mask_is_bool:
            b.add("AttnBiasShort", "Where", "attn_mask, ScalarZero, FloatNegInf")
        else:
            b.add("AttnBiasShort", "Identity", "attn_mask")
        if padding:
            b.add("MaskKVSeqLen", "Shape", "attn_mask", start=-1)
            b.add("PaddingKVSeqLen", "Sub", "NewKVSeqLen, MaskKVSeqLen")
            b.add("Pads", "Concat", "Zero1D, PaddingKVSeqLen", axis=0)
            b.add("FloatNegInfCast", "CastLike", "FloatNegInf, AttnBiasShort")
            b.add("AttnBias", "Pad", "AttnBiasShort, Pads, FloatNegInfCast, NegOne1D")
        else:
            b.add("AttnBias", "Identity", "AttnBiasShort")
    else:
        b.add("AttnBias", "ConstantOfShape", "AttnBiasShape")
    is_causal = attrs.get("is_causal", 0)
    if is_causal == 1:
        b.const1d("Zero", 0)
        b.const1d("One", 1)
        b.add("ZeroNoDim", "Squeeze", "Zero, Zero")
        b.add("OneNoDim", "Squeeze", "One, Zero")
        b.add("SequenceLength", "Gather", "AttnBiasShape, ZeroNoDim")
        b.add("TotalSequenceLength", "Gather", "AttnBiasShape, OneNoDim")
        b.add("RangeRow", "Range", "ZeroNoDim, SequenceLength, OneNoDim")
        b.add("RangeRow2D", "Unsqueeze", "RangeRow, One")
        b.add("RangeCol", "Range", "ZeroNoDim, TotalSequenceLength, OneNoDim")
        b.add("RangeCol2D", "Unsqueeze", "RangeCol, Zero")
        if has(6) and not has(4):
            b.const("Axes01", [0, 1], np.int64)
            b.const("Axes123", [1, 2, 3], np.int64)
            b.add("RangeRow4D", "Unsqueeze", "RangeRow2D, Axes01")
            b.add("RangeCol4D", "Unsqueeze", "RangeCol2D, Axes01")
            b.add("OffsetB4D", "Unsqueeze", "CausalOffsetPerBatch, Axes123")
            b.add("RowPlusOff", "Add", "RangeRow4D, OffsetB4D")
            b.add("BoolMaskTri", "Less", "RowPlusOff, RangeCol4D")
        else:
            b.add("RangeRow2DPast", "Add", "RangeRow2D, PastKVSeqLen")
            b.add("BoolMaskTri", "Less", "RangeRow2DPast, RangeCol2D")
        if cast_mask_to_bias:
            b.add("MaskTriFloat", "Where", "BoolMaskTri, FloatNegInf, ScalarZero")
            b.add("MaskTri", "CastLike", "MaskTriFloat, AttnBias")
        else:
            b.add("MaskTri", "Where", "BoolMaskTri, FloatNegInf, ScalarZero")
        b.add("AttnBiasCausalOrNot", "Add", "AttnBias, MaskTri")
    else:
        b.add("AttnBiasCausalOrNot", "Identity", "AttnBias")


def attention(b, attrs, opset, t1, mask_is_bool):
    has = lambda i: bool(b.map.get(FORMALS["Attention"][0][i], "")) if i < 7 else False
    has_out = lambda i: bool(b.map.get(FORMALS["Attention"][1][i], ""))
    softmax_precision = attrs.get("softmax_precision", t1)
    qh, kvh = attrs.get("q_num_heads", 0), attrs.get("kv_num_heads", 0)
    is3d = qh > 0 and kvh > 0
    b.add("BatchSize", "Shape", "Q", start=0, end=1)
    b.add("QSeqLen", "Shape", "Q", start=-2, end=-1)
    b.add("KVSeqLen", "Shape", "K", start=-2, end=-1)
    if is3d:
        b.const1d("QNumHeadsAttr", qh)
        b.const1d("KVNumHeadsAttr", kvh)
        b.const1d("NegOne", -1)
        b.add("QIntermediateShape", "Concat", "BatchSize, QSeqLen, QNumHeadsAttr, NegOne", axis=0)
        b.add("KVIntermediateShape", "Concat", "BatchSize, KVSeqLen, KVNumHeadsAttr, NegOne", axis=0)
        b.add("QIntermediate", "Reshape", "Q, QIntermediateShape")
        b.add("KIntermediate", "Reshape", "K, KVIntermediateShape")
        b.add("VIntermediate", "Reshape", "V, KVIntermediateShape")
        for x in "QKV":
            b.add(x + "Reshaped", "Transpose", x + "Intermediate", perm=[0, 2, 1, 3])
    else:
        for x in "QKV":
            b.add(x + "Reshaped", "Identity", x)
    b.add("QNumHeads", "Shape", "QReshaped", start=1, end=2)
    b.add("KVNumHeads", "Shape", "KReshaped", start=1, end=2)
    b.add("QKHeadSize", "Shape", "QReshaped", start=3, end=4)
    b.add("QKHeadSizeF", "Cast", "QKHeadSize", to=FLOAT)
    b.add("VHeadSize", "Shape", "VReshaped", start=3, end=4)
    b.add("SqrtHeadSize", "Sqrt", "QKHeadSizeF")
    b.const1d("One1D", 1)
    if opset >= 24:
        b.const1d("NegOne1D", -1)
    b.const1d("One1DF", 1.0, np.float32)
    b.const1d("Zero1D", 0)
    b.add("CalculatedScale", "Div", "One1DF, SqrtHeadSize")
    b.const("ScaleF", attrs.get("scale", 1.0), np.float32)
    b.add("ScaleFactor", "Identity", "ScaleF" if "scale" in attrs else "CalculatedScale")
    b.add("ScaleFactorSqrt", "Sqrt", "ScaleFactor")
    b.add("ScaleFactorF", "Cast", "ScaleFactorSqrt", to=t1)
    if has(4):
        b.add("PresentKey", "Concat", "past_key, KReshaped", axis=2)
        b.add("PastKVSeqLen", "Shape", "past_key", start=-2, end=-1)
    else:
        b.add("PresentKey", "Identity", "KReshaped")
        b.const1d("PastKVSeqLen", 0)
    if opset >= 24 and attrs.get("is_causal", 0) == 1 and has(6) and not has(4):
        b.add("CausalOffsetPerBatch", "Sub", "nonpad_kv_seqlen, QSeqLen")
    if has_out(1):
        b.add("present_key", "Identity", "PresentKey")
    if has(5):
        b.add("PresentValue", "Concat", "past_value, VReshaped", axis=2)
    else:
        b.add("PresentValue", "Identity", "VReshaped")
    if has_out(2):
        b.add("present_value", "Identity", "PresentValue")
    causal_mask(b, attrs, has, mask_is_bool, padding=opset >= 24, cast_mask_to_bias=False)
    if opset >= 24 and has(6):
        b.add("KVSeqLenExpanded", "Unsqueeze", "nonpad_kv_seqlen, One1D")
        b.add("KVSeqLen0D", "Squeeze", "KVSeqLen")
        b.const("Zero0D", 0, np.int64)
        b.const("One0D", 1, np.int64)
        b.add("Range", "Range", "Zero0D, KVSeqLen0D, One0D")
        b.add("PaddingMaskBool", "Less", "Range, KVSeqLenExpanded")
        b.add("PaddingMaskFloat", "Where", "PaddingMaskBool, ScalarZero, FloatNegInf")
        b.add("PaddingMask3D", "Unsqueeze", "PaddingMaskFloat, One1D")
        b.add("PaddingMask4D", "Unsqueeze", "PaddingMask3D, One1D")
        b.add("AttnBiasCausalPad", "Add", "AttnBiasCausalOrNot, PaddingMask4D")
    else:
        b.add("AttnBiasCausalPad", "Identity", "AttnBiasCausalOrNot")
    b.add("AttnBiasT", "Cast", "AttnBiasCausalPad", to=t1)
    b.add("NGQACond1", "Equal", "QNumHeads, KVNumHeads")
    b.add("GQACond1", "Not", "NGQACond1")
    b.add("DivNumHeads", "Div", "QNumHeads, KVNumHeads")
    b.add("IDivNumHeads", "Cast", "DivNumHeads", to=INT64)
    b.add("RemainderNumHeads", "Mod", "QNumHeads, KVNumHeads")
    b.add("GQACond2", "Equal", "RemainderNumHeads, Zero1D")
    b.add("GQACond", "And", "GQACond1, GQACond2")
    b.add("InterleaveDim", "Where", "GQACond, IDivNumHeads, One1D")
    b.const1d("Two1D", 2)
    b.add("KUnsqueezed", "Unsqueeze", "PresentKey, Two1D")
    b.add("VUnsqueezed", "Unsqueeze", "PresentValue, Two1D")
    b.add("KExpandShape", "Concat", "BatchSize, KVNumHeads, InterleaveDim, NewKVSeqLen, QKHeadSize", axis=0)
    b.add("KExpanded", "Expand", "KUnsqueezed, KExpandShape")
    b.add("VExpandShape", "Concat", "BatchSize, KVNumHeads, InterleaveDim, NewKVSeqLen, VHeadSize", axis=0)
    b.add("VExpanded", "Expand", "VUnsqueezed, VExpandShape")
    b.add("KAttentionShape", "Concat", "BatchSize, QNumHeads, NewKVSeqLen, QKHeadSize", axis=0)
    b.add("VAttentionShape", "Concat", "BatchSize, QNumHeads, NewKVSeqLen, VHeadSize", axis=0)
    b.add("KAttentionInput", "Reshape", "KExpanded, KAttentionShape")
    b.add("VAttentionInput", "Reshape", "VExpanded, VAttentionShape")
    b.add("KTranspose", "Transpose", "KAttentionInput", perm=[0, 1, 3, 2])
    b.add("QScaled", "Mul", "QReshaped, ScaleFactorF")
    b.add("KScaled", "Mul", "KTranspose, ScaleFactorF")
    b.add("QKAttnWeight", "MatMul", "QScaled, KScaled")
    b.add("QKAttnCast", "Cast", "QKAttnWeight", to=t1)
    softcap = attrs.get("softcap", 0.0)
    if softcap != 0:
        b.const1d("Softcap", softcap, np.float32)
        b.add("SoftcapF", "Cast", "Softcap", to=t1)
        b.add("SoftcapDiv", "Div", "QKAttnCast, SoftcapF")
        b.add("SoftcapTanh", "Tanh", "SoftcapDiv")
        b.add("QKAttnSoftcapped", "Mul", "SoftcapTanh, SoftcapF")
        b.add("QKAttnWeightSoftcap", "Add", "QKAttnSoftcapped, AttnBiasT")
    else:
        b.add("QKAttnWeightSoftcap", "Add", "QKAttnCast, AttnBiasT")
    b.add("SoftmaxCast", "Cast", "QKAttnWeightSoftcap", to=softmax_precision)
    b.add("AttnWeightSoftmax", "Softmax", "SoftmaxCast")
    b.add("SoftmaxOut", "Cast", "AttnWeightSoftmax", to=t1)
    b.const1d("BiasRowMaxAxes", -1)
    b.add("BiasRowMax", "ReduceMax", "AttnBiasT, BiasRowMaxAxes")
    b.add("FloatNegInfT", "CastLike", "FloatNegInf, AttnBiasT")
    b.add("RowAllMasked", "Equal", "BiasRowMax, FloatNegInfT")
    b.add("ZeroProbT", "CastLike", "ScalarZero, SoftmaxOut")
    b.add("SoftmaxOutSafe", "Where", "RowAllMasked, ZeroProbT, SoftmaxOut")
    mode = attrs.get("qk_matmul_output_mode", 0)
    if has_out(3):
        src = {1: "QKAttnSoftcapped" if softcap != 0 else "QKAttnCast", 2: "QKAttnWeightSoftcap",
               3: "SoftmaxOutSafe"}.get(mode, "QKAttnWeight")
        b.add("qk_matmul_output", "Identity", src)
    b.add("YPreReshape", "MatMul", "SoftmaxOutSafe, VAttentionInput")
    if is3d:
        b.add("YTranspose", "Transpose", "YPreReshape", perm=[0, 2, 1, 3])
        b.add("YNewShape", "Concat", "Zero1D, Zero1D, NegOne", axis=0)
        b.add("Y", "Reshape", "YTranspose, YNewShape")
    else:
        b.add("Y", "Identity", "YPreReshape")


FORMALS = {
    "Attention": (["Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen"],
                  ["Y", "present_key", "present_value", "qk_matmul_output"]),
    "RotaryEmbedding": (["X", "cos_cache", "sin_cache", "position_ids"], ["Y"]),
    "RMSNormalization": (["X", "scale"], ["Y"]),
    "LayerNormalization": (["X", "Scale", "B"], ["Y", "Mean", "InvStdDev"]),
}


def expand_node(graph, node, opset):
    ins, outs = FORMALS[node.op_type]
    formals = {f: (node.input[i] if i < len(node.input) else "") for i, f in enumerate(ins)}
    formals.update({f: (node.output[i] if i < len(node.output) else "") for i, f in enumerate(outs)})
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    types = {v.name: v.type.tensor_type for v in list(graph.input) + list(graph.output)}
    b = Body(formals, (node.name or node.op_type) + "_")
    x = types[node.input[0]]
    if node.op_type == "RMSNormalization":
        rms_norm(b, attrs, x.elem_type)
    elif node.op_type == "LayerNormalization":
        layer_norm(b, attrs, x.elem_type, bool(formals["B"]))
    elif node.op_type == "RotaryEmbedding":
        rope(b, attrs, len(x.shape.dim), bool(formals["position_ids"]))
    else:
        mask = formals["attn_mask"]
        attention(b, attrs, opset, x.elem_type,
                  bool(mask) and types[mask].elem_type == TensorProto.BOOL)
    return b.nodes


def expand_model(model):
    opset = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")][0]
    g = model.graph
    nodes = []
    for n in g.node:
        nodes += expand_node(g, n, opset)
    del g.node[:]
    g.node.extend(nodes)
    g.name = g.name + "_expanded"
    return model


def layernorm_cases(out):
    rng = np.random.default_rng(17)
    cases = []
    for shape, axes in (((4, 8), (0, 1, -1)), ((2, 3, 5), (1, 2, -1, -2)),
                        ((2, 3, 4, 5), (0, 1, 2, 3, -1, -3))):
        for axis in axes:
            cases.append((f"{len(shape)}d_axis{axis}".replace("-", "_negative_"), shape, axis, 1e-5, True))
    cases.append(("default_axis", (2, 3, 4), None, 1e-5, True))
    cases.append(("3d_epsilon_no_bias", (2, 3, 5), -1, 0.1, False))
    for name, shape, axis, eps, bias in cases:
        a = axis if axis is not None else -1
        pos = a % len(shape)
        nshape = shape[pos:]
        x = rng.standard_normal(shape).astype(np.float32)
        w = rng.standard_normal(nshape).astype(np.float32)
        bb = rng.standard_normal(nshape).astype(np.float32)
        red = tuple(range(pos, len(shape)))
        mean = x.mean(axis=red, keepdims=True)
        var = (x * x).mean(axis=red, keepdims=True) - mean * mean
        inv = 1 / np.sqrt(var + np.float32(eps))
        y = (x - mean) * inv * w + (bb if bias else 0)
        inputs = [("X", x), ("Scale", w)] + ([("B", bb)] if bias else [])
        outputs = [("Y", y), ("Mean", mean), ("InvStdDev", inv)]
        kw = {"epsilon": eps}
        if axis is not None:
            kw["axis"] = axis
        node = helper.make_node("LayerNormalization", [n for n, _ in inputs], [n for n, _ in outputs], **kw)
        g = helper.make_graph([node], "test_layer_normalization_" + name,
                              [helper.make_tensor_value_info(n, FLOAT, v.shape) for n, v in inputs],
                              [helper.make_tensor_value_info(n, FLOAT, v.shape) for n, v in outputs])
        for suffix in ("", "_expanded"):
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
            m.ir_version = 8
            if suffix:
                m = expand_model(m)
            d = os.path.join(out, "test_layer_normalization_" + name + suffix)
            os.makedirs(d + "/test_data_set_0", exist_ok=True)
            onnx.save(m, d + "/model.onnx")
            for j, (n, v) in enumerate(inputs):
                onnx.save_tensor(numpy_helper.from_array(v, n), f"{d}/test_data_set_0/input_{j}.pb")
            for j, (n, v) in enumerate(outputs):
                onnx.save_tensor(numpy_helper.from_array(v.astype(np.float32), n),
                                 f"{d}/test_data_set_0/output_{j}.pb")


def main():
    src, out = sys.argv[1], sys.argv[2]
    only = [a for a in sys.argv[3:] if not a.startswith("--")]
    for case in sorted(os.listdir(src)):
        if only and case not in only:
            continue
        m = onnx.load(os.path.join(src, case, "model.onnx"))
        if m.opset_import[0].version >= 25:
            continue
        d = os.path.join(out, case + "_expanded")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        onnx.save(expand_model(m), d + "/model.onnx")
        shutil.copytree(os.path.join(src, case, "test_data_set_0"), d + "/test_data_set_0")
    if "--layernorm" in sys.argv:
        layernorm_cases(out)


if __name__ == "__main__":
    main()
