//===- InferShapes.cpp - refine onnx result types from symbolic shapes ---===//
#include "h20/Analysis/SymbolicEvaluator.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Transforms/Passes.h"

namespace h20 {
#define GEN_PASS_DEF_INFERSHAPES
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {

/// The type `dims` describe, or null when it would not refine `current`.
Type refined(Type current, ArrayRef<h20::SymExpr> dims) {
  auto shaped = dyn_cast<TensorType>(current);
  if (!shaped)
    return {};
  SmallVector<int64_t> shape;
  for (const h20::SymExpr &d : dims) {
    auto c = h20::constantOf(d);
    shape.push_back(c ? *c : ShapedType::kDynamic);
  }
  auto ranked = dyn_cast<RankedTensorType>(current);
  if (ranked) {
    if (ranked.getRank() != static_cast<int64_t>(shape.size()))
      return {};
    bool better = false;
    for (auto [have, got] : llvm::zip(ranked.getShape(), shape)) {
      if (!ShapedType::isDynamic(have) && have != got)
        return {}; // contradiction: keep what the model declared
      better |= ShapedType::isDynamic(have) && !ShapedType::isDynamic(got);
    }
    if (!better)
      return {};
  }
  return RankedTensorType::get(shape, shaped.getElementType());
}

struct InferShapesPass : h20::impl::InferShapesBase<InferShapesPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    h20::SymbolicEvaluator eval(func);
    func.walk([&](Operation *op) {
      if (!isa<h20::onnx::OnnxDialect>(op->getDialect()))
        return;
      for (OpResult r : op->getResults()) {
        auto dims = eval.shapeOf(r);
        if (!dims)
          continue;
        Type t = refined(r.getType(), *dims);
        if (!t)
          continue;
        bool returned = llvm::any_of(r.getUsers(), [](Operation *u) {
          return isa<func::ReturnOp>(u);
        });
        if (!returned)
          r.setType(t);
      }
    });
  }
};

} // namespace
