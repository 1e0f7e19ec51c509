//===- DropGemmInitFill.cpp - no zero fill before a cuBLASLt GEMM ---------===//
//
// A GEMM generic (library call h20_gemm) becomes one cuBLASLt call with
// beta = 0, which writes every element of C: the zero fill the reference
// lowering puts in front of it would cost one more pass over C. See
// Passes.td.
//
//===----------------------------------------------------------------------===//
#include "h20/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace h20 {
#define GEN_PASS_DEF_DROPGEMMINITFILL
#include "h20/Conversion/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {

struct DropGemmInitFillPass : h20::impl::DropGemmInitFillBase<DropGemmInitFillPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    func.walk([&](linalg::GenericOp g) {
      if (!g.getLibraryCallAttr() || g.getLibraryCallAttr().getValue() != "h20_gemm")
        return;
      for (OpOperand &init : g.getDpsInitsMutable())
        if (auto fill = init.get().getDefiningOp<linalg::FillOp>())
          init.set(fill.getDpsInits()[0]);
    });
    func.walk([&](linalg::FillOp fill) {
      if (fill->use_empty())
        fill->erase();
    });
  }
};

} // namespace
