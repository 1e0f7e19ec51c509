//===- GatherBeforeCast.cpp - gather a weight's rows, then cast them ------===//
//
// See Passes.td (h20-gather-before-cast). Gather and an elementwise Cast
// commute; on a weight the order decides how much is converted per call
// (the picked rows, or the whole table) and which type the table keeps in
// memory.
//
//===----------------------------------------------------------------------===//
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace h20 {
#define GEN_PASS_DEF_GATHERBEFORECAST
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;
namespace ox = h20::onnx;

namespace {

struct GatherBeforeCastPass : h20::impl::GatherBeforeCastBase<GatherBeforeCastPass> {
  void runOnOperation() override {
    SmallVector<ox::GatherOp> gathers;
    getOperation().walk([&](ox::GatherOp g) { gathers.push_back(g); });
    for (ox::GatherOp g : gathers) {
      auto cast = g->getOperand(0).getDefiningOp<ox::CastOp>();
      if (!cast)
        continue;
      Value table = cast->getOperand(0);
      auto tableType = dyn_cast<RankedTensorType>(table.getType());
      auto rowsType = dyn_cast<RankedTensorType>(g->getResult(0).getType());
      if (!tableType || !rowsType ||
          !isa_and_nonnull<ox::WeightOp, ox::ConstantOp>(table.getDefiningOp()))
        continue;
      OpBuilder b(g);
      // The same Gather (axis, name) on the stored table ...
      Operation *rows = b.clone(*g);
      rows->setOperand(0, table);
      rows->getResult(0).setType(rowsType.clone(tableType.getElementType()));
      // ... then the same Cast on its rows.
      Operation *widened = b.clone(*cast);
      widened->setOperand(0, rows->getResult(0));
      widened->getResult(0).setType(rowsType);
      g->getResult(0).replaceAllUsesWith(widened->getResult(0));
      g->erase();
      if (cast->use_empty())
        cast->erase();
    }
  }
};

} // namespace
