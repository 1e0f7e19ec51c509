//===- OnnxNormalizationToLinalg.cpp - onnx normalizations to linalg -----===//
//
// LayerNormalization-17 as two row reductions (the sum of shifted values,
// then of squared deviations: rows over the normalized dims, which the GPU
// target runs as one block per row when the normalized dims are the last
// one), then the normalized output, which derives the mean and InvStdDev
// from the two sums per element (as the RMSNorm lowering does), and one
// small generic per requested statistic output.
//
//===----------------------------------------------------------------------===//
#include "OnnxNormalizationToLinalg.h"
#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
namespace ox = h20::onnx;

namespace h20::lowering {
namespace {

using Values = SmallVector<Value>;

/// What the LayerNormalization generics share: X, its dims, the axis, the
/// compute type and the indexing maps of a group's statistics.
struct LayerNormGroups {
  Value x;
  RankedTensorType xt;
  int64_t r = 0, axis = 0;
  Type ct;
  SmallVector<Value> dims;
  /// X's identity map; the statistics' map (the outer dims [0, axis)); the
  /// map of each group's first element, the shift (outer dims, then 0s).
  AffineMap id, statMap, firstMap;
  /// [outer dims] of the compute type, the element count of a group and
  /// epsilon (compute type).
  RankedTensorType statType;
  Value count, epsilon;
};

/// The compute type: float64 for float64 X or stash_type = 11 (DOUBLE),
/// else float32 (stash_type 1, the default).
FailureOr<Type> layerNormComputeType(ox::LayerNormalizationOp op, Type elt) {
  int64_t stash = op.getStashType().value_or(1);
  if (stash != 1 && stash != 11)
    return unsupported(op, "stash_type must be 1 (float) or 11 (double), got " +
                               std::to_string(stash));
  if (elt.isF64() || stash == 11)
    return Type(Float64Type::get(op.getContext()));
  return Type(Float32Type::get(op.getContext()));
}

FailureOr<LayerNormGroups> setUpLayerNorm(OpBuilder &b, ox::LayerNormalizationOp op) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  LayerNormGroups g;
  g.x = op->getOperand(0);
  g.xt = dyn_cast<RankedTensorType>(g.x.getType());
  if (!g.xt || g.xt.getRank() == 0 || !isa<FloatType>(g.xt.getElementType()))
    return unsupported(op, "X must be a ranked float tensor of rank >= 1");
  g.r = g.xt.getRank();
  g.axis = op.getAxis().value_or(-1);
  if (g.axis < -g.r || g.axis >= g.r)
    return unsupported(op, "axis " + std::to_string(g.axis) + " is outside X's rank " +
                               std::to_string(g.r));
  if (g.axis < 0)
    g.axis += g.r;
  FailureOr<Type> ct = layerNormComputeType(op, g.xt.getElementType());
  if (failed(ct))
    return failure();
  g.ct = *ct;
  for (int64_t k = 0; k < g.r; ++k)
    g.dims.push_back(dimOf(b, loc, g.x, k));
  SmallVector<AffineExpr> outer, first;
  for (int64_t k = 0; k < g.r; ++k) {
    if (k < g.axis)
      outer.push_back(getAffineDimExpr(k, ctx));
    first.push_back(k < g.axis ? getAffineDimExpr(k, ctx) : getAffineConstantExpr(0, ctx));
  }
  g.id = AffineMap::getMultiDimIdentityMap(g.r, ctx);
  g.statMap = AffineMap::get(g.r, 0, outer, ctx);
  g.firstMap = AffineMap::get(g.r, 0, first, ctx);
  g.statType = RankedTensorType::get(g.xt.getShape().take_front(g.axis), g.ct);
  Value count = arith::ConstantIndexOp::create(b, loc, 1);
  for (int64_t k = g.axis; k < g.r; ++k)
    count = arith::MulIOp::create(b, loc, count, g.dims[k]);
  g.count = arith::SIToFPOp::create(b, loc, g.ct,
                                    arith::IndexCastOp::create(b, loc, b.getI64Type(), count));
  double epsilon = op.getEpsilon() ? op.getEpsilon()->convertToDouble() : 1e-5;
  g.epsilon = floatConst(b, loc, g.ct, epsilon);
  return g;
}

/// The mean's offset from the shift, sum(x - x0) / count.
Value meanOffset(OpBuilder &b, Location loc, const LayerNormGroups &g, Value shiftedSum) {
  return arith::DivFOp::create(b, loc, shiftedSum, g.count);
}

/// InvStdDev from the sum of squared deviations: 1 / sqrt(sum / count + eps).
Value invStdDev(OpBuilder &b, Location loc, const LayerNormGroups &g, Value squares) {
  Value var = arith::DivFOp::create(b, loc, squares, g.count);
  Value sd = math::SqrtOp::create(b, loc, arith::AddFOp::create(b, loc, var, g.epsilon));
  return arith::DivFOp::create(b, loc, floatConst(b, loc, g.ct, 1.0), sd);
}

/// x - x0 in the compute type: an element minus its group's first element.
Value shifted(OpBuilder &b, Location loc, Value x, Value x0, Type ct) {
  return arith::SubFOp::create(b, loc, castScalar(b, loc, x, ct), castScalar(b, loc, x0, ct));
}

/// Per group, the sum over the normalized dims of (x - x0) when
/// `shiftedSum` is null, else of ((x - x0) - meanOffset)^2: [outer dims] of
/// the compute type.
Value groupSum(OpBuilder &b, Location loc, const LayerNormGroups &g, Value shiftedSum) {
  Value acc = filledTensor(b, loc, g.statType, ArrayRef<Value>(g.dims).take_front(g.axis),
                           floatConst(b, loc, g.ct, 0.0));
  SmallVector<bool> reduce(g.r, false);
  for (int64_t k = g.axis; k < g.r; ++k)
    reduce[k] = true;
  SmallVector<Value> ins{g.x, g.x};
  SmallVector<AffineMap> maps{g.id, g.firstMap};
  if (shiftedSum) {
    ins.push_back(shiftedSum);
    maps.push_back(g.statMap);
  }
  maps.push_back(g.statMap);
  return linalg::GenericOp::create(
             b, loc, TypeRange{g.statType}, ins, ValueRange{acc}, maps, iterators(reduce),
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               Value d = shifted(nb, nl, a[0], a[1], g.ct);
               if (shiftedSum) {
                 d = arith::SubFOp::create(nb, nl, d, meanOffset(nb, nl, g, a[2]));
                 d = arith::MulFOp::create(nb, nl, d, d);
               }
               linalg::YieldOp::create(nb, nl,
                                       ValueRange{arith::AddFOp::create(nb, nl, a.back(), d)});
             })
      .getResult(0);
}

/// The indexing map of Scale or B (rank <= r) read at X's position:
/// numpy broadcasting from the right, a static 1 against a dim that is not
/// 1 reads index 0. Null when the operand has the higher rank.
AffineMap broadcastMap(MLIRContext *ctx, RankedTensorType t, RankedTensorType xt) {
  int64_t r = xt.getRank(), off = r - t.getRank();
  if (off < 0)
    return AffineMap();
  SmallVector<AffineExpr> e;
  for (int64_t k = 0; k < t.getRank(); ++k) {
    bool unit = !t.isDynamicDim(k) && t.getDimSize(k) == 1 &&
                (xt.isDynamicDim(k + off) || xt.getDimSize(k + off) != 1);
    e.push_back(unit ? getAffineConstantExpr(0, ctx) : getAffineDimExpr(k + off, ctx));
  }
  return AffineMap::get(r, 0, e, ctx);
}

/// Y = ((x - x0) - meanOffset) * InvStdDev * scale [+ bias], rounded once
/// to X's type, from the two group sums.
FailureOr<Value> normalizedOutput(OpBuilder &b, ox::LayerNormalizationOp op,
                                  const LayerNormGroups &g, Value shiftedSum, Value squares) {
  Location loc = op.getLoc();
  auto yt = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!yt || yt.getRank() != g.r)
    return unsupported(op, "Y must be ranked like X");
  SmallVector<Value> ins{g.x, g.x, shiftedSum, squares};
  SmallVector<AffineMap> maps{g.id, g.firstMap, g.statMap, g.statMap};
  for (unsigned i = 1; i < op->getNumOperands(); ++i) {
    Value v = op->getOperand(i);
    if (isa<NoneType>(v.getType()))
      continue;
    auto vt = dyn_cast<RankedTensorType>(v.getType());
    AffineMap m = vt ? broadcastMap(b.getContext(), vt, g.xt) : AffineMap();
    if (!m)
      return unsupported(op, Twine(i == 1 ? "Scale" : "B") +
                                 " must be ranked, of rank <= X's, broadcasting to X");
    ins.push_back(v);
    maps.push_back(m);
  }
  maps.push_back(g.id);
  bool hasScale = op->getNumOperands() > 1 && !isa<NoneType>(op->getOperand(1).getType());
  Value init = emptyTensor(b, loc, yt, g.dims);
  Type elt = yt.getElementType();
  return linalg::GenericOp::create(
             b, loc, TypeRange{yt}, ins, ValueRange{init}, maps, parallel(g.r),
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               Value d = arith::SubFOp::create(nb, nl, shifted(nb, nl, a[0], a[1], g.ct),
                                               meanOffset(nb, nl, g, a[2]));
               Value v = arith::MulFOp::create(nb, nl, d, invStdDev(nb, nl, g, a[3]));
               unsigned next = 4;
               if (hasScale)
                 v = arith::MulFOp::create(nb, nl, v, castScalar(nb, nl, a[next++], g.ct));
               if (next + 1 < a.size())
                 v = arith::AddFOp::create(nb, nl, v, castScalar(nb, nl, a[next], g.ct));
               linalg::YieldOp::create(nb, nl, ValueRange{castScalar(nb, nl, v, elt)});
             })
      .getResult(0);
}

/// Output i: Mean (i = 1, x0 + meanOffset of the shifted sum) or InvStdDev
/// (i = 2, from the sum of squares `stat`), in the result's dtype, reshaped
/// from [outer dims] to X's shape with the normalized dims 1.
FailureOr<Value> statOutput(OpBuilder &b, ox::LayerNormalizationOp op, const LayerNormGroups &g,
                            unsigned i, Value stat) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  auto rt = dyn_cast<RankedTensorType>(op->getResult(i).getType());
  if (!rt || rt.getRank() != g.r || !isa<FloatType>(rt.getElementType()))
    return unsupported(op, Twine(i == 1 ? "Mean" : "InvStdDev") +
                               " must be a float tensor ranked like X");
  Type elt = rt.getElementType();
  auto flatType = RankedTensorType::get(g.statType.getShape(), elt);
  ArrayRef<Value> outer = ArrayRef<Value>(g.dims).take_front(g.axis);
  Value init = emptyTensor(b, loc, flatType, outer);
  AffineMap statId = AffineMap::getMultiDimIdentityMap(g.axis, ctx);
  SmallVector<AffineExpr> first;
  for (int64_t k = 0; k < g.r; ++k)
    first.push_back(k < g.axis ? getAffineDimExpr(k, ctx) : getAffineConstantExpr(0, ctx));
  bool isMean = i == 1;
  SmallVector<Value> ins{stat};
  SmallVector<AffineMap> maps{statId};
  if (isMean) {
    ins.push_back(g.x);
    maps.push_back(AffineMap::get(g.axis, 0, first, ctx));
  }
  maps.push_back(statId);
  Value flat = linalg::GenericOp::create(
                   b, loc, TypeRange{flatType}, ins, ValueRange{init}, maps, parallel(g.axis),
                   [&](OpBuilder &nb, Location nl, ValueRange a) {
                     Value v = isMean ? arith::AddFOp::create(nb, nl, castScalar(nb, nl, a[1], g.ct),
                                                              meanOffset(nb, nl, g, a[0]))
                                      : invStdDev(nb, nl, g, a[0]);
                     linalg::YieldOp::create(nb, nl, ValueRange{castScalar(nb, nl, v, elt)});
                   })
                   .getResult(0);
  SmallVector<Value> shape(outer.begin(), outer.end());
  shape.resize(g.r, arith::ConstantIndexOp::create(b, loc, 1));
  auto shapeType = RankedTensorType::get({g.r}, b.getIndexType());
  Value shapeTensor = tensor::FromElementsOp::create(b, loc, shapeType, shape);
  return tensor::ReshapeOp::create(b, loc, rt, flat, shapeTensor).getResult();
}

} // namespace

FailureOr<Values> lowerLayerNormalization(OpBuilder &b, ox::LayerNormalizationOp op) {
  FailureOr<LayerNormGroups> setup = setUpLayerNorm(b, op);
  if (failed(setup))
    return failure();
  const LayerNormGroups &g = *setup;
  Location loc = op.getLoc();
  // Pass 1: sum(x - x0), the mean being x0 + sum / count; pass 2: the
  // squared deviations from that mean.
  Value shiftedSum = groupSum(b, loc, g, Value());
  Value squares = groupSum(b, loc, g, shiftedSum);
  FailureOr<Value> y = normalizedOutput(b, op, g, shiftedSum, squares);
  if (failed(y))
    return failure();
  Values results{*y};
  for (unsigned i = 1; i < op->getNumResults(); ++i) {
    FailureOr<Value> stat = statOutput(b, op, g, i, i == 1 ? shiftedSum : squares);
    if (failed(stat))
      return failure();
    results.push_back(*stat);
  }
  return results;
}

} // namespace h20::lowering
