//===- OnnxToLinalg.cpp - onnx ops to linalg/tensor/arith/math -----------===//
//
// Semantics follow the ONNX operator specification at the imported opset.
// Broadcasting is resolved statically: a dim broadcasts when its static size
// is 1 (what every exporter emits); dynamic dims are taken to match.
//
//===----------------------------------------------------------------------===//
#include "OnnxToLinalg.h"
#include "LoweringUtils.h"
#include "OnnxIndexingToLinalg.h"
#include "OnnxNormalizationToLinalg.h"
#include "OnnxRotaryToLinalg.h"

#include "h20/Dialect/Onnx/IR/OnnxDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace h20::lowering;
namespace ox = h20::onnx;

namespace {

using Values = SmallVector<Value>;

RankedTensorType resultType(Operation *op, unsigned i = 0) {
  return dyn_cast<RankedTensorType>(op->getResult(i).getType());
}

bool isFloat(Type t) { return isa<FloatType>(t); }

/// Integer values of a constant 1-D operand (axes, perm-like inputs).
std::optional<SmallVector<int64_t>> constInts(Value v) {
  DenseIntElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  SmallVector<int64_t> out;
  for (APInt x : attr.getValues<APInt>())
    out.push_back(x.getSExtValue());
  return out;
}

Value idx(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// Element `i` of a 1-D integer tensor as an index.
Value extractIndex(OpBuilder &b, Location loc, Value t, int64_t i) {
  Value e = tensor::ExtractOp::create(b, loc, t, ValueRange{idx(b, loc, i)});
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), e);
}

/// A 1-D index tensor of `dims` (for tensor.reshape).
Value shapeTensor(OpBuilder &b, Location loc, ArrayRef<Value> dims) {
  auto t = RankedTensorType::get({static_cast<int64_t>(dims.size())}, b.getIndexType());
  return tensor::FromElementsOp::create(b, loc, t, dims);
}

Value reshapeTo(OpBuilder &b, Location loc, Value x, RankedTensorType type,
                ArrayRef<Value> dims) {
  return tensor::ReshapeOp::create(b, loc, type, x, shapeTensor(b, loc, dims));
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

Value cmp(OpBuilder &b, Location loc, Value x, Value y, arith::CmpFPredicate fp,
          arith::CmpIPredicate ip) {
  if (isFloat(x.getType()))
    return arith::CmpFOp::create(b, loc, fp, x, y);
  return arith::CmpIOp::create(b, loc, ip, x, y);
}

/// ONNX Sign: 1 for x > 0, -1 for x < 0, else x itself (0, NaN).
Value signBody(OpBuilder &b, Location l, ValueRange a) {
  Value x = a[0];
  Type t = x.getType();
  Value one, minusOne, zero;
  if (isFloat(t)) {
    one = floatConst(b, l, t, 1.0);
    minusOne = floatConst(b, l, t, -1.0);
    zero = floatConst(b, l, t, 0.0);
  } else {
    one = arith::ConstantOp::create(b, l, t, b.getIntegerAttr(t, 1));
    minusOne = arith::ConstantOp::create(b, l, t, b.getIntegerAttr(t, -1));
    zero = arith::ConstantOp::create(b, l, t, b.getIntegerAttr(t, 0));
  }
  Value pos = cmp(b, l, x, zero, arith::CmpFPredicate::OGT, arith::CmpIPredicate::sgt);
  Value neg = cmp(b, l, x, zero, arith::CmpFPredicate::OLT, arith::CmpIPredicate::slt);
  return arith::SelectOp::create(b, l, pos, one,
                                 arith::SelectOp::create(b, l, neg, minusOne, x));
}

/// ONNX Mod. Floats (fmod = 1 only): C fmod, the sign of the dividend.
/// Integers: the remainder of truncating division (fmod = 1), moved into
/// the divisor's sign for fmod = 0 (Python's %). Divisors 0 and -1 divide
/// by 1 instead: x % -1 is 0 anyway, a remainder by 0 becomes 0 (ONNX
/// leaves it undefined, numpy gives 0), and neither traps the way x86's
/// idiv does on INT_MIN / -1 or on 0.
Value modBody(OpBuilder &b, Location l, Value x, Value y, bool fmod) {
  Type t = x.getType();
  if (isFloat(t))
    return arith::RemFOp::create(b, l, x, y);
  auto c = [&](int64_t v) { return arith::ConstantOp::create(b, l, t, b.getIntegerAttr(t, v)).getResult(); };
  Value zero = c(0), one = c(1);
  Value trapping = arith::OrIOp::create(
      b, l, arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, y, zero),
      arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, y, c(-1)));
  Value divisor = arith::SelectOp::create(b, l, trapping, one, y);
  Value r = arith::RemSIOp::create(b, l, x, divisor);
  if (fmod)
    return r;
  // r != 0 and sign(r) != sign(divisor): r + divisor.
  Value nonzero = arith::CmpIOp::create(b, l, arith::CmpIPredicate::ne, r, zero);
  Value rNeg = arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, r, zero);
  Value dNeg = arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, divisor, zero);
  Value differ = arith::XOrIOp::create(b, l, rNeg, dNeg);
  Value adjust = arith::AndIOp::create(b, l, nonzero, differ);
  return arith::SelectOp::create(b, l, adjust, arith::AddIOp::create(b, l, r, divisor), r);
}

/// ONNX Softplus, log(1 + exp(x)), in a stable form:
///   x > T ? x + log1p(exp(-x)) : log1p(exp(x))
/// (T = 20, 8 for float16: exp(x) stays finite below T). The naive form was
/// inf from x = 89 in float32; above T this one gives x (to rounding). Below
/// T it is the naive form bit for bit, which is accurate there (for x << 0,
/// exp(x) keeps its digits through log1p), and keeps the rounding of
/// existing graphs: DeepSeek-V4.1's router takes a top-k of sqrt(softplus)
/// scores with near ties, and max(x, 0) + log1p(exp(-|x|)) everywhere
/// flipped one (tiny model, S = 1000: 1.1e-2 from the reference instead of
/// 7.8e-7). -inf gives 0, inf gives inf, NaN stays NaN.
Value softplusBody(OpBuilder &b, Location l, ValueRange a) {
  Value x = a[0];
  Type t = x.getType();
  Value large = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGT, x,
                                      floatConst(b, l, t, t.isF16() ? 8.0 : 20.0));
  Value tail = math::Log1pOp::create(b, l, math::ExpOp::create(b, l, arith::NegFOp::create(b, l, x)));
  Value above = arith::AddFOp::create(b, l, x, tail);
  Value below = math::Log1pOp::create(b, l, math::ExpOp::create(b, l, x));
  return arith::SelectOp::create(b, l, large, above, below);
}

/// ONNX Gelu-20 (see OnnxOps.td): the erf form, or the tanh form when
/// `tanhForm`. Computed in the operand's dtype, as ONNX Runtime does.
Value geluBody(OpBuilder &b, Location l, Value x, bool tanhForm) {
  Type t = x.getType();
  auto c = [&](double v) { return floatConst(b, l, t, v); };
  Value inner;
  if (tanhForm) {
    Value x3 = arith::MulFOp::create(b, l, arith::MulFOp::create(b, l, x, x), x);
    Value poly = arith::AddFOp::create(b, l, x, arith::MulFOp::create(b, l, c(0.044715), x3));
    inner = math::TanhOp::create(b, l, arith::MulFOp::create(b, l, c(0.7978845608028654), poly));
  } else {
    inner = math::ErfOp::create(b, l, arith::MulFOp::create(b, l, x, c(0.7071067811865476)));
  }
  Value half = arith::MulFOp::create(b, l, c(0.5), x);
  return arith::MulFOp::create(b, l, half, arith::AddFOp::create(b, l, c(1.0), inner));
}

/// The scalar body of an elementwise onnx op, or null if it is not one.
std::optional<std::function<Value(OpBuilder &, Location, ValueRange)>>
elementwiseBody(Operation *op) {
  using Fn = std::function<Value(OpBuilder &, Location, ValueRange)>;
  auto fbin = [](auto fop, auto iop) -> Fn {
    return [=](OpBuilder &b, Location l, ValueRange a) -> Value {
      if (isFloat(a[0].getType()))
        return decltype(fop)::create(b, l, a[0], a[1]);
      return decltype(iop)::create(b, l, a[0], a[1]);
    };
  };
  Type out = cast<ShapedType>(op->getResult(0).getType()).getElementType();
  return llvm::TypeSwitch<Operation *, std::optional<Fn>>(op)
      .Case([&](ox::AddOp) { return fbin(arith::AddFOp(), arith::AddIOp()); })
      .Case([&](ox::SubOp) { return fbin(arith::SubFOp(), arith::SubIOp()); })
      .Case([&](ox::MulOp) { return fbin(arith::MulFOp(), arith::MulIOp()); })
      .Case([&](ox::DivOp) { return fbin(arith::DivFOp(), arith::DivSIOp()); })
      .Case([&](ox::AndOp) { return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value { return arith::AndIOp::create(b, l, a[0], a[1]); }); })
      .Case([&](ox::OrOp) { return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value { return arith::OrIOp::create(b, l, a[0], a[1]); }); })
      .Case([&](ox::EqualOp) { return Fn([](OpBuilder &b, Location l, ValueRange a) { return cmp(b, l, a[0], a[1], arith::CmpFPredicate::OEQ, arith::CmpIPredicate::eq); }); })
      .Case([&](ox::LessOp) { return Fn([](OpBuilder &b, Location l, ValueRange a) { return cmp(b, l, a[0], a[1], arith::CmpFPredicate::OLT, arith::CmpIPredicate::slt); }); })
      .Case([&](ox::LessOrEqualOp) { return Fn([](OpBuilder &b, Location l, ValueRange a) { return cmp(b, l, a[0], a[1], arith::CmpFPredicate::OLE, arith::CmpIPredicate::sle); }); })
      .Case([&](ox::GreaterOp) { return Fn([](OpBuilder &b, Location l, ValueRange a) { return cmp(b, l, a[0], a[1], arith::CmpFPredicate::OGT, arith::CmpIPredicate::sgt); }); })
      .Case([&](ox::GreaterOrEqualOp) { return Fn([](OpBuilder &b, Location l, ValueRange a) { return cmp(b, l, a[0], a[1], arith::CmpFPredicate::OGE, arith::CmpIPredicate::sge); }); })
      .Case<ox::MaxOp, ox::MinOp>([&](Operation *o) {
        bool isMax = isa<ox::MaxOp>(o);
        return Fn([isMax](OpBuilder &b, Location l, ValueRange a) {
          Value m = a[0];
          for (Value x : a.drop_front()) {
            if (isFloat(m.getType()))
              m = isMax ? arith::MaximumFOp::create(b, l, m, x).getResult()
                        : arith::MinimumFOp::create(b, l, m, x).getResult();
            else
              m = isMax ? arith::MaxSIOp::create(b, l, m, x).getResult()
                        : arith::MinSIOp::create(b, l, m, x).getResult();
          }
          return m;
        });
      })
      .Case([&](ox::SumOp) {
        return Fn([](OpBuilder &b, Location l, ValueRange a) {
          Value m = a[0];
          for (Value x : a.drop_front())
            m = isFloat(m.getType()) ? arith::AddFOp::create(b, l, m, x).getResult()
                                     : arith::AddIOp::create(b, l, m, x).getResult();
          return m;
        });
      })
      .Case([&](ox::PowOp) {
        return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value y = castScalar(b, l, a[1], a[0].getType());
          return math::PowFOp::create(b, l, a[0], y);
        });
      })
      .Case([&](ox::WhereOp) { return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value { return arith::SelectOp::create(b, l, a[0], a[1], a[2]); }); })
      .Case([&](ox::NegOp) {
        return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value {
          if (isFloat(a[0].getType()))
            return arith::NegFOp::create(b, l, a[0]);
          Value z = arith::ConstantOp::create(b, l, a[0].getType(), b.getIntegerAttr(a[0].getType(), 0));
          return arith::SubIOp::create(b, l, z, a[0]);
        });
      })
      .Case([&](ox::AbsOp) {
        return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value {
          if (isFloat(a[0].getType()))
            return math::AbsFOp::create(b, l, a[0]);
          return math::AbsIOp::create(b, l, a[0]);
        });
      })
      .Case([&](ox::NotOp) {
        return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value {
          return arith::XOrIOp::create(b, l, a[0], arith::ConstantIntOp::create(b, l, 1, 1));
        });
      })
      .Case([&](ox::SqrtOp) { return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value { return math::SqrtOp::create(b, l, a[0]); }); })
      .Case([&](ox::ExpOp) { return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value { return math::ExpOp::create(b, l, a[0]); }); })
      .Case([&](ox::LogOp) { return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value { return math::LogOp::create(b, l, a[0]); }); })
      .Case([&](ox::SinOp) { return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value { return math::SinOp::create(b, l, a[0]); }); })
      .Case([&](ox::CosOp) { return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value { return math::CosOp::create(b, l, a[0]); }); })
      .Case([&](ox::TanhOp) { return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value { return math::TanhOp::create(b, l, a[0]); }); })
      .Case([&](ox::ErfOp) { return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value { return math::ErfOp::create(b, l, a[0]); }); })
      .Case([&](ox::ReciprocalOp) {
        return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value {
          return arith::DivFOp::create(b, l, floatConst(b, l, a[0].getType(), 1.0), a[0]);
        });
      })
      .Case([&](ox::SigmoidOp) {
        // 1 / (1 + exp(-x))
        return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value {
          Type t = a[0].getType();
          Value e = math::ExpOp::create(b, l, arith::NegFOp::create(b, l, a[0]));
          return arith::DivFOp::create(b, l, floatConst(b, l, t, 1.0),
                                       arith::AddFOp::create(b, l, floatConst(b, l, t, 1.0), e));
        });
      })
      .Case([&](ox::SoftplusOp) { return Fn(softplusBody); })
      .Case([&](ox::GeluOp g) {
        bool tanhForm = g.getApproximate() && *g.getApproximate() == "tanh";
        return Fn([tanhForm](OpBuilder &b, Location l, ValueRange a) { return geluBody(b, l, a[0], tanhForm); });
      })
      .Case([&](ox::ReluOp) {
        return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value {
          if (isFloat(a[0].getType()))
            return arith::MaximumFOp::create(b, l, a[0], floatConst(b, l, a[0].getType(), 0.0));
          Value z = arith::ConstantOp::create(b, l, a[0].getType(), b.getIntegerAttr(a[0].getType(), 0));
          return arith::MaxSIOp::create(b, l, a[0], z);
        });
      })
      .Case([&](ox::IsNaNOp) {
        return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value {
          return arith::CmpFOp::create(b, l, arith::CmpFPredicate::UNO, a[0], a[0]);
        });
      })
      .Case([&](ox::CastOp) {
        return Fn([out](OpBuilder &b, Location l, ValueRange a) { return castScalar(b, l, a[0], out); });
      })
      .Case([&](ox::IdentityOp) { return Fn([](OpBuilder &, Location, ValueRange a) { return a[0]; }); })
      // Rounding: integral inputs are returned unchanged (ONNX Round).
      .Case([&](ox::RoundOp) { return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value { return isFloat(a[0].getType()) ? math::RoundEvenOp::create(b, l, a[0]).getResult() : a[0]; }); })
      .Case([&](ox::FloorOp) { return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value { return isFloat(a[0].getType()) ? math::FloorOp::create(b, l, a[0]).getResult() : a[0]; }); })
      .Case([&](ox::CeilOp) { return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value { return isFloat(a[0].getType()) ? math::CeilOp::create(b, l, a[0]).getResult() : a[0]; }); })
      .Case([&](ox::SignOp) { return Fn(signBody); })
      .Case([&](ox::ModOp m) {
        bool fmod = m.getFmod().value_or(0) != 0;
        return Fn([fmod](OpBuilder &b, Location l, ValueRange a) { return modBody(b, l, a[0], a[1], fmod); });
      })
      .Case([&](ox::BitwiseAndOp) { return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value { return arith::AndIOp::create(b, l, a[0], a[1]); }); })
      .Case([&](ox::BitwiseOrOp) { return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value { return arith::OrIOp::create(b, l, a[0], a[1]); }); })
      .Case([&](ox::BitwiseXorOp) { return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value { return arith::XOrIOp::create(b, l, a[0], a[1]); }); })
      .Case([&](ox::BitwiseNotOp) {
        return Fn([](OpBuilder &b, Location l, ValueRange a) -> Value {
          Type t = a[0].getType();
          Value ones = arith::ConstantOp::create(b, l, t, b.getIntegerAttr(t, -1));
          return arith::XOrIOp::create(b, l, a[0], ones);
        });
      })
      .Default([](Operation *) { return std::nullopt; });
}

//===----------------------------------------------------------------------===//
// Structured ops
//===----------------------------------------------------------------------===//

/// `libraryCalls`: the GPU target's form, whose GEMMs become cuBLASLt calls
/// (float32 accumulation inside the library): one generic of the result's
/// dtype, which the GPU target matches as a GEMM. A float32 result of
/// 16-bit operands (attn.rms_scale's value) is a GEMM that stores its
/// float32 sums.
FailureOr<Values> lowerMatMul(OpBuilder &b, Operation *op, bool libraryCalls) {
  Location loc = op->getLoc();
  Value a = op->getOperand(0), c = op->getOperand(1);
  auto at = cast<RankedTensorType>(a.getType()), bt = cast<RankedTensorType>(c.getType());
  auto rt = resultType(op);
  if (at.getRank() < 2 || bt.getRank() < 2 || !rt)
    return unsupported(op, "MatMul with a 1-D operand is not lowered");
  int64_t r = rt.getRank(), batch = r - 2;
  MLIRContext *ctx = b.getContext();
  // Loop dims: batch..., m, n, k.
  auto d = [&](int64_t i) { return getAffineDimExpr(i, ctx); };
  auto operandMap = [&](RankedTensorType t, AffineExpr rowD, AffineExpr colD, int64_t bdims,
                        Value v, SmallVector<Value> &dims) {
    SmallVector<AffineExpr> e;
    for (int64_t k = 0; k < bdims; ++k) {
      int64_t outK = k + (batch - bdims);
      bool unit = t.getDimSize(k) == 1 && rt.getDimSize(outK) != 1;
      e.push_back(unit ? getAffineConstantExpr(0, ctx) : d(outK));
      if (!unit && !dims[outK])
        dims[outK] = dimOf(b, loc, v, k);
    }
    e.push_back(rowD);
    e.push_back(colD);
    return AffineMap::get(r + 1, 0, e, ctx);
  };
  SmallVector<Value> dims(r);
  AffineMap am = operandMap(at, d(batch), d(r), at.getRank() - 2, a, dims);
  AffineMap bm = operandMap(bt, d(r), d(batch + 1), bt.getRank() - 2, c, dims);
  for (int64_t k = 0; k < batch; ++k)
    if (!dims[k])
      dims[k] = idx(b, loc, 1);
  dims[batch] = dimOf(b, loc, a, at.getRank() - 2);
  dims[batch + 1] = dimOf(b, loc, c, bt.getRank() - 1);
  SmallVector<AffineExpr> oe;
  for (int64_t k = 0; k < r; ++k)
    oe.push_back(d(k));
  Type elt = rt.getElementType();
  // Operands narrower than the result (float32 sums of 16-bit operands)
  // are extended in the body; a result narrower than its operands has no
  // GEMM form.
  for (Value v : {a, c})
    if (getElementTypeOrSelf(v.getType()) != elt &&
        (!isFloat(elt) || !isFloat(getElementTypeOrSelf(v.getType())) ||
         getElementTypeOrSelf(v.getType()).getIntOrFloatBitWidth() >= elt.getIntOrFloatBitWidth()))
      return unsupported(op, "MatMul whose result type is not its operands' or wider floats");
  // 16-bit floats accumulate in float32 and round once at the end, as
  // cuBLASLt and PyTorch do: a bf16 accumulator rounds at every one of the
  // K steps (measured: 3x PyTorch bf16's distance from float32 on a tiny
  // Llama export). A result wider than the operands (16-bit operands,
  // float32 sums kept: h20-norm-scale-after-matmul's narrow GEMMs) is
  // that accumulator itself.
  bool wide = !libraryCalls && isFloat(elt) && elt.getIntOrFloatBitWidth() < 32;
  Type acc = wide ? b.getF32Type() : elt;
  auto widen = [&](OpBuilder &nb, Location nl, Value v) -> Value {
    return v.getType() == acc ? v : arith::ExtFOp::create(nb, nl, acc, v).getResult();
  };
  auto accType = RankedTensorType::get(rt.getShape(), acc);
  Value zero = isFloat(acc) ? floatConst(b, loc, acc, 0.0)
                            : arith::ConstantOp::create(b, loc, acc, b.getIntegerAttr(acc, 0)).getResult();
  Value init = filledTensor(b, loc, accType, dims, zero);
  SmallVector<utils::IteratorType> it = parallel(r);
  it.push_back(utils::IteratorType::reduction);
  Value product = linalg::GenericOp::create(
                      b, loc, TypeRange{accType}, ValueRange{a, c}, ValueRange{init},
                      {am, bm, AffineMap::get(r + 1, 0, oe, ctx)}, it,
                      [&](OpBuilder &nb, Location nl, ValueRange x) {
                        Value p, s;
                        if (isFloat(acc)) {
                          p = arith::MulFOp::create(nb, nl, widen(nb, nl, x[0]),
                                                    widen(nb, nl, x[1]));
                          s = arith::AddFOp::create(nb, nl, x[2], p);
                        } else {
                          p = arith::MulIOp::create(nb, nl, x[0], x[1]);
                          s = arith::AddIOp::create(nb, nl, x[2], p);
                        }
                        linalg::YieldOp::create(nb, nl, s);
                      })
                      .getResult(0);
  if (!wide)
    return Values{product};
  // Round the float32 sums to the result's dtype.
  Value out = emptyTensor(b, loc, rt, dims);
  AffineMap id = AffineMap::getMultiDimIdentityMap(r, ctx);
  return Values{linalg::GenericOp::create(
                    b, loc, TypeRange{rt}, ValueRange{product}, ValueRange{out}, {id, id},
                    parallel(r),
                    [&](OpBuilder &nb, Location nl, ValueRange x) {
                      linalg::YieldOp::create(nb, nl, arith::TruncFOp::create(nb, nl, elt, x[0]).getResult());
                    })
                    .getResult(0)};
}

FailureOr<Values> lowerGather(OpBuilder &b, ox::GatherOp op) {
  Location loc = op.getLoc();
  Value data = op->getOperand(0), ind = op->getOperand(1);
  auto dt = cast<RankedTensorType>(data.getType()), it = cast<RankedTensorType>(ind.getType());
  auto rt = resultType(op);
  int64_t axis = op.getAxis().value_or(0);
  if (axis < 0)
    axis += dt.getRank();
  int64_t q = it.getRank(), r = rt.getRank();
  MLIRContext *ctx = b.getContext();
  SmallVector<Value> dims;
  for (int64_t k = 0; k < axis; ++k)
    dims.push_back(dimOf(b, loc, data, k));
  for (int64_t k = 0; k < q; ++k)
    dims.push_back(dimOf(b, loc, ind, k));
  for (int64_t k = axis + 1; k < dt.getRank(); ++k)
    dims.push_back(dimOf(b, loc, data, k));
  SmallVector<AffineExpr> ie;
  for (int64_t k = 0; k < q; ++k)
    ie.push_back(getAffineDimExpr(axis + k, ctx));
  Value axisDim = dimOf(b, loc, data, axis);
  Value init = emptyTensor(b, loc, rt, dims);
  return Values{linalg::GenericOp::create(
                    b, loc, TypeRange{rt}, ValueRange{ind}, ValueRange{init},
                    {AffineMap::get(r, 0, ie, ctx), AffineMap::getMultiDimIdentityMap(r, ctx)},
                    parallel(r),
                    [&](OpBuilder &nb, Location nl, ValueRange x) {
                      Value i = arith::IndexCastOp::create(nb, nl, nb.getIndexType(), x[0]);
                      // Negative indices count from the end (ONNX Gather).
                      Value neg = arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::slt, i, idx(nb, nl, 0));
                      i = arith::SelectOp::create(nb, nl, neg, arith::AddIOp::create(nb, nl, i, axisDim), i);
                      // ONNX leaves out-of-range indices undefined; h20-run
                      // rejects bad token ids first, and a clamp keeps any
                      // other index inside the tensor (never a wild read).
                      Value last = arith::SubIOp::create(nb, nl, axisDim, idx(nb, nl, 1));
                      i = arith::MaxSIOp::create(nb, nl, arith::MinSIOp::create(nb, nl, i, last),
                                                 idx(nb, nl, 0));
                      SmallVector<Value> at;
                      for (int64_t k = 0; k < axis; ++k)
                        at.push_back(linalg::IndexOp::create(nb, nl, k));
                      at.push_back(i);
                      for (int64_t k = axis + 1; k < dt.getRank(); ++k)
                        at.push_back(linalg::IndexOp::create(nb, nl, k - 1 + q));
                      linalg::YieldOp::create(nb, nl, ValueRange{tensor::ExtractOp::create(nb, nl, data, at)});
                    })
                    .getResult(0)};
}

FailureOr<Values> lowerReshape(OpBuilder &b, Operation *op) {
  Location loc = op->getLoc();
  Value x = op->getOperand(0), shape = op->getOperand(1);
  auto xt = cast<RankedTensorType>(x.getType());
  auto rt = resultType(op);
  bool allowZero = false;
  if (auto a = op->getAttrOfType<IntegerAttr>("allowzero"))
    allowZero = a.getInt() != 0;
  Value total = idx(b, loc, 1);
  for (int64_t k = 0; k < xt.getRank(); ++k)
    total = arith::MulIOp::create(b, loc, total, dimOf(b, loc, x, k));
  SmallVector<Value> dims;
  Value known = idx(b, loc, 1);
  int64_t infer = -1;
  auto constant = constInts(shape);
  for (int64_t k = 0; k < rt.getRank(); ++k) {
    if (!rt.isDynamicDim(k)) {
      dims.push_back(idx(b, loc, rt.getDimSize(k)));
    } else if (constant && (*constant)[k] == -1) {
      infer = k;
      dims.push_back(Value());
      continue;
    } else if (constant && (*constant)[k] == 0 && !allowZero) {
      dims.push_back(dimOf(b, loc, x, k));
    } else if (constant) {
      dims.push_back(idx(b, loc, (*constant)[k]));
    } else {
      // A computed shape: ONNX 0 / -1 handled at run time is not modelled.
      dims.push_back(extractIndex(b, loc, shape, k));
    }
    known = arith::MulIOp::create(b, loc, known, dims.back());
  }
  if (infer >= 0)
    dims[infer] = arith::DivUIOp::create(b, loc, total, known);
  return Values{reshapeTo(b, loc, x, rt, dims)};
}

FailureOr<Values> lowerUnsqueezeSqueeze(OpBuilder &b, Operation *op) {
  Location loc = op->getLoc();
  Value x = op->getOperand(0);
  auto xt = cast<RankedTensorType>(x.getType());
  auto rt = resultType(op);
  std::optional<SmallVector<int64_t>> axes;
  if (op->getNumOperands() > 1 && !isa<NoneType>(op->getOperand(1).getType())) {
    axes = constInts(op->getOperand(1));
    if (!axes)
      return unsupported(op, "axes must be constant");
  }
  SmallVector<Value> dims;
  if (isa<ox::UnsqueezeOp>(op)) {
    int64_t outRank = rt.getRank();
    SmallVector<bool> inserted(outRank, false);
    for (int64_t a : *axes)
      inserted[a < 0 ? a + outRank : a] = true;
    for (int64_t k = 0, j = 0; k < outRank; ++k)
      dims.push_back(inserted[k] ? idx(b, loc, 1) : dimOf(b, loc, x, j++));
  } else {
    SmallVector<bool> removed(xt.getRank(), false);
    if (axes)
      for (int64_t a : *axes)
        removed[a < 0 ? a + xt.getRank() : a] = true;
    else
      for (int64_t k = 0; k < xt.getRank(); ++k)
        removed[k] = xt.getDimSize(k) == 1;
    for (int64_t k = 0; k < xt.getRank(); ++k)
      if (!removed[k])
        dims.push_back(dimOf(b, loc, x, k));
  }
  if (static_cast<int64_t>(dims.size()) != rt.getRank())
    return unsupported(op, "result rank does not match the axes");
  return Values{reshapeTo(b, loc, x, rt, dims)};
}

FailureOr<Values> lowerShape(OpBuilder &b, ox::ShapeOp op) {
  Location loc = op.getLoc();
  Value x = op->getOperand(0);
  int64_t r = cast<RankedTensorType>(x.getType()).getRank();
  int64_t start = op.getStart().value_or(0), end = op.getEnd().value_or(r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, start, r);
  SmallVector<Value> elems;
  for (int64_t k = start; k < end; ++k)
    elems.push_back(arith::IndexCastOp::create(b, loc, b.getI64Type(), dimOf(b, loc, x, k)));
  auto t = RankedTensorType::get({end - start}, b.getI64Type());
  return Values{tensor::FromElementsOp::create(b, loc, t, elems)};
}

/// ONNX Range-11 (https://onnx.ai/onnx/operators/onnx__Range.html): start,
/// limit and delta 0-d tensors of one type (float, double, int16/32/64),
/// read at run time; delta may be negative or fractional (0 is invalid).
/// output: 1-D, n = max(ceil((limit - start) / delta), 0) elements
/// start + i * delta. For floats, limit - start is taken in the type and
/// divided in double, as ONNX Runtime does (so both agree on n where the
/// quotient sits at an integer); integers divide exactly (ceildiv).
FailureOr<Values> lowerRange(OpBuilder &b, Operation *op) {
  Location loc = op->getLoc();
  auto rt = resultType(op);
  Type elt = rt.getElementType();
  auto scalar = [&](unsigned i) { return tensor::ExtractOp::create(b, loc, op->getOperand(i), ValueRange{}).getResult(); };
  Value start = scalar(0), limit = scalar(1), delta = scalar(2);
  // n = max(ceil((limit - start) / delta), 0)
  Value n;
  if (isFloat(elt)) {
    Type f64 = b.getF64Type();
    Value diff = castScalar(b, loc, arith::SubFOp::create(b, loc, limit, start), f64);
    Value q = arith::DivFOp::create(b, loc, diff, castScalar(b, loc, delta, f64));
    Value c = math::CeilOp::create(b, loc, q);
    n = arith::FPToSIOp::create(b, loc, b.getI64Type(), c);
  } else {
    n = arith::CeilDivSIOp::create(b, loc, arith::SubIOp::create(b, loc, limit, start), delta);
    n = castScalar(b, loc, n, b.getI64Type());
  }
  n = arith::MaxSIOp::create(b, loc, n, arith::ConstantIntOp::create(b, loc, b.getI64Type(), 0));
  Value len = arith::IndexCastOp::create(b, loc, b.getIndexType(), n);
  Value init = emptyTensor(b, loc, rt, {len});
  MLIRContext *ctx = b.getContext();
  return Values{linalg::GenericOp::create(
                    b, loc, TypeRange{rt}, ValueRange{}, ValueRange{init},
                    {AffineMap::getMultiDimIdentityMap(1, ctx)}, parallel(1),
                    [&](OpBuilder &nb, Location nl, ValueRange) {
                      Value i = linalg::IndexOp::create(nb, nl, 0);
                      Value iv = castScalar(nb, nl, arith::IndexCastOp::create(nb, nl, nb.getI64Type(), i), elt);
                      Value v = isFloat(elt)
                                    ? arith::AddFOp::create(nb, nl, start, arith::MulFOp::create(nb, nl, iv, delta)).getResult()
                                    : arith::AddIOp::create(nb, nl, start, arith::MulIOp::create(nb, nl, iv, delta)).getResult();
                      linalg::YieldOp::create(nb, nl, v);
                    })
                    .getResult(0)};
}

FailureOr<Values> lowerConcat(OpBuilder &b, ox::ConcatOp op) {
  Location loc = op.getLoc();
  auto rt = resultType(op);
  int64_t r = rt.getRank(), axis = op.getAxis() < 0 ? op.getAxis() + r : op.getAxis();
  SmallVector<Value> dims;
  for (int64_t k = 0; k < r; ++k)
    dims.push_back(k == axis ? Value() : dimOf(b, loc, op->getOperand(0), k));
  Value total = idx(b, loc, 0);
  for (Value in : op->getOperands())
    total = arith::AddIOp::create(b, loc, total, dimOf(b, loc, in, axis));
  dims[axis] = total;
  Value acc = emptyTensor(b, loc, rt, dims);
  Value offset = idx(b, loc, 0);
  for (Value in : op->getOperands()) {
    SmallVector<OpFoldResult> offsets(r, b.getIndexAttr(0)), sizes, strides(r, b.getIndexAttr(1));
    offsets[axis] = offset;
    // Static sizes as attributes: insert_slice checks the source type
    // against them.
    for (int64_t k = 0; k < r; ++k)
      sizes.push_back(tensor::getMixedSize(b, loc, in, k));
    acc = tensor::InsertSliceOp::create(b, loc, in, acc, offsets, sizes, strides);
    offset = arith::AddIOp::create(b, loc, offset, dimOf(b, loc, in, axis));
  }
  return Values{acc};
}

/// Start and length (i64) of one sliced axis of size `dim` (i64), per ONNX
/// Slice-13: a negative start or end counts from the end (+ dim); with
/// step > 0 both are clamped to [0, dim], with step < 0 start is clamped to
/// [0, dim - 1] and end to [-1, dim - 1] (-1: up to and including element
/// 0); length = max(ceil((end - start) / step), 0). The INT64 sentinels
/// (INT64_MAX, INT64_MIN, -INT64_MAX) clamp without overflow: only negative
/// bounds get dim (>= 0) added, and the clamped ones differ by <= dim + 1.
std::pair<Value, Value> sliceAxis(OpBuilder &b, Location loc, Value start, Value end, Value dim,
                                  int64_t step) {
  auto i64 = b.getI64Type();
  auto c64 = [&](int64_t v) { return arith::ConstantIntOp::create(b, loc, i64, v).getResult(); };
  auto clamp = [&](Value v, Value lo, Value hi) {
    Value neg = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, v, c64(0));
    v = arith::SelectOp::create(b, loc, neg, arith::AddIOp::create(b, loc, v, dim), v);
    return arith::MinSIOp::create(b, loc, arith::MaxSIOp::create(b, loc, v, lo), hi).getResult();
  };
  Value last = arith::SubIOp::create(b, loc, dim, c64(1));
  Value s = step > 0 ? clamp(start, c64(0), dim) : clamp(start, c64(0), last);
  Value e = step > 0 ? clamp(end, c64(0), dim) : clamp(end, c64(-1), last);
  Value len = arith::MaxSIOp::create(
      b, loc, arith::CeilDivSIOp::create(b, loc, arith::SubIOp::create(b, loc, e, s), c64(step)),
      c64(0));
  return {s, len};
}

/// A slice with some negative step as a gather: out[i] = x[start + i * step]
/// per dim (start null and step 1 on the dims not sliced: x[i]). One
/// parallel generic; extract_slice takes no negative strides.
Value sliceByGather(OpBuilder &b, Location loc, Value x, RankedTensorType rt,
                    ArrayRef<Value> starts, ArrayRef<int64_t> steps, ArrayRef<Value> sizes) {
  int64_t r = rt.getRank();
  Value init = emptyTensor(b, loc, rt, sizes);
  AffineMap id = AffineMap::getMultiDimIdentityMap(r, b.getContext());
  return linalg::GenericOp::create(
             b, loc, TypeRange{rt}, ValueRange{}, ValueRange{init}, {id}, parallel(r),
             [&](OpBuilder &nb, Location nl, ValueRange) {
               SmallVector<Value> at;
               for (int64_t k = 0; k < r; ++k) {
                 Value i = linalg::IndexOp::create(nb, nl, k);
                 if (steps[k] != 1)
                   i = arith::MulIOp::create(nb, nl, i, idx(nb, nl, steps[k]));
                 if (starts[k])
                   i = arith::AddIOp::create(nb, nl, starts[k], i);
                 at.push_back(i);
               }
               linalg::YieldOp::create(nb, nl, ValueRange{tensor::ExtractOp::create(nb, nl, x, at)});
             })
      .getResult(0);
}

/// ONNX Slice-13 (https://onnx.ai/onnx/operators/onnx__Slice.html): data of
/// any rank and dtype; starts and ends 1-D int32/int64 (constant or computed
/// at run time), axes (default 0..n-1, negative counts from the back) and
/// steps (default 1; any non-zero value) constant. Bounds follow sliceAxis.
/// Positive steps only: one tensor.extract_slice (a strided view); with a
/// negative step, a gather generic (sliceByGather).
FailureOr<Values> lowerSlice(OpBuilder &b, ox::SliceOp op) {
  Location loc = op.getLoc();
  Value x = op->getOperand(0);
  auto xt = cast<RankedTensorType>(x.getType());
  auto rt = resultType(op);
  int64_t r = xt.getRank();
  auto present = [&](unsigned i) {
    return op->getNumOperands() > i && !isa<NoneType>(op->getOperand(i).getType());
  };
  int64_t n = cast<RankedTensorType>(op->getOperand(1).getType()).getDimSize(0);
  SmallVector<int64_t> axes, steps(n, 1);
  if (present(3)) {
    auto a = constInts(op->getOperand(3));
    if (!a)
      return unsupported(op, "axes must be constant");
    axes = *a;
  } else {
    for (int64_t i = 0; i < n; ++i)
      axes.push_back(i);
  }
  if (present(4)) {
    auto s = constInts(op->getOperand(4));
    if (!s)
      return unsupported(op, "steps must be constant");
    steps = *s;
  }
  if (static_cast<int64_t>(axes.size()) != n || static_cast<int64_t>(steps.size()) != n)
    return unsupported(op, "starts, ends, axes and steps must have one length");
  SmallVector<Value> offsets(r), sizes; // offsets: null on the dims not sliced
  SmallVector<int64_t> strides(r, 1);
  for (int64_t k = 0; k < r; ++k)
    sizes.push_back(dimOf(b, loc, x, k));
  auto i64 = b.getI64Type();
  auto bound = [&](unsigned operand, int64_t i) {
    return castScalar(b, loc, tensor::ExtractOp::create(b, loc, op->getOperand(operand), ValueRange{idx(b, loc, i)}), i64);
  };
  for (int64_t i = 0; i < n; ++i) {
    int64_t ax = axes[i] < 0 ? axes[i] + r : axes[i];
    if (ax < 0 || ax >= r)
      return unsupported(op, "axis " + std::to_string(axes[i]) + " is outside the data's rank");
    if (steps[i] == 0)
      return unsupported(op, "a step of 0 is invalid");
    Value dim = arith::IndexCastOp::create(b, loc, i64, sizes[ax]);
    auto [s, len] = sliceAxis(b, loc, bound(1, i), bound(2, i), dim, steps[i]);
    offsets[ax] = arith::IndexCastOp::create(b, loc, b.getIndexType(), s);
    sizes[ax] = arith::IndexCastOp::create(b, loc, b.getIndexType(), len);
    strides[ax] = steps[i];
  }
  if (llvm::any_of(strides, [](int64_t s) { return s < 0; }))
    return Values{sliceByGather(b, loc, x, rt, offsets, strides, sizes)};
  // Sizes the result type fixes are given as attributes, as extract_slice
  // derives its result type from them.
  SmallVector<OpFoldResult> offs, sz, st;
  for (int64_t k = 0; k < r; ++k) {
    offs.push_back(offsets[k] ? OpFoldResult(offsets[k]) : b.getIndexAttr(0));
    sz.push_back(rt.isDynamicDim(k) ? OpFoldResult(sizes[k]) : b.getIndexAttr(rt.getDimSize(k)));
    st.push_back(b.getIndexAttr(strides[k]));
  }
  return Values{tensor::ExtractSliceOp::create(b, loc, rt, x, offs, sz, st)};
}

/// Split: one extract_slice per output along the axis, sized by the
/// `split` input, else equal shares of ceil(d / n), the last output what
/// remains (ONNX Split-18).
FailureOr<Values> lowerSplit(OpBuilder &b, ox::SplitOp op) {
  Location loc = op.getLoc();
  Value x = op->getOperand(0);
  auto xt = cast<RankedTensorType>(x.getType());
  int64_t r = xt.getRank(), axis = op.getAxis().value_or(0);
  if (axis < 0)
    axis += r;
  if (axis < 0 || axis >= r)
    return unsupported(op, "axis is out of range");
  unsigned n = op->getNumResults();
  Value dim = dimOf(b, loc, x, axis);
  SmallVector<Value> sizes;
  if (op->getNumOperands() > 1 && !isa<NoneType>(op->getOperand(1).getType())) {
    auto st = dyn_cast<RankedTensorType>(op->getOperand(1).getType());
    // A statically known length: the sizes are read without a bounds check.
    if (!st || st.getRank() != 1 || st.isDynamicDim(0) || st.getDimSize(0) != n)
      return unsupported(op, "split must be a 1-D tensor of static length, one size per output");
    for (unsigned i = 0; i < n; ++i)
      sizes.push_back(extractIndex(b, loc, op->getOperand(1), i));
  } else {
    Value chunk = arith::CeilDivUIOp::create(b, loc, dim, idx(b, loc, n));
    for (unsigned i = 0; i < n; ++i) {
      Value start = arith::MinUIOp::create(
          b, loc, arith::MulIOp::create(b, loc, chunk, idx(b, loc, i)), dim);
      sizes.push_back(arith::MinUIOp::create(b, loc, chunk,
                                             arith::SubIOp::create(b, loc, dim, start)));
    }
  }
  Values results;
  Value offset = idx(b, loc, 0);
  for (unsigned i = 0; i < n; ++i) {
    auto rt = resultType(op, i);
    SmallVector<OpFoldResult> offsets(r, b.getIndexAttr(0)), sz, strides(r, b.getIndexAttr(1));
    offsets[axis] = offset;
    for (int64_t k = 0; k < r; ++k) {
      if (!rt.isDynamicDim(k))
        sz.push_back(b.getIndexAttr(rt.getDimSize(k)));
      else
        sz.push_back(k == axis ? sizes[i] : dimOf(b, loc, x, k));
    }
    results.push_back(tensor::ExtractSliceOp::create(b, loc, rt, x, offsets, sz, strides));
    offset = arith::AddIOp::create(b, loc, offset, sizes[i]);
  }
  return results;
}

FailureOr<Values> lowerExpand(OpBuilder &b, Operation *op) {
  Location loc = op->getLoc();
  auto rt = resultType(op);
  Value x = op->getOperand(0), shape = op->getOperand(1);
  auto xt = cast<RankedTensorType>(x.getType());
  int64_t r = rt.getRank(), off = r - xt.getRank();
  SmallVector<Value> dims;
  for (int64_t k = 0; k < r; ++k) {
    if (!rt.isDynamicDim(k)) {
      dims.push_back(idx(b, loc, rt.getDimSize(k)));
      continue;
    }
    Value s = extractIndex(b, loc, shape, k);
    if (k >= off) { // max(shape_k, x_k): 1 in either broadcasts
      Value xd = dimOf(b, loc, x, k - off);
      s = arith::MaxUIOp::create(b, loc, s, xd);
    }
    dims.push_back(s);
  }
  return Values{elementwise(b, loc, rt, ValueRange{x},
                            [](OpBuilder &, Location, ValueRange a) { return a[0]; }, dims)};
}

/// Reductions over constant axes: sum, mean and max.
FailureOr<Values> lowerReduce(OpBuilder &b, Operation *op) {
  Location loc = op->getLoc();
  Value x = op->getOperand(0);
  auto xt = cast<RankedTensorType>(x.getType());
  auto rt = resultType(op);
  int64_t r = xt.getRank();
  std::optional<SmallVector<int64_t>> axes = SmallVector<int64_t>();
  if (op->getNumOperands() > 1 && !isa<NoneType>(op->getOperand(1).getType()))
    axes = constInts(op->getOperand(1));
  else if (auto a = op->getAttrOfType<DenseI64ArrayAttr>("axes"))
    axes = SmallVector<int64_t>(a.asArrayRef());
  if (!axes)
    return unsupported(op, "reduction axes must be constant");
  SmallVector<bool> red(r, false);
  if (axes->empty()) {
    // ONNX Reduce*-18: no or empty axes reduce every axis, unless
    // noop_with_empty_axes = 1, which makes the op an identity.
    auto noop = op->getAttrOfType<IntegerAttr>("noop_with_empty_axes");
    if (noop && noop.getInt() != 0)
      return Values{rt == xt ? x : tensor::CastOp::create(b, loc, rt, x).getResult()};
    red.assign(r, true);
  }
  for (int64_t a : *axes) {
    if (a < -r || a >= r)
      return unsupported(op, "reduction axis " + std::to_string(a) + " is outside [" +
                                 std::to_string(-r) + ", " + std::to_string(r) + ") for a rank-" +
                                 std::to_string(r) + " input");
    red[a < 0 ? a + r : a] = true;
  }
  bool keep = true;
  if (auto k = op->getAttrOfType<IntegerAttr>("keepdims"))
    keep = k.getInt() != 0;
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineExpr> oe;
  SmallVector<Value> dims;
  SmallVector<int64_t> accShape;
  Value count = idx(b, loc, 1);
  for (int64_t k = 0; k < r; ++k) {
    if (red[k]) {
      count = arith::MulIOp::create(b, loc, count, dimOf(b, loc, x, k));
      continue;
    }
    oe.push_back(getAffineDimExpr(k, ctx));
    dims.push_back(dimOf(b, loc, x, k));
    accShape.push_back(xt.getDimSize(k));
  }
  Type elt = rt.getElementType();
  if (!isFloat(elt))
    return unsupported(op, "integer reductions are not lowered");
  bool isMax = isa<ox::ReduceMaxOp>(op), isMean = isa<ox::ReduceMeanOp>(op);
  // Sums accumulate in float32 for 16-bit inputs (what "accumulation is
  // float32" in h20-compute-type promises); the result is rounded once.
  Type ct = isMax ? elt : computeTypeFor(elt);
  Value init0 = floatConst(b, loc, ct, isMax ? -std::numeric_limits<double>::infinity() : 0.0);
  auto accType = RankedTensorType::get(accShape, ct);
  Value acc = filledTensor(b, loc, accType, dims, init0);
  SmallVector<utils::IteratorType> it;
  for (bool x2 : red)
    it.push_back(x2 ? utils::IteratorType::reduction : utils::IteratorType::parallel);
  Value res = linalg::GenericOp::create(
                  b, loc, TypeRange{accType}, ValueRange{x}, ValueRange{acc},
                  {AffineMap::getMultiDimIdentityMap(r, ctx), AffineMap::get(r, 0, oe, ctx)}, it,
                  [&](OpBuilder &nb, Location nl, ValueRange a) {
                    Value x0 = castScalar(nb, nl, a[0], ct);
                    Value v = isMax ? arith::MaximumFOp::create(nb, nl, x0, a[1]).getResult()
                                    : arith::AddFOp::create(nb, nl, x0, a[1]).getResult();
                    linalg::YieldOp::create(nb, nl, v);
                  })
                  .getResult(0);
  auto outType = RankedTensorType::get(accShape, elt);
  Value cnt;
  if (isMean)
    cnt = arith::SIToFPOp::create(b, loc, ct, arith::IndexCastOp::create(b, loc, b.getI64Type(), count));
  if (isMean || ct != elt)
    res = elementwise(b, loc, outType, ValueRange{res}, [&](OpBuilder &nb, Location nl, ValueRange a) -> Value {
      Value v = isMean ? arith::DivFOp::create(nb, nl, a[0], cnt).getResult() : a[0];
      return castScalar(nb, nl, v, elt);
    });
  if (!keep)
    return Values{res};
  SmallVector<Value> outDims;
  for (int64_t k = 0, j = 0; k < r; ++k)
    outDims.push_back(red[k] ? idx(b, loc, 1) : dims[j++]);
  return Values{reshapeTo(b, loc, res, rt, outDims)};
}

FailureOr<Values> lowerSoftmax(OpBuilder &b, ox::SoftmaxOp op) {
  Location loc = op.getLoc();
  Value x = op->getOperand(0);
  auto xt = cast<RankedTensorType>(x.getType());
  int64_t r = xt.getRank(), axis = op.getAxis().value_or(-1);
  if (axis < 0)
    axis += r;
  Type elt = xt.getElementType();
  MLIRContext *ctx = b.getContext();
  SmallVector<Value> dims;
  for (int64_t k = 0; k < r; ++k)
    dims.push_back(dimOf(b, loc, x, k));
  SmallVector<AffineExpr> re;
  SmallVector<int64_t> rowShape;
  SmallVector<Value> rowDims;
  SmallVector<utils::IteratorType> it;
  for (int64_t k = 0; k < r; ++k) {
    it.push_back(k == axis ? utils::IteratorType::reduction : utils::IteratorType::parallel);
    if (k == axis)
      continue;
    re.push_back(getAffineDimExpr(k, ctx));
    rowShape.push_back(xt.getDimSize(k));
    rowDims.push_back(dims[k]);
  }
  // Max, exponentials and their sum in the compute type (float32 for
  // 16-bit inputs); the result is rounded once.
  Type ct = computeTypeFor(elt);
  auto rowType = RankedTensorType::get(rowShape, ct);
  AffineMap id = AffineMap::getMultiDimIdentityMap(r, ctx), rowMap = AffineMap::get(r, 0, re, ctx);
  Value ninf = floatConst(b, loc, ct, -std::numeric_limits<double>::infinity());
  Value mx = linalg::GenericOp::create(
                 b, loc, TypeRange{rowType}, ValueRange{x},
                 ValueRange{filledTensor(b, loc, rowType, rowDims, ninf)}, {id, rowMap}, it,
                 [&](OpBuilder &nb, Location nl, ValueRange a) {
                   linalg::YieldOp::create(
                       nb, nl, ValueRange{arith::MaximumFOp::create(nb, nl, castScalar(nb, nl, a[0], ct), a[1])});
                 })
                 .getResult(0);
  Value sum = linalg::GenericOp::create(
                  b, loc, TypeRange{rowType}, ValueRange{x, mx},
                  ValueRange{filledTensor(b, loc, rowType, rowDims, floatConst(b, loc, ct, 0.0))},
                  {id, rowMap, rowMap}, it,
                  [&](OpBuilder &nb, Location nl, ValueRange a) {
                    Value e = math::ExpOp::create(
                        nb, nl, arith::SubFOp::create(nb, nl, castScalar(nb, nl, a[0], ct), a[1]));
                    linalg::YieldOp::create(nb, nl, ValueRange{arith::AddFOp::create(nb, nl, a[2], e)});
                  })
                  .getResult(0);
  Value init = emptyTensor(b, loc, xt, dims);
  return Values{linalg::GenericOp::create(
                    b, loc, TypeRange{xt}, ValueRange{x, mx, sum}, ValueRange{init},
                    {id, rowMap, rowMap, id}, parallel(r),
                    [&](OpBuilder &nb, Location nl, ValueRange a) {
                      Value e = math::ExpOp::create(
                          nb, nl, arith::SubFOp::create(nb, nl, castScalar(nb, nl, a[0], ct), a[1]));
                      linalg::YieldOp::create(
                          nb, nl, ValueRange{castScalar(nb, nl, arith::DivFOp::create(nb, nl, e, a[2]), elt)});
                    })
                    .getResult(0)};
}

FailureOr<Values> lowerConstantOfShape(OpBuilder &b, ox::ConstantOfShapeOp op) {
  Location loc = op.getLoc();
  auto rt = resultType(op);
  SmallVector<Value> dims;
  for (int64_t k = 0; k < rt.getRank(); ++k)
    dims.push_back(rt.isDynamicDim(k) ? extractIndex(b, loc, op->getOperand(0), k)
                                      : idx(b, loc, rt.getDimSize(k)));
  Type elt = rt.getElementType();
  Attribute v = b.getZeroAttr(elt);
  if (auto a = op.getValue())
    if (auto d = dyn_cast<DenseElementsAttr>(*a))
      v = d.getValues<Attribute>()[0];
  Value c = arith::ConstantOp::create(b, loc, cast<TypedAttr>(v));
  return Values{filledTensor(b, loc, rt, dims, c)};
}

/// Clip: min(max(x, lo), hi) with the optional one-element bounds as
/// operands of the generic (a scalar, or shape [1] read at 0), so the bounds
/// stay tensors on every target.
FailureOr<Values> lowerClip(OpBuilder &b, ox::ClipOp op) {
  Location loc = op.getLoc();
  Value x = op->getOperand(0);
  auto xt = cast<RankedTensorType>(x.getType());
  auto rt = resultType(op);
  int64_t r = xt.getRank();
  MLIRContext *ctx = b.getContext();
  SmallVector<Value> operands{x};
  SmallVector<AffineMap> maps{AffineMap::getMultiDimIdentityMap(r, ctx)};
  int lo = -1, hi = -1;
  for (unsigned i = 1; i < op->getNumOperands(); ++i) {
    Value bound = op->getOperand(i);
    if (isa<NoneType>(bound.getType()))
      continue;
    auto bt = dyn_cast<RankedTensorType>(bound.getType());
    if (!bt || bt.getRank() > 1)
      return unsupported(op, "min and max must be scalars or one-element tensors");
    (i == 1 ? lo : hi) = operands.size();
    operands.push_back(bound);
    SmallVector<AffineExpr> at(bt.getRank(), getAffineConstantExpr(0, ctx));
    maps.push_back(AffineMap::get(r, 0, at, ctx));
  }
  SmallVector<Value> dims;
  for (int64_t k = 0; k < r; ++k)
    dims.push_back(dimOf(b, loc, x, k));
  maps.push_back(AffineMap::getMultiDimIdentityMap(r, ctx));
  Value init = emptyTensor(b, loc, rt, dims);
  return Values{linalg::GenericOp::create(
                    b, loc, TypeRange{rt}, operands, ValueRange{init}, maps, parallel(r),
                    [&](OpBuilder &nb, Location nl, ValueRange a) {
                      Value v = a[0];
                      bool f = isFloat(v.getType());
                      if (lo >= 0)
                        v = f ? arith::MaximumFOp::create(nb, nl, v, a[lo]).getResult()
                              : arith::MaxSIOp::create(nb, nl, v, a[lo]).getResult();
                      if (hi >= 0)
                        v = f ? arith::MinimumFOp::create(nb, nl, v, a[hi]).getResult()
                              : arith::MinSIOp::create(nb, nl, v, a[hi]).getResult();
                      linalg::YieldOp::create(nb, nl, v);
                    })
                    .getResult(0)};
}

/// ONNX Size: the product of x's dims as an int64 scalar.
FailureOr<Values> lowerSize(OpBuilder &b, ox::SizeOp op) {
  Location loc = op.getLoc();
  Value x = op->getOperand(0);
  Value n = idx(b, loc, 1);
  for (int64_t k = 0; k < cast<RankedTensorType>(x.getType()).getRank(); ++k)
    n = arith::MulIOp::create(b, loc, n, dimOf(b, loc, x, k));
  Value e = arith::IndexCastOp::create(b, loc, b.getI64Type(), n);
  return Values{tensor::FromElementsOp::create(b, loc, RankedTensorType::get({}, b.getI64Type()),
                                               ValueRange{e})
                    .getResult()};
}

/// ONNX Flatten: a reshape of x to [prod(d[:axis]), prod(d[axis:])].
FailureOr<Values> lowerFlatten(OpBuilder &b, ox::FlattenOp op) {
  Location loc = op.getLoc();
  Value x = op->getOperand(0);
  int64_t r = cast<RankedTensorType>(x.getType()).getRank(), axis = op.getAxis().value_or(1);
  if (axis < -r || axis > r)
    return unsupported(op, "axis is outside [-rank, rank]");
  if (axis < 0)
    axis += r;
  Value outer = idx(b, loc, 1), inner = idx(b, loc, 1);
  for (int64_t k = 0; k < r; ++k) {
    Value &acc = k < axis ? outer : inner;
    acc = arith::MulIOp::create(b, loc, acc, dimOf(b, loc, x, k));
  }
  return Values{reshapeTo(b, loc, x, resultType(op), {outer, inner})};
}

/// ONNX Pad, mode "constant", with pads (and axes) known at compile time
/// and not negative: tensor.pad yielding constant_value (0 when omitted).
FailureOr<Values> lowerPad(OpBuilder &b, ox::PadOp op) {
  Location loc = op.getLoc();
  if (auto mode = op.getMode(); mode && *mode != "constant")
    return unsupported(op, "mode '" + mode->str() + "' is not supported (only \"constant\")");
  Value x = op->getOperand(0);
  auto xt = cast<RankedTensorType>(x.getType());
  int64_t r = xt.getRank();
  auto pads = constInts(op->getOperand(1));
  if (!pads)
    return unsupported(op, "its pads are computed at run time (only compile-time pads are supported)");
  SmallVector<int64_t> axes;
  auto hasInput = [&](unsigned i) {
    return op->getNumOperands() > i && !isa<NoneType>(op->getOperand(i).getType());
  };
  if (hasInput(3)) {
    auto a = constInts(op->getOperand(3));
    if (!a)
      return unsupported(op, "its axes are computed at run time");
    for (int64_t v : *a) {
      if (v < -r || v >= r)
        return unsupported(op, "an axis is outside [-rank, rank)");
      axes.push_back(v < 0 ? v + r : v);
    }
  } else {
    for (int64_t k = 0; k < r; ++k)
      axes.push_back(k);
  }
  int64_t n = axes.size();
  if (static_cast<int64_t>(pads->size()) != 2 * n)
    return unsupported(op, "pads has " + std::to_string(pads->size()) + " elements, not 2 x " +
                               std::to_string(n));
  SmallVector<OpFoldResult> low(r, b.getIndexAttr(0)), high(r, b.getIndexAttr(0));
  for (int64_t k = 0; k < n; ++k) {
    if ((*pads)[k] < 0 || (*pads)[n + k] < 0)
      return unsupported(op, "negative pads (cropping) are not supported");
    low[axes[k]] = b.getIndexAttr((*pads)[k]);
    high[axes[k]] = b.getIndexAttr((*pads)[n + k]);
  }
  Type elt = xt.getElementType();
  Value value;
  if (hasInput(2)) {
    Value cv = op->getOperand(2);
    auto ct = cast<RankedTensorType>(cv.getType());
    if (ct.getNumElements() != 1 || ct.getElementType() != elt)
      return unsupported(op, "constant_value must be one element of the data's dtype");
    SmallVector<Value> zeros(ct.getRank(), idx(b, loc, 0));
    value = tensor::ExtractOp::create(b, loc, cv, zeros);
  } else {
    value = arith::ConstantOp::create(b, loc, cast<TypedAttr>(b.getZeroAttr(elt)));
  }
  auto padded = tensor::PadOp::create(b, loc, resultType(op), x, low, high, value);
  return Values{padded.getResult()};
}

} // namespace

FailureOr<Values> h20::lowering::lowerOnnxOp(OpBuilder &b, Operation *op, bool parallelForms) {
  for (auto [i, t] : llvm::enumerate(op->getResultTypes()))
    if (!isa<RankedTensorType>(t) && !(isa<ox::AttentionOp>(op) && op->getResult(i).use_empty()))
      return unsupported(op, "its result shape is unknown (an unranked tensor)");
  for (Type t : op->getOperandTypes()) {
    auto st = dyn_cast<ShapedType>(t);
    if (st && st.getElementType().isUnsignedInteger())
      return unsupported(op, "unsigned integer tensors are not lowered");
  }
  Location loc = op->getLoc();
  if (auto body = elementwiseBody(op)) {
    if (failed(checkBroadcastsInto(op, resultType(op))))
      return failure();
    SmallVector<Value> operands(op->getOperands());
    return Values{elementwise(b, loc, resultType(op), operands,
                              [&](OpBuilder &nb, Location nl, ValueRange a) { return (*body)(nb, nl, a); })};
  }
  return llvm::TypeSwitch<Operation *, FailureOr<Values>>(op)
      .Case([&](ox::ConstantOp c) -> FailureOr<Values> {
        auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
        if (!attr)
          return unsupported(op, "non-dense constant");
        return Values{arith::ConstantOp::create(b, loc, attr)};
      })
      .Case([&](ox::MatMulOp) { return lowerMatMul(b, op, parallelForms); })
      .Case([&](ox::GatherOp g) { return lowerGather(b, g); })
      .Case([&](ox::ReshapeOp) { return lowerReshape(b, op); })
      .Case<ox::UnsqueezeOp, ox::SqueezeOp>([&](Operation *) { return lowerUnsqueezeSqueeze(b, op); })
      .Case([&](ox::TransposeOp t) -> FailureOr<Values> {
        Value x = op->getOperand(0);
        int64_t r = cast<RankedTensorType>(x.getType()).getRank();
        SmallVector<int64_t> perm;
        if (auto p = t.getPerm())
          perm.assign(p->begin(), p->end());
        else
          for (int64_t k = r - 1; k >= 0; --k)
            perm.push_back(k);
        SmallVector<Value> dims;
        for (int64_t p : perm)
          dims.push_back(dimOf(b, loc, x, p));
        Value init = emptyTensor(b, loc, resultType(op), dims);
        return Values{linalg::TransposeOp::create(b, loc, x, init, perm).getResult()[0]};
      })
      .Case([&](ox::ShapeOp s) { return lowerShape(b, s); })
      .Case([&](ox::RangeOp) { return lowerRange(b, op); })
      .Case([&](ox::ConcatOp c) { return lowerConcat(b, c); })
      .Case([&](ox::SliceOp s) { return lowerSlice(b, s); })
      .Case([&](ox::SplitOp s) { return lowerSplit(b, s); })
      .Case([&](ox::ExpandOp) { return lowerExpand(b, op); })
      .Case<ox::ReduceMeanOp, ox::ReduceSumOp, ox::ReduceMaxOp>([&](Operation *) { return lowerReduce(b, op); })
      .Case([&](ox::SoftmaxOp s) { return lowerSoftmax(b, s); })
      .Case([&](ox::ConstantOfShapeOp c) { return lowerConstantOfShape(b, c); })
      .Case([&](ox::ClipOp c) { return lowerClip(b, c); })
      .Case([&](ox::GatherElementsOp g) { return lowerGatherElements(b, g); })
      .Case([&](ox::GatherNDOp g) { return lowerGatherND(b, g); })
      .Case([&](ox::CumSumOp c) { return lowerCumSum(b, c); })
      .Case([&](ox::TriluOp t) { return lowerTrilu(b, t); })
      .Case([&](ox::LayerNormalizationOp n) { return lowerLayerNormalization(b, n); })
      .Case([&](ox::ScatterElementsOp s) {
        return parallelForms ? lowerScatterElementsParallel(b, s) : lowerScatterElements(b, s);
      })
      .Case([&](ox::TopKOp t) { return parallelForms ? lowerTopKParallel(b, t) : lowerTopK(b, t); })
      .Case([&](ox::RotaryEmbeddingOp r) { return lowerRotaryEmbedding(b, r); })
      .Case([&](ox::SizeOp s) { return lowerSize(b, s); })
      .Case([&](ox::FlattenOp f) { return lowerFlatten(b, f); })
      .Case([&](ox::PadOp p) { return lowerPad(b, p); })
      .Default([&](Operation *) -> FailureOr<Values> {
        if (isa<ox::AttentionOp>(op))
          return unsupported(op, "this form was not raised to attn.attention (the warning "
                                 "before this error says why); it has no other lowering");
        return unsupported(op, "has no lowering to linalg yet (no target supports it)");
      });
}
