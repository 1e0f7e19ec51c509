//===- AttentionShapeOf.h - an attn.attention as the cost model sees it -*- C++ -*-===//
#ifndef H20_LIB_TRANSFORMS_ATTENTIONSHAPEOF_H
#define H20_LIB_TRANSFORMS_ATTENTIONSHAPEOF_H

#include "h20/Analysis/TileCostModel.h"
#include "h20/Dialect/Attn/IR/AttnDialect.h"

#include "llvm/ADT/STLFunctionalExtras.h"

namespace h20 {

/// The TileCostModel shape of `op` (q [B, Hq, S_q, D], k [B, Hkv, S_kv, D],
/// v [B, Hkv, S_kv, Dv]): every size through `dim` (which gives a dynamic
/// one the caller's stand-in), `elementBytes` per element, causal and
/// window from the attributes (window 0: none).
inline AttentionShape attentionShapeOf(attn::AttentionOp op,
                                       llvm::function_ref<int64_t(int64_t)> dim,
                                       int64_t elementBytes) {
  auto q = mlir::cast<mlir::RankedTensorType>(op.getQuery().getType());
  auto k = mlir::cast<mlir::RankedTensorType>(op.getKey().getType());
  auto v = mlir::cast<mlir::RankedTensorType>(op.getValue().getType());
  AttentionShape s;
  s.batch = dim(q.getDimSize(0));
  s.heads = dim(q.getDimSize(1));
  s.seqQ = dim(q.getDimSize(2));
  s.seqKv = dim(k.getDimSize(2));
  s.headDim = dim(q.getDimSize(3));
  s.headDimV = dim(v.getDimSize(3));
  s.elementBytes = elementBytes;
  s.causal = op.getCausal();
  s.window = op.getWindow() ? static_cast<int64_t>(*op.getWindow()) : 0;
  return s;
}

} // namespace h20

#endif // H20_LIB_TRANSFORMS_ATTENTIONSHAPEOF_H
