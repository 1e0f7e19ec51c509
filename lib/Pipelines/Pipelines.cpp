//===- Pipelines.cpp - h20's named compilation pipelines -----------------===//
#include "h20/Pipelines/Pipelines.h"

#include "h20/Transforms/Passes.h"

#include "mlir/Transforms/Passes.h"

void h20::buildPlanPipeline(mlir::PassManager &pm, llvm::StringRef target, int64_t maxSeq,
                            int64_t kvElementBytes, int64_t tensorParallel,
                            llvm::StringRef computeType, bool quantizeLinears) {
  if (tensorParallel > 1) {
    TensorParallelOptions tp;
    tp.ranks = tensorParallel;
    pm.addPass(createTensorParallel(tp));
    pm.addPass(mlir::createCSEPass());
  }
  // A unit-gain RMS norm before a narrow GEMM scales the GEMM's result
  // instead (V4.1's mHC mixes): the normalised copy is never written.
  if (computeType != "f16")
    pm.addNestedPass<mlir::func::FuncOp>(createNormScaleAfterMatMul());
  LowerRopeOptions rope;
  if (maxSeq > 0)
    rope.maxPositions = maxSeq;
  pm.addNestedPass<mlir::func::FuncOp>(createLowerRope(rope));
  pm.addPass(mlir::createCSEPass());
  FuseKVCachesOptions kv;
  kv.maxSeq = maxSeq;
  kv.elementBytes = kvElementBytes;
  pm.addNestedPass<mlir::func::FuncOp>(createFuseKVCaches(kv));
  SelectTilesOptions tiles;
  tiles.target = target.str();
  if (maxSeq > 0)
    tiles.seqLen = maxSeq;
  pm.addNestedPass<mlir::func::FuncOp>(createSelectTiles(tiles));
  if (quantizeLinears)
    pm.addNestedPass<mlir::func::FuncOp>(createQuantizeLinears());
}

llvm::LogicalResult h20::buildEmitPipeline(mlir::PassManager &pm, llvm::StringRef level,
                                           llvm::StringRef target, int64_t maxSeq,
                                           int64_t kvElementBytes, int64_t tensorParallel,
                                           llvm::StringRef computeType, bool quantizeLinears) {
  if (level == "onnx")
    return llvm::success();
  if (level == "planned") {
    if (failed(buildEmitPipeline(pm, "attn")))
      return llvm::failure();
    buildPlanPipeline(pm, target, maxSeq, kvElementBytes, tensorParallel, computeType,
                      quantizeLinears);
    return llvm::success();
  }
  if (level == "attn") {
    // Choosing (mask analysis writes attributes) precedes applying (raising
    // reads them); CSE merges what both export styles duplicate, and the
    // canonical order makes equal models print equally.
    pm.addNestedPass<mlir::func::FuncOp>(createInferShapes());
    pm.addNestedPass<mlir::func::FuncOp>(createFoldShapes());
    // A table's rows are gathered in its stored type, then cast.
    pm.addNestedPass<mlir::func::FuncOp>(createGatherBeforeCast());
    pm.addNestedPass<mlir::func::FuncOp>(createAnalyzeMasks());
    pm.addNestedPass<mlir::func::FuncOp>(createRaiseToAttn());
    // After raising: the RoPE a round trip of transposes wraps is one op.
    pm.addNestedPass<mlir::func::FuncOp>(createCancelTransposes());
    pm.addPass(mlir::createCSEPass());
    pm.addNestedPass<mlir::func::FuncOp>(createCanonicalOrder());
    return llvm::success();
  }
  return llvm::failure();
}
