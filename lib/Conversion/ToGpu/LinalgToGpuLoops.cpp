//===- LinalgToGpuLoops.cpp - linalg on memrefs -> GPU-mapped loops -------===//
//
// One kernel per structured op, one thread per output element of the
// collapsed parallel space. Deliberately simple (correctness first): a
// reduction such as RMSNorm's sum runs sequentially in its thread. Library
// calls (GEMM, attention) are left for the target. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "h20/Conversion/Passes.h"

#include "mlir/Dialect/GPU/Transforms/ParallelLoopMapper.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/PatternMatch.h"

namespace h20 {
#define GEN_PASS_DEF_LINALGTOGPULOOPS
#include "h20/Conversion/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {

gpu::ParallelLoopDimMappingAttr mapping(MLIRContext *ctx, gpu::Processor p) {
  AffineMap id = AffineMap::getMultiDimIdentityMap(1, ctx);
  return gpu::ParallelLoopDimMappingAttr::get(ctx, p, id, id);
}

/// Marks every scf.parallel nested in `root` sequential: only the outer
/// tile/thread pair is mapped to the grid.
void markNestedSequential(Operation *root) {
  root->walk([&](scf::ParallelOp inner) {
    if (inner->hasAttr(gpu::getMappingAttrName()))
      return;
    SmallVector<gpu::ParallelLoopDimMappingAttr> seq(
        inner.getNumLoops(), mapping(inner.getContext(), gpu::Processor::Sequential));
    (void)gpu::setMappingAttr(inner, seq);
  });
}

struct LinalgToGpuLoopsPass : h20::impl::LinalgToGpuLoopsBase<LinalgToGpuLoopsPass> {
  using LinalgToGpuLoopsBase::LinalgToGpuLoopsBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    MLIRContext *ctx = &getContext();
    IRRewriter rewriter(ctx);
    SmallVector<linalg::LinalgOp> ops;
    func.walk([&](linalg::LinalgOp op) {
      if (op->getParentOfType<scf::ParallelOp>() || !op.hasPureBufferSemantics())
        return;
      auto g = dyn_cast<linalg::GenericOp>(op.getOperation());
      if (g && g.getLibraryCallAttr())
        return;
      ops.push_back(op);
    });
    for (linalg::LinalgOp op : ops) {
      rewriter.setInsertionPoint(op);
      bool hasParallel = llvm::any_of(op.getIteratorTypesArray(), linalg::isParallelIterator);
      Location loc = op.getLoc();
      // An op with only reductions: give it a one-iteration parallel loop
      // to become a one-thread kernel.
      scf::ParallelOp single;
      if (!hasParallel) {
        Value c0 = arith::ConstantIndexOp::create(rewriter, loc, 0);
        Value c1 = arith::ConstantIndexOp::create(rewriter, loc, 1);
        single = scf::ParallelOp::create(rewriter, loc, ValueRange{c0}, ValueRange{c1},
                                         ValueRange{c1});
        rewriter.setInsertionPoint(single.getBody()->getTerminator());
        op->moveBefore(single.getBody()->getTerminator());
      }
      FailureOr<linalg::LinalgLoops> loops = linalg::linalgOpToParallelLoops(rewriter, op);
      if (failed(loops)) {
        op->emitError("cannot turn this op into GPU loops");
        return signalPassFailure();
      }
      rewriter.eraseOp(op);
      auto outer = single ? single
                          : (loops->empty() ? scf::ParallelOp()
                                            : dyn_cast<scf::ParallelOp>(loops->front()));
      if (!outer) {
        func.emitError("internal: a linalg op with parallel dims gave no parallel loop");
        return signalPassFailure();
      }
      if (outer.getNumLoops() > 1) {
        std::vector<unsigned> all(outer.getNumLoops());
        for (unsigned i = 0; i < all.size(); ++i)
          all[i] = i;
        rewriter.setInsertionPoint(outer);
        collapseParallelLoops(rewriter, outer, {all});
        // The collapsed loop replaced `outer`. Every loop made so far is
        // mapped and the ops not yet converted are still linalg ops, so the
        // one unmapped top-level parallel loop is the collapsed one.
        outer = nullptr;
        for (Operation &o : llvm::reverse(func.getBody().front()))
          if (auto p = dyn_cast<scf::ParallelOp>(o); p && !p->hasAttr(gpu::getMappingAttrName())) {
            outer = p;
            break;
          }
      }
      if (!outer) {
        func.emitError("internal: collapsed loop not found");
        return signalPassFailure();
      }
      auto [tiles, threads] = scf::tileParallelLoop(outer, {blockSize}, /*noMinMaxBounds=*/true);
      (void)gpu::setMappingAttr(tiles, {mapping(ctx, gpu::Processor::BlockX)});
      (void)gpu::setMappingAttr(threads, {mapping(ctx, gpu::Processor::ThreadX)});
      markNestedSequential(threads);
    }
  }
};

} // namespace
