//===- AttnToLinalg.cpp - reference decompositions of the attn ops -------===//
//
// These decompositions define what attn.rms_norm, attn.rope and
// attn.attention compute (see their ODS descriptions): the CPU target runs
// them and every optimised path is tested against them. They favour
// exactness over speed: RoPE angles in f64, attention in f32 with the full
// S_q x S_kv score matrix.
//
//===----------------------------------------------------------------------===//
#include "AttnToLinalg.h"
#include "LoweringUtils.h"

#include "h20/Dialect/Attn/IR/AttnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace h20::lowering;

namespace h20::lowering {
namespace {

/// f32 unless the input is f64.
Type computeTypeFor(Type elt) {
  return elt.isF64() ? elt : Float32Type::get(elt.getContext());
}

SmallVector<utils::IteratorType> iterators(ArrayRef<bool> reduce) {
  SmallVector<utils::IteratorType> it;
  for (bool r : reduce)
    it.push_back(r ? utils::IteratorType::reduction : utils::IteratorType::parallel);
  return it;
}

} // namespace

/// y = cast(x * rsqrt(mean(x^2 over [axis, rank)) + eps)) * w, statistics in
/// compute_type (f32 by default).
FailureOr<Value> lowerRmsNorm(OpBuilder &b, attn::RmsNormOp op) {
  Location loc = op.getLoc();
  Value x = op.getInput(), w = op.getWeight();
  auto xt = cast<RankedTensorType>(x.getType());
  int64_t rank = xt.getRank(), axis = static_cast<int64_t>(op.getAxis());
  if (axis < 0)
    axis += rank;
  Type ct = op.getComputeType() ? *op.getComputeType() : b.getF32Type();
  MLIRContext *ctx = b.getContext();

  // Sum of squares over the normalised dims, into [outer dims].
  SmallVector<Value> dims;
  for (int64_t k = 0; k < rank; ++k)
    dims.push_back(dimOf(b, loc, x, k));
  SmallVector<int64_t> outerShape(xt.getShape().begin(), xt.getShape().begin() + axis);
  auto sumType = RankedTensorType::get(outerShape, ct);
  Value zero = floatConst(b, loc, ct, 0.0);
  Value acc = filledTensor(b, loc, sumType, ArrayRef<Value>(dims).take_front(axis), zero);
  SmallVector<AffineExpr> outer;
  for (int64_t k = 0; k < axis; ++k)
    outer.push_back(getAffineDimExpr(k, ctx));
  SmallVector<bool> reduce(rank, false);
  for (int64_t k = axis; k < rank; ++k)
    reduce[k] = true;
  Value sumsq =
      linalg::GenericOp::create(
          b, loc, TypeRange{sumType}, ValueRange{x}, ValueRange{acc},
          {AffineMap::getMultiDimIdentityMap(rank, ctx), AffineMap::get(rank, 0, outer, ctx)},
          iterators(reduce),
          [&](OpBuilder &nb, Location nl, ValueRange a) {
            Value v = castScalar(nb, nl, a[0], ct);
            Value sq = arith::MulFOp::create(nb, nl, v, v);
            linalg::YieldOp::create(nb, nl, ValueRange{arith::AddFOp::create(nb, nl, a[1], sq)});
          })
          .getResult(0);

  // Element count of the normalised dims, as a float.
  Value count = arith::ConstantIndexOp::create(b, loc, 1);
  for (int64_t k = axis; k < rank; ++k)
    count = arith::MulIOp::create(b, loc, count, dims[k]);
  Value countF = arith::SIToFPOp::create(
      b, loc, ct, arith::IndexCastOp::create(b, loc, b.getI64Type(), count));
  Value eps = floatConst(b, loc, ct, op.getEpsilon().convertToDouble());

  SmallVector<AffineExpr> wExprs;
  auto wt = cast<RankedTensorType>(w.getType());
  for (int64_t k = 0; k < wt.getRank(); ++k) {
    int64_t outK = rank - wt.getRank() + k;
    bool unit = wt.getDimSize(k) == 1 && xt.getDimSize(outK) != 1;
    wExprs.push_back(unit ? getAffineConstantExpr(0, ctx) : getAffineDimExpr(outK, ctx));
  }
  Value init = emptyTensor(b, loc, xt, dims);
  return linalg::GenericOp::create(
             b, loc, TypeRange{xt}, ValueRange{x, sumsq, w}, ValueRange{init},
             {AffineMap::getMultiDimIdentityMap(rank, ctx), AffineMap::get(rank, 0, outer, ctx),
              AffineMap::get(rank, 0, wExprs, ctx), AffineMap::getMultiDimIdentityMap(rank, ctx)},
             parallel(rank),
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               Value mean = arith::DivFOp::create(nb, nl, a[1], countF);
               Value inv = math::RsqrtOp::create(nb, nl, arith::AddFOp::create(nb, nl, mean, eps));
               Value n = arith::MulFOp::create(nb, nl, castScalar(nb, nl, a[0], ct), inv);
               Value y = arith::MulFOp::create(nb, nl, castScalar(nb, nl, n, xt.getElementType()),
                                               castScalar(nb, nl, a[2], xt.getElementType()));
               linalg::YieldOp::create(nb, nl, y);
             })
      .getResult(0);
}

/// Inverse frequencies theta^(-2j/rotary_dim) in f64, with the scaling.
static FailureOr<SmallVector<double>> inverseFrequencies(attn::RopeOp op) {
  int64_t rd = static_cast<int64_t>(op.getRotaryDim());
  double theta = op.getTheta().convertToDouble();
  SmallVector<double> f;
  for (int64_t j = 0; j < rd / 2; ++j)
    f.push_back(std::pow(theta, -2.0 * j / rd));
  switch (op.getScaling()) {
  case attn::RopeScaling::none:
    return f;
  case attn::RopeScaling::linear:
    for (double &x : f)
      x /= op.getFactor()->convertToDouble();
    return f;
  default:
    return op.emitOpError("scaling '")
           << attn::stringifyRopeScaling(op.getScaling())
           << "' has no CPU reference decomposition yet";
  }
}

/// out[c] = x[c] cos(a_j) - x[c'] sin(a_j) for the first element of each pair
/// and x[c] cos(a_j) + x[c'] sin(a_j) for the second, a_j = pos * inv_freq[j]
/// in f64; channels c >= rotary_dim are copied.
FailureOr<Value> lowerRope(OpBuilder &b, attn::RopeOp op) {
  auto freqs = inverseFrequencies(op);
  if (failed(freqs))
    return failure();
  Location loc = op.getLoc();
  Value x = op.getInput(), pos = op.getPositions();
  auto xt = cast<RankedTensorType>(x.getType());
  MLIRContext *ctx = b.getContext();
  int64_t rd = static_cast<int64_t>(op.getRotaryDim()), half = rd / 2;
  bool interleaved = op.getInterleaved();
  auto ft = RankedTensorType::get({half}, b.getF64Type());
  Value table = arith::ConstantOp::create(b, loc, ft, DenseElementsAttr::get(ft, ArrayRef<double>(*freqs)));
  SmallVector<Value> dims;
  for (int64_t k = 0; k < 4; ++k)
    dims.push_back(dimOf(b, loc, x, k));
  Value init = emptyTensor(b, loc, xt, dims);
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  Type elt = xt.getElementType(), ct = computeTypeFor(elt);
  return linalg::GenericOp::create(
             b, loc, TypeRange{xt}, ValueRange{x, pos}, ValueRange{init},
             {AffineMap::getMultiDimIdentityMap(4, ctx), AffineMap::get(4, 0, {d(0), d(2)}, ctx),
              AffineMap::getMultiDimIdentityMap(4, ctx)},
             parallel(4),
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(nb, nl, v).getResult(); };
               Value c = linalg::IndexOp::create(nb, nl, 3);
               Value inRotary = arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::slt, c, cst(rd));
               // Pair index j, partner channel, and whether c is the pair's first.
               Value j, partner, first;
               if (interleaved) {
                 j = arith::DivUIOp::create(nb, nl, c, cst(2));
                 Value odd = arith::RemUIOp::create(nb, nl, c, cst(2));
                 first = arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::eq, odd, cst(0));
                 partner = arith::SelectOp::create(nb, nl, first, arith::AddIOp::create(nb, nl, c, cst(1)),
                                                   arith::SubIOp::create(nb, nl, c, cst(1)));
               } else {
                 first = arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::slt, c, cst(half));
                 j = arith::SelectOp::create(nb, nl, first, c, arith::SubIOp::create(nb, nl, c, cst(half)));
                 partner = arith::SelectOp::create(nb, nl, first, arith::AddIOp::create(nb, nl, c, cst(half)),
                                                   arith::SubIOp::create(nb, nl, c, cst(half)));
               }
               // Keep indices in range for channels past rotary_dim (unused there).
               j = arith::SelectOp::create(nb, nl, inRotary, j, cst(0));
               partner = arith::SelectOp::create(nb, nl, inRotary, partner, c);
               Value bI = linalg::IndexOp::create(nb, nl, 0), hI = linalg::IndexOp::create(nb, nl, 1),
                     sI = linalg::IndexOp::create(nb, nl, 2);
               Value other = tensor::ExtractOp::create(nb, nl, x, ValueRange{bI, hI, sI, partner});
               Value f = tensor::ExtractOp::create(nb, nl, table, ValueRange{j});
               Value p = castScalar(nb, nl, a[1], nb.getF64Type());
               Value angle = arith::MulFOp::create(nb, nl, p, f);
               Value cosA = castScalar(nb, nl, math::CosOp::create(nb, nl, angle), ct);
               Value sinA = castScalar(nb, nl, math::SinOp::create(nb, nl, angle), ct);
               Value xc = castScalar(nb, nl, a[0], ct), xo = castScalar(nb, nl, other, ct);
               Value xcos = arith::MulFOp::create(nb, nl, xc, cosA);
               Value osin = arith::MulFOp::create(nb, nl, xo, sinA);
               Value rotated = arith::SelectOp::create(nb, nl, first, arith::SubFOp::create(nb, nl, xcos, osin),
                                                       arith::AddFOp::create(nb, nl, xcos, osin));
               Value out = arith::SelectOp::create(nb, nl, inRotary, castScalar(nb, nl, rotated, elt), a[0]);
               linalg::YieldOp::create(nb, nl, out);
             })
      .getResult(0);
}

/// Softmax attention with the visibility rules of attn.attention; the S_q x
/// S_kv score matrix is materialised (a reference, not a fast path).
FailureOr<Value> lowerAttention(OpBuilder &b, attn::AttentionOp op) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  Value q = op.getQuery(), k = op.getKey(), v = op.getValue();
  auto qt = cast<RankedTensorType>(q.getType());
  auto rt = cast<RankedTensorType>(op.getResult().getType());
  Type ct = computeTypeFor(qt.getElementType());
  int64_t group = static_cast<int64_t>(op.getKvGroup());
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  auto kvHead = [&](unsigned hDim) { return d(hDim).floorDiv(group); };

  Value B = dimOf(b, loc, q, 0), H = dimOf(b, loc, q, 1), Sq = dimOf(b, loc, q, 2),
        Skv = dimOf(b, loc, k, 2), Dv = dimOf(b, loc, v, 3);
  auto scoreType = RankedTensorType::get({qt.getDimSize(0), qt.getDimSize(1), qt.getDimSize(2),
                                          cast<RankedTensorType>(k.getType()).getDimSize(2)},
                                         ct);
  Value zero = floatConst(b, loc, ct, 0.0);
  Value negInf = floatConst(b, loc, ct, -std::numeric_limits<double>::infinity());

  // 1. raw[b,h,i,j] = sum_d q[b,h,i,d] k[b,h/g,j,d]
  Value raw0 = filledTensor(b, loc, scoreType, {B, H, Sq, Skv}, zero);
  Value raw = linalg::GenericOp::create(
                  b, loc, TypeRange{scoreType}, ValueRange{q, k}, ValueRange{raw0},
                  {AffineMap::get(5, 0, {d(0), d(1), d(2), d(4)}, ctx),
                   AffineMap::get(5, 0, {d(0), kvHead(1), d(3), d(4)}, ctx),
                   AffineMap::get(5, 0, {d(0), d(1), d(2), d(3)}, ctx)},
                  iterators({false, false, false, false, true}),
                  [&](OpBuilder &nb, Location nl, ValueRange a) {
                    Value p = arith::MulFOp::create(nb, nl, castScalar(nb, nl, a[0], ct),
                                                    castScalar(nb, nl, a[1], ct));
                    linalg::YieldOp::create(nb, nl, ValueRange{arith::AddFOp::create(nb, nl, a[2], p)});
                  })
                  .getResult(0);

  // 2. scaled / capped / masked scores; invisible keys get -inf.
  double scale = op.getScale().convertToDouble();
  std::optional<double> softcap;
  if (auto c = op.getSoftcap())
    softcap = c->convertToDouble();
  bool causal = op.getCausal();
  std::optional<int64_t> window;
  if (auto w = op.getWindow())
    window = static_cast<int64_t>(*w);
  Value offset = op.getAlignment() == attn::CausalAlignment::bottom_right
                     ? arith::SubIOp::create(b, loc, Skv, Sq).getResult()
                     : arith::ConstantIndexOp::create(b, loc, 0).getResult();
  SmallVector<Value> inputs{raw};
  SmallVector<AffineMap> maps{AffineMap::getMultiDimIdentityMap(4, ctx)};
  Value mask = op.getMask();
  if (mask) {
    auto mt = cast<RankedTensorType>(mask.getType());
    SmallVector<AffineExpr> e;
    for (int64_t i = 0; i < mt.getRank(); ++i) {
      int64_t outK = 4 - mt.getRank() + i;
      bool unit = mt.getDimSize(i) == 1 && scoreType.getDimSize(outK) != 1;
      e.push_back(unit ? getAffineConstantExpr(0, ctx) : d(outK));
    }
    inputs.push_back(mask);
    maps.push_back(AffineMap::get(4, 0, e, ctx));
  }
  maps.push_back(AffineMap::getMultiDimIdentityMap(4, ctx));
  Value scoresInit = emptyTensor(b, loc, scoreType, {B, H, Sq, Skv});
  Value scores =
      linalg::GenericOp::create(
          b, loc, TypeRange{scoreType}, inputs, ValueRange{scoresInit}, maps, parallel(4),
          [&](OpBuilder &nb, Location nl, ValueRange a) {
            Value s = arith::MulFOp::create(nb, nl, a[0], floatConst(nb, nl, ct, scale));
            if (softcap) {
              Value c = floatConst(nb, nl, ct, *softcap);
              s = arith::MulFOp::create(nb, nl, c,
                                        math::TanhOp::create(nb, nl, arith::DivFOp::create(nb, nl, s, c)));
            }
            Value visible = arith::ConstantIntOp::create(nb, nl, 1, 1);
            Value i = linalg::IndexOp::create(nb, nl, 2), j = linalg::IndexOp::create(nb, nl, 3);
            Value iPos = arith::AddIOp::create(nb, nl, i, offset);
            if (causal)
              visible = arith::AndIOp::create(
                  nb, nl, visible, arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::sle, j, iPos));
            if (window) {
              Value lo = arith::SubIOp::create(nb, nl, iPos,
                                               arith::ConstantIndexOp::create(nb, nl, *window));
              visible = arith::AndIOp::create(
                  nb, nl, visible, arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::sgt, j, lo));
            }
            if (mask) {
              Value m = a[1];
              if (m.getType().isInteger(1))
                visible = arith::AndIOp::create(nb, nl, visible, m);
              else
                s = arith::AddFOp::create(nb, nl, s, castScalar(nb, nl, m, ct));
            }
            linalg::YieldOp::create(nb, nl, ValueRange{arith::SelectOp::create(nb, nl, visible, s, negInf)});
          })
          .getResult(0);

  // 3. Row max (with the sink logit, if any).
  auto rowType = RankedTensorType::get(scoreType.getShape().drop_back(), ct);
  Value max0 = filledTensor(b, loc, rowType, {B, H, Sq}, negInf);
  Value rowMax = linalg::GenericOp::create(
                     b, loc, TypeRange{rowType}, ValueRange{scores}, ValueRange{max0},
                     {AffineMap::getMultiDimIdentityMap(4, ctx),
                      AffineMap::get(4, 0, {d(0), d(1), d(2)}, ctx)},
                     iterators({false, false, false, true}),
                     [&](OpBuilder &nb, Location nl, ValueRange a) {
                       linalg::YieldOp::create(nb, nl, ValueRange{arith::MaximumFOp::create(nb, nl, a[0], a[1])});
                     })
                     .getResult(0);
  // sink[h] joins every row of head h: a map through dim 1 only.
  Value sink = op.getSink();
  auto withSink = [&](Value rows, Value extra,
                      function_ref<Value(OpBuilder &, Location, Value, Value, Value)> fn) {
    SmallVector<Value> ins{rows, sink};
    SmallVector<AffineMap> m{AffineMap::getMultiDimIdentityMap(3, ctx),
                             AffineMap::get(3, 0, {d(1)}, ctx)};
    if (extra) {
      ins.push_back(extra);
      m.push_back(AffineMap::getMultiDimIdentityMap(3, ctx));
    }
    m.push_back(AffineMap::getMultiDimIdentityMap(3, ctx));
    Value init = emptyTensor(b, loc, rowType, {B, H, Sq});
    return linalg::GenericOp::create(
               b, loc, TypeRange{rowType}, ins, ValueRange{init}, m, parallel(3),
               [&](OpBuilder &nb, Location nl, ValueRange a) {
                 linalg::YieldOp::create(
                     nb, nl, fn(nb, nl, a[0], castScalar(nb, nl, a[1], ct), extra ? a[2] : Value()));
               })
        .getResult(0);
  };
  if (sink)
    rowMax = withSink(rowMax, Value(), [](OpBuilder &nb, Location nl, Value m, Value s, Value) -> Value {
      return arith::MaximumFOp::create(nb, nl, m, s);
    });

  // 4. e = exp(s - m) (0 on fully masked rows), denominators and P.V.
  auto expOf = [&](OpBuilder &nb, Location nl, Value s, Value m) -> Value {
    Value isInf = arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OEQ, m, negInf);
    Value e = math::ExpOp::create(nb, nl, arith::SubFOp::create(nb, nl, s, m));
    return arith::SelectOp::create(nb, nl, isInf, floatConst(nb, nl, ct, 0.0), e);
  };
  Value den0 = filledTensor(b, loc, rowType, {B, H, Sq}, zero);
  Value den = linalg::GenericOp::create(
                  b, loc, TypeRange{rowType}, ValueRange{scores, rowMax}, ValueRange{den0},
                  {AffineMap::getMultiDimIdentityMap(4, ctx), AffineMap::get(4, 0, {d(0), d(1), d(2)}, ctx),
                   AffineMap::get(4, 0, {d(0), d(1), d(2)}, ctx)},
                  iterators({false, false, false, true}),
                  [&](OpBuilder &nb, Location nl, ValueRange a) {
                    linalg::YieldOp::create(nb, nl, ValueRange{arith::AddFOp::create(nb, nl, a[2], expOf(nb, nl, a[0], a[1]))});
                  })
                  .getResult(0);
  if (sink)
    den = withSink(den, rowMax, [&](OpBuilder &nb, Location nl, Value dn, Value s, Value m) -> Value {
      return arith::AddFOp::create(nb, nl, dn, expOf(nb, nl, s, m));
    });
  auto outType = RankedTensorType::get(rt.getShape(), ct);
  Value num0 = filledTensor(b, loc, outType, {B, H, Sq, Dv}, zero);
  Value num = linalg::GenericOp::create(
                  b, loc, TypeRange{outType}, ValueRange{scores, rowMax, v}, ValueRange{num0},
                  {AffineMap::get(5, 0, {d(0), d(1), d(2), d(4)}, ctx),
                   AffineMap::get(5, 0, {d(0), d(1), d(2)}, ctx),
                   AffineMap::get(5, 0, {d(0), kvHead(1), d(4), d(3)}, ctx),
                   AffineMap::get(5, 0, {d(0), d(1), d(2), d(3)}, ctx)},
                  iterators({false, false, false, false, true}),
                  [&](OpBuilder &nb, Location nl, ValueRange a) {
                    Value p = arith::MulFOp::create(nb, nl, expOf(nb, nl, a[0], a[1]),
                                                    castScalar(nb, nl, a[2], ct));
                    linalg::YieldOp::create(nb, nl, ValueRange{arith::AddFOp::create(nb, nl, a[3], p)});
                  })
                  .getResult(0);
  Value outInit = emptyTensor(b, loc, rt, {B, H, Sq, Dv});
  return linalg::GenericOp::create(
             b, loc, TypeRange{rt}, ValueRange{num, den}, ValueRange{outInit},
             {AffineMap::getMultiDimIdentityMap(4, ctx), AffineMap::get(4, 0, {d(0), d(1), d(2)}, ctx),
              AffineMap::getMultiDimIdentityMap(4, ctx)},
             parallel(4),
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               Value positive = arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OGT, a[1],
                                                      floatConst(nb, nl, ct, 0.0));
               Value y = arith::SelectOp::create(nb, nl, positive, arith::DivFOp::create(nb, nl, a[0], a[1]),
                                                 floatConst(nb, nl, ct, 0.0));
               linalg::YieldOp::create(nb, nl, castScalar(nb, nl, y, rt.getElementType()));
             })
      .getResult(0);
}

} // namespace h20::lowering
