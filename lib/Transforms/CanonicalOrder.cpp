//===- CanonicalOrder.cpp - order ops by a DFS from the results ----------===//
#include "h20/Transforms/Passes.h"

#include "llvm/ADT/DenseSet.h"

namespace h20 {
#define GEN_PASS_DEF_CANONICALORDER
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {
struct CanonicalOrderPass
    : h20::impl::CanonicalOrderBase<CanonicalOrderPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || !func.getBody().hasOneBlock())
      return;
    Block &block = func.getBody().front();
    Operation *terminator = block.getTerminator();

    // Iterative post-order DFS (models have thousands of ops in a chain).
    SmallVector<Operation *> order;
    llvm::DenseSet<Operation *> visited;
    SmallVector<std::pair<Operation *, unsigned>> stack;
    auto push = [&](Value v) {
      Operation *def = v.getDefiningOp();
      if (def && def->getBlock() == &block && visited.insert(def).second)
        stack.push_back({def, 0});
    };
    for (Value v : terminator->getOperands()) {
      push(v);
      while (!stack.empty()) {
        auto &[op, next] = stack.back();
        if (next < op->getNumOperands()) {
          push(op->getOperand(next++));
          continue;
        }
        order.push_back(op);
        stack.pop_back();
      }
    }
    for (Operation *op : order)
      op->moveBefore(terminator);
    // Unreached ops go last, in their previous relative order.
    SmallVector<Operation *> rest;
    for (Operation &op : block)
      if (&op != terminator && !visited.contains(&op))
        rest.push_back(&op);
    for (Operation *op : rest)
      op->moveBefore(terminator);
  }
};
} // namespace
