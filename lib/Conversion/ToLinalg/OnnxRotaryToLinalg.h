//===- OnnxRotaryToLinalg.h - onnx.RotaryEmbedding as one generic -*- C++ -*-===//
#ifndef H20_LIB_CONVERSION_TOLINALG_ONNXROTARYTOLINALG_H
#define H20_LIB_CONVERSION_TOLINALG_ONNXROTARYTOLINALG_H

#include "h20/Dialect/Onnx/IR/OnnxDialect.h"

#include "mlir/IR/Builders.h"

namespace h20::lowering {

/// ONNX RotaryEmbedding-23 with explicit cos/sin caches, for the forms
/// RaiseToAttn leaves (caches that are not a recognisable table of
/// positions x inv_freq, e.g. DeepSeek-V4.1's compressed-entry positions or
/// its inverse rotation): X [B, H, S, D] (4-D only), cos/sin [B, S, rd/2]
/// without position_ids or [max_pos, rd/2] indexed by position_ids [B, S];
/// channels >= rd pass through; interleaved pairs (2p, 2p+1) or halves.
/// out = x1 cos - x2 sin, x1 sin + x2 cos (onnx/defs/nn/defs.cc,
/// RotaryEmbedding; onnx/reference/ops/op_rotary_embedding.py).
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
lowerRotaryEmbedding(mlir::OpBuilder &b, onnx::RotaryEmbeddingOp op);

} // namespace h20::lowering

#endif // H20_LIB_CONVERSION_TOLINALG_ONNXROTARYTOLINALG_H
