//===- Pipelines.cpp - h20's named compilation pipelines -----------------===//
#include "h20/Pipelines/Pipelines.h"

llvm::LogicalResult h20::buildEmitPipeline(mlir::PassManager &pm,
                                           llvm::StringRef level) {
  if (level == "onnx")
    return llvm::success();
  return llvm::failure();
}
