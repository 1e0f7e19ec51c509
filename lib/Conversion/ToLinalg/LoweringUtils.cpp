//===- LoweringUtils.cpp - shared helpers of the linalg lowerings --------===//
#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

namespace h20::lowering {

Value dimOf(OpBuilder &b, Location loc, Value v, int64_t k) {
  auto t = cast<RankedTensorType>(v.getType());
  if (!t.isDynamicDim(k))
    return arith::ConstantIndexOp::create(b, loc, t.getDimSize(k));
  return tensor::DimOp::create(b, loc, v, k);
}

Value emptyTensor(OpBuilder &b, Location loc, RankedTensorType type,
                  ValueRange dims) {
  SmallVector<Value> dynamic;
  for (int64_t k = 0; k < type.getRank(); ++k)
    if (type.isDynamicDim(k))
      dynamic.push_back(dims[k]);
  return tensor::EmptyOp::create(b, loc, type, dynamic);
}

Value filledTensor(OpBuilder &b, Location loc, RankedTensorType type,
                   ValueRange dims, Value value) {
  Value empty = emptyTensor(b, loc, type, dims);
  return linalg::FillOp::create(b, loc, value, empty).getResult(0);
}

SmallVector<utils::IteratorType> parallel(unsigned n) {
  return SmallVector<utils::IteratorType>(n, utils::IteratorType::parallel);
}

SmallVector<utils::IteratorType> iterators(ArrayRef<bool> reduce) {
  SmallVector<utils::IteratorType> it;
  for (bool r : reduce)
    it.push_back(r ? utils::IteratorType::reduction : utils::IteratorType::parallel);
  return it;
}

Type computeTypeFor(Type elt) {
  return elt.isF64() ? elt : Float32Type::get(elt.getContext());
}

Value elementwise(OpBuilder &b, Location loc, RankedTensorType resultType,
                  ValueRange operands, BodyFn body, ArrayRef<Value> givenDims) {
  int64_t rank = resultType.getRank();
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineMap> maps;
  SmallVector<Value> dims(givenDims.begin(), givenDims.end());
  dims.resize(rank);
  for (Value v : operands) {
    auto t = cast<RankedTensorType>(v.getType());
    int64_t r = t.getRank(), off = rank - r;
    SmallVector<AffineExpr> exprs;
    for (int64_t k = 0; k < r; ++k) {
      int64_t outK = k + off;
      bool unit = !t.isDynamicDim(k) && t.getDimSize(k) == 1;
      bool resultUnit = !resultType.isDynamicDim(outK) && resultType.getDimSize(outK) == 1;
      if (unit && !resultUnit) {
        exprs.push_back(getAffineConstantExpr(0, ctx));
        continue;
      }
      exprs.push_back(getAffineDimExpr(outK, ctx));
      if (!dims[outK] && !unit)
        dims[outK] = dimOf(b, loc, v, k);
    }
    maps.push_back(AffineMap::get(rank, 0, exprs, ctx));
  }
  for (int64_t k = 0; k < rank; ++k)
    if (!dims[k])
      dims[k] = arith::ConstantIndexOp::create(
          b, loc, resultType.isDynamicDim(k) ? 1 : resultType.getDimSize(k));
  maps.push_back(AffineMap::getMultiDimIdentityMap(rank, ctx));
  Value init = emptyTensor(b, loc, resultType, dims);
  auto op = linalg::GenericOp::create(
      b, loc, TypeRange{resultType}, operands, ValueRange{init}, maps, parallel(rank),
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value r = body(nb, nl, args.drop_back());
        linalg::YieldOp::create(nb, nl, r);
      });
  return op.getResult(0);
}

LogicalResult checkBroadcastsInto(Operation *op, RankedTensorType resultType) {
  auto shapeOf = [](ShapedType t) {
    std::string s = "[";
    for (int64_t k = 0; k < t.getRank(); ++k)
      s += (k ? "x" : "") + (t.isDynamicDim(k) ? std::string("?") : std::to_string(t.getDimSize(k)));
    return s + "]";
  };
  int64_t rank = resultType.getRank();
  for (auto [j, v] : llvm::enumerate(op->getOperands())) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t)
      return unsupported(op, "operand " + Twine(j) + " has no known rank");
    if (t.getRank() > rank)
      return unsupported(op, "operand " + Twine(j) + " of shape " + shapeOf(t) +
                                 " does not broadcast to the result shape " +
                                 shapeOf(resultType) + " (its rank is higher)");
    for (int64_t k = 0; k < t.getRank(); ++k) {
      int64_t outK = k + rank - t.getRank();
      if (t.isDynamicDim(k) || resultType.isDynamicDim(outK) || t.getDimSize(k) == 1 ||
          t.getDimSize(k) == resultType.getDimSize(outK))
        continue;
      return unsupported(op, "operand " + Twine(j) + " of shape " + shapeOf(t) +
                                 " does not broadcast to the result shape " +
                                 shapeOf(resultType) + " (dim " + Twine(outK) + ")");
    }
  }
  return success();
}

std::string nodeSuffix(Operation *op) {
  if (auto n = dyn_cast<NameLoc>(op->getLoc()); n && !n.getName().empty())
    return " (node '" + n.getName().str() + "')";
  return {};
}

LogicalResult unsupported(Operation *op, const Twine &why) {
  return op->emitError() << op->getName() << nodeSuffix(op) << ": " << why;
}

Value floatConst(OpBuilder &b, Location loc, Type t, double v) {
  return arith::ConstantOp::create(b, loc, t, b.getFloatAttr(t, v));
}

/// An f8E4M3FN value as f32, decoded from its bits (LLVM has no 8-bit
/// float type and MLIR's arith-to-llvm no extf from it; the conversion is
/// exact). E4M3FN (OCP 8-bit floating point spec, 2023, section 5.1): sign,
/// 4 exponent bits with bias 7, 3 mantissa bits; exponent 0 is subnormal
/// (m * 2^-9); S.1111.111 is NaN; there are no infinities.
Value decodeF8E4M3FN(OpBuilder &b, Location loc, Value v) {
  Type i32 = b.getI32Type(), f32 = b.getF32Type();
  auto c = [&](int64_t x) {
    return arith::ConstantOp::create(b, loc, i32, b.getI32IntegerAttr(x));
  };
  Value bits =
      arith::ExtUIOp::create(b, loc, i32, arith::BitcastOp::create(b, loc, b.getI8Type(), v));
  Value sign = arith::ShLIOp::create(b, loc, arith::AndIOp::create(b, loc, bits, c(0x80)), c(24));
  Value mag = arith::AndIOp::create(b, loc, bits, c(0x7F));
  Value exp = arith::ShRUIOp::create(b, loc, mag, c(3));
  Value man = arith::AndIOp::create(b, loc, mag, c(7));
  // Normal: 2^(e - 7) * (1 + m / 8) has float32 exponent e - 7 + 127 and
  // mantissa m << 20.
  Value normal = arith::OrIOp::create(
      b, loc, arith::ShLIOp::create(b, loc, arith::AddIOp::create(b, loc, exp, c(120)), c(23)),
      arith::ShLIOp::create(b, loc, man, c(20)));
  // Subnormal: m * 2^-9, exact in float32.
  Value sub = arith::BitcastOp::create(
      b, loc, i32,
      arith::MulFOp::create(b, loc, arith::UIToFPOp::create(b, loc, f32, man),
                            floatConst(b, loc, f32, 1.0 / 512.0)));
  Value isSub = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, exp, c(0));
  Value r = arith::SelectOp::create(b, loc, isSub, sub, normal);
  Value isNaN = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, mag, c(0x7F));
  r = arith::SelectOp::create(b, loc, isNaN, c(0x7FC00000), r);
  return arith::BitcastOp::create(b, loc, f32, arith::OrIOp::create(b, loc, r, sign));
}

Value castScalar(OpBuilder &b, Location loc, Value v, Type to) {
  Type from = v.getType();
  if (from == to)
    return v;
  if (isa<Float8E4M3FNType>(from))
    return castScalar(b, loc, decodeF8E4M3FN(b, loc, v), to);
  auto fromF = dyn_cast<FloatType>(from), toF = dyn_cast<FloatType>(to);
  if (fromF && toF && fromF.getWidth() == toF.getWidth()) {
    // bf16 <-> f16 (same width, different formats; the GPU target stores
    // float32 as bf16 under an f16 graph): through f32, which holds either
    // exactly, so the one rounding is the final truncf.
    Value wide = arith::ExtFOp::create(b, loc, b.getF32Type(), v);
    return arith::TruncFOp::create(b, loc, to, wide).getResult();
  }
  if (fromF && toF)
    return fromF.getWidth() < toF.getWidth()
               ? arith::ExtFOp::create(b, loc, to, v).getResult()
               : arith::TruncFOp::create(b, loc, to, v).getResult();
  if (to.isInteger(1)) {
    if (fromF)
      return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, v,
                                   floatConst(b, loc, from, 0.0));
    Value zero = arith::ConstantOp::create(b, loc, from, b.getIntegerAttr(from, 0));
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, v, zero);
  }
  if (fromF) // float -> int
    return to.isUnsignedInteger()
               ? arith::FPToUIOp::create(b, loc, to, v).getResult()
               : arith::FPToSIOp::create(b, loc, to, v).getResult();
  bool fromUnsigned = from.isUnsignedInteger() || from.isInteger(1);
  if (toF)
    return fromUnsigned ? arith::UIToFPOp::create(b, loc, to, v).getResult()
                        : arith::SIToFPOp::create(b, loc, to, v).getResult();
  unsigned fw = from.getIntOrFloatBitWidth(), tw = to.getIntOrFloatBitWidth();
  if (fw < tw)
    return fromUnsigned ? arith::ExtUIOp::create(b, loc, to, v).getResult()
                        : arith::ExtSIOp::create(b, loc, to, v).getResult();
  if (fw > tw)
    return arith::TruncIOp::create(b, loc, to, v);
  return arith::BitcastOp::create(b, loc, to, v);
}

void carrierIndexing(MLIRContext *ctx, ArrayRef<Value> operands, unsigned parallelDims,
                     SmallVector<AffineMap> &maps, SmallVector<utils::IteratorType> &its) {
  unsigned numDims = 0;
  for (Value v : operands)
    numDims += cast<RankedTensorType>(v.getType()).getRank();
  unsigned next = 0;
  for (Value v : operands) {
    SmallVector<AffineExpr> e;
    for (int64_t i = 0; i < cast<RankedTensorType>(v.getType()).getRank(); ++i)
      e.push_back(getAffineDimExpr(next++, ctx));
    maps.push_back(AffineMap::get(numDims, 0, e, ctx));
  }
  its.assign(numDims - parallelDims, utils::IteratorType::reduction);
  its.append(parallelDims, utils::IteratorType::parallel);
}

} // namespace h20::lowering
