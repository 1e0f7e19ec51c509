//===- TensorParallel.h - split a decoder over tensor-parallel ranks -*- C++ -*-===//
//
// The rewrite behind h20-tensor-parallel (Passes.td states what is split and
// how), callable without a pass manager: the cost model applies it to a
// copy of a module to price the tensor-parallel plan.
//
//===----------------------------------------------------------------------===//
#ifndef H20_TRANSFORMS_TENSORPARALLEL_H
#define H20_TRANSFORMS_TENSORPARALLEL_H

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>

namespace h20 {

/// What applyTensorParallel split.
struct TensorParallelSummary {
  int64_t attentionBlocks = 0; ///< attention ops whose heads were split
  int64_t mlpBlocks = 0;       ///< MLPs whose columns were split
  int64_t replicatedAttention = 0; ///< attention ops left whole (did not fit)
  int64_t expertBlocks = 0;        ///< routed-experts ops split by expert (expert parallelism)
  int64_t attentionRows = 0; ///< sparse attention ops split by query rows (attn::kSplitRowsAttr)
  int64_t queryGemms = 0;    ///< their query-side projections split by rows too
  int64_t sharedExpertGemms = 0; ///< shared-expert GEMMs split by rows (beside routed experts)
};

/// Rewrites the attn-level `module` into the program of one of `ranks`
/// tensor-parallel ranks (weights become per-rank slices, attn.all_reduce
/// follows each row-parallel MatMul and each routed-experts op, whose
/// expert weights are split by expert: expert parallelism; DeepSeek-V4.1's
/// sparse attention and indexers split by query rows, attn::kSplitRowsAttr,
/// an attn.all_reduce after each sparse attention or the output projection
/// it reaches, and its shared experts by the same rows) and sets
/// `h20.tensor_parallel`.
/// ranks == 1 changes nothing. Fails (with a diagnostic on the module) for
/// ranks < 1, or when ranks > 1 and no block can be split.
/// `attentionRows` false leaves DeepSeek-V4.1's attention whole on every
/// rank.
mlir::LogicalResult applyTensorParallel(mlir::ModuleOp module, int64_t ranks,
                                        TensorParallelSummary *summary = nullptr,
                                        bool attentionRows = true);

/// h20-merge-all-reduces on every function under `root`: each
/// `onnx.Add(attn.all_reduce(a), attn.all_reduce(b))` whose Add is the only
/// reader of both, with one type throughout, becomes
/// `attn.all_reduce(onnx.Add(a, b))` (the sum over ranks is linear).
/// Returns the number of pairs merged.
int64_t mergeAllReduces(mlir::Operation *root);

} // namespace h20

#endif // H20_TRANSFORMS_TENSORPARALLEL_H
