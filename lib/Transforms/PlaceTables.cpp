//===- PlaceTables.cpp - large lookup tables in pinned host memory --------===//
//
// See Passes.td (h20-place-tables). The choice is recorded on the weight
// (`h20.placement`); h20-lower-to-linalg copies it into the function's
// weight list, the GPU target into the program's buffer, and the runtime
// only reads it. Nothing about the computation changes: a gather reads a
// row from wherever its table is.
//
//===----------------------------------------------------------------------===//
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseSet.h"

namespace h20 {
#define GEN_PASS_DEF_PLACETABLES
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;
namespace ox = h20::onnx;

namespace {

/// Whether every use of `w` looks rows up: the data operand of an
/// onnx.Gather along axis 0 (a negative axis counts from the table's rank).
bool onlyRowLookups(ox::WeightOp w) {
  auto t = cast<RankedTensorType>(w.getResult().getType());
  if (t.getRank() < 1 || w.getResult().use_empty())
    return false;
  for (OpOperand &use : w.getResult().getUses()) {
    auto g = dyn_cast<ox::GatherOp>(use.getOwner());
    if (!g || use.getOperandNumber() != 0)
      return false;
    int64_t axis = g.getAxis().value_or(0);
    if (axis < 0)
      axis += t.getRank();
    if (axis != 0)
      return false;
  }
  return true;
}

/// Device bytes of `t` (sub-byte elements rounded up per element), or -1
/// when it does not fit 63 bits.
int64_t deviceBytes(RankedTensorType t) {
  int64_t bytes = (t.getElementTypeBitWidth() + 7) / 8;
  for (int64_t d : t.getShape()) {
    if (d < 0 || (d && bytes > INT64_MAX / d))
      return -1;
    bytes *= d;
  }
  return bytes;
}

struct PlaceTablesPass : h20::impl::PlaceTablesBase<PlaceTablesPass> {
  using Base::Base;
  void runOnOperation() override {
    func::FuncOp f = getOperation();
    if (minBytes < 0)
      return;
    Builder b(f.getContext());
    int64_t count = 0, total = 0;
    auto place = [&](ox::WeightOp w, int64_t bytes) {
      w->setAttr("h20.placement", b.getStringAttr("host"));
      ++count;
      total += bytes;
    };
    // Tables large enough on their own; the indices they are read with.
    SmallVector<std::pair<ox::WeightOp, int64_t>> smaller;
    llvm::DenseSet<Value> hostIndices;
    f.walk([&](ox::WeightOp w) {
      int64_t bytes = deviceBytes(cast<RankedTensorType>(w.getResult().getType()));
      if (bytes < 0 || !onlyRowLookups(w))
        return;
      if (bytes < minBytes) {
        smaller.push_back({w, bytes});
        return;
      }
      place(w, bytes);
      for (Operation *g : w.getResult().getUsers())
        hostIndices.insert(g->getOperand(1));
    });
    // A smaller table read with the same indices goes with them (an FP8
    // table's scales beside its rows): one lookup, one place.
    for (auto [w, bytes] : smaller)
      if (llvm::any_of(w.getResult().getUsers(),
                       [&](Operation *g) { return hostIndices.contains(g->getOperand(1)); }))
        place(w, bytes);
    if (count)
      f->setAttr("h20.host_tables",
                 b.getDictionaryAttr({b.getNamedAttr("count", b.getI64IntegerAttr(count)),
                                      b.getNamedAttr("bytes", b.getI64IntegerAttr(total))}));
  }
};

} // namespace
