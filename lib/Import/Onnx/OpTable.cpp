//===- OpTable.cpp - which ONNX ops h20 imports, keyed by version --------===//
//
// Since-versions are those of the ONNX operator changelog
// (https://onnx.ai/onnx/operators/) from opset 13 on; versions that only
// widened the type list map to the same op, since the dialect's verifiers
// and later passes check dtypes.
//
//===----------------------------------------------------------------------===//
#include "OpTable.h"

#include "llvm/ADT/ArrayRef.h"

namespace h20::onnx_import {
namespace {

constexpr llvm::StringLiteral kMs = "com.microsoft";
/// h20's own domain (models/deepseek_v41/h20_ops.py): ops whose ONNX
/// function bodies would build S x S intermediates; raised to attn ops.
constexpr llvm::StringLiteral kH20 = "ai.h20";

#define ONNX_OP(type, since) {"", #type, since, "onnx." #type}
#define MS_OP(type, since) {kMs, #type, since, "onnx.ms." #type}
#define H20_OP(type, since) {kH20, #type, since, "onnx.h20." #type}

const OpEntry kOps[] = {
    ONNX_OP(Abs, 13), ONNX_OP(Add, 14), ONNX_OP(And, 7),
    ONNX_OP(Attention, 23), ONNX_OP(Attention, 24),
    ONNX_OP(Cast, 13), ONNX_OP(Cast, 19), ONNX_OP(Cast, 21), ONNX_OP(Cast, 23), ONNX_OP(Cast, 24),
    ONNX_OP(Concat, 13), ONNX_OP(Constant, 13), ONNX_OP(Constant, 19), ONNX_OP(Constant, 21),
    ONNX_OP(Constant, 23), ONNX_OP(Constant, 24),
    ONNX_OP(ConstantOfShape, 9), ONNX_OP(ConstantOfShape, 20), ONNX_OP(ConstantOfShape, 21),
    ONNX_OP(ConstantOfShape, 23), ONNX_OP(ConstantOfShape, 24),
    ONNX_OP(Cos, 7), ONNX_OP(CumSum, 14), ONNX_OP(Div, 14),
    ONNX_OP(Equal, 13), ONNX_OP(Equal, 19), ONNX_OP(Erf, 13), ONNX_OP(Exp, 13),
    ONNX_OP(Expand, 13), ONNX_OP(Gather, 13), ONNX_OP(Gelu, 20), ONNX_OP(GatherND, 13),
    ONNX_OP(Gemm, 13), ONNX_OP(Greater, 13), ONNX_OP(GreaterOrEqual, 16),
    ONNX_OP(Identity, 16), ONNX_OP(Identity, 19), ONNX_OP(Identity, 21), ONNX_OP(Identity, 23),
    ONNX_OP(Identity, 24), ONNX_OP(IsNaN, 13), ONNX_OP(IsNaN, 20),
    ONNX_OP(LayerNormalization, 17), ONNX_OP(Less, 13),
    ONNX_OP(LessOrEqual, 16), ONNX_OP(Log, 13), ONNX_OP(MatMul, 13),
    ONNX_OP(Max, 13), ONNX_OP(Min, 13), ONNX_OP(Mul, 14), ONNX_OP(Neg, 13),
    ONNX_OP(Not, 1), ONNX_OP(Or, 7), ONNX_OP(Pow, 15),
    ONNX_OP(RMSNormalization, 23), ONNX_OP(Range, 11),
    ONNX_OP(Reciprocal, 13), ONNX_OP(ReduceMax, 13), ONNX_OP(ReduceMax, 18), ONNX_OP(ReduceMax, 20),
    ONNX_OP(ReduceMean, 13), ONNX_OP(ReduceMean, 18), ONNX_OP(ReduceSum, 13), ONNX_OP(Relu, 14),
    ONNX_OP(Reshape, 14), ONNX_OP(Reshape, 19), ONNX_OP(Reshape, 21), ONNX_OP(Reshape, 23),
    ONNX_OP(Reshape, 24), ONNX_OP(RotaryEmbedding, 23),
    ONNX_OP(Shape, 15), ONNX_OP(Shape, 19), ONNX_OP(Shape, 21), ONNX_OP(Shape, 23),
    ONNX_OP(Shape, 24), ONNX_OP(Sigmoid, 13), ONNX_OP(Sin, 7),
    ONNX_OP(Slice, 13), ONNX_OP(Softmax, 13), ONNX_OP(Softplus, 1),
    ONNX_OP(Split, 13), ONNX_OP(Split, 18), ONNX_OP(Sqrt, 13), ONNX_OP(Squeeze, 13),
    ONNX_OP(Squeeze, 21), ONNX_OP(Squeeze, 23), ONNX_OP(Squeeze, 24),
    ONNX_OP(Sub, 14), ONNX_OP(Sum, 13), ONNX_OP(Tanh, 13), ONNX_OP(Tile, 13),
    ONNX_OP(Transpose, 13), ONNX_OP(Transpose, 21), ONNX_OP(Transpose, 23),
    ONNX_OP(Transpose, 24), ONNX_OP(Trilu, 14), ONNX_OP(Unsqueeze, 13),
    ONNX_OP(Unsqueeze, 21), ONNX_OP(Unsqueeze, 23), ONNX_OP(Unsqueeze, 24),
    ONNX_OP(Where, 16),
    // Ops of the function bodies of Attention, RMSNormalization and
    // LayerNormalization (what onnxscript-based exporters write). CastLike
    // imports as Cast to the second input's dtype (GraphImporter).
    {"", "CastLike", 15, "onnx.Cast"}, {"", "CastLike", 19, "onnx.Cast"},
    {"", "CastLike", 21, "onnx.Cast"}, {"", "CastLike", 23, "onnx.Cast"},
    {"", "CastLike", 24, "onnx.Cast"},
    ONNX_OP(Flatten, 13), ONNX_OP(Flatten, 21), ONNX_OP(Flatten, 23), ONNX_OP(Flatten, 24),
    ONNX_OP(Pad, 13), ONNX_OP(Pad, 18), ONNX_OP(Pad, 19), ONNX_OP(Pad, 21), ONNX_OP(Pad, 23),
    ONNX_OP(Pad, 24),
    ONNX_OP(Size, 13), ONNX_OP(Size, 19), ONNX_OP(Size, 21), ONNX_OP(Size, 23), ONNX_OP(Size, 24),
    // Indexing, selection, rounding, modulus and bit ops (DeepSeek-V4.1's
    // routing and sparse-attention indexer).
    ONNX_OP(BitwiseAnd, 18), ONNX_OP(BitwiseNot, 18), ONNX_OP(BitwiseOr, 18),
    ONNX_OP(BitwiseXor, 18), ONNX_OP(Ceil, 13), ONNX_OP(Clip, 13), ONNX_OP(Floor, 13),
    ONNX_OP(GatherElements, 13), ONNX_OP(Mod, 13), ONNX_OP(Round, 11), ONNX_OP(Round, 22),
    ONNX_OP(ScatterElements, 13), ONNX_OP(ScatterElements, 16), ONNX_OP(ScatterElements, 18),
    ONNX_OP(Sign, 13), ONNX_OP(TopK, 11), ONNX_OP(TopK, 24),
    // ONNX Runtime registers SimplifiedLayerNormalization in the default
    // domain (a contrib op there); its optimizer also emits it as com.microsoft.
    {"", "SimplifiedLayerNormalization", 1, "onnx.ms.SimplifiedLayerNormalization"},
    MS_OP(GroupQueryAttention, 1), MS_OP(MultiHeadAttention, 1),
    MS_OP(RotaryEmbedding, 1), MS_OP(SimplifiedLayerNormalization, 1),
    MS_OP(SkipSimplifiedLayerNormalization, 1),
    H20_OP(SinkAttention, 1), H20_OP(SparseSinkAttention, 1), H20_OP(IndexerTopK, 1),
    H20_OP(IndexerTopKCandidates, 1), H20_OP(IndexerTopKInCandidates, 1),
    H20_OP(RoutedExperts, 1), H20_OP(RoutedExpertsMxfp4, 1),
    H20_OP(BlockScaledMatMul, 1),
};

#undef ONNX_OP
#undef MS_OP
#undef H20_OP

} // namespace

const OpEntry *lookupOp(llvm::StringRef domain, llvm::StringRef opType,
                        int64_t opset) {
  // ai.onnx is the default domain's long name.
  if (domain == "ai.onnx")
    domain = "";
  const OpEntry *best = nullptr;
  for (const OpEntry &e : kOps)
    if (e.domain == domain && e.opType == opType && e.sinceVersion <= opset &&
        (!best || e.sinceVersion > best->sinceVersion))
      best = &e;
  return best;
}

} // namespace h20::onnx_import
