//===- CopiesToLinalg.cpp - memref.copy as linalg.copy --------------------===//
//
// Keeps artifacts free of MLIR's runner-utils library. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "h20/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace h20 {
#define GEN_PASS_DEF_COPIESTOLINALG
#include "h20/Conversion/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {

struct CopiesToLinalgPass : h20::impl::CopiesToLinalgBase<CopiesToLinalgPass> {
  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation().walk([&](memref::CopyOp c) { copies.push_back(c); });
    for (memref::CopyOp c : copies) {
      OpBuilder b(c);
      linalg::CopyOp::create(b, c.getLoc(), c.getSource(), c.getTarget());
      c.erase();
    }
  }
};

} // namespace
