//===- OnnxIndexingToLinalg.cpp - element-indexed onnx ops to loops ------===//
//
// Semantics: the ONNX operator specification (GatherElements-13,
// GatherND-13, ScatterElements-18, TopK-11/24, CumSum-14, Trilu-14). Index
// inputs may be int32 or int64 and
// negative (counting from the end of the axis); an index outside the axis
// is clamped into it, so a bad index never reads or writes outside a tensor.
//
//===----------------------------------------------------------------------===//
#include "OnnxIndexingToLinalg.h"
#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
namespace ox = h20::onnx;

namespace h20::lowering {
namespace {

using Values = SmallVector<Value>;

Value cIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

Value zeroOf(OpBuilder &b, Location loc, Type t) {
  if (isa<FloatType>(t))
    return floatConst(b, loc, t, 0.0);
  return arith::ConstantOp::create(b, loc, t, b.getIntegerAttr(t, 0));
}

int64_t normalizedAxis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

/// An ONNX index element (any integer type) as a position along a dim of
/// `size`: negative counts from the end, then clamped to [0, size - 1].
Value axisPosition(OpBuilder &b, Location loc, Value raw, Value size) {
  Value i = arith::IndexCastOp::create(b, loc, b.getIndexType(), raw);
  Value zero = cIndex(b, loc, 0);
  Value neg = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, i, zero);
  i = arith::SelectOp::create(b, loc, neg, arith::AddIOp::create(b, loc, i, size), i);
  Value last = arith::SubIOp::create(b, loc, size, cIndex(b, loc, 1));
  return arith::MaxSIOp::create(b, loc, arith::MinSIOp::create(b, loc, i, last), zero);
}

/// Loop position `i` (< dim k of `from`) used as a position in dim k of
/// `into`: itself when `from`'s dim is statically no larger, else clamped
/// to into's last position (ONNX requires the dims to fit; a model that
/// breaks the rule must still not touch memory outside the tensor).
Value fitPosition(OpBuilder &b, Location loc, Value i, RankedTensorType from,
                  RankedTensorType into, int64_t k, Value intoDim) {
  if (!from.isDynamicDim(k) && !into.isDynamicDim(k) && from.getDimSize(k) <= into.getDimSize(k))
    return i;
  Value last = arith::SubIOp::create(b, loc, intoDim, cIndex(b, loc, 1));
  return arith::MinSIOp::create(b, loc, i, last);
}

/// `v` as `type` (a tensor.cast when shape inference made the result more
/// static than the value computed from the operands).
Value castTo(OpBuilder &b, Location loc, Value v, Type type) {
  if (v.getType() == type)
    return v;
  return tensor::CastOp::create(b, loc, type, v);
}

/// The reduction of ScatterElements: `old` combined with `update`.
Value combine(OpBuilder &b, Location loc, StringRef reduction, Value old, Value update) {
  bool f = isa<FloatType>(old.getType());
  if (reduction == "add")
    return f ? arith::AddFOp::create(b, loc, old, update).getResult()
             : arith::AddIOp::create(b, loc, old, update).getResult();
  if (reduction == "mul")
    return f ? arith::MulFOp::create(b, loc, old, update).getResult()
             : arith::MulIOp::create(b, loc, old, update).getResult();
  if (reduction == "max")
    return f ? arith::MaximumFOp::create(b, loc, old, update).getResult()
             : arith::MaxSIOp::create(b, loc, old, update).getResult();
  return f ? arith::MinimumFOp::create(b, loc, old, update).getResult()
           : arith::MinSIOp::create(b, loc, old, update).getResult();
}

/// TopK's order: true when element (v1 at position i1) comes before (v2 at
/// i2): a better value (larger for `largest`, else smaller; NaN counts as
/// larger than every number), or an equal value at a lower position.
Value ranksBefore(OpBuilder &b, Location loc, Value v1, Value i1, Value v2, Value i2,
                  bool largest) {
  Value better, same;
  if (isa<FloatType>(v1.getType())) {
    using P = arith::CmpFPredicate;
    auto cmpf = [&](P p, Value x, Value y) { return arith::CmpFOp::create(b, loc, p, x, y).getResult(); };
    Value nan1 = cmpf(P::UNO, v1, v1), nan2 = cmpf(P::UNO, v2, v2);
    Value num1 = cmpf(P::ORD, v1, v1), num2 = cmpf(P::ORD, v2, v2);
    better = largest ? arith::OrIOp::create(b, loc, cmpf(P::OGT, v1, v2),
                                            arith::AndIOp::create(b, loc, nan1, num2))
                     : arith::OrIOp::create(b, loc, cmpf(P::OLT, v1, v2),
                                            arith::AndIOp::create(b, loc, num1, nan2));
    same = arith::OrIOp::create(b, loc, cmpf(P::OEQ, v1, v2), arith::AndIOp::create(b, loc, nan1, nan2));
  } else {
    using P = arith::CmpIPredicate;
    better = arith::CmpIOp::create(b, loc, largest ? P::sgt : P::slt, v1, v2);
    same = arith::CmpIOp::create(b, loc, P::eq, v1, v2);
  }
  Value lower = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, i1, i2);
  return arith::OrIOp::create(b, loc, better, arith::AndIOp::create(b, loc, same, lower));
}

/// One TopK scan of a row: the best element (value, position) that ranks
/// after the previous pick (prevValue, prevPos), or any element when
/// `first`. `at(e)` gives the coordinates of element e of the row.
std::pair<Value, Value> bestAfter(OpBuilder &b, Location loc, Value x, Value n,
                                  function_ref<SmallVector<Value>(Value)> at, Value first,
                                  Value prevValue, Value prevPos, Value zeroValue, bool largest) {
  Value zero = cIndex(b, loc, 0), one = cIndex(b, loc, 1);
  Value notFound = arith::ConstantIntOp::create(b, loc, 0, 1);
  auto scan = scf::ForOp::create(
      b, loc, zero, n, one, ValueRange{notFound, zeroValue, zero},
      [&](OpBuilder &eb, Location el, Value e, ValueRange best) {
        // best: found, value, position of the best element so far.
        Value v = tensor::ExtractOp::create(eb, el, x, at(e));
        Value afterPrev = arith::OrIOp::create(
            eb, el, first, ranksBefore(eb, el, prevValue, prevPos, v, e, largest));
        Value none = arith::XOrIOp::create(eb, el, best[0], arith::ConstantIntOp::create(eb, el, 1, 1));
        Value improves =
            arith::OrIOp::create(eb, el, none, ranksBefore(eb, el, v, e, best[1], best[2], largest));
        Value take = arith::AndIOp::create(eb, el, afterPrev, improves);
        scf::YieldOp::create(eb, el,
                             ValueRange{arith::OrIOp::create(eb, el, best[0], take),
                                        arith::SelectOp::create(eb, el, take, v, best[1]),
                                        arith::SelectOp::create(eb, el, take, e, best[2])});
      });
  return {scan.getResult(1), scan.getResult(2)};
}

/// The value of a constant 0-d or 1-element integer tensor (CumSum's axis).
std::optional<int64_t> constantScalar(Value v) {
  DenseIntElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || attr.getNumElements() != 1)
    return std::nullopt;
  return (*attr.getValues<APInt>().begin()).getSExtValue();
}

/// Linear position `k` of the loop as an i64 (for comparisons with ONNX
/// integers such as Trilu's k).
Value indexAsI64(OpBuilder &b, Location loc, int64_t k) {
  return arith::IndexCastOp::create(b, loc, b.getI64Type(), linalg::IndexOp::create(b, loc, k));
}

/// CumSum's mask: whether element j along the axis counts towards output
/// position i.
Value cumSumTakes(OpBuilder &b, Location loc, Value j, Value i, bool exclusive, bool reverse) {
  using P = arith::CmpIPredicate;
  P p = reverse ? (exclusive ? P::sgt : P::sge) : (exclusive ? P::slt : P::sle);
  return arith::CmpIOp::create(b, loc, p, j, i);
}

} // namespace

FailureOr<Values> lowerGatherElements(OpBuilder &b, ox::GatherElementsOp op) {
  Location loc = op.getLoc();
  Value data = op->getOperand(0), ind = op->getOperand(1);
  auto dt = dyn_cast<RankedTensorType>(data.getType());
  auto it = dyn_cast<RankedTensorType>(ind.getType());
  auto rt = cast<RankedTensorType>(op->getResult(0).getType());
  if (!dt || !it || dt.getRank() != it.getRank() || rt.getRank() != dt.getRank())
    return unsupported(op, "data, indices and output must be ranked, all of one rank");
  int64_t r = dt.getRank(), axis = normalizedAxis(op.getAxis().value_or(0), r);
  SmallVector<Value> dims, dataDims;
  for (int64_t k = 0; k < r; ++k) {
    dims.push_back(dimOf(b, loc, ind, k));
    dataDims.push_back(dimOf(b, loc, data, k));
  }
  Value init = emptyTensor(b, loc, rt, dims);
  AffineMap id = AffineMap::getMultiDimIdentityMap(r, b.getContext());
  return Values{linalg::GenericOp::create(
                    b, loc, TypeRange{rt}, ValueRange{ind}, ValueRange{init}, {id, id},
                    parallel(r),
                    [&](OpBuilder &nb, Location nl, ValueRange a) {
                      SmallVector<Value> at;
                      for (int64_t k = 0; k < r; ++k)
                        at.push_back(k == axis ? axisPosition(nb, nl, a[0], dataDims[k])
                                               : fitPosition(nb, nl, linalg::IndexOp::create(nb, nl, k),
                                                             it, dt, k, dataDims[k]));
                      linalg::YieldOp::create(nb, nl, ValueRange{tensor::ExtractOp::create(nb, nl, data, at)});
                    })
                    .getResult(0)};
}

FailureOr<Values> lowerScatterElements(OpBuilder &b, ox::ScatterElementsOp op) {
  Location loc = op.getLoc();
  Value data = op->getOperand(0), ind = op->getOperand(1), upd = op->getOperand(2);
  auto dt = dyn_cast<RankedTensorType>(data.getType());
  auto it = dyn_cast<RankedTensorType>(ind.getType());
  auto ut = dyn_cast<RankedTensorType>(upd.getType());
  if (!dt || !it || !ut || it.getRank() != dt.getRank() || ut.getRank() != dt.getRank())
    return unsupported(op, "data, indices and updates must be ranked, all of one rank");
  int64_t r = dt.getRank(), axis = normalizedAxis(op.getAxis().value_or(0), r);
  StringRef reduction = op.getReduction().value_or("none");
  SmallVector<Value> lbs(r, cIndex(b, loc, 0)), steps(r, cIndex(b, loc, 1)), ubs, dataDims,
      updDims;
  for (int64_t k = 0; k < r; ++k) {
    ubs.push_back(dimOf(b, loc, ind, k));
    dataDims.push_back(dimOf(b, loc, data, k));
    updDims.push_back(dimOf(b, loc, upd, k));
  }
  // One update at a time, in row-major order of the indices: with
  // reduction "none" a repeated index keeps the last update.
  scf::LoopNest nest = scf::buildLoopNest(
      b, loc, lbs, ubs, steps, ValueRange{data},
      [&](OpBuilder &nb, Location nl, ValueRange ivs, ValueRange acc) -> scf::ValueVector {
        SmallVector<Value> updAt, at;
        for (int64_t k = 0; k < r; ++k)
          updAt.push_back(fitPosition(nb, nl, ivs[k], it, ut, k, updDims[k]));
        Value raw = tensor::ExtractOp::create(nb, nl, ind, ivs);
        Value u = tensor::ExtractOp::create(nb, nl, upd, updAt);
        for (int64_t k = 0; k < r; ++k)
          at.push_back(k == axis ? axisPosition(nb, nl, raw, dataDims[k])
                                 : fitPosition(nb, nl, ivs[k], it, dt, k, dataDims[k]));
        if (reduction != "none")
          u = combine(nb, nl, reduction, tensor::ExtractOp::create(nb, nl, acc[0], at), u);
        return {tensor::InsertOp::create(nb, nl, u, acc[0], at).getResult()};
      });
  return Values{castTo(b, loc, nest.results[0], op->getResult(0).getType())};
}

/// What both TopK lowerings start from: the operands' types, the axis and
/// its length N, K (fixed by the result type, else read at run time and
/// clamped into [0, N]: the output's axis dim is that K) and the output dims.
struct TopKSetup {
  Value x;
  RankedTensorType vt, it;
  int64_t r = 0, axis = 0;
  bool largest = true;
  Type elt;
  Value zero, one, n, k;
  SmallVector<Value> outDims;
};

FailureOr<TopKSetup> setUpTopK(OpBuilder &b, ox::TopKOp op) {
  Location loc = op.getLoc();
  TopKSetup t;
  t.x = op->getOperand(0);
  Value kTensor = op->getOperand(1);
  auto xt = dyn_cast<RankedTensorType>(t.x.getType());
  auto kt = dyn_cast<RankedTensorType>(kTensor.getType());
  t.vt = cast<RankedTensorType>(op->getResult(0).getType());
  t.it = cast<RankedTensorType>(op->getResult(1).getType());
  if (!xt || !kt || kt.getRank() > 1 || t.vt.getRank() != xt.getRank())
    return unsupported(op, "X must be ranked and K a scalar or a shape-[1] tensor");
  t.r = xt.getRank();
  t.axis = normalizedAxis(op.getAxis().value_or(-1), t.r);
  t.largest = op.getLargest().value_or(1) != 0;
  t.elt = xt.getElementType();
  t.zero = cIndex(b, loc, 0);
  t.one = cIndex(b, loc, 1);
  t.n = dimOf(b, loc, t.x, t.axis);
  if (!t.vt.isDynamicDim(t.axis)) {
    t.k = cIndex(b, loc, t.vt.getDimSize(t.axis));
  } else {
    SmallVector<Value> at(kt.getRank(), t.zero);
    Value raw = tensor::ExtractOp::create(b, loc, kTensor, at);
    Value k = arith::IndexCastOp::create(b, loc, b.getIndexType(), raw);
    t.k = arith::MaxSIOp::create(b, loc, arith::MinSIOp::create(b, loc, k, t.n), t.zero);
  }
  for (int64_t d = 0; d < t.r; ++d)
    t.outDims.push_back(d == t.axis ? t.k : dimOf(b, loc, t.x, d));
  return t;
}

FailureOr<Values> lowerTopK(OpBuilder &b, ox::TopKOp op) {
  Location loc = op.getLoc();
  FailureOr<TopKSetup> setup = setUpTopK(b, op);
  if (failed(setup))
    return failure();
  const TopKSetup &t = *setup;
  Value x = t.x, zero = t.zero, one = t.one, n = t.n, k = t.k;
  RankedTensorType vt = t.vt, it = t.it;
  int64_t r = t.r, axis = t.axis;
  bool largest = t.largest;
  Type elt = t.elt;
  const SmallVector<Value> &outDims = t.outDims;
  SmallVector<Value> lbs, ubs, steps;
  for (int64_t d = 0; d < r; ++d) {
    if (d == axis)
      continue;
    lbs.push_back(zero);
    ubs.push_back(outDims[d]);
    steps.push_back(one);
  }
  Value values = emptyTensor(b, loc, vt, outDims), indices = emptyTensor(b, loc, it, outDims);
  Value zeroValue = zeroOf(b, loc, elt);
  // Rows (every dim but the axis) -> picks j < K -> a scan of the row.
  scf::LoopNest rows = scf::buildLoopNest(
      b, loc, lbs, ubs, steps, ValueRange{values, indices},
      [&](OpBuilder &rb, Location rl, ValueRange row, ValueRange acc) -> scf::ValueVector {
        auto at = [&](Value pos) {
          SmallVector<Value> c;
          for (int64_t d = 0, o = 0; d < r; ++d)
            c.push_back(d == axis ? pos : row[o++]);
          return c;
        };
        auto picks = scf::ForOp::create(
            rb, rl, zero, k, one, ValueRange{acc[0], acc[1], zeroValue, zero},
            [&](OpBuilder &jb, Location jl, Value j, ValueRange st) {
              // st: values, indices, and the previous pick (value, position).
              Value first = arith::CmpIOp::create(jb, jl, arith::CmpIPredicate::eq, j, zero);
              auto [bestValue, bestPos] =
                  bestAfter(jb, jl, x, n, at, first, st[2], st[3], zeroValue, largest);
              Value pos64 = arith::IndexCastOp::create(jb, jl, jb.getI64Type(), bestPos);
              Value nv = tensor::InsertOp::create(jb, jl, bestValue, st[0], at(j));
              Value ni = tensor::InsertOp::create(jb, jl, pos64, st[1], at(j));
              scf::YieldOp::create(jb, jl, ValueRange{nv, ni, bestValue, bestPos});
            });
        return {picks.getResult(0), picks.getResult(1)};
      });
  return Values{rows.results[0], rows.results[1]};
}

FailureOr<Values> lowerScatterElementsParallel(OpBuilder &b, ox::ScatterElementsOp op) {
  Location loc = op.getLoc();
  Value data = op->getOperand(0), ind = op->getOperand(1), upd = op->getOperand(2);
  auto dt = dyn_cast<RankedTensorType>(data.getType());
  auto it = dyn_cast<RankedTensorType>(ind.getType());
  auto ut = dyn_cast<RankedTensorType>(upd.getType());
  if (!dt || !it || !ut || it.getRank() != dt.getRank() || ut.getRank() != dt.getRank())
    return unsupported(op, "data, indices and updates must be ranked, all of one rank");
  int64_t r = dt.getRank(), axis = normalizedAxis(op.getAxis().value_or(0), r);
  StringRef reduction = op.getReduction().value_or("none");
  auto rt = cast<RankedTensorType>(op->getResult(0).getType());
  SmallVector<Value> dataDims, indDims, updDims;
  for (int64_t k = 0; k < r; ++k) {
    dataDims.push_back(dimOf(b, loc, data, k));
    indDims.push_back(dimOf(b, loc, ind, k));
    updDims.push_back(dimOf(b, loc, upd, k));
  }
  Value init = emptyTensor(b, loc, dt, dataDims);
  AffineMap id = AffineMap::getMultiDimIdentityMap(r, b.getContext());
  Value result =
      linalg::GenericOp::create(
          b, loc, TypeRange{dt}, ValueRange{data}, ValueRange{init}, {id, id}, parallel(r),
          [&](OpBuilder &nb, Location nl, ValueRange a) {
            SmallVector<Value> p;
            for (int64_t k = 0; k < r; ++k)
              p.push_back(linalg::IndexOp::create(nb, nl, k));
            // Only index positions sharing p's other coordinates can target p.
            Value inRange = arith::ConstantIntOp::create(nb, nl, 1, 1);
            for (int64_t k = 0; k < r; ++k)
              if (k != axis)
                inRange = arith::AndIOp::create(
                    nb, nl, inRange,
                    arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::slt, p[k], indDims[k]));
            Value trips = arith::SelectOp::create(nb, nl, inRange, indDims[axis], cIndex(nb, nl, 0));
            auto scan = scf::ForOp::create(
                nb, nl, cIndex(nb, nl, 0), trips, cIndex(nb, nl, 1), ValueRange{a[0]},
                [&](OpBuilder &sb, Location sl, Value j, ValueRange acc) {
                  SmallVector<Value> at(p), updAt;
                  at[axis] = j;
                  for (int64_t k = 0; k < r; ++k)
                    updAt.push_back(fitPosition(sb, sl, at[k], it, ut, k, updDims[k]));
                  Value raw = tensor::ExtractOp::create(sb, sl, ind, at);
                  Value target = axisPosition(sb, sl, raw, dataDims[axis]);
                  Value hit = arith::CmpIOp::create(sb, sl, arith::CmpIPredicate::eq, target, p[axis]);
                  Value u = tensor::ExtractOp::create(sb, sl, upd, updAt);
                  if (reduction != "none")
                    u = combine(sb, sl, reduction, acc[0], u);
                  scf::YieldOp::create(sb, sl, ValueRange{arith::SelectOp::create(sb, sl, hit, u, acc[0])});
                });
            linalg::YieldOp::create(nb, nl, ValueRange{scan.getResult(0)});
          })
          .getResult(0);
  return Values{castTo(b, loc, result, rt)};
}

FailureOr<Values> lowerTopKParallel(OpBuilder &b, ox::TopKOp op) {
  Location loc = op.getLoc();
  FailureOr<TopKSetup> setup = setUpTopK(b, op);
  if (failed(setup))
    return failure();
  const TopKSetup &t = *setup;
  Value x = t.x, zero = t.zero, one = t.one, n = t.n;
  RankedTensorType vt = t.vt, it = t.it;
  int64_t r = t.r, axis = t.axis;
  bool largest = t.largest;
  Type elt = t.elt;
  const SmallVector<Value> &outDims = t.outDims;
  Value values = emptyTensor(b, loc, vt, outDims), indices = emptyTensor(b, loc, it, outDims);
  AffineMap id = AffineMap::getMultiDimIdentityMap(r, b.getContext());
  auto g = linalg::GenericOp::create(
      b, loc, TypeRange{vt, it}, ValueRange{}, ValueRange{values, indices}, {id, id}, parallel(r),
      [&](OpBuilder &nb, Location nl, ValueRange) {
        SmallVector<Value> p;
        for (int64_t d = 0; d < r; ++d)
          p.push_back(linalg::IndexOp::create(nb, nl, d));
        Value zeroValue = zeroOf(nb, nl, elt);
        Value picks = arith::AddIOp::create(nb, nl, p[axis], cIndex(nb, nl, 1));
        // Picks 0..j: each the best element ranking after the previous pick.
        auto loop = scf::ForOp::create(
            nb, nl, zero, picks, one, ValueRange{zeroValue, zero},
            [&](OpBuilder &jb, Location jl, Value j, ValueRange prev) {
              Value first = arith::CmpIOp::create(jb, jl, arith::CmpIPredicate::eq, j, zero);
              auto at = [&](Value e) {
                SmallVector<Value> c(p);
                c[axis] = e;
                return c;
              };
              auto [v, pos] = bestAfter(jb, jl, x, n, at, first, prev[0], prev[1], zeroValue, largest);
              scf::YieldOp::create(jb, jl, ValueRange{v, pos});
            });
        Value pos64 = arith::IndexCastOp::create(nb, nl, nb.getI64Type(), loop.getResult(1));
        linalg::YieldOp::create(nb, nl, ValueRange{loop.getResult(0), pos64});
      });
  return Values{g.getResult(0), g.getResult(1)};
}

FailureOr<Values> lowerGatherND(OpBuilder &b, ox::GatherNDOp op) {
  Location loc = op.getLoc();
  Value data = op->getOperand(0), ind = op->getOperand(1);
  auto dt = dyn_cast<RankedTensorType>(data.getType());
  auto it = dyn_cast<RankedTensorType>(ind.getType());
  auto rt = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!dt || !it || !rt || it.getRank() < 1 || it.isDynamicDim(it.getRank() - 1))
    return unsupported(op, "data and indices must be ranked, indices' last dim static");
  int64_t r = dt.getRank(), q = it.getRank(), bd = op.getBatchDims().value_or(0);
  int64_t m = it.getDimSize(q - 1);
  if (bd < 0 || bd >= std::min(q, r) || m < 1 || bd + m > r)
    return unsupported(op, "needs 0 <= batch_dims < min(rank(indices), rank(data)) and "
                           "1 <= indices' last dim <= rank(data) - batch_dims");
  int64_t outRank = q - 1 + r - bd - m;
  if (rt.getRank() != outRank)
    return unsupported(op, "the output's rank is not rank(indices) - 1 + rank(data) - "
                           "batch_dims - indices' last dim");
  SmallVector<Value> dims, dataDims;
  for (int64_t k = 0; k < r; ++k)
    dataDims.push_back(dimOf(b, loc, data, k));
  for (int64_t k = 0; k + 1 < q; ++k)
    dims.push_back(dimOf(b, loc, ind, k));
  for (int64_t k = bd + m; k < r; ++k)
    dims.push_back(dataDims[k]);
  Value init = emptyTensor(b, loc, rt, dims);
  AffineMap id = AffineMap::getMultiDimIdentityMap(outRank, b.getContext());
  return Values{linalg::GenericOp::create(
                    b, loc, TypeRange{rt}, ValueRange{}, ValueRange{init}, {id}, parallel(outRank),
                    [&](OpBuilder &nb, Location nl, ValueRange) {
                      SmallVector<Value> p, at, indAt;
                      for (int64_t k = 0; k < outRank; ++k)
                        p.push_back(linalg::IndexOp::create(nb, nl, k));
                      // Batch dims: the same position in data (ONNX
                      // requires the dims to match).
                      for (int64_t k = 0; k < bd; ++k)
                        at.push_back(fitPosition(nb, nl, p[k], it, dt, k, dataDims[k]));
                      indAt.append(p.begin(), p.begin() + (q - 1));
                      indAt.push_back(Value());
                      for (int64_t j = 0; j < m; ++j) {
                        indAt.back() = cIndex(nb, nl, j);
                        Value raw = tensor::ExtractOp::create(nb, nl, ind, indAt);
                        at.push_back(axisPosition(nb, nl, raw, dataDims[bd + j]));
                      }
                      for (int64_t k = bd + m; k < r; ++k)
                        at.push_back(p[q - 1 + k - bd - m]);
                      linalg::YieldOp::create(nb, nl, ValueRange{tensor::ExtractOp::create(nb, nl, data, at)});
                    })
                    .getResult(0)};
}

FailureOr<Values> lowerCumSum(OpBuilder &b, ox::CumSumOp op) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  Value x = op->getOperand(0);
  auto xt = dyn_cast<RankedTensorType>(x.getType());
  auto rt = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!xt || !rt || xt.getRank() < 1 || rt.getRank() != xt.getRank())
    return unsupported(op, "x must be ranked with rank >= 1");
  int64_t r = xt.getRank();
  std::optional<int64_t> axis = constantScalar(op->getOperand(1));
  if (!axis || *axis < -r || *axis >= r)
    return unsupported(op, "axis must be a constant 0-d or 1-element tensor in [-r, r)");
  int64_t a = normalizedAxis(*axis, r);
  bool exclusive = op.getExclusive().value_or(0) != 0, reverse = op.getReverse().value_or(0) != 0;
  Type elt = rt.getElementType();
  Type ct = isa<FloatType>(elt) ? computeTypeFor(elt) : elt;
  SmallVector<Value> dims;
  for (int64_t k = 0; k < r; ++k)
    dims.push_back(dimOf(b, loc, x, k));
  // Loop dims: the output's r dims, then j (the summed position along the
  // axis), innermost.
  SmallVector<AffineExpr> xe, oe;
  for (int64_t k = 0; k < r; ++k) {
    xe.push_back(getAffineDimExpr(k == a ? r : k, ctx));
    oe.push_back(getAffineDimExpr(k, ctx));
  }
  auto accType = RankedTensorType::get(rt.getShape(), ct);
  Value zero = zeroOf(b, loc, ct);
  Value acc = filledTensor(b, loc, accType, dims, zero);
  SmallVector<utils::IteratorType> its = parallel(r);
  its.push_back(utils::IteratorType::reduction);
  Value sums = linalg::GenericOp::create(
                   b, loc, TypeRange{accType}, ValueRange{x}, ValueRange{acc},
                   {AffineMap::get(r + 1, 0, xe, ctx), AffineMap::get(r + 1, 0, oe, ctx)}, its,
                   [&](OpBuilder &nb, Location nl, ValueRange v) {
                     Value take = cumSumTakes(nb, nl, linalg::IndexOp::create(nb, nl, r),
                                              linalg::IndexOp::create(nb, nl, a), exclusive, reverse);
                     Value term = arith::SelectOp::create(nb, nl, take, castScalar(nb, nl, v[0], ct),
                                                          zeroOf(nb, nl, ct));
                     Value sum = isa<FloatType>(ct) ? arith::AddFOp::create(nb, nl, v[1], term).getResult()
                                                    : arith::AddIOp::create(nb, nl, v[1], term).getResult();
                     linalg::YieldOp::create(nb, nl, ValueRange{sum});
                   })
                   .getResult(0);
  if (ct == elt)
    return Values{sums};
  return Values{elementwise(b, loc, rt, ValueRange{sums},
                            [&](OpBuilder &nb, Location nl, ValueRange v) {
                              return castScalar(nb, nl, v[0], elt);
                            },
                            dims)};
}

FailureOr<Values> lowerTrilu(OpBuilder &b, ox::TriluOp op) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  Value x = op->getOperand(0);
  auto xt = dyn_cast<RankedTensorType>(x.getType());
  auto rt = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!xt || !rt || xt.getRank() < 2 || rt.getRank() != xt.getRank())
    return unsupported(op, "x must be ranked with rank >= 2");
  int64_t r = xt.getRank();
  bool upper = op.getUpper().value_or(1) != 0;
  SmallVector<Value> operands{x}, dims;
  SmallVector<AffineMap> maps{AffineMap::getMultiDimIdentityMap(r, ctx)};
  // k, when given, is an operand read at 0 (it stays a tensor on every
  // target, like Clip's bounds).
  bool hasK = op->getNumOperands() > 1 && !isa<NoneType>(op->getOperand(1).getType());
  if (hasK) {
    auto kt = dyn_cast<RankedTensorType>(op->getOperand(1).getType());
    if (!kt || kt.getRank() > 1 || !isa<IntegerType>(kt.getElementType()))
      return unsupported(op, "k must be an integer scalar or one-element tensor");
    operands.push_back(op->getOperand(1));
    SmallVector<AffineExpr> at(kt.getRank(), getAffineConstantExpr(0, ctx));
    maps.push_back(AffineMap::get(r, 0, at, ctx));
  }
  for (int64_t k = 0; k < r; ++k)
    dims.push_back(dimOf(b, loc, x, k));
  maps.push_back(AffineMap::getMultiDimIdentityMap(r, ctx));
  Value init = emptyTensor(b, loc, rt, dims);
  Type elt = rt.getElementType();
  return Values{linalg::GenericOp::create(
                    b, loc, TypeRange{rt}, operands, ValueRange{init}, maps, parallel(r),
                    [&](OpBuilder &nb, Location nl, ValueRange a) {
                      Value k = hasK ? castScalar(nb, nl, a[1], nb.getI64Type())
                                     : arith::ConstantIntOp::create(nb, nl, nb.getI64Type(), 0).getResult();
                      Value diff = arith::SubIOp::create(nb, nl, indexAsI64(nb, nl, r - 1),
                                                         indexAsI64(nb, nl, r - 2));
                      Value keep = arith::CmpIOp::create(
                          nb, nl, upper ? arith::CmpIPredicate::sge : arith::CmpIPredicate::sle, diff, k);
                      linalg::YieldOp::create(
                          nb, nl, ValueRange{arith::SelectOp::create(nb, nl, keep, a[0], zeroOf(nb, nl, elt))});
                    })
                    .getResult(0)};
}

} // namespace h20::lowering
