//===- MergeAllReduces.cpp - one all-reduce for a sum of two -------------===//
//
// See Passes.td (h20-merge-all-reduces). A sum over the ranks is linear:
// all_reduce(a) + all_reduce(b) = all_reduce(a + b), so two collectives of
// the same bytes become one (a rank adds its own two shares first; the
// rounding of that sum moves from after the collective to before it).
//
//===----------------------------------------------------------------------===//
#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Transforms/Passes.h"
#include "h20/Transforms/TensorParallel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace h20 {
#define GEN_PASS_DEF_MERGEALLREDUCES
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;
namespace at = h20::attn;
namespace ox = h20::onnx;

namespace {

/// The all-reduce that only `add` reads, as its operand `v`, or null.
at::AllReduceOp soleSum(Value v, Operation *add) {
  auto sum = v.getDefiningOp<at::AllReduceOp>();
  return sum && sum->hasOneUse() && *sum->user_begin() == add ? sum : at::AllReduceOp();
}

struct MergeAllReducesPass : h20::impl::MergeAllReducesBase<MergeAllReducesPass> {
  void runOnOperation() override { h20::mergeAllReduces(getOperation()); }
};

} // namespace

int64_t h20::mergeAllReduces(Operation *root) {
  SmallVector<ox::AddOp> adds;
  root->walk([&](ox::AddOp add) { adds.push_back(add); });
  int64_t merged = 0;
  for (ox::AddOp add : adds) {
    at::AllReduceOp lhs = soleSum(add->getOperand(0), add);
    at::AllReduceOp rhs = soleSum(add->getOperand(1), add);
    // Same type on both sides and the result: no broadcast, no cast. And
    // one block: a collective every rank ran must not move under control
    // flow that only some ranks might take.
    if (!lhs || !rhs || lhs == rhs || lhs.getType() != rhs.getType() ||
        add->getResult(0).getType() != lhs.getType() || lhs->getBlock() != add->getBlock() ||
        rhs->getBlock() != add->getBlock())
      continue;
    OpBuilder b(add);
    Value partial = ox::AddOp::create(b, add.getLoc(), TypeRange{lhs.getType()},
                                      ValueRange{lhs.getInput(), rhs.getInput()})
                        ->getResult(0);
    auto sum = at::AllReduceOp::create(b, add.getLoc(), partial.getType(), partial);
    add->getResult(0).replaceAllUsesWith(sum.getResult());
    add->erase();
    lhs->erase();
    rhs->erase();
    ++merged;
  }
  return merged;
}
