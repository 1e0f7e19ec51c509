//===- LastPositionSlice.h - the Slice that keeps an LM head's last row -*- C++ -*-===//
#ifndef H20_LIB_TRANSFORMS_LASTPOSITIONSLICE_H
#define H20_LIB_TRANSFORMS_LASTPOSITIONSLICE_H

#include "h20/Dialect/Onnx/IR/OnnxDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace h20 {

/// Whether `op` is onnx.Slice(h, starts = [-1], ends >= 2^62, axes = [1]
/// or [-2], steps = [1] or absent) on a rank-3 h [B, S, K]: the last
/// position of every sequence, as h20-logits-last writes it and as h20's
/// DeepSeek-V4.1 exporter (`export.py --logits last`) emits it.
bool isLastPositionSlice(mlir::Operation *op);

/// The LM head producing `logits`: onnx.MatMul(h [B, S, K], W [K, V]) or
/// onnx.h20.BlockScaledMatMul(h [B, S, K], W [V, K] FP8, Scale) (an FP8
/// head, DeepSeek's block-scaled linear), with ranked operands of those
/// ranks, looking through onnx.Identity; its vocabulary size V in `vocab`.
/// Null otherwise.
mlir::Operation *lmHead(mlir::Value logits, int64_t *vocab = nullptr);

/// The graph's last-position Slice feeding its single output's LM head
/// (func.return(head(Slice(h), W ...)), head as lmHead), or null.
onnx::SliceOp lastPositionSlice(mlir::func::FuncOp func);

} // namespace h20

#endif // H20_LIB_TRANSFORMS_LASTPOSITIONSLICE_H
