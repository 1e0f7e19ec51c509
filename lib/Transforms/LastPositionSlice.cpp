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

Operation *lmHead(Value logits, int64_t *vocab) {
  // An inlined function body (e.g. BlockScaledMatMul's, on the CPU target)
  // ends in Identity.
  while (auto id = logits.getDefiningOp<ox::IdentityOp>())
    logits = id->getOperand(0);
  Operation *head = logits.getDefiningOp();
  if (!isa_and_nonnull<ox::MatMulOp, ox::H20BlockScaledMatMulOp>(head))
    return nullptr;
  auto ht = dyn_cast<RankedTensorType>(head->getOperand(0).getType());
  auto wt = dyn_cast<RankedTensorType>(head->getOperand(1).getType());
  if (!ht || !wt || ht.getRank() != 3 || wt.getRank() != 2)
    return nullptr;
  if (vocab) // MatMul: W [K, V]; BlockScaledMatMul: W [V, K]
    *vocab = wt.getDimSize(isa<ox::MatMulOp>(head) ? 1 : 0);
  return head;
}

ox::SliceOp lastPositionSlice(func::FuncOp func) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  if (ret.getNumOperands() != 1)
    return {};
  Operation *head = lmHead(ret.getOperand(0));
  Operation *slice = head ? head->getOperand(0).getDefiningOp() : nullptr;
  return isLastPositionSlice(slice) ? cast<ox::SliceOp>(slice) : ox::SliceOp();
}

} // namespace h20
