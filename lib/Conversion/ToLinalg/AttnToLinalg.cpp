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
#include "h20/Dialect/Attn/IR/RopeParams.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace h20::lowering;

namespace h20::lowering {

/// y = cast(x * rsqrt(mean(x^2 over [axis, rank)) + eps)) * w, statistics in
/// compute_type (f32 by default).
/// Sum over dims [axis, rank) of x^2, each element cast to `ct` before it
/// is squared: [x's dims before axis] in `ct`. `dims` are x's sizes.
static Value sumOfSquares(OpBuilder &b, Location loc, Value x, int64_t axis, Type ct,
                          ArrayRef<Value> dims) {
  auto xt = cast<RankedTensorType>(x.getType());
  const int64_t rank = xt.getRank();
  MLIRContext *ctx = b.getContext();
  SmallVector<int64_t> outerShape(xt.getShape().begin(), xt.getShape().begin() + axis);
  auto sumType = RankedTensorType::get(outerShape, ct);
  Value zero = floatConst(b, loc, ct, 0.0);
  Value acc = filledTensor(b, loc, sumType, dims.take_front(axis), zero);
  SmallVector<AffineExpr> outer;
  for (int64_t k = 0; k < axis; ++k)
    outer.push_back(getAffineDimExpr(k, ctx));
  SmallVector<bool> reduce(rank, false);
  for (int64_t k = axis; k < rank; ++k)
    reduce[k] = true;
  return linalg::GenericOp::create(
             b, loc, TypeRange{sumType}, ValueRange{x}, ValueRange{acc},
             {AffineMap::getMultiDimIdentityMap(rank, ctx), AffineMap::get(rank, 0, outer, ctx)},
             iterators(reduce),
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               Value v = castScalar(nb, nl, a[0], ct);
               Value sq = arith::MulFOp::create(nb, nl, v, v);
               linalg::YieldOp::create(nb, nl, ValueRange{arith::AddFOp::create(nb, nl, a[1], sq)});
             })
      .getResult(0);
}

/// The element count of dims [axis, rank), as a `ct` float.
static Value countOf(OpBuilder &b, Location loc, ArrayRef<Value> dims, int64_t axis, Type ct) {
  Value count = arith::ConstantIndexOp::create(b, loc, 1);
  for (size_t k = axis; k < dims.size(); ++k)
    count = arith::MulIOp::create(b, loc, count, dims[k]);
  return arith::SIToFPOp::create(b, loc, ct,
                                 arith::IndexCastOp::create(b, loc, b.getI64Type(), count));
}

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
  SmallVector<AffineExpr> outer;
  for (int64_t k = 0; k < axis; ++k)
    outer.push_back(getAffineDimExpr(k, ctx));
  Value sumsq = sumOfSquares(b, loc, x, axis, ct, dims);
  Value countF = countOf(b, loc, dims, axis, ct);
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

FailureOr<Value> lowerRmsScale(OpBuilder &b, attn::RmsScaleOp op) {
  Location loc = op.getLoc();
  Value x = op.getInput(), v = op.getValue();
  auto xt = cast<RankedTensorType>(x.getType());
  // The result may be narrower than `value` (a GEMM's float32 sums): the
  // product is rounded once, to the result's type.
  auto rt = cast<RankedTensorType>(op.getResult().getType());
  const int64_t rank = xt.getRank(), axis = rank - 1;
  Type ct = op.getComputeType() ? *op.getComputeType() : b.getF32Type();
  MLIRContext *ctx = b.getContext();
  SmallVector<Value> xDims, vDims;
  for (int64_t k = 0; k < rank; ++k) {
    xDims.push_back(dimOf(b, loc, x, k));
    vDims.push_back(dimOf(b, loc, v, k));
  }
  Value sumsq = sumOfSquares(b, loc, x, axis, ct, xDims);
  Value countF = countOf(b, loc, xDims, axis, ct);
  Value eps = floatConst(b, loc, ct, op.getEpsilon().convertToDouble());
  SmallVector<AffineExpr> outer;
  for (int64_t k = 0; k < axis; ++k)
    outer.push_back(getAffineDimExpr(k, ctx));
  Value init = emptyTensor(b, loc, rt, vDims);
  return linalg::GenericOp::create(
             b, loc, TypeRange{rt}, ValueRange{v, sumsq}, ValueRange{init},
             {AffineMap::getMultiDimIdentityMap(rank, ctx), AffineMap::get(rank, 0, outer, ctx),
              AffineMap::getMultiDimIdentityMap(rank, ctx)},
             parallel(rank),
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               Value mean = arith::DivFOp::create(nb, nl, a[1], countF);
               Value inv = math::RsqrtOp::create(nb, nl, arith::AddFOp::create(nb, nl, mean, eps));
               Value y = arith::MulFOp::create(nb, nl, castScalar(nb, nl, a[0], ct), inv);
               linalg::YieldOp::create(nb, nl, castScalar(nb, nl, y, rt.getElementType()));
             })
      .getResult(0);
}

namespace {

/// Computes (cos, sin) of pair `j` at position `pos` (i64), inside a
/// linalg body; the result is in the compute type.
using CosSinFn = function_ref<std::pair<Value, Value>(OpBuilder &, Location, Value pos, Value j)>;

/// The batch index of `pos` ([B or 1, S], the verifiers' shapes) for batch
/// loop `b` over `x`'s batch: a statically 1 batch against any other batch
/// broadcasts (Llama exports pass position_ids [1, S]), so it is read at 0
/// whatever B is at run time.
AffineExpr positionsBatch(Value pos, Value x, AffineExpr b) {
  return cast<RankedTensorType>(pos.getType()).getDimSize(0) == 1 &&
                 cast<RankedTensorType>(x.getType()).getDimSize(0) != 1
             ? getAffineConstantExpr(0, b.getContext())
             : b;
}

/// The rotation shared by attn.rope and attn.rope_apply: out[c] = x[c] cos -
/// x[c'] sin for the first element of a pair, x[c] cos + x[c'] sin for the
/// second; channels c >= rotary_dim are copied bit-exact.
Value buildRotation(OpBuilder &b, Location loc, Value x, Value pos, int64_t rd, bool interleaved,
                    CosSinFn cosSin) {
  auto xt = cast<RankedTensorType>(x.getType());
  MLIRContext *ctx = b.getContext();
  int64_t half = rd / 2;
  SmallVector<Value> dims;
  for (int64_t k = 0; k < 4; ++k)
    dims.push_back(dimOf(b, loc, x, k));
  Value init = emptyTensor(b, loc, xt, dims);
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  Type elt = xt.getElementType(), ct = computeTypeFor(elt);
  return linalg::GenericOp::create(
             b, loc, TypeRange{xt}, ValueRange{x, pos}, ValueRange{init},
             {AffineMap::getMultiDimIdentityMap(4, ctx),
              AffineMap::get(4, 0, {positionsBatch(pos, x, d(0)), d(2)}, ctx),
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
               auto [cosA, sinA] = cosSin(nb, nl, castScalar(nb, nl, a[1], nb.getI64Type()), j);
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

/// Non-interleaved RoPE over the whole head (rotary_dim = D), in a form
/// whose big loop vectorizes: the same rotation as buildRotation, split
/// into (1) cos/sin per (batch, position, pair) [Bp, S, D/2] (Bp the
/// positions' batch, B or 1) in the compute type, computed once for all
/// heads (Q's and K's rotations each compute their own: 0.13 ms against
/// the rotation's 0.78 ms over a 128K prompt on an H200), and (2) a loop over
/// [B, H, S, 2, D/2] (half t, pair j; channel t*D/2 + j) with
/// affine accesses only:
///   out[.., t, j] = x[.., t, j] * cos[j] + (sign[t] * x[.., 1 - t, j]) * sin[j]
/// sign = (-1, +1), i.e. x cos - x' sin for the first half, x cos + x' sin
/// for the second: the same products and sums as buildRotation's. No
/// gathers, no index arithmetic in the body: the GPU target loads eight
/// consecutive channels per operand at once (h20-linalg-to-gpu-loops),
/// where buildRotation's partner gather kept it to scalar code.
Value buildHalfSplitRotation(OpBuilder &b, Location loc, Value x, Value pos, CosSinFn cosSin) {
  auto xt = cast<RankedTensorType>(x.getType());
  MLIRContext *ctx = b.getContext();
  const int64_t half = xt.getDimSize(3) / 2;
  Type elt = xt.getElementType(), ct = computeTypeFor(elt);
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  SmallVector<Value> dims;
  for (int64_t k = 0; k < 4; ++k)
    dims.push_back(dimOf(b, loc, x, k));
  // (1) cos and sin, [Bp, S, half] with Bp positions' batch (1 broadcasts).
  auto pt = cast<RankedTensorType>(pos.getType());
  auto tableType = RankedTensorType::get({pt.getDimSize(0), xt.getDimSize(2), half}, ct);
  Value tableBatch = dimOf(b, loc, pos, 0);
  Value cosInit = emptyTensor(b, loc, tableType, {tableBatch, dims[2], Value()});
  Value sinInit = emptyTensor(b, loc, tableType, {tableBatch, dims[2], Value()});
  auto tables = linalg::GenericOp::create(
      b, loc, TypeRange{tableType, tableType}, ValueRange{pos}, ValueRange{cosInit, sinInit},
      {AffineMap::get(3, 0, {d(0), d(1)}, ctx), AffineMap::getMultiDimIdentityMap(3, ctx),
       AffineMap::getMultiDimIdentityMap(3, ctx)},
      parallel(3), [&](OpBuilder &nb, Location nl, ValueRange a) {
        Value j = linalg::IndexOp::create(nb, nl, 2);
        auto [c, sn] = cosSin(nb, nl, castScalar(nb, nl, a[0], nb.getI64Type()), j);
        linalg::YieldOp::create(nb, nl, ValueRange{c, sn});
      });
  // (2) the rotation.
  auto signType = RankedTensorType::get({2}, ct);
  Value sign = arith::ConstantOp::create(
      b, loc, signType,
      DenseElementsAttr::get(signType, ArrayRef<Attribute>{b.getFloatAttr(ct, -1.0),
                                                           b.getFloatAttr(ct, 1.0)}));
  AffineExpr channel = d(3) * half + d(4), partner = (1 - d(3)) * half + d(4);
  Value init = emptyTensor(b, loc, xt, dims);
  return linalg::GenericOp::create(
             b, loc, TypeRange{xt},
             ValueRange{x, x, tables.getResult(0), tables.getResult(1), sign}, ValueRange{init},
             {AffineMap::get(5, 0, {d(0), d(1), d(2), channel}, ctx),
              AffineMap::get(5, 0, {d(0), d(1), d(2), partner}, ctx),
              AffineMap::get(5, 0, {positionsBatch(pos, x, d(0)), d(2), d(4)}, ctx),
              AffineMap::get(5, 0, {positionsBatch(pos, x, d(0)), d(2), d(4)}, ctx),
              AffineMap::get(5, 0, {d(3)}, ctx),
              AffineMap::get(5, 0, {d(0), d(1), d(2), channel}, ctx)},
             parallel(5),
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               Value xc = castScalar(nb, nl, a[0], ct), xo = castScalar(nb, nl, a[1], ct);
               Value xcos = arith::MulFOp::create(nb, nl, xc, a[2]);
               Value osin = arith::MulFOp::create(nb, nl, arith::MulFOp::create(nb, nl, a[4], xo), a[3]);
               Value rotated = arith::AddFOp::create(nb, nl, xcos, osin);
               linalg::YieldOp::create(nb, nl, castScalar(nb, nl, rotated, elt));
             })
      .getResult(0);
}

/// Dynamic NTK's base for prompt length `seqLen` (index), as f64:
/// theta * (factor * S / orig - (factor - 1))^(d / (d - 2)) when S > orig.
Value dynamicNtkBase(OpBuilder &b, Location loc, const rope::Params &p, Value seqLen) {
  Type f64 = b.getF64Type();
  Value s = arith::SIToFPOp::create(b, loc, f64, arith::IndexCastOp::create(b, loc, b.getI64Type(), seqLen));
  double orig = static_cast<double>(p.originalMaxPositions.value_or(1));
  Value ratio = arith::SubFOp::create(
      b, loc, arith::MulFOp::create(b, loc, floatConst(b, loc, f64, p.factor / orig), s),
      floatConst(b, loc, f64, p.factor - 1.0));
  double e = static_cast<double>(p.rotaryDim) / (p.rotaryDim - 2);
  Value grown = arith::MulFOp::create(b, loc, floatConst(b, loc, f64, p.theta),
                                      math::PowFOp::create(b, loc, ratio, floatConst(b, loc, f64, e)));
  Value longer = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, s, floatConst(b, loc, f64, orig));
  return arith::SelectOp::create(b, loc, longer, grown, floatConst(b, loc, f64, p.theta));
}

/// inv_freq[j] = base^(-2j/d) in f64 inside a body, for a runtime base.
Value runtimeInvFreq(OpBuilder &b, Location loc, Value base, Value j, int64_t d) {
  Type f64 = b.getF64Type();
  Value jf = arith::SIToFPOp::create(b, loc, f64, arith::IndexCastOp::create(b, loc, b.getI64Type(), j));
  Value expo = arith::MulFOp::create(b, loc, jf, floatConst(b, loc, f64, -2.0 / d));
  return math::PowFOp::create(b, loc, base, expo);
}

} // namespace

/// The reference: angles pos * inv_freq[j] in f64 (inv_freq from RopeMath),
/// cos/sin in f64 times the magnitude factor, rounded once.
FailureOr<Value> lowerRope(OpBuilder &b, attn::RopeOp op) {
  Location loc = op.getLoc();
  rope::Params p = attn::ropeParams(op);
  Type ct = computeTypeFor(cast<RankedTensorType>(op.getInput().getType()).getElementType());
  Type f64 = b.getF64Type();
  double m = rope::attentionFactor(p);
  Value table, base;
  if (p.scaling == rope::Scaling::dynamic_ntk) {
    base = dynamicNtkBase(b, loc, p, dimOf(b, loc, op.getPositions(), 1));
  } else {
    std::vector<double> f = rope::inverseFrequencies(p);
    auto ft = RankedTensorType::get({static_cast<int64_t>(f.size())}, f64);
    table = arith::ConstantOp::create(b, loc, ft, DenseElementsAttr::get(ft, ArrayRef<double>(f)));
  }
  return buildRotation(
      b, loc, op.getInput(), op.getPositions(), p.rotaryDim, op.getInterleaved(),
      [&](OpBuilder &nb, Location nl, Value pos, Value j) -> std::pair<Value, Value> {
        Value f = table ? tensor::ExtractOp::create(nb, nl, table, ValueRange{j}).getResult()
                        : runtimeInvFreq(nb, nl, base, j, p.rotaryDim);
        Value angle = arith::MulFOp::create(nb, nl, arith::SIToFPOp::create(nb, nl, f64, pos), f);
        Value c = math::CosOp::create(nb, nl, angle), s = math::SinOp::create(nb, nl, angle);
        if (m != 1.0) {
          c = arith::MulFOp::create(nb, nl, c, floatConst(nb, nl, f64, m));
          s = arith::MulFOp::create(nb, nl, s, floatConst(nb, nl, f64, m));
        }
        return {castScalar(nb, nl, c, ct), castScalar(nb, nl, s, ct)};
      });
}

/// Tables: computed here at compile time (f64, rounded once), or for
/// dynamic NTK by a loop nest over the table entries once per prefill.
FailureOr<SmallVector<Value>> lowerRopeTable(OpBuilder &b, attn::RopeTableOp op) {
  Location loc = op.getLoc();
  rope::Params p = attn::ropeParams(op);
  int64_t maxPos = static_cast<int64_t>(op.getMaxPositions());
  if (rope::tableBlock(maxPos) != static_cast<int64_t>(op.getBlock()))
    return op.emitOpError("block ") << op.getBlock() << " differs from the table builder's "
                                    << rope::tableBlock(maxPos);
  auto ct = op.getCoarse().getType(), ft = op.getFine().getType();
  if (!op.getSeqLen()) {
    rope::TwoLevelTable t = rope::buildTwoLevelTable(p, maxPos);
    auto pack = [](const std::vector<float> &c, const std::vector<float> &s) {
      std::vector<float> v(c);
      v.insert(v.end(), s.begin(), s.end());
      return v;
    };
    std::vector<float> coarse = pack(t.coarseCos, t.coarseSin), fine = pack(t.fineCos, t.fineSin);
    return SmallVector<Value>{
        arith::ConstantOp::create(b, loc, ct, DenseElementsAttr::get(ct, ArrayRef<float>(coarse))),
        arith::ConstantOp::create(b, loc, ft, DenseElementsAttr::get(ft, ArrayRef<float>(fine)))};
  }
  Value base = dynamicNtkBase(b, loc, p, op.getSeqLen());
  MLIRContext *ctx = b.getContext();
  Type f64 = b.getF64Type();
  auto build = [&](RankedTensorType type, int64_t stride, double scale) {
    Value init = tensor::EmptyOp::create(b, loc, type, ValueRange{});
    return linalg::GenericOp::create(
               b, loc, TypeRange{type}, ValueRange{}, ValueRange{init},
               {AffineMap::getMultiDimIdentityMap(3, ctx)}, parallel(3),
               [&](OpBuilder &nb, Location nl, ValueRange) {
                 Value which = linalg::IndexOp::create(nb, nl, 0);
                 Value row = linalg::IndexOp::create(nb, nl, 1), j = linalg::IndexOp::create(nb, nl, 2);
                 Value posI = arith::MulIOp::create(nb, nl, row, arith::ConstantIndexOp::create(nb, nl, stride));
                 Value pos = arith::SIToFPOp::create(nb, nl, f64, arith::IndexCastOp::create(nb, nl, nb.getI64Type(), posI));
                 Value angle = arith::MulFOp::create(nb, nl, pos, runtimeInvFreq(nb, nl, base, j, p.rotaryDim));
                 Value isSin = arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::eq, which,
                                                     arith::ConstantIndexOp::create(nb, nl, 1));
                 Value v = arith::SelectOp::create(nb, nl, isSin, math::SinOp::create(nb, nl, angle),
                                                   math::CosOp::create(nb, nl, angle));
                 v = arith::MulFOp::create(nb, nl, v, floatConst(nb, nl, f64, scale));
                 linalg::YieldOp::create(nb, nl, castScalar(nb, nl, v, nb.getF32Type()));
               })
        .getResult(0);
  };
  return SmallVector<Value>{build(ct, op.getBlock(), rope::attentionFactor(p)), build(ft, 1, 1.0)};
}

/// cos/sin gathered from the two-level tables and recombined in f32.
FailureOr<Value> lowerRopeApply(OpBuilder &b, attn::RopeApplyOp op) {
  Location loc = op.getLoc();
  Value coarse = op.getCoarse(), fine = op.getFine();
  int64_t block = static_cast<int64_t>(op.getBlock());
  auto xt = cast<RankedTensorType>(op.getInput().getType());
  Type ct = computeTypeFor(xt.getElementType());
  const int64_t rd = static_cast<int64_t>(op.getRotaryDim());
  auto cosSin = [&](OpBuilder &nb, Location nl, Value pos, Value j) -> std::pair<Value, Value> {
    Value p = arith::IndexCastOp::create(nb, nl, nb.getIndexType(), pos);
    Value blk = arith::ConstantIndexOp::create(nb, nl, block);
    Value hi = arith::DivUIOp::create(nb, nl, p, blk), lo = arith::RemUIOp::create(nb, nl, p, blk);
    Value zero = arith::ConstantIndexOp::create(nb, nl, 0), one = arith::ConstantIndexOp::create(nb, nl, 1);
    Value cc = tensor::ExtractOp::create(nb, nl, coarse, ValueRange{zero, hi, j});
    Value cs = tensor::ExtractOp::create(nb, nl, coarse, ValueRange{one, hi, j});
    Value fc = tensor::ExtractOp::create(nb, nl, fine, ValueRange{zero, lo, j});
    Value fs = tensor::ExtractOp::create(nb, nl, fine, ValueRange{one, lo, j});
    Value c = arith::SubFOp::create(nb, nl, arith::MulFOp::create(nb, nl, cc, fc),
                                    arith::MulFOp::create(nb, nl, cs, fs));
    Value s = arith::AddFOp::create(nb, nl, arith::MulFOp::create(nb, nl, cs, fc),
                                    arith::MulFOp::create(nb, nl, cc, fs));
    return {castScalar(nb, nl, c, ct), castScalar(nb, nl, s, ct)};
  };
  if (!op.getInterleaved() && xt.getDimSize(3) == rd) // rd is even (verifier)
    return buildHalfSplitRotation(b, loc, op.getInput(), op.getPositions(), cosSin);
  return buildRotation(b, loc, op.getInput(), op.getPositions(), rd, op.getInterleaved(), cosSin);
}

namespace {

/// The score matrix of attn.attention / attn.attention_scores (steps 1-2 of
/// the decomposition), in the compute type `ct`.
struct Scores {
  Type ct;
  RankedTensorType type; ///< [B, Hq, S_q, S_kv] x ct
  Value B, H, Sq, Skv;   ///< their sizes
  Value raw;             ///< <q, k> unscaled
  Value masked;          ///< scale, softcap, mask; -inf where not visible
};

/// Builds the scores of `op` (AttentionOp or AttentionScoresOp: the same
/// operands q, k, mask and visibility attributes); `masked` stays null
/// unless `withMask`.
template <typename OpT>
Scores buildScores(OpBuilder &b, OpT op, bool withMask = true) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  Value q = op.getQuery(), k = op.getKey();
  auto qt = cast<RankedTensorType>(q.getType());
  Scores sc;
  sc.ct = computeTypeFor(qt.getElementType());
  Type ct = sc.ct;
  int64_t group = static_cast<int64_t>(op.getKvGroup());
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  auto kvHead = [&](unsigned hDim) { return d(hDim).floorDiv(group); };

  sc.B = dimOf(b, loc, q, 0), sc.H = dimOf(b, loc, q, 1), sc.Sq = dimOf(b, loc, q, 2),
  sc.Skv = dimOf(b, loc, k, 2);
  Value B = sc.B, H = sc.H, Sq = sc.Sq, Skv = sc.Skv;
  auto scoreType = RankedTensorType::get({qt.getDimSize(0), qt.getDimSize(1), qt.getDimSize(2),
                                          cast<RankedTensorType>(k.getType()).getDimSize(2)},
                                         ct);
  sc.type = scoreType;
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

  sc.raw = raw;
  if (!withMask)
    return sc;

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

  sc.masked = scores;
  return sc;
}

/// exp(s - m), 0 when the row maximum m is -inf (no visible key).
Value expOrZero(OpBuilder &nb, Location nl, Type ct, Value s, Value m) {
  Value negInf = floatConst(nb, nl, ct, -std::numeric_limits<double>::infinity());
  Value isInf = arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OEQ, m, negInf);
  Value e = math::ExpOp::create(nb, nl, arith::SubFOp::create(nb, nl, s, m));
  return arith::SelectOp::create(nb, nl, isInf, floatConst(nb, nl, ct, 0.0), e);
}

/// Row maxima [B, Hq, S_q] of the masked scores.
Value rowMaxOf(OpBuilder &b, Location loc, const Scores &sc) {
  MLIRContext *ctx = b.getContext();
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  auto rowType = RankedTensorType::get(sc.type.getShape().drop_back(), sc.ct);
  Value max0 = filledTensor(b, loc, rowType, {sc.B, sc.H, sc.Sq},
                            floatConst(b, loc, sc.ct, -std::numeric_limits<double>::infinity()));
  return linalg::GenericOp::create(
             b, loc, TypeRange{rowType}, ValueRange{sc.masked}, ValueRange{max0},
             {AffineMap::getMultiDimIdentityMap(4, ctx), AffineMap::get(4, 0, {d(0), d(1), d(2)}, ctx)},
             iterators({false, false, false, true}),
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               linalg::YieldOp::create(nb, nl, ValueRange{arith::MaximumFOp::create(nb, nl, a[0], a[1])});
             })
      .getResult(0);
}

/// Softmax denominators [B, Hq, S_q]: sum_j exp(s - m).
Value denominatorsOf(OpBuilder &b, Location loc, const Scores &sc, Value rowMax) {
  MLIRContext *ctx = b.getContext();
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  auto rowType = RankedTensorType::get(sc.type.getShape().drop_back(), sc.ct);
  Value den0 = filledTensor(b, loc, rowType, {sc.B, sc.H, sc.Sq}, floatConst(b, loc, sc.ct, 0.0));
  return linalg::GenericOp::create(
             b, loc, TypeRange{rowType}, ValueRange{sc.masked, rowMax}, ValueRange{den0},
             {AffineMap::getMultiDimIdentityMap(4, ctx), AffineMap::get(4, 0, {d(0), d(1), d(2)}, ctx),
              AffineMap::get(4, 0, {d(0), d(1), d(2)}, ctx)},
             iterators({false, false, false, true}),
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               linalg::YieldOp::create(
                   nb, nl, ValueRange{arith::AddFOp::create(nb, nl, a[2], expOrZero(nb, nl, sc.ct, a[0], a[1]))});
             })
      .getResult(0);
}

} // namespace

/// Softmax attention with the visibility rules of attn.attention; the S_q x
/// S_kv score matrix is materialised (a reference, not a fast path).
FailureOr<Value> lowerAttention(OpBuilder &b, attn::AttentionOp op) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  Value v = op.getValue();
  auto rt = cast<RankedTensorType>(op.getResult().getType());
  int64_t group = static_cast<int64_t>(op.getKvGroup());
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  auto kvHead = [&](unsigned hDim) { return d(hDim).floorDiv(group); };
  Scores sc = buildScores(b, op);
  Type ct = sc.ct;
  Value B = sc.B, H = sc.H, Sq = sc.Sq, Dv = dimOf(b, loc, v, 3);
  Value scores = sc.masked;
  Value zero = floatConst(b, loc, ct, 0.0);

  // 3. Row max (with the sink logit, if any).
  auto rowType = RankedTensorType::get(sc.type.getShape().drop_back(), ct);
  Value rowMax = rowMaxOf(b, loc, sc);
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
    return expOrZero(nb, nl, ct, s, m);
  };
  Value den = denominatorsOf(b, loc, sc, rowMax);
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

/// The requested stage of the score matrix, rounded to the result type.
FailureOr<Value> lowerAttentionScores(OpBuilder &b, attn::AttentionScoresOp op) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  auto rt = cast<RankedTensorType>(op.getResult().getType());
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  attn::ScoreStage stage = op.getStage();
  bool unmasked = stage == attn::ScoreStage::scaled || stage == attn::ScoreStage::softcapped;
  Scores sc = buildScores(b, op, /*withMask=*/!unmasked);
  Type ct = sc.ct;
  Value init = emptyTensor(b, loc, rt, {sc.B, sc.H, sc.Sq, sc.Skv});
  auto id = AffineMap::getMultiDimIdentityMap(4, ctx);
  auto rows = AffineMap::get(4, 0, {d(0), d(1), d(2)}, ctx);
  if (unmasked) {
    double scale = op.getScale().convertToDouble();
    std::optional<double> softcap;
    if (auto c = op.getSoftcap(); c && stage == attn::ScoreStage::softcapped)
      softcap = c->convertToDouble();
    return linalg::GenericOp::create(
               b, loc, TypeRange{rt}, ValueRange{sc.raw}, ValueRange{init}, {id, id}, parallel(4),
               [&](OpBuilder &nb, Location nl, ValueRange a) {
                 Value s = arith::MulFOp::create(nb, nl, a[0], floatConst(nb, nl, ct, scale));
                 if (softcap) {
                   Value c = floatConst(nb, nl, ct, *softcap);
                   s = arith::MulFOp::create(
                       nb, nl, c, math::TanhOp::create(nb, nl, arith::DivFOp::create(nb, nl, s, c)));
                 }
                 linalg::YieldOp::create(nb, nl, castScalar(nb, nl, s, rt.getElementType()));
               })
        .getResult(0);
  }
  if (stage == attn::ScoreStage::masked)
    return linalg::GenericOp::create(
               b, loc, TypeRange{rt}, ValueRange{sc.masked}, ValueRange{init}, {id, id}, parallel(4),
               [&](OpBuilder &nb, Location nl, ValueRange a) {
                 linalg::YieldOp::create(nb, nl, castScalar(nb, nl, a[0], rt.getElementType()));
               })
        .getResult(0);
  // probabilities: exp(s - m) / den, rows without a visible key 0.
  Value rowMax = rowMaxOf(b, loc, sc);
  Value den = denominatorsOf(b, loc, sc, rowMax);
  return linalg::GenericOp::create(
             b, loc, TypeRange{rt}, ValueRange{sc.masked, rowMax, den}, ValueRange{init},
             {id, rows, rows, id}, parallel(4),
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               Value e = expOrZero(nb, nl, ct, a[0], a[1]);
               Value positive = arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OGT, a[2],
                                                      floatConst(nb, nl, ct, 0.0));
               Value p = arith::SelectOp::create(nb, nl, positive, arith::DivFOp::create(nb, nl, e, a[2]),
                                                 floatConst(nb, nl, ct, 0.0));
               linalg::YieldOp::create(nb, nl, castScalar(nb, nl, p, rt.getElementType()));
             })
      .getResult(0);
}

} // namespace h20::lowering

namespace h20::lowering {

FailureOr<Value> lowerAttentionToLibraryCall(OpBuilder &b, attn::AttentionOp op) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  // What the attention kernel does not implement (an explicit mask, sinks,
  // or what the target marked) runs as the reference decomposition:
  // correct, generated like any other linalg, not fast.
  if (op.getMask() || op.getSink() || op->hasAttr(kDecomposeAttention))
    return lowerAttention(b, op);
  Value q = op.getQuery(), k = op.getKey(), v = op.getValue();
  auto rt = cast<RankedTensorType>(op.getResult().getType());
  SmallVector<Value> dyn;
  for (int64_t i = 0; i < 4; ++i)
    if (rt.isDynamicDim(i))
      dyn.push_back(dimOf(b, loc, i == 3 ? v : q, i));
  Value init = tensor::EmptyOp::create(b, loc, rt, dyn);
  auto dims = [&](unsigned first) {
    SmallVector<AffineExpr> e;
    for (unsigned i = 0; i < 4; ++i)
      e.push_back(getAffineDimExpr(first + i, ctx));
    return AffineMap::get(16, 0, e, ctx);
  };
  SmallVector<utils::IteratorType> its(12, utils::IteratorType::reduction);
  its.append(4, utils::IteratorType::parallel);
  auto g = linalg::GenericOp::create(
      b, loc, TypeRange{rt}, ValueRange{q, k, v}, ValueRange{init},
      {dims(0), dims(4), dims(8), dims(12)}, its,
      [&](OpBuilder &nb, Location nl, ValueRange a) {
        Value s = arith::AddFOp::create(nb, nl, a[0], a[1]);
        s = arith::AddFOp::create(nb, nl, s, a[2]);
        linalg::YieldOp::create(nb, nl, ValueRange{arith::AddFOp::create(nb, nl, s, a[3])});
      });
  g.setLibraryCallAttr(b.getStringAttr(kAttentionLibraryCall));
  SmallVector<NamedAttribute> attrs{
      b.getNamedAttr("causal", b.getBoolAttr(op.getCausal())),
      b.getNamedAttr("bottom_right",
                     b.getBoolAttr(op.getAlignment() == attn::CausalAlignment::bottom_right)),
      b.getNamedAttr("kv_group", b.getI64IntegerAttr(static_cast<int64_t>(op.getKvGroup())))};
  if (auto s = op.getScaleAttr())
    attrs.push_back(b.getNamedAttr("scale", s));
  if (auto w = op.getWindowAttr())
    attrs.push_back(b.getNamedAttr("window", w));
  if (auto c = op.getSoftcapAttr())
    attrs.push_back(b.getNamedAttr("softcap", c));
  if (Attribute t = op->getAttr("h20.tiles"))
    attrs.push_back(b.getNamedAttr("tiles", t));
  if (Attribute k = op->getAttr("h20.kernel"))
    attrs.push_back(b.getNamedAttr("kernel", k));
  if (Operation *view = k.getDefiningOp())
    if (Attribute layer = view->getAttr(kKvLayerAttr))
      attrs.push_back(b.getNamedAttr("kv_layer", layer));
  g->setAttr(kAttentionAttrs, b.getDictionaryAttr(attrs));
  return g.getResult(0);
}

} // namespace h20::lowering
