//===- WidenElementwise.cpp - 16-bit elementwise bodies computed in f32 ---===//
//
// GPU target, after FuseElementwise: a fused elementwise generic on bf16 /
// f16 values computes its body in f32 and rounds once, at the yield. Before,
// every arith/math op of the body rounded to 16 bits: SiLU(g) * u in bf16
// rounded six times where PyTorch's kernels round twice (silu in f32, then
// the product), and on a 32-layer Llama-3-8B shape at 32K tokens h20's
// last-position logits sat 1.17x further from float32 than PyTorch bf16's.
// This is XLA's and PyTorch's practice for 16-bit elementwise math (compute
// in f32 inside a kernel, store in 16 bits). See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "h20/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace h20 {
#define GEN_PASS_DEF_WIDENELEMENTWISE
#include "h20/Conversion/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {

bool isNarrowFloat(Type t) { return t.isBF16() || t.isF16(); }

/// An arith / math op whose 16-bit float operands and results can be f32
/// instead, with the same meaning (everything but the casts that define
/// a rounding: extf, truncf, bitcast).
bool isWidenable(Operation *op) {
  if (!isa<arith::ArithDialect, math::MathDialect>(op->getDialect()))
    return false;
  if (isa<arith::ExtFOp, arith::TruncFOp, arith::BitcastOp, arith::ConstantOp>(op))
    return false;
  if (op->getNumRegions() != 0)
    return false;
  auto narrow = [](Value v) { return isNarrowFloat(v.getType()); };
  return llvm::any_of(op->getOperands(), narrow) || llvm::any_of(op->getResults(), narrow);
}

/// Rewrites the body of `g` (all loops parallel, no library call) so that
/// 16-bit float math runs in f32; returns whether anything changed.
bool widenBody(linalg::GenericOp g) {
  Block &body = g.getRegion().front();
  OpBuilder b(g.getContext());
  Type f32 = b.getF32Type();
  DenseMap<Value, Value> wide; // a 16-bit value -> the same value in f32, unrounded
  auto wideOf = [&](Value v) -> Value {
    if (Value w = wide.lookup(v))
      return w;
    // Right after the definition; at the start of the body for its
    // arguments and for values captured from outside (constants): either
    // way the extension dominates every later use in the body.
    OpBuilder::InsertionGuard guard(b);
    if (v.getParentBlock() == &body && !isa<BlockArgument>(v))
      b.setInsertionPointAfterValue(v);
    else
      b.setInsertionPointToStart(&body);
    Value w = arith::ExtFOp::create(b, v.getLoc(), f32, v);
    wide[v] = w;
    return w;
  };
  bool changed = false;
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    // extf of a value held wide: that value, without its 16-bit rounding.
    if (auto ext = dyn_cast<arith::ExtFOp>(op)) {
      if (Value w = wide.lookup(ext.getIn()); w && ext.getType() == f32) {
        ext.replaceAllUsesWith(w);
        ext.erase();
        changed = true;
      }
      continue;
    }
    if (!isWidenable(&op))
      continue;
    IRMapping map;
    for (Value v : op.getOperands())
      if (isNarrowFloat(v.getType()))
        map.map(v, wideOf(v));
    b.setInsertionPoint(&op);
    Operation *w = b.clone(op, map);
    for (OpResult r : w->getResults())
      if (isNarrowFloat(r.getType()))
        r.setType(f32);
    for (auto [oldRes, newRes] : llvm::zip(op.getResults(), w->getResults())) {
      if (!isNarrowFloat(oldRes.getType())) {
        oldRes.replaceAllUsesWith(newRes);
        continue;
      }
      // Users that stay 16-bit (the yield) read one rounding of the wide
      // value; widened users read the wide value itself.
      Value narrow = arith::TruncFOp::create(b, op.getLoc(), oldRes.getType(), newRes);
      oldRes.replaceAllUsesWith(narrow);
      wide[narrow] = newRes;
    }
    op.erase();
    changed = true;
  }
  // Drop the roundings nothing reads any more.
  SmallVector<Operation *> casts;
  for (Operation &op : body.without_terminator())
    if (isa<arith::TruncFOp, arith::ExtFOp>(op))
      casts.push_back(&op);
  for (Operation *op : llvm::reverse(casts))
    if (op->use_empty())
      op->erase();
  return changed;
}

struct WidenElementwisePass : h20::impl::WidenElementwiseBase<WidenElementwisePass> {
  void runOnOperation() override {
    getOperation().walk([&](linalg::GenericOp g) {
      if (g.getLibraryCallAttr() || g.getNumReductionLoops() != 0)
        return;
      widenBody(g);
    });
  }
};

} // namespace
