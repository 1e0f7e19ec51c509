//===- OnnxAttentionMasks.h - explicit visibility masks for ONNX Attention -*- C++ -*-===//
//
// ONNX Attention-24/25 can place its queries where attn.attention's
// attributes cannot say: per batch (nonpad_kv_seqlen with is_causal), at
// past_len when fewer keys than queries are new, or with a window reaching
// right of the diagonal. h20-raise-attn then states the visibility as an
// explicit boolean mask operand, built here from standard ONNX ops (Range,
// comparisons) so every target lowers it like any other graph.
//
//===----------------------------------------------------------------------===//
#ifndef H20_LIB_TRANSFORMS_ONNXATTENTIONMASKS_H
#define H20_LIB_TRANSFORMS_ONNXATTENTIONMASKS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

#include <cstdint>

namespace h20 {

/// Where query row i of an ONNX Attention sits among the keys, and which
/// keys around that position it sees (ONNX Attention-25, onnx/defs/nn/defs.cc;
/// reference onnx/reference/ops/op_attention.py).
struct QueryPlacement {
  /// pos(i) = i + offset with offset = S_past (`pastKey` [B, H, S_past, D])
  /// when given, else nonpad_kv_seqlen[b] - S_q (`nonpad` [B] i64) when
  /// given, else 0.
  mlir::Value pastKey, nonpad;
  int64_t left = -1;  ///< key j visible only if j >= pos(i) - left (-1: no bound)
  int64_t right = -1; ///< key j visible only if j <= pos(i) + right (-1: no bound)
};

/// The boolean [B or 1, 1, S_q, S_kv] "key j is visible to row i" of
/// `placement`, from q [B, H, S_q, D] and k [B, Hkv, S_kv, D] (static or
/// dynamic sizes). Null when nonpad is not a rank-1 i64 tensor.
mlir::Value buildVisibilityMask(mlir::OpBuilder &b, mlir::Location loc, mlir::Value q,
                                mlir::Value k, const QueryPlacement &placement);

/// Attention-24's nonpad_kv_seqlen `nonpad` [B] (i64) as the boolean
/// [B, 1, 1, S_kv] "key j < nonpad[b]" for k [B, Hkv, S_kv, D]; null when
/// nonpad is not a rank-1 i64 tensor.
mlir::Value buildKeyPaddingMask(mlir::OpBuilder &b, mlir::Location loc, mlir::Value nonpad,
                                mlir::Value k);

/// com.microsoft MultiHeadAttention's 2-D key_padding_mask [B, S_kv] (any
/// integer type; 1 keeps key j of batch b, 0 hides it; ORT
/// contrib_ops/cpu/bert/attention_helper.h) as the boolean [B, 1, 1, S_kv].
/// Null unless the mask is a rank-2 integer tensor.
mlir::Value buildKeyPaddingMask2d(mlir::OpBuilder &b, mlir::Location loc, mlir::Value mask);

/// Prompt-phase positions of `x` [B, S, ...]: the i64 [B, S] tensor
/// position_ids[b][s] = s (what com.microsoft GroupQueryAttention's rotary
/// uses in the prompt phase without a past). Dynamic B and S allowed.
mlir::Value buildPromptPositions(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x);

/// `mask` (bool, or additive float; rank <= 4) restricted to the keys where
/// `valid` (bool, rank 4) holds: And for a bool mask, Where(valid, mask, -inf)
/// for an additive one; `valid` itself without a mask. The result has the
/// broadcast shape of both. Null when the shapes do not broadcast (static
/// sizes that differ and are not 1).
mlir::Value restrictMask(mlir::OpBuilder &b, mlir::Location loc, mlir::Value mask,
                         mlir::Value valid);

/// `mask` [..., S_m] extended to `skv` keys (S_m < skv): the new keys are
/// masked out (false, or -inf), as ONNX Attention pads a short attn_mask.
/// Null unless the mask's last dim is static and below `skv`.
mlir::Value padMaskKeys(mlir::OpBuilder &b, mlir::Location loc, mlir::Value mask, int64_t skv);

} // namespace h20

#endif // H20_LIB_TRANSFORMS_ONNXATTENTIONMASKS_H
