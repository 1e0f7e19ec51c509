//===- Pipelines.h - h20's named compilation pipelines ----------*- C++ -*-===//
#ifndef H20_PIPELINES_PIPELINES_H
#define H20_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringRef.h"

namespace h20 {

/// Fills `pm` with the passes that take imported onnx-dialect IR to `level`:
///   onnx    — nothing (the importer's output);
///   attn    — shape/constant folding, mask analysis, raising to attn ops;
///   planned — attn, then h20-lower-rope, h20-fuse-kv-caches and
///             h20-select-tiles for `target` (h20, h100, h200, h800, a100,
///             l20, cpu), with `maxSeq` as the cache capacity and the RoPE
///             table length (0: prompt-sized cache, 1M-position tables);
///             `kvElementBytes` sizes the sparse-attention KV plan's
///             elements (0: the IR's element type); with
///             `tensorParallel` T > 1, h20-tensor-parallel splits the heads
///             and MLP columns over T ranks first (before the KV cache is
///             planned, so it holds one rank's KV heads).
/// Fails for an unknown level.
llvm::LogicalResult buildEmitPipeline(mlir::PassManager &pm, llvm::StringRef level,
                                      llvm::StringRef target = "h200",
                                      int64_t maxSeq = 0, int64_t kvElementBytes = 0,
                                      int64_t tensorParallel = 1);

/// The "planned" passes that follow the attn level (what buildEmitPipeline's
/// "planned" adds after "attn"), for a module already at the attn level.
void buildPlanPipeline(mlir::PassManager &pm, llvm::StringRef target, int64_t maxSeq,
                       int64_t kvElementBytes, int64_t tensorParallel);

} // namespace h20

#endif // H20_PIPELINES_PIPELINES_H
