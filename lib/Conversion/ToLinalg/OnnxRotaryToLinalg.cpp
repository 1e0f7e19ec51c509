//===- OnnxRotaryToLinalg.cpp - onnx.RotaryEmbedding as one generic ------===//
#include "OnnxRotaryToLinalg.h"
#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
namespace ox = h20::onnx;

namespace h20::lowering {

FailureOr<SmallVector<Value>> lowerRotaryEmbedding(OpBuilder &b, ox::RotaryEmbeddingOp op) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  Value x = op->getOperand(0), cosC = op->getOperand(1), sinC = op->getOperand(2);
  bool hasPositions = op->getNumOperands() > 3 && !isa<NoneType>(op->getOperand(3).getType());
  Value positions = hasPositions ? op->getOperand(3) : Value();
  auto xt = dyn_cast<RankedTensorType>(x.getType());
  auto ct = dyn_cast<RankedTensorType>(cosC.getType());
  auto rt = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!xt || !ct || !rt || xt.getRank() != 4)
    return unsupported(op, "only the 4-D [B, H, S, D] form with ranked caches is lowered");
  if (ct.getRank() != (hasPositions ? 2 : 3))
    return unsupported(op, hasPositions ? "caches must be [max_pos, rd/2] with position_ids"
                                        : "caches must be [B, S, rd/2] without position_ids");
  bool interleaved = op.getInterleaved().value_or(0) != 0;
  Type ct32 = computeTypeFor(xt.getElementType());
  Value half = dimOf(b, loc, cosC, ct.getRank() - 1);
  Value rd = arith::MulIOp::create(b, loc, half, arith::ConstantIndexOp::create(b, loc, 2));
  if (int64_t attr = op.getRotaryEmbeddingDim().value_or(0))
    rd = arith::ConstantIndexOp::create(b, loc, attr);
  SmallVector<Value> dims;
  for (int64_t k = 0; k < 4; ++k)
    dims.push_back(dimOf(b, loc, x, k));
  Value init = emptyTensor(b, loc, rt, dims);
  Value out = linalg::GenericOp::create(
                  b, loc, TypeRange{rt}, ValueRange{x}, ValueRange{init},
                  {AffineMap::getMultiDimIdentityMap(4, ctx), AffineMap::getMultiDimIdentityMap(4, ctx)},
                  parallel(4),
                  [&](OpBuilder &nb, Location nl, ValueRange a) {
                    Value bi = linalg::IndexOp::create(nb, nl, 0), hi = linalg::IndexOp::create(nb, nl, 1);
                    Value si = linalg::IndexOp::create(nb, nl, 2), d = linalg::IndexOp::create(nb, nl, 3);
                    Value zero = arith::ConstantIndexOp::create(nb, nl, 0);
                    Value one = arith::ConstantIndexOp::create(nb, nl, 1);
                    Value two = arith::ConstantIndexOp::create(nb, nl, 2);
                    Value rotated = arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::slt, d, rd);
                    // Pair index p, the partner channel, and whether d is the
                    // first of its pair (x1) or the second (x2). Channels past
                    // rd read pair 0 (in range) and keep x.
                    Value inRange = arith::SelectOp::create(nb, nl, rotated, d, zero);
                    Value p, partner, first;
                    if (interleaved) {
                      p = arith::DivUIOp::create(nb, nl, inRange, two);
                      Value r = arith::RemUIOp::create(nb, nl, inRange, two);
                      first = arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::eq, r, zero);
                      partner = arith::SelectOp::create(nb, nl, first, arith::AddIOp::create(nb, nl, inRange, one),
                                                        arith::SubIOp::create(nb, nl, inRange, one));
                    } else {
                      Value h = arith::DivUIOp::create(nb, nl, rd, two);
                      first = arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::slt, inRange, h);
                      p = arith::SelectOp::create(nb, nl, first, inRange, arith::SubIOp::create(nb, nl, inRange, h));
                      partner = arith::SelectOp::create(nb, nl, first, arith::AddIOp::create(nb, nl, inRange, h), p);
                    }
                    SmallVector<Value> at;
                    if (hasPositions) {
                      Value pos = tensor::ExtractOp::create(nb, nl, positions, ValueRange{bi, si});
                      at = {arith::IndexCastOp::create(nb, nl, nb.getIndexType(), pos), p};
                    } else {
                      at = {bi, si, p};
                    }
                    Value c = castScalar(nb, nl, tensor::ExtractOp::create(nb, nl, cosC, at), ct32);
                    Value s = castScalar(nb, nl, tensor::ExtractOp::create(nb, nl, sinC, at), ct32);
                    Value self = castScalar(nb, nl, a[0], ct32);
                    Value other = castScalar(
                        nb, nl, tensor::ExtractOp::create(nb, nl, x, ValueRange{bi, hi, si, partner}), ct32);
                    // x1' = x1 c - x2 s; x2' = x1 s + x2 c (self is x1 or x2).
                    Value selfC = arith::MulFOp::create(nb, nl, self, c);
                    Value otherS = arith::MulFOp::create(nb, nl, other, s);
                    Value y = arith::SelectOp::create(nb, nl, first, arith::SubFOp::create(nb, nl, selfC, otherS),
                                                      arith::AddFOp::create(nb, nl, selfC, otherS));
                    y = castScalar(nb, nl, y, rt.getElementType());
                    linalg::YieldOp::create(nb, nl, ValueRange{arith::SelectOp::create(nb, nl, rotated, y, a[0])});
                  })
                  .getResult(0);
  return SmallVector<Value>{out};
}

} // namespace h20::lowering
