//===- ChooseLaunchShapes.cpp - generated kernels' launch shape, in IR ----===//
//
// The choice half of h20-linalg-to-gpu-loops (choose-then-apply): block
// size, vector width and row-reduction form per op, recorded as
// `h20.launch` so that `--emit=buffers` shows them and a lit test checks
// them. Before, they were that pass's options, one value for every op.
// See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "h20/Analysis/TargetDescription.h"
#include "h20/Conversion/Passes.h"

#include "GeneratedKernels.h"

#include "mlir/IR/Builders.h"

namespace h20 {
#define GEN_PASS_DEF_CHOOSELAUNCHSHAPES
#include "h20/Conversion/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {

/// sm_90 parts (H20, H100, H200, H800): 8 warps per block, 16-byte loads
/// of bf16 (Passes.td says why these values).
constexpr int64_t kHopperBlock = 256, kHopperVector = 8;

struct ChooseLaunchShapesPass : h20::impl::ChooseLaunchShapesBase<ChooseLaunchShapesPass> {
  using ChooseLaunchShapesBase::ChooseLaunchShapesBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    const h20::TargetDescription *t = h20::findTarget(target);
    if (!t || t->computeCapability < 90) {
      func.emitError("h20-choose-launch-shapes: target '")
          << target << "' is not an sm_90 GPU (known: h20, h100, h200, h800)";
      return signalPassFailure();
    }
    if (blockSize < 0 || blockSize > 1024 || vectorWidth < 0 || vectorWidth > 16) {
      func.emitError("h20-choose-launch-shapes: block-size must be in [0, 1024] and "
                     "vector-width in [0, 16], got ")
          << blockSize << " and " << vectorWidth;
      return signalPassFailure();
    }
    Builder b(func.getContext());
    int64_t block = blockSize ? int64_t(blockSize) : kHopperBlock;
    int64_t vector = vectorWidth ? int64_t(vectorWidth) : kHopperVector;
    DictionaryAttr launch = b.getDictionaryAttr({
        b.getNamedAttr("block", b.getI64IntegerAttr(block)),
        b.getNamedAttr("row_reduction", b.getBoolAttr(true)),
        b.getNamedAttr("vector", b.getI64IntegerAttr(vector)),
    });
    func.walk([&](linalg::LinalgOp op) {
      if (h20::becomesGeneratedKernel(op))
        op->setAttr("h20.launch", launch);
    });
  }
};

} // namespace
