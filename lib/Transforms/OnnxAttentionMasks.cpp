//===- OnnxAttentionMasks.cpp - explicit visibility masks for ONNX Attention ---===//
#include "OnnxAttentionMasks.h"

#include "h20/Dialect/Onnx/IR/OnnxDialect.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
namespace ox = h20::onnx;

namespace h20 {
namespace {

/// Builds ONNX ops with explicit result types.
struct OnnxBuilder {
  OpBuilder &b;
  Location loc;

  Type i64() const { return b.getI64Type(); }
  RankedTensorType i64Tensor(ArrayRef<int64_t> shape) const {
    return RankedTensorType::get(shape, i64());
  }
  Value scalar(int64_t v) const {
    auto t = i64Tensor({});
    return ox::ConstantOp::create(b, loc, TypeRange{t}, ValueRange{},
                                  DenseElementsAttr::get(t, ArrayRef<int64_t>{v}))
        ->getResult(0);
  }
  Value vector(ArrayRef<int64_t> values) const {
    auto t = i64Tensor({static_cast<int64_t>(values.size())});
    return ox::ConstantOp::create(b, loc, TypeRange{t}, ValueRange{}, DenseElementsAttr::get(t, values))
        ->getResult(0);
  }
  /// x.shape[axis] as an i64 scalar tensor.
  Value length(Value x, int64_t axis) const {
    auto si64 = b.getIntegerType(64, /*isSigned=*/true);
    Value len = ox::ShapeOp::create(b, loc, TypeRange{i64Tensor({1})}, ValueRange{x},
                                    b.getIntegerAttr(si64, axis), b.getIntegerAttr(si64, axis + 1))
                    ->getResult(0);
    return ox::SqueezeOp::create(b, loc, TypeRange{i64Tensor({})}, ValueRange{len})->getResult(0);
  }
  /// [0, 1, ..., n - 1] with n = x.shape[axis].
  Value iota(Value x, int64_t axis) const {
    int64_t n = cast<RankedTensorType>(x.getType()).getDimSize(axis);
    return ox::RangeOp::create(b, loc, TypeRange{i64Tensor({n})},
                               ValueRange{scalar(0), length(x, axis), scalar(1)})
        ->getResult(0);
  }
  Value unsqueeze(Value x, ArrayRef<int64_t> axes, RankedTensorType type) const {
    return ox::UnsqueezeOp::create(b, loc, TypeRange{type}, ValueRange{x, vector(axes)})->getResult(0);
  }
  template <typename OpT>
  Value binary(Type type, Value x, Value y) const {
    return OpT::create(b, loc, TypeRange{type}, ValueRange{x, y})->getResult(0);
  }
};

/// The broadcast of two static-or-dynamic sizes; nullopt when both are
/// static, differ and neither is 1.
std::optional<int64_t> broadcastDim(int64_t x, int64_t y) {
  if (x == 1)
    return y;
  if (y == 1)
    return x;
  if (ShapedType::isDynamic(x))
    return y;
  if (ShapedType::isDynamic(y) || x == y)
    return x;
  return std::nullopt;
}

} // namespace

Value buildVisibilityMask(OpBuilder &b, Location loc, Value q, Value k,
                          const QueryPlacement &placement) {
  if (placement.left < 0 && placement.right < 0)
    return {};
  OnnxBuilder ob{b, loc};
  auto qt = cast<RankedTensorType>(q.getType()), kt = cast<RankedTensorType>(k.getType());
  int64_t sq = qt.getDimSize(2), skv = kt.getDimSize(2);
  Value i = ob.unsqueeze(ob.iota(q, 2), {1}, ob.i64Tensor({sq, 1}));
  Value j = ob.iota(k, 2);
  // pos(i) = i + offset: [S_q, 1], or [B, S_q, 1] with a per-batch offset.
  Value pos = i;
  int64_t batch = 0; // 0: one offset for every batch
  if (placement.pastKey) {
    pos = ob.binary<ox::AddOp>(ob.i64Tensor({sq, 1}), i, ob.length(placement.pastKey, 2));
  } else if (placement.nonpad) {
    auto nt = dyn_cast<RankedTensorType>(placement.nonpad.getType());
    if (!nt || nt.getRank() != 1 || !nt.getElementType().isInteger(64))
      return {};
    batch = nt.getDimSize(0);
    auto perBatch = ob.i64Tensor({batch, 1, 1});
    Value ends = ox::ReshapeOp::create(b, loc, TypeRange{perBatch},
                                       ValueRange{placement.nonpad, ob.vector({-1, 1, 1})}, IntegerAttr())
                     ->getResult(0);
    Value offset = ob.binary<ox::SubOp>(perBatch, ends, ob.length(q, 2));
    pos = ob.binary<ox::AddOp>(ob.i64Tensor({batch, sq, 1}), i, offset);
  }
  auto posType = cast<RankedTensorType>(pos.getType());
  SmallVector<int64_t> visShape(posType.getShape());
  visShape.back() = skv;
  auto visType = RankedTensorType::get(visShape, b.getI1Type());
  Value visible;
  if (placement.right >= 0) {
    Value hi = placement.right ? ob.binary<ox::AddOp>(posType, pos, ob.scalar(placement.right)) : pos;
    visible = ob.binary<ox::LessOrEqualOp>(visType, j, hi);
  }
  if (placement.left >= 0) {
    Value lo = ob.binary<ox::SubOp>(posType, pos, ob.scalar(placement.left));
    Value c = ob.binary<ox::GreaterOrEqualOp>(visType, j, lo);
    visible = visible ? ob.binary<ox::AndOp>(visType, visible, c) : c;
  }
  if (placement.pastKey || !placement.nonpad)
    return ob.unsqueeze(visible, {0, 1}, RankedTensorType::get({1, 1, sq, skv}, b.getI1Type()));
  return ob.unsqueeze(visible, {1}, RankedTensorType::get({batch, 1, sq, skv}, b.getI1Type()));
}

Value buildKeyPaddingMask(OpBuilder &b, Location loc, Value nonpad, Value k) {
  auto nt = dyn_cast<RankedTensorType>(nonpad.getType());
  if (!nt || nt.getRank() != 1 || !nt.getElementType().isInteger(64))
    return {};
  OnnxBuilder ob{b, loc};
  int64_t batch = nt.getDimSize(0), skv = cast<RankedTensorType>(k.getType()).getDimSize(2);
  Value j = ob.iota(k, 2);
  Value limit = ox::ReshapeOp::create(b, loc, TypeRange{ob.i64Tensor({batch, 1, 1, 1})},
                                      ValueRange{nonpad, ob.vector({-1, 1, 1, 1})}, IntegerAttr())
                    ->getResult(0);
  return ob.binary<ox::LessOp>(RankedTensorType::get({batch, 1, 1, skv}, b.getI1Type()), j, limit);
}

Value buildKeyPaddingMask2d(OpBuilder &b, Location loc, Value mask) {
  auto mt = dyn_cast<RankedTensorType>(mask.getType());
  if (!mt || mt.getRank() != 2 || !mt.getElementType().isInteger())
    return {};
  OnnxBuilder ob{b, loc};
  int64_t batch = mt.getDimSize(0), skv = mt.getDimSize(1);
  Value zero = ob.scalar(0);
  if (!mt.getElementType().isInteger(64)) {
    auto c = ox::CastOp::create(b, loc, TypeRange{ob.i64Tensor({batch, skv})}, ValueRange{mask});
    c->setAttr("to", b.getIntegerAttr(b.getIntegerType(64, true), 7)); // INT64
    mask = c->getResult(0);
  }
  Value keep = ob.binary<ox::GreaterOp>(RankedTensorType::get({batch, skv}, b.getI1Type()), mask,
                                        zero);
  return ob.unsqueeze(keep, {1, 2}, RankedTensorType::get({batch, 1, 1, skv}, b.getI1Type()));
}

Value buildPromptPositions(OpBuilder &b, Location loc, Value x) {
  OnnxBuilder ob{b, loc};
  auto xt = cast<RankedTensorType>(x.getType());
  int64_t batch = xt.getDimSize(0), s = xt.getDimSize(1);
  Value row = ob.unsqueeze(ob.iota(x, 1), {0}, ob.i64Tensor({1, s}));
  if (batch == 1)
    return row;
  auto si64 = b.getIntegerType(64, /*isSigned=*/true);
  Value shape = ox::ShapeOp::create(b, loc, TypeRange{ob.i64Tensor({2})}, ValueRange{x},
                                    b.getIntegerAttr(si64, 0), b.getIntegerAttr(si64, 2))
                    ->getResult(0);
  return ox::ExpandOp::create(b, loc, TypeRange{ob.i64Tensor({batch, s})}, ValueRange{row, shape})
      ->getResult(0);
}

Value restrictMask(OpBuilder &b, Location loc, Value mask, Value valid) {
  if (!mask)
    return valid;
  auto mt = dyn_cast<RankedTensorType>(mask.getType());
  auto vt = cast<RankedTensorType>(valid.getType());
  if (!mt || mt.getRank() > 4 || vt.getRank() != 4)
    return {};
  SmallVector<int64_t> shape(4, 1);
  for (int64_t d = 0; d < 4; ++d) {
    int64_t md = d >= 4 - mt.getRank() ? mt.getDimSize(d - (4 - mt.getRank())) : 1;
    auto dim = broadcastDim(vt.getDimSize(d), md);
    if (!dim)
      return {};
    shape[d] = *dim;
  }
  if (mt.getElementType().isInteger(1))
    return ox::AndOp::create(b, loc, TypeRange{RankedTensorType::get(shape, b.getI1Type())},
                             ValueRange{valid, mask})
        ->getResult(0);
  auto ft = RankedTensorType::get({}, mt.getElementType());
  auto fty = dyn_cast<FloatType>(mt.getElementType());
  if (!fty)
    return {};
  Value ninf = ox::ConstantOp::create(
                   b, loc, TypeRange{ft}, ValueRange{},
                   DenseElementsAttr::get(ft, APFloat::getInf(fty.getFloatSemantics(), /*Negative=*/true)))
                   ->getResult(0);
  return ox::WhereOp::create(b, loc, TypeRange{RankedTensorType::get(shape, mt.getElementType())},
                             ValueRange{valid, mask, ninf})
      ->getResult(0);
}

Value padMaskKeys(OpBuilder &b, Location loc, Value mask, int64_t skv) {
  auto mt = dyn_cast<RankedTensorType>(mask.getType());
  if (!mt || mt.getRank() < 1 || !mt.hasStaticShape() || ShapedType::isDynamic(skv) ||
      mt.getShape().back() >= skv)
    return {};
  SmallVector<int64_t> padShape(mt.getShape());
  padShape.back() = skv - mt.getShape().back();
  auto padType = RankedTensorType::get(padShape, mt.getElementType());
  Attribute fill;
  if (mt.getElementType().isInteger(1))
    fill = b.getBoolAttr(false);
  else if (auto fty = dyn_cast<FloatType>(mt.getElementType()))
    fill = b.getFloatAttr(fty, APFloat::getInf(fty.getFloatSemantics(), /*Negative=*/true));
  else
    return {};
  Value pad = ox::ConstantOp::create(b, loc, TypeRange{padType}, ValueRange{},
                                     DenseElementsAttr::get(padType, fill))
                  ->getResult(0);
  SmallVector<int64_t> shape(mt.getShape());
  shape.back() = skv;
  return ox::ConcatOp::create(b, loc, TypeRange{RankedTensorType::get(shape, mt.getElementType())},
                              ValueRange{mask, pad},
                              b.getIntegerAttr(b.getIntegerType(64, true), mt.getRank() - 1))
      ->getResult(0);
}

} // namespace h20
