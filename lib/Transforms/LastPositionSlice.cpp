//===- LastPositionSlice.cpp - the Slice that keeps an LM head's last row -===//
#include "LastPositionSlice.h"

using namespace mlir;
namespace ox = h20::onnx;

namespace h20 {
namespace {

/// The single element of a constant i64 [1] operand, if it is one.
std::optional<int64_t> constantScalar(Value v) {
  auto c = v.getDefiningOp<ox::ConstantOp>();
  auto a = c ? dyn_cast_or_null<DenseIntElementsAttr>(c->getAttr("value")) : DenseIntElementsAttr();
  if (!a || a.getNumElements() != 1)
    return std::nullopt;
  return (*a.value_begin<APInt>()).getSExtValue();
}

} // namespace

bool isLastPositionSlice(Operation *op) {
  auto slice = dyn_cast_or_null<ox::SliceOp>(op);
  if (!slice || slice->getNumOperands() < 4)
    return false;
  auto ht = dyn_cast<RankedTensorType>(slice->getOperand(0).getType());
  if (!ht || ht.getRank() != 3)
    return false;
  std::optional<int64_t> start = constantScalar(slice->getOperand(1)),
                         end = constantScalar(slice->getOperand(2)),
                         axis = constantScalar(slice->getOperand(3));
  if (start != -1 || !end || *end < (int64_t(1) << 62) || (axis != 1 && axis != -2))
    return false;
  if (slice->getNumOperands() > 4 && !isa<ox::NoValueOp>(slice->getOperand(4).getDefiningOp()))
    return constantScalar(slice->getOperand(4)) == 1;
  return true;
}

ox::SliceOp lastPositionSlice(func::FuncOp func) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  if (ret.getNumOperands() != 1)
    return {};
  auto mm = ret.getOperand(0).getDefiningOp<ox::MatMulOp>();
  Operation *slice = mm ? mm->getOperand(0).getDefiningOp() : nullptr;
  return isLastPositionSlice(slice) ? cast<ox::SliceOp>(slice) : ox::SliceOp();
}

} // namespace h20
