//===- OutputsToDestinations.cpp - results as caller-allocated memrefs ----===//
//
// The artifact's ABI is destination-passing: the runtime allocates every
// output and the function writes into it. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "h20/Conversion/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace h20 {
#define GEN_PASS_DEF_OUTPUTSTODESTINATIONS
#include "h20/Conversion/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {

struct OutputsToDestinationsPass
    : h20::impl::OutputsToDestinationsBase<OutputsToDestinationsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    auto ret = dyn_cast<func::ReturnOp>(func.getBody().front().getTerminator());
    if (!ret) {
      func.emitError("h20-outputs-to-destinations: the function must end in func.return");
      return signalPassFailure();
    }
    for (Value v : ret.getOperands())
      if (!isa<RankedTensorType>(v.getType())) {
        func.emitError("h20-outputs-to-destinations: result of type ")
            << v.getType() << " is not a ranked tensor";
        return signalPassFailure();
      }
    OpBuilder b(ret);
    SmallVector<Type> inputs(func.getArgumentTypes());
    for (Value v : ret.getOperands()) {
      auto t = cast<RankedTensorType>(v.getType());
      auto mt = MemRefType::get(t.getShape(), t.getElementType());
      BlockArgument dest = func.getBody().front().addArgument(mt, v.getLoc());
      inputs.push_back(mt);
      auto m = bufferization::MaterializeInDestinationOp::create(b, v.getLoc(), TypeRange{}, v,
                                                                 dest);
      m.setRestrict(true);
      m.setWritable(true);
    }
    func::ReturnOp::create(b, ret.getLoc());
    ret.erase();
    func.setType(FunctionType::get(func.getContext(), inputs, {}));
  }
};

} // namespace
