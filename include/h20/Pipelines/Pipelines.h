//===- Pipelines.h - h20's named compilation pipelines ----------*- C++ -*-===//
#ifndef H20_PIPELINES_PIPELINES_H
#define H20_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringRef.h"

namespace h20 {

/// Fills `pm` with the passes that take imported onnx-dialect IR to `level`:
///   onnx — nothing (the importer's output);
///   attn — shape/constant folding, mask analysis, raising to attn ops.
/// Fails for an unknown level.
llvm::LogicalResult buildEmitPipeline(mlir::PassManager &pm,
                                      llvm::StringRef level);

} // namespace h20

#endif // H20_PIPELINES_PIPELINES_H
