//===- FoldShapes.cpp - fold shape subgraphs that compute constants ------===//
#include "h20/Analysis/SymbolicEvaluator.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Transforms/RegionUtils.h"

namespace h20 {
#define GEN_PASS_DEF_FOLDSHAPES
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {

struct FoldShapesPass : h20::impl::FoldShapesBase<FoldShapesPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    h20::SymbolicEvaluator eval(func);
    OpBuilder b(func.getContext());
    SmallVector<Operation *> ops;
    func.walk([&](Operation *op) {
      if (isa<h20::onnx::OnnxDialect>(op->getDialect()) &&
          !isa<h20::onnx::ConstantOp, h20::onnx::WeightOp, h20::onnx::NoValueOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      for (OpResult r : op->getResults()) {
        auto type = dyn_cast<RankedTensorType>(r.getType());
        if (!type || !type.hasStaticShape() || type.getNumElements() > 64 ||
            !type.getElementType().isSignlessInteger() || r.use_empty())
          continue;
        const h20::SymTensor *t = eval.get(r);
        if (!t || !t->elem)
          continue;
        // Enumerate every element; all must fold to constants.
        SmallVector<APInt> values;
        SmallVector<int64_t> idx(type.getRank(), 0);
        bool ok = true;
        for (int64_t n = 0; n < type.getNumElements() && ok; ++n) {
          int64_t rem = n;
          for (int64_t k = type.getRank() - 1; k >= 0; --k) {
            idx[k] = rem % type.getDimSize(k);
            rem /= type.getDimSize(k);
          }
          auto v = h20::constantOf(h20::substituteIndices(
              t->elem, [&](int64_t k) { return h20::symConst(idx[k]); }));
          ok = v.has_value();
          if (ok)
            values.push_back(APInt(type.getElementTypeBitWidth(), *v,
                                   /*isSigned=*/true, /*implicitTrunc=*/true));
        }
        if (!ok)
          continue;
        b.setInsertionPoint(op);
        auto c = h20::onnx::ConstantOp::create(
            b, op->getLoc(), TypeRange{type}, ValueRange{},
            DenseElementsAttr::get(type, values));
        r.replaceAllUsesWith(c->getResult(0));
      }
    }
    IRRewriter rewriter(func.getContext());
    (void)runRegionDCE(rewriter, func.getBody());
  }
};

} // namespace
