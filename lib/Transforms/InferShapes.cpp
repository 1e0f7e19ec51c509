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

/// ONNX Reshape-14: the shape holds at most one -1 and no other negative
/// value. A shape known at compile time that breaks this is an error naming
/// the node (the evaluator leaves such a result's shape unknown).
LogicalResult checkReshapes(func::FuncOp func, h20::SymbolicEvaluator &eval) {
  WalkResult r = func.walk([&](h20::onnx::ReshapeOp op) {
    if (op->getNumOperands() != 2)
      return WalkResult::advance();
    auto target = eval.vectorOf(op->getOperand(1));
    if (!target)
      return WalkResult::advance();
    int64_t minusOnes = 0;
    std::string shape;
    std::optional<int64_t> bad;
    for (const h20::SymExpr &d : *target) {
      auto c = h20::constantOf(d);
      shape += (shape.empty() ? "" : ", ") + (c ? std::to_string(*c) : std::string("?"));
      minusOnes += c && *c == -1;
      if (c && *c < -1)
        bad = *c;
    }
    if (minusOnes <= 1 && !bad)
      return WalkResult::advance();
    std::string node = h20::onnx::describeNode(op->getLoc());
    auto diag = op->emitError() << (node.empty() ? "onnx.Reshape" : node) << ": shape [" << shape
                                << "] ";
    if (bad)
      diag << "holds " << *bad << "; only -1 (inferred) and dims >= 0 are allowed";
    else
      diag << "holds -1 " << minusOnes << " times; at most one dim can be inferred";
    return WalkResult::interrupt();
  });
  return failure(r.wasInterrupted());
}

/// ONNX Expand-13: the input's shape and the requested shape broadcast
/// (aligned from the back, each dim pair equal or one of them 1). A pair of
/// known dims that does not is an error naming the node, instead of a
/// mis-shaped kernel later.
LogicalResult checkExpands(func::FuncOp func, h20::SymbolicEvaluator &eval) {
  WalkResult r = func.walk([&](h20::onnx::ExpandOp op) {
    if (op->getNumOperands() != 2)
      return WalkResult::advance();
    auto in = eval.shapeOf(op->getOperand(0));
    auto target = eval.vectorOf(op->getOperand(1));
    if (!in || !target)
      return WalkResult::advance();
    int64_t n = in->size(), m = target->size();
    for (int64_t k = 1; k <= std::min(n, m); ++k) {
      auto a = h20::constantOf((*in)[n - k]), t = h20::constantOf((*target)[m - k]);
      if (!a || !t || *a == *t || *a == 1 || *t == 1)
        continue;
      std::string node = h20::onnx::describeNode(op->getLoc());
      op->emitError() << (node.empty() ? "onnx.Expand" : node) << ": input dim " << n - k
                      << " of size " << *a << " does not broadcast to size " << *t
                      << " (shape dim " << m - k << "): sizes must be equal or one of them 1";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(r.wasInterrupted());
}

/// ONNX MatMul (numpy.matmul): A [..., M, K] x B [..., K, N] (a rank-1
/// operand is a vector of K). Known inner dims that differ are an error
/// naming the node and both shapes: lowered anyway, the product would read
/// past a weight's rows.
LogicalResult checkMatMuls(func::FuncOp func) {
  WalkResult r = func.walk([&](h20::onnx::MatMulOp op) {
    if (op->getNumOperands() != 2)
      return WalkResult::advance();
    auto a = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
    auto b = dyn_cast<RankedTensorType>(op->getOperand(1).getType());
    if (!a || !b || a.getRank() < 1 || b.getRank() < 1)
      return WalkResult::advance();
    const int64_t ka = a.getDimSize(a.getRank() - 1);
    const int64_t kb = b.getDimSize(b.getRank() == 1 ? 0 : b.getRank() - 2);
    if (ShapedType::isDynamic(ka) || ShapedType::isDynamic(kb) || ka == kb)
      return WalkResult::advance();
    std::string node = h20::onnx::describeNode(op->getLoc());
    op->emitError() << (node.empty() ? "onnx.MatMul" : node) << ": inputs " << a << " and " << b
                    << " do not multiply: inner dimensions " << ka << " and " << kb
                    << " differ (A [..., M, K] x B [..., K, N])";
    return WalkResult::interrupt();
  });
  return failure(r.wasInterrupted());
}

/// ONNX multidirectional broadcasting (Add, Mul, Where, ...): operand dims
/// aligned from the back must be equal or 1. Static dims that are not are
/// an error naming the node and both shapes.
LogicalResult checkBroadcasts(func::FuncOp func) {
  namespace ox = h20::onnx;
  WalkResult r = func.walk([&](Operation *op) {
    if (!isa<ox::AddOp, ox::SubOp, ox::MulOp, ox::DivOp, ox::PowOp, ox::AndOp, ox::OrOp,
             ox::EqualOp, ox::LessOp, ox::LessOrEqualOp, ox::GreaterOp, ox::GreaterOrEqualOp,
             ox::MaxOp, ox::MinOp, ox::SumOp, ox::WhereOp, ox::ModOp, ox::BitwiseAndOp,
             ox::BitwiseOrOp, ox::BitwiseXorOp>(op))
      return WalkResult::advance();
    SmallVector<RankedTensorType> types;
    for (Value v : op->getOperands())
      if (auto t = dyn_cast<RankedTensorType>(v.getType()))
        types.push_back(t);
    int64_t rank = 0;
    for (RankedTensorType t : types)
      rank = std::max(rank, t.getRank());
    for (int64_t k = 1; k <= rank; ++k) {
      int64_t seen = 1;
      for (RankedTensorType t : types) {
        if (k > t.getRank() || t.isDynamicDim(t.getRank() - k) || t.getDimSize(t.getRank() - k) == 1)
          continue;
        int64_t d = t.getDimSize(t.getRank() - k);
        if (seen != 1 && seen != d) {
          std::string node = h20::onnx::describeNode(op->getLoc()), shapes;
          for (RankedTensorType u : types) {
            shapes += shapes.empty() ? "[" : ", [";
            for (int64_t j = 0; j < u.getRank(); ++j)
              shapes += (j ? "x" : "") +
                        (u.isDynamicDim(j) ? std::string("?") : std::to_string(u.getDimSize(j)));
            shapes += "]";
          }
          op->emitError() << (node.empty() ? op->getName().getStringRef().str() : node)
                          << ": operand shapes " << shapes << " do not broadcast (dim "
                          << rank - k << " from the front of the result: " << seen << " vs " << d
                          << ")";
          return WalkResult::interrupt();
        }
        seen = d;
      }
    }
    return WalkResult::advance();
  });
  return failure(r.wasInterrupted());
}

struct InferShapesPass : h20::impl::InferShapesBase<InferShapesPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    h20::SymbolicEvaluator eval(func);
    if (failed(checkReshapes(func, eval)) || failed(checkExpands(func, eval)))
      return signalPassFailure();
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
    // With the refined operand types, broadcasts that cannot work.
    if (failed(checkBroadcasts(func)) || failed(checkMatMuls(func)))
      return signalPassFailure();
  }
};

} // namespace
