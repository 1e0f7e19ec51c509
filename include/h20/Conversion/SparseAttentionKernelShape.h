//===- SparseAttentionKernelShape.h - what the sparse-attention kernel runs -*- C++ -*-===//
//
// One predicate for the GPU lowering (which runs the kernel or the
// reference decomposition) and for h20-check-row-splits (which keeps a
// query-row split only on ops the kernel runs: the decomposition computes
// every row).
//
//===----------------------------------------------------------------------===//
#ifndef H20_CONVERSION_SPARSEATTENTIONKERNELSHAPE_H
#define H20_CONVERSION_SPARSEATTENTIONKERNELSHAPE_H

#include "h20/Dialect/Attn/IR/AttnDialect.h"

#include <cstdint>

namespace h20 {

/// What the sparse-attention kernel (lib/Target/GPU/kernels/
/// sparse_attention.cuh) takes: head dim <= 512 and window + K <= 4096 key
/// slots (its compacted slot list lives in shared memory beside the tiles).
inline constexpr int64_t kSparseAttentionMaxDim = 512;
inline constexpr int64_t kSparseAttentionMaxSlots = 4096;

/// Whether the kernel runs `op`: query, latent, compressed rows and result
/// of one 16-bit float type (f16 or bf16), an f32 / f16 / bf16 sink, static
/// heads and head dim <= kSparseAttentionMaxDim, 0 <= window <=
/// kSparseAttentionMaxSlots and window + K <= kSparseAttentionMaxSlots
/// where K (picks per query) is static (a dynamic K is checked by the GPU
/// target once the chunk fixes it).
inline bool sparseAttentionKernelApplies(attn::SparseAttentionOp op) {
  auto qt = llvm::cast<mlir::RankedTensorType>(op.getQuery().getType());
  auto rt = llvm::cast<mlir::RankedTensorType>(op.getResult().getType());
  mlir::Type et = qt.getElementType();
  auto sameType = [&](mlir::Value v) {
    return !v || llvm::cast<mlir::RankedTensorType>(v.getType()).getElementType() == et;
  };
  const int64_t window = static_cast<int64_t>(op.getWindow());
  const int64_t picks =
      op.getIndices() ? llvm::cast<mlir::RankedTensorType>(op.getIndices().getType()).getDimSize(1)
                      : 0;
  mlir::Type st = llvm::cast<mlir::RankedTensorType>(op.getSink().getType()).getElementType();
  return (et.isBF16() || et.isF16()) && rt.getElementType() == et &&
         (st.isF32() || st.isF16() || st.isBF16()) && sameType(op.getLatent()) &&
         sameType(op.getCompressed()) && qt.getRank() == 3 && !qt.isDynamicDim(1) &&
         !qt.isDynamicDim(2) && qt.getDimSize(2) <= kSparseAttentionMaxDim && window >= 0 &&
         window <= kSparseAttentionMaxSlots &&
         (mlir::ShapedType::isDynamic(picks) || window + picks <= kSparseAttentionMaxSlots);
}

} // namespace h20

#endif // H20_CONVERSION_SPARSEATTENTIONKERNELSHAPE_H
