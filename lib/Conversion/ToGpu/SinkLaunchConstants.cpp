//===- SinkLaunchConstants.cpp - constants into gpu.launch bodies ---------===//
//
// A constant a kernel uses becomes part of the kernel, not a launch
// argument. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "h20/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Utils/GPUUtils.h"

namespace h20 {
#define GEN_PASS_DEF_SINKLAUNCHCONSTANTS
#include "h20/Conversion/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {

struct SinkLaunchConstantsPass : h20::impl::SinkLaunchConstantsBase<SinkLaunchConstantsPass> {
  void runOnOperation() override {
    getOperation().walk([](gpu::LaunchOp launch) {
      (void)sinkOperationsIntoLaunchOp(launch,
                                       [](Operation *op) { return isa<arith::ConstantOp>(op); });
    });
  }
};

} // namespace
