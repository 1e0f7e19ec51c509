//===- CheckRowSplits.cpp - keep query-row splits that divide -------------===//
//
// See Passes.td (h20-check-row-splits). h20-tensor-parallel chooses the
// split of DeepSeek-V4.1's attention by query rows at the attn level, where
// the token count is still dynamic; the chunk size h20-chunked-prefill
// fixes later decides whether each rank gets whole rows. A split that does
// not divide is withdrawn here, once for the whole function, so that no
// later stage meets an uneven one (the GPU target's emitters take R / T
// rows per rank as given).
//
//===----------------------------------------------------------------------===//
#include "h20/Conversion/SparseAttentionKernelShape.h"
#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <optional>
#include <string>

namespace h20 {
#define GEN_PASS_DEF_CHECKROWSPLITS
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;
namespace at = h20::attn;
namespace onnx = h20::onnx;

namespace {

/// Why `op`'s split over `ranks` cannot run, or nothing when its query rows
/// are a static multiple of `ranks`, or a chunk's tokens (dynamic, at most
/// `chunk`, h20.chunked's) with `chunk` a multiple of `ranks`.
std::optional<std::string> whyNot(Operation *op, int64_t ranks, int64_t chunk) {
  auto q = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  if (!q || q.getRank() < 1)
    return std::string("its query is not a ranked tensor");
  // The rows: the query's first dim, or a GEMM's M (its input's rank - 2).
  const int64_t axis = isa<onnx::MatMulOp, onnx::H20BlockScaledMatMulOp>(op) ? q.getRank() - 2 : 0;
  if (axis < 0)
    return std::string("a GEMM input of rank < 2");
  const int64_t rows = q.isDynamicDim(axis) ? chunk : q.getDimSize(axis);
  if (rows <= 0)
    return std::string("its query rows are not bounded (a whole-prompt program: give --chunk)");
  if (rows % ranks != 0)
    return (q.isDynamicDim(axis) ? "chunks of " : "") + std::to_string(rows) +
           (q.isDynamicDim(axis) ? " tokens" : " query rows") + " do not divide over " +
           std::to_string(ranks) + " ranks" +
           (q.isDynamicDim(axis) ? " (give --chunk a multiple of " + std::to_string(ranks) + ")"
                                 : std::string());
  // The GPU target splits the rows of its sparse-attention kernel; the
  // reference decomposition it runs otherwise (f32, shapes the kernel does
  // not take) computes every row.
  if (auto sa = dyn_cast<at::SparseAttentionOp>(op); sa && !h20::sparseAttentionKernelApplies(sa))
    return std::string("the sparse attention kernel does not run this op (") +
           (q.getElementType().isF32() ? "f32: it runs f16/bf16 only"
                                       : "its types or shape: see sparseAttentionKernelApplies") +
           ")";
  return std::nullopt;
}

/// Removes every split of `func`: the attributes, and the all-reduce after
/// each gathered op (its result is whole again). Fails when a gathered op
/// is read by anything but its all-reduce: h20-merge-all-reduces ran
/// first, and the sum it made would count the whole result T times.
LogicalResult withdraw(func::FuncOp func) {
  SmallVector<Operation *> split;
  func.walk([&](Operation *op) {
    if (op->hasAttr(at::kSplitRowsAttr))
      split.push_back(op);
  });
  for (Operation *op : split) {
    if (op->hasAttr(at::kSplitGatherAttr) &&
        !llvm::all_of(op->getResult(0).getUsers(),
                      [](Operation *u) { return isa<at::AllReduceOp>(u); }))
      return op->emitError("internal: h20-check-row-splits: a gathered op read by something other "
                           "than its all-reduce (h20-merge-all-reduces must run after this pass)");
  }
  for (Operation *op : split) {
    op->removeAttr(at::kSplitRowsAttr);
    if (!op->removeAttr(at::kSplitGatherAttr))
      continue;
    for (Operation *u : llvm::make_early_inc_range(op->getResult(0).getUsers()))
      if (auto sum = dyn_cast<at::AllReduceOp>(u)) {
        sum.getResult().replaceAllUsesWith(sum.getInput());
        sum.erase();
      }
  }
  return success();
}

struct CheckRowSplitsPass : h20::impl::CheckRowSplitsBase<CheckRowSplitsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string why;
    for (func::FuncOp func : module.getOps<func::FuncOp>()) {
      auto chunked = func->getAttrOfType<DictionaryAttr>("h20.chunked");
      auto chunkAttr = chunked ? chunked.getAs<IntegerAttr>("chunk") : IntegerAttr();
      const int64_t chunk = chunkAttr ? chunkAttr.getInt() : 0;
      Operation *blocker = nullptr;
      func.walk([&](Operation *op) {
        auto split = op->getAttrOfType<IntegerAttr>(at::kSplitRowsAttr);
        if (blocker || !split)
          return;
        if (split.getInt() < 2 ||
            !isa<at::SparseAttentionOp, at::IndexerTopKOp, at::IndexerCandidatesOp, onnx::MatMulOp,
                 onnx::H20BlockScaledMatMulOp>(op)) {
          op->emitError("h20-check-row-splits: ")
              << at::kSplitRowsAttr << " = " << split.getInt()
              << " on an op that cannot be split by query rows (sparse attention, indexers and "
                 "the GEMMs of their output, over >= 2 ranks)";
          return signalPassFailure();
        }
        if (std::optional<std::string> w = whyNot(op, split.getInt(), chunk)) {
          blocker = op;
          why = *w;
        }
      });
      if (!blocker)
        continue;
      blocker->emitWarning("h20-check-row-splits: the attention (and any shared expert split "
                           "with it) runs every query row on every rank: ")
          << why;
      if (failed(withdraw(func)))
        return signalPassFailure();
    }
    if (why.empty())
      return;
    auto tp = module->getAttrOfType<DictionaryAttr>("h20.tensor_parallel");
    if (!tp)
      return;
    Builder b(module.getContext());
    NamedAttrList fields(tp);
    // Every split is withdrawn: the query-side and shared-expert GEMMs too.
    for (StringRef k : {"attention_rows", "query_gemms", "shared_expert_gemms"})
      if (fields.get(k))
        fields.set(k, b.getI64IntegerAttr(0));
    fields.set("attention_rows_withdrawn", b.getStringAttr(why));
    module->setAttr("h20.tensor_parallel", fields.getDictionary(module.getContext()));
    // Without the rows, a tensor-parallel program that splits nothing else
    // would run the whole model on every rank: refuse it, as
    // h20-tensor-parallel refuses a model with nothing to split.
    auto count = [&](StringRef k) {
      auto v = tp.getAs<IntegerAttr>(k);
      return v ? v.getInt() : int64_t(0);
    };
    if (count("attention_blocks") + count("mlp_blocks") + count("expert_blocks") == 0) {
      module.emitError("h20-check-row-splits: nothing is left to split over ")
          << count("ranks") << " tensor-parallel ranks: the attention's split by query rows was "
          << "withdrawn (" << why << "), and no attention head, MLP or routed-experts block "
          << "was split";
      return signalPassFailure();
    }
  }
};

} // namespace
