//===- OnnxOps.td - the ONNX ops h20 imports ---------------*- tablegen -*-===//
//
// Attribute defaults follow the ONNX operator specification; an attribute
// absent from the node is absent from the op and takes the spec's default.
//
//===----------------------------------------------------------------------===//
#ifndef H20_ONNX_OPS
#define H20_ONNX_OPS

include "h20/Dialect/Onnx/IR/OnnxDialect.td"

//===----------------------------------------------------------------------===//
// Graph-level values
//===----------------------------------------------------------------------===//

def Onnx_NoValueOp : Onnx_Op<"NoValue", [Pure]> {
  let summary = "An omitted optional node input";
  let results = (outs NoneType:$none);
  let assemblyFormat = "attr-dict";
}

def Onnx_WeightOp : Onnx_Op<"Weight", [Pure]> {
  let summary = "A reference to an initializer's bytes, never the bytes";
  let description = [{
    Names the ONNX initializer `name`; its data is `length` bytes at byte
    `offset` of `file` (the external-data file, relative to the model's
    directory, or the model file itself for inline raw_data). `offset` and
    `length` are absent when the data is stored in typed fields (float_data
    etc.) rather than raw bytes. The result's type is the initializer's shape
    and dtype. With `h20.derive = {kind, source_type, source_shape}`
    (h20-quantize-linears) the bytes hold a float [K, N] tensor of
    `source_type` and the result is derived from it when loaded: kind
    "fp8_block128", its transpose [N, K] in float8e4m3fn, each 128 x 128
    block divided by its scale; "fp8_block128_scale", those scales,
    [ceil(N / 128), ceil(K / 128)] float32 (the block's max |w| / 448).
    Errors: empty name; a negative offset or length; a length that
    differs from the byte size of a statically shaped result (of the
    source, when derived); an h20.derive that does not give the result.
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<StrAttr>:$file,
                   OptionalAttr<I64Attr>:$offset, OptionalAttr<I64Attr>:$length);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Onnx_ConstantOp : Onnx_NodeOp<"Constant", 0, 0, 1, 1> {
  let summary = "ONNX Constant (small values only; big ones become onnx.Weight)";
  let arguments = (ins Variadic<Onnx_Input>:$inputs, ElementsAttr:$value);
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

def Onnx_AddOp : Onnx_BinaryOp<"Add">;
def Onnx_SubOp : Onnx_BinaryOp<"Sub">;
def Onnx_MulOp : Onnx_BinaryOp<"Mul">;
def Onnx_DivOp : Onnx_BinaryOp<"Div">;
def Onnx_PowOp : Onnx_BinaryOp<"Pow">;
def Onnx_AndOp : Onnx_BinaryOp<"And">;
def Onnx_OrOp : Onnx_BinaryOp<"Or">;
def Onnx_EqualOp : Onnx_BinaryOp<"Equal">;
def Onnx_LessOp : Onnx_BinaryOp<"Less">;
def Onnx_LessOrEqualOp : Onnx_BinaryOp<"LessOrEqual">;
def Onnx_GreaterOp : Onnx_BinaryOp<"Greater">;
def Onnx_GreaterOrEqualOp : Onnx_BinaryOp<"GreaterOrEqual">;
def Onnx_MaxOp : Onnx_VariadicOp<"Max">;
def Onnx_MinOp : Onnx_VariadicOp<"Min">;
def Onnx_SumOp : Onnx_VariadicOp<"Sum">;

def Onnx_NegOp : Onnx_UnaryOp<"Neg">;
def Onnx_NotOp : Onnx_UnaryOp<"Not">;
def Onnx_AbsOp : Onnx_UnaryOp<"Abs">;
def Onnx_SqrtOp : Onnx_UnaryOp<"Sqrt">;
def Onnx_ReciprocalOp : Onnx_UnaryOp<"Reciprocal">;
def Onnx_ExpOp : Onnx_UnaryOp<"Exp">;
def Onnx_LogOp : Onnx_UnaryOp<"Log">;
def Onnx_SinOp : Onnx_UnaryOp<"Sin">;
def Onnx_CosOp : Onnx_UnaryOp<"Cos">;
def Onnx_TanhOp : Onnx_UnaryOp<"Tanh">;
def Onnx_ErfOp : Onnx_UnaryOp<"Erf">;
def Onnx_SigmoidOp : Onnx_UnaryOp<"Sigmoid">;
def Onnx_SoftplusOp : Onnx_UnaryOp<"Softplus">;
def Onnx_ReluOp : Onnx_UnaryOp<"Relu">;
def Onnx_GeluOp : Onnx_NodeOp<"Gelu", 1, 1, 1, 1> {
  let summary = "ONNX Gelu-20: Gaussian error linear unit, elementwise";
  let description = [{
    Y (same shape and float dtype as X) = 0.5 X (1 + erf(X / sqrt(2))) with
    `approximate` = "none" (the default), or
    0.5 X (1 + tanh(sqrt(2 / pi) (X + 0.044715 X^3))) with "tanh" (what
    transformers' gelu_pytorch_tanh, GeGLU in Gemma, computes). Any other
    value is an error naming the node. Source: ONNX operator spec, Gelu-20;
    Hendrycks & Gimpel, "Gaussian Error Linear Units" (2016), section 2.
  }];
  let arguments = (ins Variadic<Onnx_Input>:$inputs, OptionalAttr<StrAttr>:$approximate);
}
def Onnx_IsNaNOp : Onnx_UnaryOp<"IsNaN">;
def Onnx_IdentityOp : Onnx_UnaryOp<"Identity">;

//===----------------------------------------------------------------------===//
// Elementwise: rounding, sign, clipping, modulus and bit operations
//===----------------------------------------------------------------------===//

def Onnx_RoundOp : Onnx_UnaryOp<"Round"> {
  let summary = "ONNX Round-11/22: nearest integer, halves to even";
  let description = [{
    Y (same shape and float dtype as X) = X rounded to the nearest integer;
    a value exactly halfway between two integers goes to the even one
    (round(2.5) = 2, round(-4.5) = -4); integral values, +-0, NaN and
    infinities are returned unchanged. Source: ONNX operator spec, Round
    (https://onnx.ai/onnx/operators/onnx__Round.html).
  }];
}
def Onnx_FloorOp : Onnx_UnaryOp<"Floor"> {
  let summary = "ONNX Floor-13: largest integer <= x, elementwise (float dtypes)";
  let description = [{
    Y (same shape and float dtype as X) = floor(X); NaN and infinities are
    returned unchanged. Source: ONNX operator spec, Floor.
  }];
}
def Onnx_CeilOp : Onnx_UnaryOp<"Ceil"> {
  let summary = "ONNX Ceil-13: smallest integer >= x, elementwise (float dtypes)";
  let description = [{
    Y (same shape and float dtype as X) = ceil(X); NaN and infinities are
    returned unchanged. Source: ONNX operator spec, Ceil.
  }];
}
def Onnx_SignOp : Onnx_UnaryOp<"Sign"> {
  let summary = "ONNX Sign-13: -1, 0 or 1 by the sign of x, elementwise";
  let description = [{
    Y (same shape and dtype as X, any numeric dtype) = 1 where X > 0, -1 where
    X < 0, else X itself (0, and NaN for floats). Source: ONNX operator spec,
    Sign.
  }];
}

def Onnx_ClipOp : Onnx_NodeOp<"Clip", 1, 3, 1, 1> {
  let summary = "ONNX Clip-13 (input, optional min, optional max)";
  let description = [{
    Y (same shape and dtype as input) = min(max(input, min), max), where min
    and max are optional scalar tensors (rank 0, or one element) of the
    input's dtype; an omitted bound (a `none` operand, or an absent trailing
    input) does not clip. When min > max every element becomes max. Source:
    ONNX operator spec, Clip-13 (opset 11 moved min/max from attributes to
    inputs).
  }];
  let arguments = (ins Variadic<Onnx_Input>:$inputs);
}

def Onnx_ModOp : Onnx_NodeOp<"Mod", 2, 2, 1, 1> {
  let summary = "ONNX Mod-13: elementwise remainder with numpy broadcasting";
  let description = [{
    C = A mod B (A, B and C of one numeric dtype, shapes broadcast as numpy).
    fmod = 0 (default, integers only): the result has the sign of the
    divisor, like Python's % (Mod(-7, 3) = 2, Mod(7, -3) = -2). fmod = 1:
    the result has the sign of the dividend, like C fmod (fmod(-7, 3) = -1);
    floating-point inputs require fmod = 1. An integer remainder by 0 is 0
    (ONNX leaves it undefined; numpy gives 0). Source: ONNX operator spec,
    Mod (https://onnx.ai/onnx/operators/onnx__Mod.html).
  }];
  let arguments = (ins Variadic<Onnx_Input>:$inputs, OptionalAttr<SI64Attr>:$fmod);
}

def Onnx_BitwiseAndOp : Onnx_BinaryOp<"BitwiseAnd"> {
  let summary = "ONNX BitwiseAnd-18: elementwise a & b of integers, numpy broadcasting";
  let description = [{
    C = A & B bit by bit (integer dtypes; A, B and C of one dtype, shapes
    broadcast as numpy). Source: ONNX operator spec, BitwiseAnd.
  }];
}
def Onnx_BitwiseOrOp : Onnx_BinaryOp<"BitwiseOr"> {
  let summary = "ONNX BitwiseOr-18: elementwise a | b of integers, numpy broadcasting";
  let description = [{
    C = A | B bit by bit (integer dtypes; A, B and C of one dtype, shapes
    broadcast as numpy). Source: ONNX operator spec, BitwiseOr.
  }];
}
def Onnx_BitwiseXorOp : Onnx_BinaryOp<"BitwiseXor"> {
  let summary = "ONNX BitwiseXor-18: elementwise a ^ b of integers, numpy broadcasting";
  let description = [{
    C = A ^ B bit by bit (integer dtypes; A, B and C of one dtype, shapes
    broadcast as numpy). Source: ONNX operator spec, BitwiseXor.
  }];
}
def Onnx_BitwiseNotOp : Onnx_UnaryOp<"BitwiseNot"> {
  let summary = "ONNX BitwiseNot-18: elementwise ~x of integers";
  let description = [{
    Y (same shape and integer dtype as X) = ~X, every bit flipped (for signed
    integers ~x = -x - 1). Source: ONNX operator spec, BitwiseNot.
  }];
}

def Onnx_WhereOp : Onnx_NodeOp<"Where", 3, 3, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs);
}

def Onnx_CastOp : Onnx_NodeOp<"Cast", 1, 1, 1, 1> {
  /// `to` is an ONNX TensorProto.DataType code.
  let arguments = (ins Variadic<Onnx_Input>:$inputs, SI64Attr:$to,
                   OptionalAttr<SI64Attr>:$saturate);
}

//===----------------------------------------------------------------------===//
// Linear algebra and normalisation
//===----------------------------------------------------------------------===//

def Onnx_MatMulOp : Onnx_BinaryOp<"MatMul">;

def Onnx_GemmOp : Onnx_NodeOp<"Gemm", 2, 3, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs,
                   OptionalAttr<F32Attr>:$alpha, OptionalAttr<F32Attr>:$beta,
                   OptionalAttr<SI64Attr>:$transA, OptionalAttr<SI64Attr>:$transB);
}

def Onnx_SoftmaxOp : Onnx_NodeOp<"Softmax", 1, 1, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs, OptionalAttr<SI64Attr>:$axis);
}

class Onnx_ReduceOp<string mnemonic> : Onnx_NodeOp<mnemonic, 1, 2, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs,
                   OptionalAttr<SI64Attr>:$keepdims,
                   OptionalAttr<SI64Attr>:$noop_with_empty_axes,
                   OptionalAttr<DenseI64ArrayAttr>:$axes);
}
def Onnx_ReduceMeanOp : Onnx_ReduceOp<"ReduceMean">;
def Onnx_ReduceSumOp : Onnx_ReduceOp<"ReduceSum">;
def Onnx_ReduceMaxOp : Onnx_ReduceOp<"ReduceMax">;

def Onnx_RMSNormalizationOp : Onnx_NodeOp<"RMSNormalization", 2, 2, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs,
                   OptionalAttr<SI64Attr>:$axis, OptionalAttr<F32Attr>:$epsilon,
                   OptionalAttr<SI64Attr>:$stash_type);
}

def Onnx_LayerNormalizationOp : Onnx_NodeOp<"LayerNormalization", 2, 3, 1, 3> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs,
                   OptionalAttr<SI64Attr>:$axis, OptionalAttr<F32Attr>:$epsilon,
                   OptionalAttr<SI64Attr>:$stash_type);
}

//===----------------------------------------------------------------------===//
// Attention and RoPE (opset 23+)
//===----------------------------------------------------------------------===//

def Onnx_AttentionOp : Onnx_NodeOp<"Attention", 3, 7, 1, 4> {
  let summary = "ONNX Attention-23/24/25 (Q, K, V, mask, past_key, past_value, nonpad_kv_seqlen)";
  let arguments = (ins Variadic<Onnx_Input>:$inputs,
                   OptionalAttr<SI64Attr>:$is_causal,
                   OptionalAttr<SI64Attr>:$left_window_size,
                   OptionalAttr<SI64Attr>:$right_window_size,
                   OptionalAttr<SI64Attr>:$kv_num_heads,
                   OptionalAttr<SI64Attr>:$q_num_heads,
                   OptionalAttr<SI64Attr>:$qk_matmul_output_mode,
                   OptionalAttr<F32Attr>:$scale,
                   OptionalAttr<F32Attr>:$softcap,
                   OptionalAttr<SI64Attr>:$softmax_precision);
}

def Onnx_RotaryEmbeddingOp : Onnx_NodeOp<"RotaryEmbedding", 3, 4, 1, 1> {
  let summary = "ONNX RotaryEmbedding-23 (X, cos_cache, sin_cache, position_ids)";
  let arguments = (ins Variadic<Onnx_Input>:$inputs,
                   OptionalAttr<SI64Attr>:$interleaved,
                   OptionalAttr<SI64Attr>:$num_heads,
                   OptionalAttr<SI64Attr>:$rotary_embedding_dim);
}

//===----------------------------------------------------------------------===//
// Shapes, indexing and data movement
//===----------------------------------------------------------------------===//

def Onnx_ShapeOp : Onnx_NodeOp<"Shape", 1, 1, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs,
                   OptionalAttr<SI64Attr>:$start, OptionalAttr<SI64Attr>:$end);
}
def Onnx_ReshapeOp : Onnx_NodeOp<"Reshape", 2, 2, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs, OptionalAttr<SI64Attr>:$allowzero);
}
def Onnx_TransposeOp : Onnx_NodeOp<"Transpose", 1, 1, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs,
                   OptionalAttr<DenseI64ArrayAttr>:$perm);
}
def Onnx_ConcatOp : Onnx_NodeOp<"Concat", 1, -1, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs, SI64Attr:$axis);
}
def Onnx_SplitOp : Onnx_NodeOp<"Split", 1, 2, 1, -1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs, OptionalAttr<SI64Attr>:$axis,
                   OptionalAttr<SI64Attr>:$num_outputs);
}
def Onnx_SliceOp : Onnx_NodeOp<"Slice", 3, 5, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs);
}
def Onnx_SqueezeOp : Onnx_NodeOp<"Squeeze", 1, 2, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs);
}
def Onnx_UnsqueezeOp : Onnx_NodeOp<"Unsqueeze", 2, 2, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs);
}
def Onnx_ExpandOp : Onnx_NodeOp<"Expand", 2, 2, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs);
}
def Onnx_TileOp : Onnx_NodeOp<"Tile", 2, 2, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs);
}
def Onnx_GatherOp : Onnx_NodeOp<"Gather", 2, 2, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs, OptionalAttr<SI64Attr>:$axis);
}
def Onnx_GatherNDOp : Onnx_NodeOp<"GatherND", 2, 2, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs,
                   OptionalAttr<SI64Attr>:$batch_dims);
}
def Onnx_GatherElementsOp : Onnx_NodeOp<"GatherElements", 2, 2, 1, 1> {
  let summary = "ONNX GatherElements-13 (data, indices)";
  let description = [{
    data: rank r >= 1, any dtype; indices: int32/int64 of the same rank r,
    with dims <= data's on every axis but `axis`. output (indices' shape,
    data's dtype): output[i0..i(r-1)] = data[i0.., indices[i0..i(r-1)] at
    position `axis`, ..i(r-1)]. `axis` (default 0) may be negative (counts
    from the back); a negative index counts from the end of data's `axis`
    dim. Indices outside [-s, s) are an error in ONNX; h20 clamps them into
    the tensor (never reads outside it). Source: ONNX operator spec,
    GatherElements (https://onnx.ai/onnx/operators/onnx__GatherElements.html).
  }];
  let arguments = (ins Variadic<Onnx_Input>:$inputs, OptionalAttr<SI64Attr>:$axis);
}
def Onnx_ScatterElementsOp : Onnx_NodeOp<"ScatterElements", 3, 3, 1, 1> {
  let summary = "ONNX ScatterElements-18 (data, indices, updates)";
  let description = [{
    data: rank r >= 1, any dtype; indices: int32/int64 of rank r; updates:
    indices' shape, data's dtype. output (data's shape and dtype) = data,
    then for every index tuple (i0..i(r-1)) of indices, in row-major order:
    output[i0.., indices[i0..] at position `axis`, ..] = updates[i0..]
    (reduction "none", the default), or that element combined with the
    update by "add", "mul", "max" or "min". `axis` (default 0) may be
    negative; a negative index counts from the end of data's `axis` dim.
    With "none", ONNX leaves duplicate indices undefined; h20 applies the
    updates in order (the last wins). Indices outside [-s, s) are an error
    in ONNX; h20 clamps them into the tensor. Source: ONNX operator spec,
    ScatterElements (https://onnx.ai/onnx/operators/onnx__ScatterElements.html).
  }];
  let arguments = (ins Variadic<Onnx_Input>:$inputs, OptionalAttr<SI64Attr>:$axis,
                   OptionalAttr<StrAttr>:$reduction);
}
def Onnx_TopKOp : Onnx_NodeOp<"TopK", 2, 2, 2, 2> {
  let summary = "ONNX TopK-11/24 (X, K) -> (Values, Indices)";
  let description = [{
    X: rank r >= 1, numeric; K: int64 tensor of one element (shape [1]), a
    constant or computed at run time, 0 <= K <= X's `axis` dim. Values (X's
    dtype) and Indices (int64) have X's shape with the `axis` dim replaced by
    K: the K largest (`largest` = 1, the default) or smallest (0) elements
    along `axis` (default -1, negative counts from the back) and their
    positions along it. Equal values are ordered by position, the lower
    index first. `sorted` = 1 (default) orders them best first; with
    `sorted` = 0 ONNX leaves the order open and h20 returns them sorted
    too. NaN counts as larger than every number. K larger than the axis
    dim is invalid ONNX: a K read at run time is clamped to the dim (the
    output is that long), a constant K over a dynamic dim leaves the extra
    entries 0. Source: ONNX operator spec, TopK
    (https://onnx.ai/onnx/operators/onnx__TopK.html).
  }];
  let arguments = (ins Variadic<Onnx_Input>:$inputs, OptionalAttr<SI64Attr>:$axis,
                   OptionalAttr<SI64Attr>:$largest, OptionalAttr<SI64Attr>:$sorted);
}
def Onnx_RangeOp : Onnx_NodeOp<"Range", 3, 3, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs);
}
def Onnx_CumSumOp : Onnx_NodeOp<"CumSum", 2, 2, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs,
                   OptionalAttr<SI64Attr>:$exclusive, OptionalAttr<SI64Attr>:$reverse);
}
def Onnx_TriluOp : Onnx_NodeOp<"Trilu", 1, 2, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs, OptionalAttr<SI64Attr>:$upper);
}
def Onnx_ConstantOfShapeOp : Onnx_NodeOp<"ConstantOfShape", 1, 1, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs,
                   OptionalAttr<ElementsAttr>:$value);
}
def Onnx_SizeOp : Onnx_NodeOp<"Size", 1, 1, 1, 1> {
  let summary = "ONNX Size-13/19/21/23 (data)";
  let description = [{
    data: any shape and dtype. output: an int64 scalar (rank 0), the number
    of elements of data (the product of its dims, 1 for a scalar)
    (https://onnx.ai/onnx/operators/onnx__Size.html).
  }];
  let arguments = (ins Variadic<Onnx_Input>:$inputs);
}
def Onnx_FlattenOp : Onnx_NodeOp<"Flatten", 1, 1, 1, 1> {
  let summary = "ONNX Flatten-13/21/23 (input)";
  let description = [{
    input: rank r, any dtype. output (input's dtype): the 2-D tensor
    [d0 * ... * d(axis-1), d(axis) * ... * d(r-1)] holding input's elements in
    row-major order (an empty product is 1). `axis` (default 1) is in
    [-r, r]; a negative one counts from the back
    (https://onnx.ai/onnx/operators/onnx__Flatten.html).
  }];
  let arguments = (ins Variadic<Onnx_Input>:$inputs, OptionalAttr<SI64Attr>:$axis);
}
def Onnx_PadOp : Onnx_NodeOp<"Pad", 2, 4, 1, 1> {
  let summary = "ONNX Pad-13/18/19/21/23 (data, pads, constant_value?, axes?)";
  let description = [{
    data: rank r, any dtype; pads: int64 [2 n] (n = r, or the number of
    axes), begin amounts of every padded axis, then end amounts;
    constant_value: a scalar (or one-element tensor) of data's dtype, default
    0; axes (opset 18): int64/int32 [n], the axes pads refer to (negative
    counts from the back), default all. output (data's dtype):
    out dim k = pads_begin[k] + dk + pads_end[k]; out[i] = data[i - begin]
    where that index is inside data, else the constant. h20 implements
    `mode` = "constant" (the default) with pads known at compile time and not
    negative; "reflect", "edge", "wrap", negative (cropping) or run-time pads
    are refused at lowering, naming the node
    (https://onnx.ai/onnx/operators/onnx__Pad.html).
  }];
  let arguments = (ins Variadic<Onnx_Input>:$inputs, OptionalAttr<StrAttr>:$mode);
}

//===----------------------------------------------------------------------===//
// com.microsoft contrib ops (ONNX Runtime's transformer optimizer)
//===----------------------------------------------------------------------===//

def Onnx_MsSimplifiedLayerNormalizationOp
    : Onnx_NodeOp<"ms.SimplifiedLayerNormalization", 2, 2, 1, 2> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs,
                   OptionalAttr<SI64Attr>:$axis, OptionalAttr<F32Attr>:$epsilon,
                   OptionalAttr<SI64Attr>:$stash_type);
}
def Onnx_MsSkipSimplifiedLayerNormalizationOp
    : Onnx_NodeOp<"ms.SkipSimplifiedLayerNormalization", 3, 4, 1, 4> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs,
                   OptionalAttr<F32Attr>:$epsilon);
}
def Onnx_MsRotaryEmbeddingOp : Onnx_NodeOp<"ms.RotaryEmbedding", 4, 4, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs,
                   OptionalAttr<SI64Attr>:$interleaved,
                   OptionalAttr<SI64Attr>:$is_packed_batching,
                   OptionalAttr<SI64Attr>:$num_heads,
                   OptionalAttr<SI64Attr>:$rotary_embedding_dim,
                   OptionalAttr<F32Attr>:$scale);
}
def Onnx_MsGroupQueryAttentionOp
    : Onnx_NodeOp<"ms.GroupQueryAttention", 7, 11, 1, 3> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs,
                   OptionalAttr<SI64Attr>:$do_rotary,
                   OptionalAttr<SI64Attr>:$kv_num_heads,
                   OptionalAttr<SI64Attr>:$num_heads,
                   OptionalAttr<SI64Attr>:$local_window_size,
                   OptionalAttr<SI64Attr>:$rotary_interleaved,
                   OptionalAttr<F32Attr>:$scale,
                   OptionalAttr<F32Attr>:$softcap);
}
def Onnx_MsMultiHeadAttentionOp
    : Onnx_NodeOp<"ms.MultiHeadAttention", 1, 10, 1, 4> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs,
                   OptionalAttr<SI64Attr>:$num_heads,
                   OptionalAttr<SI64Attr>:$unidirectional,
                   OptionalAttr<F32Attr>:$scale,
                   OptionalAttr<F32Attr>:$mask_filter_value);
}

// ai.h20: h20's own domain, the DeepSeek-V4.1 computations ONNX states only
// with S x S (or S x S/r) intermediates (models/deepseek_v41/h20_ops.py has
// their meaning and standard-op function bodies). RaiseToAttn turns them into
// attn.sparse_attention, attn.indexer_topk and attn.indexer_candidates.
def Onnx_H20SinkAttentionOp : Onnx_NodeOp<"h20.SinkAttention", 3, 3, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs, F32Attr:$scale, SI64Attr:$window);
}
def Onnx_H20SparseSinkAttentionOp : Onnx_NodeOp<"h20.SparseSinkAttention", 5, 5, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs, F32Attr:$scale, SI64Attr:$window);
}
def Onnx_H20IndexerTopKOp : Onnx_NodeOp<"h20.IndexerTopK", 3, 3, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs, SI64Attr:$ratio, SI64Attr:$topk,
                   F32Attr:$scale);
}
def Onnx_H20IndexerTopKCandidatesOp : Onnx_NodeOp<"h20.IndexerTopKCandidates", 3, 3, 2, 2> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs, SI64Attr:$ratio, SI64Attr:$topk,
                   F32Attr:$scale, SI64Attr:$blocks, SI64Attr:$block_size);
}
def Onnx_H20IndexerTopKInCandidatesOp : Onnx_NodeOp<"h20.IndexerTopKInCandidates", 4, 4, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs, SI64Attr:$ratio, SI64Attr:$topk,
                   F32Attr:$scale, SI64Attr:$block_size);
}
// RoutedExperts(X [N, Dm], Router [Dm, E], Bias [E], W1 [E, Dm, I],
// W3 [E, Dm, I], W2 [E, I, Dm]) -> Y [N, Dm]: DeepSeek-V4.1's routed MoE
// experts (sqrt-softplus scores, top_k by score + bias, clamped SwiGLU).
// Its function body runs every expert for every token; the GPU target runs
// only the picked ones (library call h20_routed_experts: routing kernels and
// grouped cuBLASLt GEMMs). The CPU target imports the function body instead.
def Onnx_H20RoutedExpertsOp : Onnx_NodeOp<"h20.RoutedExperts", 6, 6, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs, SI64Attr:$top_k, F32Attr:$scaling,
                   F32Attr:$limit, F32Attr:$temp);
}

// RoutedExpertsMxfp4(X, Router, Bias, W1 [E, I, Dm/2] i8, S1 [E, I, Dm/32] i8,
// W3, S3 (as W1, S1), W2 [E, Dm, I/2] i8, S2 [E, Dm, I/32] i8) -> Y [N, Dm]:
// RoutedExperts on MXFP4 experts as DeepSeek-V4's checkpoints store them
// (each expert's Linear weight [out, in] as packed e2m1 pairs, element 2j in
// the low nibble, with one ue8m0 scale byte per 32 inputs: OCP Microscaling
// Formats v1.0). The function body dequantises in the graph (the CPU target
// imports it); the GPU target keeps the bytes and dequantises inside its
// grouped GEMMs (library call h20_routed_experts, weights "mxfp4").
def Onnx_H20RoutedExpertsMxfp4Op : Onnx_NodeOp<"h20.RoutedExpertsMxfp4", 9, 9, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs, SI64Attr:$top_k, F32Attr:$scaling,
                   F32Attr:$limit, F32Attr:$temp);
}

// BlockScaledMatMul(X [..., K], W [N, K] float8e4m3fn, Scale [ceil(N /
// block_n), ceil(K / block_k)] float32) -> Y [..., N] of X's type:
// Y = X . (W * Scale[n / block_n, k / block_k])^T, DeepSeek-V3/V4.1's
// block-scaled FP8 linear (weight_block_size [128, 128]; the checkpoint's
// weight and weight_scale_inv). The function body dequantises W in the
// graph (Cast, a block-broadcast Mul) and runs a float MatMul, which the CPU
// target imports; the GPU target keeps W in FP8 and runs a block-scaled FP8
// GEMM (activations quantised per 1 x block_k on the fly, cuBLASLt
// VEC128 x BLK128x128 scale modes).
def Onnx_H20BlockScaledMatMulOp : Onnx_NodeOp<"h20.BlockScaledMatMul", 3, 3, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs, SI64Attr:$block_n, SI64Attr:$block_k);
}

#endif // H20_ONNX_OPS
