//===- RaiseToAttn.cpp - ONNX attention/RoPE/RMSNorm forms -> attn ops ---===//
//
// Matching is structural and exact: every constant, axis and shape a pattern
// relies on is checked (shapes symbolically, via SymbolicEvaluator); anything
// else is left as it was. Both torch.onnx export styles — fused opset-23 ops
// and the decomposed opset-18 graphs — end up as the same attn ops.
//
//===----------------------------------------------------------------------===//
#include "h20/Analysis/SymbolicEvaluator.h"
#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/Attn/IR/RopeMath.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Transforms/Passes.h"
#include "h20/Transforms/ProvenMask.h"
#include "h20/Transforms/WeightData.h"

#include "OnnxAttentionMasks.h"
#include "RaiseH20Domain.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/Transforms/RegionUtils.h"

#include <cmath>

namespace h20 {
#define GEN_PASS_DEF_RAISETOATTN
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;
using namespace h20;
namespace ox = h20::onnx;

namespace {

//===----------------------------------------------------------------------===//
// Small matchers
//===----------------------------------------------------------------------===//

/// The value of a splat (or single-element) numeric onnx.Constant.
std::optional<double> constantScalar(Value v) {
  auto c = v.getDefiningOp<ox::ConstantOp>();
  if (!c)
    return std::nullopt;
  auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
  if (!attr || !(attr.isSplat() || attr.getNumElements() == 1))
    return std::nullopt;
  if (auto f = dyn_cast<DenseFPElementsAttr>(attr))
    return (*f.getValues<APFloat>().begin()).convertToDouble();
  if (auto i = dyn_cast<DenseIntElementsAttr>(attr))
    return static_cast<double>((*i.getValues<APInt>().begin()).getSExtValue());
  return std::nullopt;
}

/// Float values of a small constant tensor: an onnx.Constant, or an
/// onnx.Weight of at most 4096 elements read from the model's file (the
/// exporter stores inv_freq [1, 128, 1] of head_dim 256 as an initializer).
std::optional<SmallVector<double>> constantValues(Value v) {
  if (auto w = v.getDefiningOp<ox::WeightOp>()) {
    auto t = cast<RankedTensorType>(w.getResult().getType());
    if (!isa<FloatType>(t.getElementType()) || t.getNumElements() > 4096)
      return std::nullopt;
    auto data = h20::readFloatElements(v, 0, t.getNumElements());
    if (!data)
      return std::nullopt;
    return SmallVector<double>(data->begin(), data->end());
  }
  auto c = v.getDefiningOp<ox::ConstantOp>();
  if (!c)
    return std::nullopt;
  auto attr = dyn_cast<DenseFPElementsAttr>(c.getValue());
  if (!attr)
    return std::nullopt;
  SmallVector<double> out;
  for (APFloat x : attr.getValues<APFloat>())
    out.push_back(x.convertToDouble());
  return out;
}

/// For a commutative binary op, the operand other than one satisfying `pred`.
template <typename Pred>
Value otherOperand(Operation *op, Pred pred, Value *matched = nullptr) {
  if (op->getNumOperands() != 2)
    return {};
  for (unsigned i = 0; i < 2; ++i)
    if (pred(op->getOperand(i))) {
      if (matched)
        *matched = op->getOperand(i);
      return op->getOperand(1 - i);
    }
  return {};
}

/// The double closest to the shortest decimal that rounds to `f` in fp32:
/// 9.99999997e-7f becomes 1e-6, so attributes read as the model author wrote.
double snapFloat(double f) {
  float x = static_cast<float>(f);
  for (int digits = 1; digits <= 9; ++digits) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(x));
    double d = std::strtod(buf, nullptr);
    if (static_cast<float>(d) == x)
      return d;
  }
  return f;
}

/// One constant folded into an attention's scale: its value, whether the
/// scores are divided by it, and its float type's semantics (null for an
/// integer constant).
struct ScaleFactor {
  double value = 1.0;
  bool divides = false;
  const llvm::fltSemantics *semantics = nullptr;
};

/// True when `factors` are exactly the constants an exporter writes for a
/// softmax scale of 1/sqrt(headDim): n equal constants of one float type,
/// all multiplying by round(headDim^(-1/(2n))) or all dividing by
/// round(headDim^(1/(2n))), rounded to nearest-even in that type (one
/// Mul(S, 1/sqrt(d)), torch.onnx's Mul(Q, d^-1/4) and Mul(K^T, d^-1/4),
/// one Div(S, sqrt(d)), ...). Exact, so a genuinely different constant
/// (even one ulp away) never matches.
bool isRoundedInvSqrt(ArrayRef<ScaleFactor> factors, int64_t headDim) {
  if (factors.empty() || headDim <= 0)
    return false;
  const ScaleFactor &f0 = factors.front();
  for (const ScaleFactor &f : factors)
    if (!f.semantics || f.semantics != f0.semantics || f.divides != f0.divides ||
        f.value != f0.value)
      return false;
  double n = static_cast<double>(factors.size());
  double target = std::pow(static_cast<double>(headDim), (f0.divides ? 0.5 : -0.5) / n);
  llvm::APFloat r(target);
  bool lost = false;
  r.convert(*f0.semantics, llvm::APFloat::rmNearestTiesToEven, &lost);
  return r.convertToDouble() == f0.value;
}

/// 1/sqrt(head_dim) exactly when `scale` is that value rounded through fp32
/// arithmetic (within 4 ulp) or when `factors` are the rounded constants
/// an exporter writes for it (isRoundedInvSqrt); else `scale` itself.
///
/// Why: torch.onnx writes SDPA's default scale as Mul(Q, c) and Mul(K^T, c)
/// with c = sqrt(1/sqrt(head_dim)) cast to the model dtype; in bfloat16,
/// c = 0.296875 for head_dim 128 and c*c is 0.29% below 1/sqrt(128), a
/// systematic error in every softmax that PyTorch eager (which uses the
/// exact scale in its kernels) does not make. Recovering the value the
/// exporter rounded is the same fit as RoPE's theta from rounded inv_freq.
double snapScale(double scale, int64_t headDim, ArrayRef<ScaleFactor> factors = {}) {
  double exact = 1.0 / std::sqrt(static_cast<double>(headDim));
  if (headDim > 0 &&
      (std::fabs(scale - exact) <= 4 * 1.2e-7 * exact || isRoundedInvSqrt(factors, headDim)))
    return exact;
  return snapFloat(scale);
}

/// The float semantics of a constant's element type; null for integers.
const llvm::fltSemantics *floatSemantics(Type t) {
  auto ft = dyn_cast<FloatType>(getElementTypeOrSelf(t));
  return ft ? &ft.getFloatSemantics() : nullptr;
}

int64_t rankOf(Value v) {
  if (auto t = dyn_cast<RankedTensorType>(v.getType()))
    return t.getRank();
  return -1;
}

bool isLastAxis(int64_t axis, int64_t rank) {
  return axis == -1 || (rank > 0 && axis == rank - 1);
}

/// Whether `op` is a Cast between two floating-point dtypes of one shape:
/// what an exporter writes to compute a norm or RoPE in float32 for a 16-bit
/// model (transformers' `x.to(torch.float32)` ... `.to(input_dtype)`).
bool isPrecisionCast(Operation *op) {
  if (!isa_and_nonnull<ox::CastOp>(op))
    return false;
  auto from = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  auto to = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  return from && to && from.getShape() == to.getShape() &&
         isa<FloatType>(from.getElementType()) && isa<FloatType>(to.getElementType());
}

/// `v` with any chain of precision Casts in front of it peeled off. The
/// raised op computes in float32 internally (stash / table precision), so
/// what the Casts round is within the 16-bit result's own rounding.
Value peelPrecisionCasts(Value v) {
  while (v && isPrecisionCast(v.getDefiningOp()))
    v = v.getDefiningOp()->getOperand(0);
  return v;
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

class Raiser {
public:
  Raiser(func::FuncOp func) : func(func), eval(func), b(func.getContext()) {}

  void run() {
    SmallVector<Operation *> ops;
    func.walk([&](Operation *op) { ops.push_back(op); });
    // Replaced ops stay until the DCE at the end (their results are unused).
    for (Operation *op : ops) {
      b.setInsertionPoint(op);
      if (auto n = dyn_cast<ox::RMSNormalizationOp>(op))
        raiseRmsNorm(n);
      else if (auto n = dyn_cast<ox::MsSimplifiedLayerNormalizationOp>(op))
        raiseSimplifiedLayerNorm(n);
      else if (auto n = dyn_cast<ox::MsSkipSimplifiedLayerNormalizationOp>(op))
        raiseSkipSimplifiedLayerNorm(n);
      else if (auto r = dyn_cast<ox::RotaryEmbeddingOp>(op))
        raiseRotaryEmbedding(r);
      else if (auto r = dyn_cast<ox::MsRotaryEmbeddingOp>(op))
        raiseMsRotaryEmbedding(r);
      else if (auto a = dyn_cast<ox::MsMultiHeadAttentionOp>(op))
        raiseMsMultiHeadAttention(a);
      else if (auto g = dyn_cast<ox::MsGroupQueryAttentionOp>(op))
        raiseMsGroupQueryAttention(g);
      else if (auto a = dyn_cast<ox::AttentionOp>(op))
        raiseAttention(a);
      else if (isa<ox::MulOp>(op))
        raiseDecomposedRmsNorm(op);
      else if (isa<ox::AddOp>(op))
        raiseDecomposedRope(op);
      else if (isa<ox::MatMulOp>(op))
        raiseDecomposedAttention(op);
      else if (op->getName().getStringRef().starts_with("onnx.h20."))
        raiseH20DomainOp(b, op);
    }
    // Whatever the raised ops replaced (mask and cos/sin subgraphs) dies here.
    IRRewriter rewriter(func.getContext());
    (void)runRegionDCE(rewriter, func.getBody());
  }

private:
  void replace(Operation *op, Value with) {
    op->getResult(0).replaceAllUsesWith(with);
  }

  bool sameShape(Value a, Value b) {
    auto sa = eval.shapeOf(a), sb = eval.shapeOf(b);
    if (!sa || !sb || sa->size() != sb->size())
      return false;
    for (auto [x, y] : llvm::zip(*sa, *sb))
      if (!provablyEqual(x, y))
        return false;
    return true;
  }

  //===--------------------------------------------------------------------===//
  // RMSNorm
  //===--------------------------------------------------------------------===//

  void emitRmsNorm(Operation *op, Value x, Value w, double eps, int64_t axis,
                   bool stashF32) {
    auto xt = dyn_cast<RankedTensorType>(x.getType());
    auto wt = dyn_cast<RankedTensorType>(w.getType());
    auto rt = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!xt || !wt || !rt)
      return;
    // RMSNormalization-23 may read X in one float dtype and give Y in the
    // scale's (a 16-bit Gemma export: bf16 X, float32 1 + w and Y): the
    // norm runs on X cast to Y's dtype, which is what stash_type 1 computes.
    if (xt != rt && xt.getShape() == rt.getShape() && isa<FloatType>(xt.getElementType()) &&
        isa<FloatType>(rt.getElementType()) && wt.getElementType() == rt.getElementType()) {
      int64_t code = rt.getElementType().isF32()    ? 1
                     : rt.getElementType().isF16()  ? 10
                     : rt.getElementType().isBF16() ? 16
                                                    : 0;
      if (!code)
        return;
      auto c = ox::CastOp::create(b, op->getLoc(), TypeRange{rt}, ValueRange{x});
      c->setAttr("to", b.getIntegerAttr(b.getIntegerType(64, true), code));
      x = c->getResult(0);
      xt = rt;
    }
    if (xt != rt)
      return;
    auto norm = attn::RmsNormOp::create(
        b, op->getLoc(), xt, x, w, b.getF64FloatAttr(snapFloat(eps)),
        b.getI64IntegerAttr(axis < 0 ? axis + xt.getRank() : axis),
        stashF32 && !xt.getElementType().isF32() ? TypeAttr::get(b.getF32Type())
                                                  : TypeAttr());
    replace(op, norm);
  }

  void raiseRmsNorm(ox::RMSNormalizationOp op) {
    // stash_type 1 (float32, the default) is attn.rms_norm's own default.
    emitRmsNorm(op, op->getOperand(0), op->getOperand(1),
                op.getEpsilon() ? op.getEpsilon()->convertToFloat() : 1e-5,
                op.getAxis().value_or(-1), op.getStashType().value_or(1) == 1);
  }

  void raiseSimplifiedLayerNorm(ox::MsSimplifiedLayerNormalizationOp op) {
    if (op->getNumResults() > 1 && !op->getResult(1).use_empty())
      return;
    emitRmsNorm(op, op->getOperand(0), op->getOperand(1),
                op.getEpsilon() ? op.getEpsilon()->convertToFloat() : 1e-5,
                op.getAxis().value_or(-1), true);
  }

  /// w * (x * Reciprocal(Sqrt(ReduceMean(x^2, [-1], keepdims) + eps))), any
  /// operand order, or x / Sqrt(...) in place of the Reciprocal product.
  void raiseDecomposedRmsNorm(Operation *outer) {
    auto isWeight = [](Value v) { return rankOf(v) == 1; };
    Value w;
    Value normed = otherOperand(outer, isWeight, &w);
    if (!normed)
      return;
    // 16-bit exports: w * Cast(normed_f32), normed_f32 computed from
    // Cast(x) (transformers' LlamaRMSNorm and its copies).
    Operation *inner = peelPrecisionCasts(normed).getDefiningOp();
    Value x, sqrtOut;
    if (inner && isa<ox::MulOp>(inner)) {
      Value recip;
      x = otherOperand(inner, [](Value v) {
        return v.getDefiningOp<ox::ReciprocalOp>() != nullptr;
      }, &recip);
      if (!x)
        return;
      sqrtOut = recip.getDefiningOp()->getOperand(0);
    } else if (inner && isa<ox::DivOp>(inner)) {
      x = inner->getOperand(0);
      sqrtOut = inner->getOperand(1);
    } else {
      return;
    }
    auto sqrt = sqrtOut.getDefiningOp<ox::SqrtOp>();
    if (!sqrt)
      return;
    Operation *add = sqrt->getOperand(0).getDefiningOp();
    if (!add || !isa<ox::AddOp>(add))
      return;
    std::optional<double> eps;
    Value mean = otherOperand(add, [&](Value v) {
      eps = constantScalar(v);
      return eps.has_value();
    });
    auto reduce = mean ? mean.getDefiningOp<ox::ReduceMeanOp>() : nullptr;
    if (!reduce || reduce.getKeepdims().value_or(1) != 1)
      return;
    // Axes: the last one only (attribute before opset 18, input from 18 on).
    int64_t r = rankOf(x);
    std::optional<SmallVector<SymExpr>> axes;
    if (reduce->getNumOperands() > 1)
      axes = eval.vectorOf(reduce->getOperand(1));
    else if (auto a = reduce.getAxes())
      axes = SmallVector<SymExpr>(llvm::map_range(
          *a, [](int64_t v) { return symConst(v); }));
    if (!axes || axes->size() != 1 || !constantOf((*axes)[0]) ||
        !isLastAxis(*constantOf((*axes)[0]), r))
      return;
    auto pow = reduce->getOperand(0).getDefiningOp<ox::PowOp>();
    if (!pow || pow->getOperand(0) != x || constantScalar(pow->getOperand(1)) != 2.0)
      return;
    auto wt = cast<RankedTensorType>(w.getType());
    auto xt = dyn_cast<RankedTensorType>(x.getType());
    if (!xt || wt.getDimSize(0) != xt.getDimSize(r - 1))
      return;
    // Normalise the value before its precision Cast when that has the
    // result's dtype (the norm then runs on the model's own tensor, stashing
    // float32 as the graph did); otherwise the graph's float32 value itself.
    Value x0 = peelPrecisionCasts(x);
    if (x0 != x && x0.getType() == outer->getResult(0).getType() &&
        wt.getElementType() == cast<RankedTensorType>(x0.getType()).getElementType())
      x = x0;
    emitRmsNorm(outer, x, w, *eps, -1, true);
  }

  //===--------------------------------------------------------------------===//
  // RoPE
  //===--------------------------------------------------------------------===//

  /// What the cos/sin tables of a RoPE are made of.
  struct Angles {
    Value positions; ///< i64 [B, S]
    double theta = 0;
    int64_t halfDim = 0; ///< number of frequencies (rotary_dim / 2)
    attn::RopeScaling scaling = attn::RopeScaling::none;
    double factor = 1;
    /// llama3 / YaRN parameters, when recognised.
    std::optional<int64_t> originalMax;
    std::optional<double> lowFreq, highFreq, betaFast, betaSlow;
    double magnitude = 1; ///< what multiplies cos and sin (YaRN attention_factor)
    /// The frequencies themselves, when no closed form reproduces them.
    SmallVector<double> invFreq;
  };

  /// theta of inverse frequencies f_j = c * theta^(-2j/d), j < count, by a
  /// least-squares line through (j, log f_j): slope -2 log(theta) / d. Every
  /// value counts, so float32 rounding of single values (relative 6e-8)
  /// moves theta by ~1e-7 relative; theta from f_0 / f_1 alone, raised to
  /// the d/2-th power, missed theta = 500000 by a few units at d = 128.
  /// Snapped to the nearest integer within 1e-5 relative (configs write
  /// 10000, 500000, 1000000).
  static double fitTheta(ArrayRef<double> f, int64_t count, double d) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int64_t j = 0; j < count; ++j) {
      double y = std::log(f[j]);
      sx += j;
      sy += y;
      sxx += double(j) * j;
      sxy += j * y;
    }
    double slope = (count * sxy - sx * sy) / (count * sxx - sx * sx);
    double theta = std::exp(-slope * d / 2.0);
    if (std::fabs(theta - std::round(theta)) < 1e-5 * theta)
      theta = std::round(theta);
    return theta;
  }

  /// Recognises llama3 and YaRN frequency sets: theta from the unscaled
  /// high frequencies, factor from the lowest, then the scaling parameters by
  /// trying the values configs use and keeping one that reproduces every
  /// frequency (RopeMath, the same formulas the lowering uses).
  static bool fitScaledInvFreq(ArrayRef<double> f, Angles &a, double relTolerance) {
    int64_t n = f.size();
    if (n < 4 || !(f[0] > 0) || !(f[1] > 0) || f[1] >= f[0] || !(f[n - 1] > 0))
      return false;
    double d = 2.0 * n;
    // llama3 and YaRN leave the highest frequencies (the first quarter at
    // every config in use) unscaled: theta from those.
    double theta = fitTheta(f, std::max<int64_t>(2, n / 4), d);
    double factor = std::pow(theta, -2.0 * (n - 1) / d) / f[n - 1];
    if (std::fabs(factor - std::round(factor)) < 1e-3 * factor)
      factor = std::round(factor);
    auto matches = [&](const rope::Params &p) {
      std::vector<double> g = rope::inverseFrequencies(p);
      for (int64_t j = 0; j < n; ++j)
        if (std::fabs(f[j] - g[j]) > relTolerance * g[j])
          return false;
      return true;
    };
    rope::Params p;
    p.theta = theta;
    p.rotaryDim = 2 * n;
    p.factor = factor;
    for (int64_t orig : {1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072}) {
      p.originalMaxPositions = orig;
      p.scaling = rope::Scaling::llama3;
      for (double low : {1.0, 2.0})
        for (double high : {2.0, 4.0, 8.0}) {
          p.lowFreqFactor = low;
          p.highFreqFactor = high;
          if (low < high && matches(p)) {
            a.scaling = attn::RopeScaling::llama3;
            a.lowFreq = low;
            a.highFreq = high;
            a.originalMax = orig;
            a.theta = theta;
            a.factor = factor;
            a.halfDim = n;
            return true;
          }
        }
      p.scaling = rope::Scaling::yarn;
      for (double fast : {32.0, 16.0})
        for (double slow : {1.0, 2.0}) {
          p.betaFast = fast;
          p.betaSlow = slow;
          if (matches(p)) {
            a.scaling = attn::RopeScaling::yarn;
            a.betaFast = fast;
            a.betaSlow = slow;
            a.originalMax = orig;
            a.theta = theta;
            a.factor = factor;
            a.halfDim = n;
            return true;
          }
        }
    }
    return false;
  }

  /// Recovers theta (and a linear scaling factor) from inv_freq values,
  /// inv_freq[j] = theta^(-2j/d) / factor with d = 2 * n, within 4 fp32 ulp.
  static bool fitInvFreq(ArrayRef<double> f, Angles &a,
                         double relTolerance = 4 * 1.2e-7) {
    int64_t n = f.size();
    if (n < 2 || !(f[0] > 0) || !(f[1] > 0) || f[1] >= f[0])
      return false;
    double d = 2.0 * n;
    for (int64_t j = 0; j < n; ++j)
      if (!(f[j] > 0))
        return false;
    double theta = fitTheta(f, n, d);
    double factor = 1.0 / f[0];
    if (std::fabs(factor - std::round(factor)) < 1e-6 * factor)
      factor = std::round(factor);
    for (int64_t j = 0; j < n; ++j) {
      double expected = std::pow(theta, -2.0 * j / d) / factor;
      if (std::fabs(f[j] - expected) > relTolerance * expected)
        return fitScaledInvFreq(f, a, relTolerance);
    }
    a.theta = theta;
    a.halfDim = n;
    if (factor != 1.0) {
      a.scaling = attn::RopeScaling::linear;
      a.factor = factor;
    }
    return true;
  }

  /// Angles of the frequencies `invFreq`: theta (and a linear, llama3 or
  /// YaRN scaling) fitted to all of them, or, when no closed form
  /// reproduces them, the values themselves. nullopt for values that are
  /// no frequencies (empty, <= 0, not finite).
  static std::optional<Angles> anglesOfFrequencies(ArrayRef<double> invFreq) {
    Angles a;
    if (fitInvFreq(invFreq, a))
      return a;
    // No theta (with any scaling) gives these values: keep them. A 16-bit
    // torch export rounds its inv_freq buffer to bfloat16 (3 significant
    // digits) and PyTorch rotates by the rounded values.
    if (invFreq.empty() ||
        llvm::any_of(invFreq, [](double v) { return !(v > 0.0) || !std::isfinite(v); }))
      return std::nullopt;
    a.invFreq.assign(invFreq.begin(), invFreq.end());
    a.halfDim = static_cast<int64_t>(invFreq.size());
    a.theta = invFreq.size() > 1 ? fitTheta(invFreq, a.halfDim, 2.0 * a.halfDim) : 10000.0;
    if (!(a.theta > 1.0) || !std::isfinite(a.theta))
      a.theta = 10000.0;
    return a;
  }

  /// The angle table T[b, s, j] = inv_freq[j] * P[b, s] of a RotaryEmbedding
  /// computed in the graph, in either of the forms exporters write:
  ///  - transformers' Llama: Transpose(MatMul(inv_freq[1, n, 1],
  ///    Cast(P[B, 1, S])), [0, 2, 1]);
  ///  - an outer product: [Unsqueeze(., [0])] of Mul(Unsqueeze(Cast(p[S]),
  ///    [1]), inv_freq[n] or [1, n]) (operands in either order), as
  ///    DeepSeek-V4.1's exporter writes it (models/deepseek_v41/export.py,
  ///    rope_tables); p may be any int64 positions, e.g. Range(0, S) or the
  ///    compressed entries' Range(0, S / r) * r.
  std::optional<Angles> matchAngleTable(Value t) {
    if (auto a = matchOuterProductTable(t))
      return a;
    auto tr = t.getDefiningOp<ox::TransposeOp>();
    if (!tr || !tr.getPerm() || ArrayRef<int64_t>(*tr.getPerm()) != ArrayRef<int64_t>{0, 2, 1})
      return std::nullopt;
    auto mm = tr->getOperand(0).getDefiningOp<ox::MatMulOp>();
    if (!mm)
      return std::nullopt;
    auto invFreq = constantValues(mm->getOperand(0));
    auto castOp = mm->getOperand(1).getDefiningOp<ox::CastOp>();
    if (!invFreq || !castOp)
      return std::nullopt;
    auto ft = cast<RankedTensorType>(mm->getOperand(0).getType());
    if (ft.getRank() != 3 || ft.getDimSize(2) != 1)
      return std::nullopt;
    Value p = castOp->getOperand(0);
    auto pt = dyn_cast<RankedTensorType>(p.getType());
    if (!pt || pt.getRank() != 3 || pt.getDimSize(1) != 1 ||
        !pt.getElementType().isInteger(64))
      return std::nullopt;
    std::optional<Angles> a = anglesOfFrequencies(*invFreq);
    if (!a)
      return std::nullopt;
    // P = Unsqueeze(pos[B, S], [1]) gives pos directly; else collapse P.
    if (auto u = p.getDefiningOp<ox::UnsqueezeOp>()) {
      auto axes = eval.vectorOf(u->getOperand(1));
      if (axes && axes->size() == 1 && constantOf((*axes)[0]) == std::optional<int64_t>(1))
        a->positions = u->getOperand(0);
    }
    if (!a->positions) {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointAfterValue(p);
      auto collapsed = RankedTensorType::get({pt.getDimSize(0), pt.getDimSize(2)},
                                             pt.getElementType());
      a->positions = tensor::CollapseShapeOp::create(
          b, p.getLoc(), collapsed, p, ArrayRef<ReassociationIndices>{{0, 1}, {2}});
    }
    return a;
  }

  /// Whether `v` is Unsqueeze(x, [axis]); then x.
  Value unsqueezedFrom(Value v, int64_t axis) {
    auto u = v.getDefiningOp<ox::UnsqueezeOp>();
    if (!u)
      return {};
    auto axes = eval.vectorOf(u->getOperand(1));
    if (!axes || axes->size() != 1 || constantOf((*axes)[0]) != std::optional<int64_t>(axis))
      return {};
    return u->getOperand(0);
  }

  /// The outer-product form of matchAngleTable: positions p[S] (int64, cast
  /// to float) times inv_freq[n], as [1, S, n] (or [S, n]: the caller's
  /// RotaryEmbedding broadcasts it). The positions become p as [1, S].
  std::optional<Angles> matchOuterProductTable(Value t) {
    if (Value inner = unsqueezedFrom(t, 0))
      t = inner;
    auto mul = t.getDefiningOp<ox::MulOp>();
    if (!mul)
      return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      Value col = unsqueezedFrom(mul->getOperand(side), 1);
      Value freqs = mul->getOperand(1 - side);
      auto castOp = col ? col.getDefiningOp<ox::CastOp>() : ox::CastOp();
      auto ft = dyn_cast<RankedTensorType>(freqs.getType());
      if (!castOp || !ft || ft.getRank() < 1 || ft.getRank() > 2 ||
          (ft.getRank() == 2 && ft.getDimSize(0) != 1))
        continue;
      // Positions cast to f16 / bf16 are rounded (above 2048 / 256) before
      // they multiply: attn.rope's exact positions would differ. f32 and
      // f64 keep every position a prompt can have (< 2^24).
      auto castTo = cast<ShapedType>(castOp->getResult(0).getType()).getElementType();
      if (!castTo.isF32() && !castTo.isF64())
        continue;
      Value p = castOp->getOperand(0);
      auto pt = dyn_cast<RankedTensorType>(p.getType());
      auto invFreq = constantValues(freqs);
      if (!pt || pt.getRank() != 1 || !pt.getElementType().isInteger(64) || !invFreq)
        continue;
      std::optional<Angles> a = anglesOfFrequencies(*invFreq);
      if (!a)
        return std::nullopt;
      // An onnx.Unsqueeze, not a tensor reshape: the passes that follow a
      // position back to a graph input (h20-input-value-ranges records its
      // range, h20-chunked-prefill's input guard) look through ONNX's
      // value-preserving ops.
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointAfterValue(p);
      auto row = RankedTensorType::get({1, pt.getDimSize(0)}, pt.getElementType());
      a->positions = ox::UnsqueezeOp::create(b, p.getLoc(), TypeRange{row},
                                             ValueRange{p, i64Constant(p.getLoc(), {0})})
                         ->getResult(0);
      return a;
    }
    return std::nullopt;
  }

  /// cos/sin operands of a fused RotaryEmbedding: Cos(T) and Sin(T) of the
  /// same angle table T [B, S, n], or Cos(T) and Neg(Sin(T)): the inverse
  /// rotation R(-T), which `inverse` reports (DeepSeek-V4's rotation of the
  /// attention output back, models/deepseek_v41/export.py).
  std::optional<Angles> matchCosSinPair(Value cosV, Value sinV, bool &inverse) {
    // YaRN scales both tables by its attention factor: Mul(Cos(T), m).
    double magnitude = 1.0;
    auto peel = [&](Value v) -> Value {
      magnitude = 1.0;
      auto mul = v.getDefiningOp<ox::MulOp>();
      if (!mul)
        return v;
      std::optional<double> m;
      Value rest = otherOperand(mul, [&](Value o) { return (m = constantScalar(o)).has_value(); });
      if (!rest)
        return v;
      magnitude = *m;
      return rest;
    };
    cosV = peel(cosV);
    double cosMagnitude = magnitude;
    // -m sin(T) may be written Neg(Mul(Sin(T), m)) or Mul(Neg(Sin(T)), m).
    inverse = false;
    auto peelNeg = [&](Value v) {
      if (auto neg = v.getDefiningOp<ox::NegOp>()) {
        inverse = !inverse;
        return neg->getOperand(0);
      }
      return v;
    };
    sinV = peelNeg(peel(peelNeg(sinV)));
    if (magnitude != cosMagnitude)
      return std::nullopt;
    auto c = cosV.getDefiningOp<ox::CosOp>();
    auto s = sinV.getDefiningOp<ox::SinOp>();
    if (!c || !s || c->getOperand(0) != s->getOperand(0))
      return std::nullopt;
    auto a = matchAngleTable(c->getOperand(0));
    if (!a)
      return std::nullopt;
    // Only YaRN carries a magnitude (attention_factor) in attn.rope.
    if (magnitude != 1.0 && a->scaling != attn::RopeScaling::yarn)
      return std::nullopt;
    a->magnitude = snapFloat(magnitude);
    return a;
  }

  /// The [D] constant of x's element type that is -1 at the second element
  /// of each of the `halfDim` rotated pairs (interleaved: 2j + 1; else the
  /// upper half's j + halfDim) and 1 elsewhere, channels past the rotary
  /// dims included.
  Value pairSigns(Location loc, RankedTensorType xt, int64_t halfDim, bool interleaved) {
    int64_t d = xt.getDimSize(xt.getRank() - 1);
    Type e = xt.getElementType();
    SmallVector<Attribute> values(d, b.getFloatAttr(e, 1.0));
    for (int64_t j = 0; j < halfDim; ++j)
      values[interleaved ? 2 * j + 1 : j + halfDim] = b.getFloatAttr(e, -1.0);
    auto t = RankedTensorType::get({d}, e);
    return ox::ConstantOp::create(b, loc, TypeRange{t}, ValueRange{},
                                  DenseElementsAttr::get(t, values))
        ->getResult(0);
  }

  Value emitRope(Operation *op, Value x, const Angles &a, bool interleaved) {
    auto xt = cast<RankedTensorType>(x.getType());
    auto f64 = [&](std::optional<double> v) { return v ? b.getF64FloatAttr(*v) : FloatAttr(); };
    bool scaled = a.scaling != attn::RopeScaling::none;
    bool yarn = a.scaling == attn::RopeScaling::yarn;
    auto rope = attn::RopeOp::create(
        b, op->getLoc(), xt, x, a.positions, b.getF64FloatAttr(a.theta),
        b.getI64IntegerAttr(2 * a.halfDim), b.getBoolAttr(interleaved),
        attn::RopeScalingAttr::get(b.getContext(), a.scaling),
        scaled ? b.getF64FloatAttr(a.factor) : FloatAttr(),
        a.originalMax ? b.getI64IntegerAttr(*a.originalMax) : IntegerAttr(), f64(a.betaFast),
        f64(a.betaSlow), FloatAttr(), FloatAttr(),
        // The graph's own magnitude, exactly (1 when it multiplies by none).
        yarn ? b.getF64FloatAttr(a.magnitude) : FloatAttr(), f64(a.lowFreq), f64(a.highFreq),
        a.invFreq.empty() ? DenseF64ArrayAttr() : b.getDenseF64ArrayAttr(a.invFreq));
    return rope;
  }

  void raiseRotaryEmbedding(ox::RotaryEmbeddingOp op) {
    Value x = op->getOperand(0);
    int64_t rank = rankOf(x);
    if (rank != 3 && rank != 4)
      return;
    bool interleaved = op.getInterleaved().value_or(0) != 0;
    // Tables computed in the graph from an inv_freq constant: recover theta.
    bool inverse = false;
    if (op->getNumOperands() == 3 && rank == 4)
      if (auto a = matchCosSinPair(op->getOperand(1), op->getOperand(2), inverse)) {
        int64_t rd = op.getRotaryEmbeddingDim().value_or(0);
        auto xt = cast<RankedTensorType>(x.getType());
        if ((rd == 0 || rd == 2 * a->halfDim) && xt == op->getResult(0).getType() &&
            !xt.isDynamicDim(3) && 2 * a->halfDim <= xt.getDimSize(3)) {
          if (!inverse) {
            replace(op, emitRope(op, x, *a, interleaved));
            return;
          }
          // R(-T) = C R(T) C with C = diag(1, -1) on every rotated pair:
          // flipping the pairs' second element before and after the
          // rotation inverts it, elementwise, so the rotation itself stays
          // an attn.rope that h20-lower-rope turns into table gathers.
          Value sign = pairSigns(op->getLoc(), xt, a->halfDim, interleaved);
          Value flipped = ox::MulOp::create(b, op->getLoc(), TypeRange{xt}, ValueRange{x, sign})
                              ->getResult(0);
          Value rotated = emitRope(op, flipped, *a, interleaved);
          replace(op, ox::MulOp::create(b, op->getLoc(), TypeRange{xt},
                                        ValueRange{rotated, sign})
                          ->getResult(0));
          return;
        }
      }
    raiseRotaryWithCaches(op, interleaved);
  }

  /// RotaryEmbedding whose cos/sin caches are data (graph inputs): the
  /// caches become a one-level table for attn.rope_apply (coarse level =
  /// identity rotation). With position_ids the caches are [max_pos, rd/2];
  /// without, they are [B, S, rd/2] per token, flattened to B*S rows indexed
  /// by b*S + s. Static shapes only for the latter.
  void raiseRotaryWithCaches(ox::RotaryEmbeddingOp op, bool interleaved) {
    Value x = op->getOperand(0), cosC = op->getOperand(1), sinC = op->getOperand(2);
    auto ct = dyn_cast<RankedTensorType>(cosC.getType());
    auto xt = dyn_cast<RankedTensorType>(x.getType());
    if (!ct || ct != sinC.getType() || !ct.hasStaticShape() || !xt ||
        xt != op->getResult(0).getType())
      return;
    bool hasPositions = op->getNumOperands() > 3 && !isa<NoneType>(op->getOperand(3).getType());
    int64_t half = ct.getShape().back();
    int64_t rd = op.getRotaryEmbeddingDim().value_or(0);
    if (rd == 0)
      rd = 2 * half;
    if (rd != 2 * half)
      return;
    Location loc = op->getLoc();
    // 3-D input: heads from num_heads.
    Value x4 = x;
    if (xt.getRank() == 3) {
      int64_t n = op.getNumHeads().value_or(0);
      if (!isPacked3d(x, n))
        return;
      x4 = splitHeads(loc, x, n);
    }
    auto x4t = cast<RankedTensorType>(x4.getType());
    if (x4t.isDynamicDim(3) || rd > x4t.getDimSize(3))
      return;
    Value positions;
    int64_t rows;
    Value cosT = cosC, sinT = sinC;
    if (hasPositions) {
      if (ct.getRank() != 2)
        return;
      positions = op->getOperand(3);
      rows = ct.getDimSize(0);
    } else {
      // Per-token caches [B, S, half]: flatten and index b * S + s.
      if (ct.getRank() != 3 || x4t.isDynamicDim(0) || x4t.isDynamicDim(2) ||
          ct.getDimSize(0) != x4t.getDimSize(0) || ct.getDimSize(1) != x4t.getDimSize(2))
        return;
      int64_t B = ct.getDimSize(0), S = ct.getDimSize(1);
      rows = B * S;
      auto flat = RankedTensorType::get({rows, half}, ct.getElementType());
      Value shape = i64Constant(loc, {rows, half});
      cosT = ox::ReshapeOp::create(b, loc, TypeRange{flat}, ValueRange{cosC, shape}, IntegerAttr())
                 ->getResult(0);
      sinT = ox::ReshapeOp::create(b, loc, TypeRange{flat}, ValueRange{sinC, shape}, IntegerAttr())
                 ->getResult(0);
      auto pt = RankedTensorType::get({B, S}, b.getI64Type());
      SmallVector<int64_t> idx(rows);
      for (int64_t i = 0; i < rows; ++i)
        idx[i] = i;
      positions = ox::ConstantOp::create(b, loc, TypeRange{pt}, ValueRange{},
                                         DenseElementsAttr::get(pt, ArrayRef<int64_t>(idx)))
                      ->getResult(0);
    }
    // fine = [cos; sin] as f32 [2, rows, half]; coarse = identity [2, 1, half].
    auto f32 = b.getF32Type();
    auto asF32Row = [&](Value v) {
      auto t = cast<RankedTensorType>(v.getType());
      if (!t.getElementType().isF32()) {
        auto c = RankedTensorType::get(t.getShape(), f32);
        v = ox::CastOp::create(b, loc, TypeRange{c}, ValueRange{v},
                               b.getIntegerAttr(b.getIntegerType(64, true), 1), IntegerAttr())
                ->getResult(0);
      }
      auto u = RankedTensorType::get({1, rows, half}, f32);
      return ox::UnsqueezeOp::create(b, loc, TypeRange{u}, ValueRange{v, i64Constant(loc, {0})})
          ->getResult(0);
    };
    auto fineType = RankedTensorType::get({2, rows, half}, f32);
    Value fine = ox::ConcatOp::create(b, loc, TypeRange{fineType},
                                      ValueRange{asF32Row(cosT), asF32Row(sinT)},
                                      b.getIntegerAttr(b.getIntegerType(64, true), 0))
                     ->getResult(0);
    auto coarseType = RankedTensorType::get({2, 1, half}, f32);
    SmallVector<float> identity(2 * half, 0.0f);
    std::fill(identity.begin(), identity.begin() + half, 1.0f);
    Value coarse = ox::ConstantOp::create(b, loc, TypeRange{coarseType}, ValueRange{},
                                          DenseElementsAttr::get(coarseType, ArrayRef<float>(identity)))
                       ->getResult(0);
    Value y = attn::RopeApplyOp::create(b, loc, x4t, x4, positions, coarse, fine,
                                        b.getI64IntegerAttr(rd), b.getBoolAttr(interleaved),
                                        b.getI64IntegerAttr(rows));
    if (xt.getRank() == 3)
      y = mergeHeads(loc, y);
    replace(op, y);
  }

  /// Slice(x, [start], [end], [axis = last]) with constant bounds.
  bool matchLastAxisSlice(Value v, Value &x, int64_t &start, int64_t &end) {
    auto s = v.getDefiningOp<ox::SliceOp>();
    if (!s || s->getNumOperands() < 4)
      return false;
    auto st = eval.vectorOf(s->getOperand(1)), en = eval.vectorOf(s->getOperand(2)),
         ax = eval.vectorOf(s->getOperand(3));
    if (!st || !en || !ax || st->size() != 1 || en->size() != 1 || ax->size() != 1)
      return false;
    if (s->getNumOperands() > 4) {
      auto steps = eval.vectorOf(s->getOperand(4));
      if (!steps || steps->size() != 1 || constantOf((*steps)[0]) != std::optional<int64_t>(1))
        return false;
    }
    x = s->getOperand(0);
    auto axis = constantOf((*ax)[0]), a = constantOf((*st)[0]), e = constantOf((*en)[0]);
    int64_t r = rankOf(x);
    auto xt = dyn_cast<RankedTensorType>(x.getType());
    if (!axis || !a || !e || !xt || !isLastAxis(*axis, r) || xt.isDynamicDim(r - 1))
      return false;
    int64_t d = xt.getDimSize(r - 1);
    start = std::clamp<int64_t>(*a < 0 ? *a + d : *a, 0, d);
    end = std::clamp<int64_t>(*e < 0 ? *e + d : *e, 0, d);
    return true;
  }

  /// x * cosU + Concat(-x[..., h:], x[..., :h]) * sinU (half rotation), where
  /// cosU/sinU = Unsqueeze(Cos/Sin(Concat(T, T)), [1]).
  void raiseDecomposedRope(Operation *add) {
    auto asMul = [](Value v) { return v.getDefiningOp<ox::MulOp>(); };
    auto m0 = asMul(add->getOperand(0)), m1 = asMul(add->getOperand(1));
    if (!m0 || !m1)
      return;
    for (int attempt = 0; attempt < 2; ++attempt, std::swap(m0, m1)) {
      auto tableOf = [](Operation *mul, auto opTag, Value &other) -> Value {
        using OpT = decltype(opTag);
        for (unsigned i = 0; i < 2; ++i) {
          // Unsqueeze(., [1]) over the heads and precision Casts (16-bit
          // exports compute cos/sin in float32), in either order.
          Value t = mul->getOperand(i);
          while (true) {
            if (auto u = t.getDefiningOp<ox::UnsqueezeOp>())
              t = u->getOperand(0);
            else if (isPrecisionCast(t.getDefiningOp()))
              t = t.getDefiningOp()->getOperand(0);
            else
              break;
          }
          if (auto trig = t.getDefiningOp<OpT>()) {
            other = mul->getOperand(1 - i);
            return trig->getOperand(0);
          }
        }
        return {};
      };
      Value x, rotated;
      Value cosArg = tableOf(m0, ox::CosOp(), x);
      Value sinArg = tableOf(m1, ox::SinOp(), rotated);
      if (!cosArg || cosArg != sinArg)
        continue;
      // cos/sin tables: Unsqueeze(., [1]) of [B, S, d] to broadcast over heads.
      for (Operation *mul : {m0.getOperation(), m1.getOperation()})
        for (Value t : mul->getOperands())
          if (auto u = peelPrecisionCasts(t).getDefiningOp<ox::UnsqueezeOp>()) {
            auto axes = eval.vectorOf(u->getOperand(1));
            if (!axes || axes->size() != 1 || constantOf((*axes)[0]) != std::optional<int64_t>(1))
              return;
          }
      // Angle table duplicated for half rotation: Concat(T, T) on the last axis.
      auto dup = cosArg.getDefiningOp<ox::ConcatOp>();
      if (!dup || dup->getNumOperands() != 2 || dup->getOperand(0) != dup->getOperand(1) ||
          !isLastAxis(dup.getAxis(), rankOf(cosArg)))
        continue;
      auto angles = matchAngleTable(dup->getOperand(0));
      if (!angles)
        continue;
      // rotated = Concat(Neg(x[h:d]), x[0:h]).
      auto cat = rotated.getDefiningOp<ox::ConcatOp>();
      if (!cat || cat->getNumOperands() != 2 || !isLastAxis(cat.getAxis(), rankOf(rotated)))
        continue;
      auto neg = cat->getOperand(0).getDefiningOp<ox::NegOp>();
      if (!neg)
        continue;
      Value x1, x2;
      int64_t s1, e1, s2, e2;
      if (!matchLastAxisSlice(neg->getOperand(0), x2, s2, e2) ||
          !matchLastAxisSlice(cat->getOperand(1), x1, s1, e1) || x1 != x || x2 != x)
        continue;
      auto xt = dyn_cast<RankedTensorType>(x.getType());
      int64_t d = xt ? xt.getDimSize(xt.getRank() - 1) : -1;
      int64_t h = angles->halfDim;
      if (!xt || xt.getRank() != 4 || d != 2 * h || s1 != 0 || e1 != h || s2 != h || e2 != d ||
          xt != add->getResult(0).getType())
        continue;
      replace(add, emitRope(add, x, *angles, /*interleaved=*/false));
      return;
    }
  }

  //===--------------------------------------------------------------------===//
  // com.microsoft forms: [B, S, N*D] activations
  //===--------------------------------------------------------------------===//

  Value i64Constant(Location loc, ArrayRef<int64_t> values) {
    auto t = RankedTensorType::get({static_cast<int64_t>(values.size())}, b.getI64Type());
    return ox::ConstantOp::create(b, loc, TypeRange{t}, ValueRange{},
                                  DenseElementsAttr::get(t, values))
        ->getResult(0);
  }

  /// [B, S, N*D] -> [B, N, S, D] (Reshape with 0 = copy, then Transpose).
  Value splitHeads(Location loc, Value x, int64_t n) {
    auto t = cast<RankedTensorType>(x.getType());
    int64_t d = t.getDimSize(2) / n;
    auto split = RankedTensorType::get({t.getDimSize(0), t.getDimSize(1), n, d},
                                       t.getElementType());
    Value r = ox::ReshapeOp::create(b, loc, TypeRange{split},
                                    ValueRange{x, i64Constant(loc, {0, 0, n, d})},
                                    IntegerAttr())
                  ->getResult(0);
    auto heads = RankedTensorType::get({t.getDimSize(0), n, t.getDimSize(1), d},
                                       t.getElementType());
    return ox::TransposeOp::create(b, loc, TypeRange{heads}, ValueRange{r},
                                   b.getDenseI64ArrayAttr({0, 2, 1, 3}))
        ->getResult(0);
  }

  /// [B, N, S, D] -> [B, S, N*D].
  Value mergeHeads(Location loc, Value y) {
    auto t = cast<RankedTensorType>(y.getType());
    auto tr = RankedTensorType::get({t.getDimSize(0), t.getDimSize(2), t.getDimSize(1),
                                     t.getDimSize(3)},
                                    t.getElementType());
    Value x = ox::TransposeOp::create(b, loc, TypeRange{tr}, ValueRange{y},
                                      b.getDenseI64ArrayAttr({0, 2, 1, 3}))
                  ->getResult(0);
    int64_t nd = t.getDimSize(1) * t.getDimSize(3);
    auto merged = RankedTensorType::get({t.getDimSize(0), t.getDimSize(2), nd},
                                        t.getElementType());
    return ox::ReshapeOp::create(b, loc, TypeRange{merged},
                                 ValueRange{x, i64Constant(loc, {0, 0, nd})}, IntegerAttr())
        ->getResult(0);
  }

  /// [B, S, hidden] with static hidden divisible by n.
  static bool isPacked3d(Value v, int64_t n) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t && t.getRank() == 3 && !t.isDynamicDim(2) && n > 0 && t.getDimSize(2) % n == 0;
  }

  /// Recovers theta from cos/sin caches [max_pos, n] (cos(p*f_j), sin(p*f_j)):
  /// f_j = atan2(sin[1][j], cos[1][j]), fitted to theta^(-2j/(2n)); then
  /// checked against a far row, so a table of anything else is refused.
  std::optional<Angles> matchCosSinCache(Value cosV, Value sinV) {
    auto ct = dyn_cast<RankedTensorType>(cosV.getType());
    if (!ct || ct != sinV.getType() || ct.getRank() != 2 || !ct.hasStaticShape() ||
        ct.getDimSize(0) < 2)
      return std::nullopt;
    int64_t rows = ct.getDimSize(0), n = ct.getDimSize(1);
    auto c1 = readFloatElements(cosV, n, n), s1 = readFloatElements(sinV, n, n);
    if (!c1 || !s1)
      return std::nullopt;
    SmallVector<double> f;
    for (int64_t j = 0; j < n; ++j)
      f.push_back(std::atan2((*s1)[j], (*c1)[j]));
    Angles a;
    if (!fitInvFreq(f, a, 1e-4))
      return std::nullopt;
    int64_t far = rows - 1;
    auto cf = readFloatElements(cosV, far * n, n), sf = readFloatElements(sinV, far * n, n);
    if (!cf || !sf)
      return std::nullopt;
    for (int64_t j = 0; j < n; ++j) {
      double angle = far * (std::pow(a.theta, -2.0 * j / (2.0 * n)) / a.factor);
      // fp32 angles carry ~far * 6e-8 radians of rounding.
      double tol = 1e-5 + 2e-7 * far;
      if (std::fabs(std::cos(angle) - (*cf)[j]) > tol ||
          std::fabs(std::sin(angle) - (*sf)[j]) > tol)
        return std::nullopt;
    }
    return a;
  }

  /// com.microsoft.RotaryEmbedding(x, position_ids, cos_cache, sin_cache).
  /// com.microsoft.RotaryEmbedding: raised to attn.rope when its caches are
  /// a recognised angle table; otherwise, with [B, S] position ids and no
  /// packed batching, rewritten to ONNX RotaryEmbedding-23 (x, cos_cache,
  /// sin_cache, position_ids), which has the same definition (ONNX adopted
  /// ORT's op: same layouts, caches [max_pos, rd / 2], interleaving and
  /// rotary_embedding_dim) and a lowering of its own (4-D: a 3-D input is
  /// split into heads around it); ORT ignores `scale`.
  void raiseMsRotaryEmbedding(ox::MsRotaryEmbeddingOp op) {
    // Both forms need [B, S] position ids and no packed batching.
    auto pt = dyn_cast<RankedTensorType>(op->getOperand(1).getType());
    if (!pt || pt.getRank() != 2 || op.getIsPackedBatching().value_or(0) != 0)
      return;
    if (tryRaiseMsRotaryEmbedding(op))
      return;
    // The 3-D [B, S, N * D] form goes through [B, N, S, D] (the lowered one).
    Value x = op->getOperand(0);
    Location loc = op->getLoc();
    int64_t heads = op.getNumHeads().value_or(0);
    bool packed = rankOf(x) == 3;
    if (packed && !isPacked3d(x, heads))
      return;
    if (!packed && rankOf(x) != 4)
      return;
    Value x4 = packed ? splitHeads(loc, x, heads) : x;
    auto r = ox::RotaryEmbeddingOp::create(
        b, loc, TypeRange{x4.getType()},
        ValueRange{x4, op->getOperand(2), op->getOperand(3), op->getOperand(1)});
    if (auto i = op.getInterleavedAttr())
      r.setInterleavedAttr(i);
    if (auto d = op.getRotaryEmbeddingDimAttr())
      r.setRotaryEmbeddingDimAttr(d);
    Value y = packed ? mergeHeads(loc, r->getResult(0)) : r->getResult(0);
    op->getResult(0).replaceAllUsesWith(y);
  }

  bool tryRaiseMsRotaryEmbedding(ox::MsRotaryEmbeddingOp op) {
    Value x = op->getOperand(0), pos = op->getOperand(1);
    auto a = matchCosSinCache(op->getOperand(2), op->getOperand(3));
    if (!a)
      return false;
    int64_t rd = op.getRotaryEmbeddingDim().value_or(0);
    if (rd != 0 && rd != 2 * a->halfDim)
      return false;
    a->positions = pos;
    bool interleaved = op.getInterleaved().value_or(0) != 0;
    Location loc = op->getLoc();
    if (rankOf(x) == 4) {
      auto xt = cast<RankedTensorType>(x.getType());
      if (xt.getDimSize(3) < 2 * a->halfDim)
        return false;
      replace(op, emitRope(op, x, *a, interleaved));
      return true;
    }
    int64_t heads = op.getNumHeads().value_or(0);
    auto xt = dyn_cast<RankedTensorType>(x.getType());
    if (heads <= 0 && xt && rankOf(x) == 3 && !xt.isDynamicDim(2))
      heads = xt.getDimSize(2) / (2 * a->halfDim); // full rotary: D = rd
    if (!isPacked3d(x, heads) || xt.getDimSize(2) / heads < 2 * a->halfDim)
      return false;
    Value y = emitRope(op, splitHeads(loc, x, heads), *a, interleaved);
    replace(op, mergeHeads(loc, y));
    return true;
  }

  /// SkipSimplifiedLayerNormalization: sum = x + skip [+ bias]; y = RMSNorm(sum).
  void raiseSkipSimplifiedLayerNorm(ox::MsSkipSimplifiedLayerNormalizationOp op) {
    for (unsigned i : {1u, 2u})
      if (op->getNumResults() > i && !op->getResult(i).use_empty())
        return;
    Value x = op->getOperand(0), skip = op->getOperand(1), w = op->getOperand(2);
    if (x.getType() != skip.getType() || x.getType() != op->getResult(0).getType())
      return;
    Location loc = op->getLoc();
    Value sum = ox::AddOp::create(b, loc, TypeRange{x.getType()}, ValueRange{x, skip})
                    ->getResult(0);
    if (op->getNumOperands() > 3 && !isa<NoneType>(op->getOperand(3).getType()))
      sum = ox::AddOp::create(b, loc, TypeRange{x.getType()},
                              ValueRange{sum, op->getOperand(3)})
                ->getResult(0);
    if (op->getNumResults() > 3)
      op->getResult(3).replaceAllUsesWith(sum);
    auto xt = cast<RankedTensorType>(x.getType());
    double eps = op.getEpsilon() ? op.getEpsilon()->convertToFloat() : 1e-5;
    auto norm = attn::RmsNormOp::create(
        b, loc, xt, sum, w, b.getF64FloatAttr(snapFloat(eps)),
        b.getI64IntegerAttr(xt.getRank() - 1),
        xt.getElementType().isF32() ? TypeAttr() : TypeAttr::get(b.getF32Type()));
    replace(op, norm);
  }

  /// com.microsoft.MultiHeadAttention with separate Q, K, V [B, S, N*D],
  /// optionally key_padding_mask (input 4): 2-D [B, S_kv] (1 keeps a key,
  /// 0 hides it) or 1-D [B] key lengths; causal iff unidirectional. Bias,
  /// attention_bias, past and packed forms stay unraised with a warning.
  /// ORT hides masked keys with mask_filter_value (-10000) rather than -inf;
  /// both give exp() == 0 unless every key of a row is hidden (ORT then
  /// averages V, h20 gives 0).
  void raiseMsMultiHeadAttention(ox::MsMultiHeadAttentionOp op) {
    auto present = [&](unsigned i) {
      return op->getNumOperands() > i && !isa<NoneType>(op->getOperand(i).getType());
    };
    auto keep = [&](const Twine &why) {
      op->emitWarning("MultiHeadAttention not raised: ") << why;
    };
    for (unsigned i = 5; i < op->getNumOperands(); ++i)
      if (present(i))
        return keep("attention_bias, past_key / past_value and the other optional inputs "
                    "are not supported");
    if (present(3))
      return keep("the bias input (unfused Q/K/V bias) is not supported");
    for (unsigned i = 1; i < op->getNumResults(); ++i)
      if (!op->getResult(i).use_empty())
        return keep("present_key / present_value outputs are not supported");
    int64_t n = op.getNumHeads().value_or(0);
    if (!present(1) || !present(2))
      return keep("packed QKV (no key / value inputs) is not supported");
    Value q = op->getOperand(0), k = op->getOperand(1), v = op->getOperand(2);
    if (!isPacked3d(q, n) || !isPacked3d(k, n) || !isPacked3d(v, n))
      return keep("Q, K, V must be 3-D [B, S, N*D] with num_heads dividing a static hidden size");
    int64_t d = cast<RankedTensorType>(q.getType()).getDimSize(2) / n;
    double scale = op.getScale() && op.getScale()->convertToFloat() != 0
                       ? op.getScale()->convertToFloat()
                       : 1.0 / std::sqrt(static_cast<double>(d));
    Location loc = op->getLoc();
    Value qh = splitHeads(loc, q, n), kh = splitHeads(loc, k, n), vh = splitHeads(loc, v, n);
    Value mask;
    if (present(4)) {
      Value kpm = op->getOperand(4);
      auto mt = dyn_cast<RankedTensorType>(kpm.getType());
      if (mt && mt.getRank() == 2)
        mask = buildKeyPaddingMask2d(b, loc, kpm);
      else if (mt && mt.getRank() == 1 && mt.getElementType().isInteger())
        mask = buildKeyPaddingMask(b, loc, castToI64(loc, kpm), kh);
      if (!mask)
        return keep("key_padding_mask must be an integer [B, S_kv] (1 keep, 0 hide) or [B] "
                    "key lengths");
    }
    Value y = emitAttentionOfType(op, qh, kh, vh, chooseMask(mask, qh, kh), scale,
                                  op.getUnidirectional().value_or(0) != 0, std::nullopt);
    if (!y)
      return keep("its operands have no attn.attention form");
    replace(op, mergeHeads(loc, y));
  }

  /// `x` as i64 (an onnx.Cast unless it already is).
  Value castToI64(Location loc, Value x) {
    auto t = cast<RankedTensorType>(x.getType());
    if (t.getElementType().isInteger(64))
      return x;
    auto c = ox::CastOp::create(b, loc, TypeRange{t.clone(b.getI64Type())}, ValueRange{x});
    c->setAttr("to", b.getIntegerAttr(b.getIntegerType(64, true), 7)); // INT64
    return c->getResult(0);
  }

  /// x[..., start:end] of a rank-3 `x` with a static last dim.
  Value sliceLastAxis(Location loc, Value x, int64_t start, int64_t end) {
    auto t = cast<RankedTensorType>(x.getType());
    auto rt = RankedTensorType::get({t.getDimSize(0), t.getDimSize(1), end - start},
                                    t.getElementType());
    return ox::SliceOp::create(b, loc, TypeRange{rt},
                               ValueRange{x, i64Constant(loc, {start}), i64Constant(loc, {end}),
                                          i64Constant(loc, {2})})
        ->getResult(0);
  }

  /// com.microsoft.GroupQueryAttention in the prompt phase (no past KV):
  /// separate or packed QKV ([B, S, (N + 2 Nkv) D], key and value omitted),
  /// do_rotary with cos_cache / sin_cache [max_pos, D / 2] at positions
  /// 0..S-1 (ONNX RotaryEmbedding-23, the same definition), causal, with
  /// local_window_size, softcap and scale. seqlens_k [B] (i32, total key
  /// length - 1 per batch) hides keys j > seqlens_k[b]: when that is provably
  /// S - 1 no mask is needed, otherwise a boolean key mask is built from the
  /// run-time values. total_sequence_length only sizes present_key/value in
  /// ORT (onnxruntime/contrib_ops/cpu/bert/group_query_attention.cc) and is
  /// not read. What is not supported stays unraised with a warning.
  void raiseMsGroupQueryAttention(ox::MsGroupQueryAttentionOp op) {
    auto present = [&](unsigned i) {
      return op->getNumOperands() > i && !isa<NoneType>(op->getOperand(i).getType());
    };
    auto keep = [&](const Twine &why) {
      op->emitWarning("GroupQueryAttention not raised: ") << why;
    };
    if (present(3) || present(4))
      return keep("past_key / past_value (the decode phase) are not supported: h20 runs the "
                  "prompt phase");
    for (unsigned i = 9; i < op->getNumOperands(); ++i)
      if (present(i))
        return keep("position_ids / attention_bias inputs are not supported");
    bool rotary = op.getDoRotary().value_or(0) != 0;
    if (rotary != (present(7) && present(8)) || present(7) != present(8))
      return keep("do_rotary needs cos_cache and sin_cache, and the caches need do_rotary");
    for (unsigned i = 1; i < op->getNumResults(); ++i)
      if (!op->getResult(i).use_empty())
        return keep("present_key / present_value outputs are not supported");
    int64_t n = op.getNumHeads().value_or(0), nkv = op.getKvNumHeads().value_or(0);
    if (n <= 0 || nkv <= 0 || n % nkv)
      return keep("num_heads must be a positive multiple of kv_num_heads");
    Location loc = op->getLoc();
    Value q = op->getOperand(0), k, v;
    if (present(1) != present(2))
      return keep("key and value must be given together (or both omitted: packed QKV)");
    if (present(1)) {
      k = op->getOperand(1);
      v = op->getOperand(2);
    } else {
      if (!isPacked3d(q, n + 2 * nkv))
        return keep("packed QKV must be [B, S, (num_heads + 2 kv_num_heads) * D]");
      int64_t d = cast<RankedTensorType>(q.getType()).getDimSize(2) / (n + 2 * nkv);
      Value packed = q;
      q = sliceLastAxis(loc, packed, 0, n * d);
      k = sliceLastAxis(loc, packed, n * d, (n + nkv) * d);
      v = sliceLastAxis(loc, packed, (n + nkv) * d, (n + 2 * nkv) * d);
    }
    if (!isPacked3d(q, n) || !isPacked3d(k, nkv) || !isPacked3d(v, nkv))
      return keep("Q, K, V must be 3-D [B, S, heads * D] with static hidden sizes");
    int64_t d = cast<RankedTensorType>(q.getType()).getDimSize(2) / n;
    double scale = op.getScale() && op.getScale()->convertToFloat() != 0
                       ? op.getScale()->convertToFloat()
                       : 1.0 / std::sqrt(static_cast<double>(d));
    std::optional<double> softcap;
    if (auto c = op.getSoftcap(); c && c->convertToFloat() > 0)
      softcap = c->convertToFloat();
    // ORT 1.30 keeps keys [i - local_window_size + 1, i]: local_window_size
    // tokens, the current one included (measured against its CPU kernel:
    // Oracle/ort-ms-contrib-ops.test, gqa_window; lws + 1 tokens is off).
    std::optional<int64_t> window;
    if (int64_t lws = op.getLocalWindowSize().value_or(-1); lws > 0)
      window = lws;
    Value qh = splitHeads(loc, q, n), kh = splitHeads(loc, k, nkv), vh = splitHeads(loc, v, nkv);
    if (rotary) {
      auto ct = dyn_cast<RankedTensorType>(op->getOperand(7).getType());
      // ORT's GroupQueryAttention rotates the whole head (it rejects other
      // cache widths); so does this.
      if (!ct || ct.getRank() != 2 || ct.isDynamicDim(1) || 2 * ct.getDimSize(1) != d)
        return keep("cos_cache / sin_cache must be [max_pos, head_size / 2]");
      Value pos = buildPromptPositions(b, loc, q);
      auto rope = [&](Value x) {
        auto r = ox::RotaryEmbeddingOp::create(
            b, loc, TypeRange{x.getType()},
            ValueRange{x, op->getOperand(7), op->getOperand(8), pos});
        if (int64_t il = op.getRotaryInterleaved().value_or(0))
          r->setAttr("interleaved", b.getIntegerAttr(b.getIntegerType(64, true), il));
        return r->getResult(0);
      };
      qh = rope(qh);
      kh = rope(kh);
    }
    auto qs = eval.shapeOf(q);
    auto seqlens = eval.get(op->getOperand(5));
    bool provenLengths = qs && seqlens && seqlens->elem &&
                         eval.isConstantOnDomain(symSub(seqlens->elem, (*qs)[1]),
                                                 seqlens->dims, -1);
    Value mask;
    if (!provenLengths) {
      auto st = dyn_cast<RankedTensorType>(op->getOperand(5).getType());
      if (!st || st.getRank() != 1 || !st.getElementType().isInteger())
        return keep("seqlens_k must be an integer [B] tensor");
      // Keys j <= seqlens_k[b] are the batch's; later keys are padding.
      Value lengths = ox::AddOp::create(b, loc, TypeRange{st.clone(b.getI64Type())},
                                        ValueRange{castToI64(loc, op->getOperand(5)),
                                                   i64Constant(loc, {1})})
                          ->getResult(0);
      mask = buildKeyPaddingMask(b, loc, lengths, kh);
      if (!mask)
        return keep("seqlens_k does not broadcast with the keys");
    }
    Value y = emitAttentionOfType(op, qh, kh, vh, chooseMask(mask, qh, kh), scale,
                                  /*isCausal=*/true, softcap, window);
    if (!y)
      return keep("its operands have no attn.attention form");
    replace(op, mergeHeads(loc, y));
  }

  //===--------------------------------------------------------------------===//
  // Attention
  //===--------------------------------------------------------------------===//

  /// Folds GQA's repeat_kv (Unsqueeze(k, [2]) -> Expand to [B, Hkv, g, S, D]
  /// -> Reshape to [B, Hkv*g, S, D]) back to k and g; otherwise (k, 1).
  std::pair<Value, int64_t> stripKvRepeat(Value k) {
    auto reshape = k.getDefiningOp<ox::ReshapeOp>();
    auto expand = reshape ? reshape->getOperand(0).getDefiningOp<ox::ExpandOp>() : nullptr;
    auto unsq = expand ? expand->getOperand(0).getDefiningOp<ox::UnsqueezeOp>() : nullptr;
    if (!unsq)
      return {k, 1};
    Value base = unsq->getOperand(0);
    auto axes = eval.vectorOf(unsq->getOperand(1));
    auto bs = eval.shapeOf(base), es = eval.shapeOf(expand->getResult(0)),
         ks = eval.shapeOf(k);
    if (!axes || axes->size() != 1 || constantOf((*axes)[0]) != std::optional<int64_t>(2) ||
        !bs || !es || !ks || bs->size() != 4 || es->size() != 5 || ks->size() != 4)
      return {k, 1};
    auto g = constantOf((*es)[2]);
    if (!g || *g < 1)
      return {k, 1};
    const auto &B = *bs, &E = *es, &K = *ks;
    if (!provablyEqual(E[0], B[0]) || !provablyEqual(E[1], B[1]) ||
        !provablyEqual(E[3], B[2]) || !provablyEqual(E[4], B[3]) ||
        !provablyEqual(K[0], B[0]) || !provablyEqual(K[1], symMul(symConst(*g), B[1])) ||
        !provablyEqual(K[2], B[2]) || !provablyEqual(K[3], B[3]))
      return {k, 1};
    return {base, *g};
  }

  /// Mask handling shared by both forms: a proven mask whose dims match
  /// (S_q, S_kv) becomes attributes; anything else stays an operand.
  struct MaskChoice {
    Value operand;
    std::optional<ProvenMask> proven;
    bool unusable = false; ///< an unranked mask attn ops cannot take
  };
  MaskChoice chooseMask(Value mask, Value q, Value k) {
    MaskChoice choice{mask, std::nullopt};
    if (!mask)
      return choice;
    if (!isa<RankedTensorType>(mask.getType()))
      return {Value(), std::nullopt, /*unusable=*/true};
    Value visible = visibleCondition(mask);
    if (!visible)
      return choice;
    auto proven = ProvenMask::of(visible);
    auto ms = eval.shapeOf(visible), qs = eval.shapeOf(q), ks = eval.shapeOf(k);
    if (!proven || !ms || !qs || !ks || ms->size() < 2 || qs->size() != 4 || ks->size() != 4)
      return choice;
    if (!provablyEqual((*ms)[ms->size() - 2], (*qs)[2]) ||
        !provablyEqual((*ms)[ms->size() - 1], (*ks)[2]))
      return choice;
    return {Value(), proven};
  }

  Value emitAttention(Operation *op, Value q, Value k, Value v, MaskChoice mask,
                      double scale, bool isCausal, std::optional<double> softcap) {
    Value r = emitAttentionOfType(op, q, k, v, mask, scale, isCausal, softcap);
    if (r && r.getType() != op->getResult(0).getType()) {
      r.getDefiningOp()->erase();
      return {};
    }
    return r;
  }

  /// The attn.attention of (q, k, v), result type [B, Hq, S_q, Dv] from the
  /// operands; the caller checks it against what it replaces.
  Value emitAttentionOfType(Operation *op, Value q, Value k, Value v, MaskChoice mask,
                            double scale, bool isCausal, std::optional<double> softcap,
                            std::optional<int64_t> window = std::nullopt,
                            attn::CausalAlignment isCausalAlignment =
                                attn::CausalAlignment::top_left) {
    if (mask.unusable)
      return {};
    auto [kb, gk] = stripKvRepeat(k);
    auto [vb, gv] = stripKvRepeat(v);
    if (gk != gv)
      return {};
    auto qt = dyn_cast<RankedTensorType>(q.getType());
    auto kt = dyn_cast<RankedTensorType>(kb.getType());
    auto vt = dyn_cast<RankedTensorType>(vb.getType());
    if (!qt || !kt || !vt || qt.getRank() != 4 || kt.getRank() != 4 || vt.getRank() != 4 ||
        qt.isDynamicDim(1) || kt.isDynamicDim(1) || qt.getDimSize(1) % kt.getDimSize(1) != 0)
      return {};
    int64_t group = qt.getDimSize(1) / kt.getDimSize(1);
    bool causal = isCausal;
    auto alignment = isCausalAlignment;
    if (mask.proven && mask.proven->causal) {
      if (isCausal && mask.proven->alignment != alignment)
        return {};
      causal = true;
      alignment = mask.proven->alignment;
      window = mask.proven->window;
    }
    if (!isCausal && !mask.proven)
      alignment = attn::CausalAlignment::bottom_right;
    SmallVector<int64_t> shape{qt.getDimSize(0), qt.getDimSize(1), qt.getDimSize(2),
                               vt.getDimSize(3)};
    auto rt = RankedTensorType::get(shape, qt.getElementType());
    // When S_q == S_kv (provably) the two alignments agree: prefer the
    // canonical bottom_right so equal models print equally.
    if (auto qs = eval.shapeOf(q), ks = eval.shapeOf(kb);
        qs && ks && provablyEqual((*qs)[2], (*ks)[2]))
      alignment = attn::CausalAlignment::bottom_right;
    if (!qt.isDynamicDim(3))
      scale = snapScale(scale, qt.getDimSize(3));
    return attn::AttentionOp::create(
        b, op->getLoc(), rt, q, kb, vb, mask.operand, Value(), b.getF64FloatAttr(scale),
        b.getBoolAttr(causal), attn::CausalAlignmentAttr::get(b.getContext(), alignment),
        window ? b.getI64IntegerAttr(*window) : IntegerAttr(),
        softcap ? b.getF64FloatAttr(snapFloat(*softcap)) : FloatAttr(),
        b.getI64IntegerAttr(group));
  }

  /// Why `mask` (rank <= 4, right-aligned against [B, Hq, S_q, S_kv] of
  /// q [B, Hq, S_q, D] and k [B, Hkv, S_kv, D]) does not provably broadcast
  /// to the scores; empty when every dim is 1 or provably the scores' dim.
  /// The kernels index the mask with the scores' indices: a dim that might
  /// differ at run time (another dim_param, a dynamic size) is refused.
  std::string maskMisfit(Value mask, Value q, Value k) {
    auto mt = dyn_cast<RankedTensorType>(mask.getType());
    if (!mt)
      return "";
    if (mt.getRank() > 4)
      return "attn_mask has rank " + std::to_string(mt.getRank()) + ", more than 4";
    auto ms = eval.shapeOf(mask), qs = eval.shapeOf(q), ks = eval.shapeOf(k);
    if (!ms || !qs || !ks || qs->size() != 4 || ks->size() != 4)
      return "the shapes of attn_mask, Q and K are not known";
    const char *names[] = {"batch", "query heads", "query length S_q", "key length S_kv"};
    SymExpr target[] = {(*qs)[0], (*qs)[1], (*qs)[2], (*ks)[2]};
    int64_t r = mt.getRank();
    for (int64_t d = 0; d < r; ++d) {
      int64_t t = 4 - r + d;
      if (constantOf((*ms)[d]) == std::optional<int64_t>(1) || provablyEqual((*ms)[d], target[t]))
        continue;
      auto have = constantOf((*ms)[d]), want = constantOf(target[t]);
      std::string sizes = have && want ? " (" + std::to_string(*have) + " vs " +
                                             std::to_string(*want) + ")"
                                       : " (not provably equal)";
      return "attn_mask dim " + std::to_string(d) + " is neither 1 nor the " + names[t] + sizes;
    }
    return "";
  }

  /// ONNX Attention-23/24/25: Q, K, V (4-D [B, H, S, D], or 3-D [B, S, H*D]
  /// with q_num_heads / kv_num_heads), optional mask (a mask with fewer keys
  /// than K is padded with masked-out keys), optional past_key / past_value
  /// (keys = past ++ new, returned as present_key / value), optional
  /// nonpad_kv_seqlen, local windows, and the qk_matmul_output output (an
  /// attn.attention_scores beside the attn.attention).
  ///
  /// Query row i sits at key position pos(i) = i + offset, offset = S_past
  /// with a past, nonpad_kv_seqlen[b] - S_q with nonpad_kv_seqlen and no past,
  /// else 0 (ONNX's reference, onnx/reference/ops/op_attention.py). When that
  /// placement is attn.attention's top-left or bottom-right anchor and the
  /// window ends at the diagonal, it becomes attributes; otherwise (a
  /// per-batch offset, S_past with fewer new keys than queries, a window
  /// reaching right of the diagonal) an explicit boolean mask operand.
  void raiseAttention(ox::AttentionOp op) {
    auto present = [&](unsigned i) {
      return op->getNumOperands() > i && !isa<NoneType>(op->getOperand(i).getType());
    };
    // Each form it cannot raise leaves the op with a warning saying why
    // (the op has no other lowering, so compiling then fails on it).
    auto keep = [&](const Twine &why) { op->emitWarning("Attention not raised: ") << why; };
    if (present(4) != present(5))
      return keep("past_key and past_value must be given together");
    Value q = op->getOperand(0), k = op->getOperand(1), v = op->getOperand(2);
    int64_t rank = rankOf(q);
    if (rank != 3 && rank != 4)
      return keep("Q must be 3-D [B, S, H*D] or 4-D [B, H, S, D]");
    Location loc = op.getLoc();
    if (rank == 3) {
      int64_t hq = op.getQNumHeads().value_or(0), hkv = op.getKvNumHeads().value_or(0);
      if (!isPacked3d(q, hq) || !isPacked3d(k, hkv) || !isPacked3d(v, hkv))
        return keep("3-D Q, K, V need q_num_heads / kv_num_heads dividing their static "
                    "hidden sizes");
      q = splitHeads(loc, q, hq);
      k = splitHeads(loc, k, hkv);
      v = splitHeads(loc, v, hkv);
    }
    if (rankOf(k) != 4 || rankOf(v) != 4)
      return keep("K and V must have Q's rank");
    {
      auto qt = cast<RankedTensorType>(q.getType()), kt = cast<RankedTensorType>(k.getType());
      if (!qt.isDynamicDim(1) && !kt.isDynamicDim(1) &&
          (kt.getDimSize(1) == 0 || qt.getDimSize(1) % kt.getDimSize(1) != 0))
        return keep("query heads (" + Twine(qt.getDimSize(1)) +
                    ") must be a multiple of key/value heads (" + Twine(kt.getDimSize(1)) + ")");
    }
    // Visibility: is_causal bounds the window at the diagonal.
    bool isCausal = op.getIsCausal().value_or(0) != 0;
    int64_t left = op.getLeftWindowSize().value_or(-1);
    int64_t right = op.getRightWindowSize().value_or(-1);
    if (isCausal)
      right = 0;
    if (left < -1 || right < -1)
      return keep("window sizes must be >= -1 (-1: unbounded)");
    bool anchored = left >= 0 || right >= 0;
    // With a past, bottom-right (offset S_kv - S_q) is S_past only when as
    // many keys as queries are new.
    bool offsetUnaligned = false;
    if (present(4) && anchored) {
      auto qs = eval.shapeOf(q), ks = eval.shapeOf(k);
      offsetUnaligned = !qs || !ks || qs->size() != 4 || ks->size() != 4 ||
                        !provablyEqual((*qs)[2], (*ks)[2]);
    }
    if (present(4)) {
      auto appendPast = [&](Value past, Value cur) -> Value {
        auto pt = dyn_cast<RankedTensorType>(past.getType());
        auto ct = cast<RankedTensorType>(cur.getType());
        if (!pt || pt.getRank() != 4)
          return {};
        int64_t s = pt.isDynamicDim(2) || ct.isDynamicDim(2) ? ShapedType::kDynamic
                                                             : pt.getDimSize(2) + ct.getDimSize(2);
        auto t = RankedTensorType::get({ct.getDimSize(0), ct.getDimSize(1), s, ct.getDimSize(3)},
                                       ct.getElementType());
        return ox::ConcatOp::create(b, loc, TypeRange{t}, ValueRange{past, cur},
                                    b.getIntegerAttr(b.getIntegerType(64, true), 2))
            ->getResult(0);
      };
      k = appendPast(op->getOperand(4), k);
      v = appendPast(op->getOperand(5), v);
      if (!k || !v)
        return keep("past_key / past_value must be 4-D [B, H, S_past, D]");
    }
    // present_key / present_value: past ++ new, or the new K, V alone.
    for (auto [i, val] : {std::pair<unsigned, Value>{1, k}, {2, v}})
      if (op->getNumResults() > i && !op->getResult(i).use_empty() &&
          op->getResult(i).getType() != val.getType())
        return keep("present_key / present_value type differs from the keys / values [B, H, S, D]");
    Value mask = present(3) ? op->getOperand(3) : Value();
    if (auto mt = mask ? dyn_cast<RankedTensorType>(mask.getType()) : RankedTensorType()) {
      int64_t skv = cast<RankedTensorType>(k.getType()).getDimSize(2);
      if (mt.getRank() >= 1 && !mt.isDynamicDim(mt.getRank() - 1) && !ShapedType::isDynamic(skv) &&
          mt.getShape().back() < skv) {
        mask = padMaskKeys(b, loc, mask, skv);
        if (!mask)
          return keep("attn_mask has fewer keys than K and other dynamic dims: cannot pad it");
      }
    }
    if (mask) {
      if (std::string why = maskMisfit(mask, q, k); !why.empty())
        return keep(why);
    }
    auto qt = cast<RankedTensorType>(q.getType());
    double scale;
    if (auto sc = op.getScale())
      scale = sc->convertToFloat();
    else if (!qt.isDynamicDim(3))
      scale = 1.0 / std::sqrt(static_cast<double>(qt.getDimSize(3)));
    else
      return keep("a dynamic head size needs an explicit scale");
    std::optional<double> softcap;
    if (auto c = op.getSoftcap(); c && c->convertToFloat() > 0)
      softcap = c->convertToFloat();

    bool perBatchOffset = present(6) && !present(4) && anchored;
    bool rightOfDiagonal = right > 0 || (right < 0 && left >= 0);
    bool causalAttr = false;
    std::optional<int64_t> window;
    if (perBatchOffset || rightOfDiagonal || offsetUnaligned) {
      QueryPlacement placement;
      placement.pastKey = present(4) ? op->getOperand(4) : Value();
      placement.nonpad = present(6) ? op->getOperand(6) : Value();
      placement.left = left;
      placement.right = right;
      Value visible = buildVisibilityMask(b, loc, q, k, placement);
      mask = visible ? restrictMask(b, loc, mask, visible) : Value();
      if (!mask)
        return keep("the visibility mask of this window / offset does not broadcast with attn_mask");
    } else {
      causalAttr = right == 0;
      if (left >= 0)
        window = left + 1; // the window counts the current token
    }
    if (present(6)) {
      mask = withNonpadKv(loc, mask, op->getOperand(6), k);
      if (!mask)
        return keep("nonpad_kv_seqlen must be a 1-D int64 tensor [B] broadcasting with attn_mask");
    }
    // With a past, the queries are the last S_q of the keys: bottom-right
    // (checked above); without one, top-left.
    Value y = emitAttentionOfType(op, q, k, v, chooseMask(mask, q, k), scale, causalAttr, softcap,
                                  window,
                                  present(4) ? attn::CausalAlignment::bottom_right
                                             : attn::CausalAlignment::top_left);
    if (!y)
      return keep("its operands have no attn.attention form (unranked mask, or mismatching GQA)");
    auto attention = y.getDefiningOp<attn::AttentionOp>();
    if (rank == 3)
      y = mergeHeads(loc, y);
    if (y.getType() != op->getResult(0).getType()) {
      // Leave the op; what was built for it is dead and goes with the DCE.
      return keep("Y's declared type differs from [B, Hq, S_q, Dv] of the inputs");
    }
    Value scores;
    if (op->getNumResults() > 3 && !op->getResult(3).use_empty()) {
      scores = emitScores(op, attention);
      if (!scores)
        return keep("qk_matmul_output's declared type differs from [B, Hq, S_q, S_kv]");
    }
    if (op->getNumResults() > 1)
      op->getResult(1).replaceAllUsesWith(k);
    if (op->getNumResults() > 2)
      op->getResult(2).replaceAllUsesWith(v);
    if (scores)
      op->getResult(3).replaceAllUsesWith(scores);
    replace(op, y);
  }

  /// qk_matmul_output of `op` as an attn.attention_scores with the operands
  /// and visibility of `attention`; null when the mode is unknown or the
  /// result type differs from the op's.
  Value emitScores(ox::AttentionOp op, attn::AttentionOp attention) {
    int64_t mode = op.getQkMatmulOutputMode().value_or(0);
    auto stage = attn::symbolizeScoreStage(static_cast<uint32_t>(mode));
    if (mode < 0 || !stage) {
      op->emitWarning("Attention kept: qk_matmul_output_mode ") << mode << " is not 0..3";
      return {};
    }
    auto qt = cast<RankedTensorType>(attention.getQuery().getType());
    auto kt = cast<RankedTensorType>(attention.getKey().getType());
    auto rt = RankedTensorType::get(
        {qt.getDimSize(0), qt.getDimSize(1), qt.getDimSize(2), kt.getDimSize(2)}, qt.getElementType());
    if (rt != op->getResult(3).getType())
      return {};
    return attn::AttentionScoresOp::create(
        b, op.getLoc(), rt, attention.getQuery(), attention.getKey(), attention.getMask(),
        attn::ScoreStageAttr::get(b.getContext(), *stage), attention.getScaleAttr(),
        attention.getCausalAttr(), attention.getAlignmentAttr(), attention.getWindowAttr(),
        attention.getSoftcapAttr(), attention.getKvGroupAttr());
  }

  /// Attention-24's nonpad_kv_seqlen [B]: keys j >= nonpad[b] are padding.
  /// Builds the boolean [B, 1, 1, S_kv] "j < nonpad[b]" and restricts `mask`
  /// to it (restrictMask). It depends on data, so it stays a mask operand.
  Value withNonpadKv(Location loc, Value mask, Value nonpad, Value k) {
    Value valid = buildKeyPaddingMask(b, loc, nonpad, k);
    return valid ? restrictMask(b, loc, mask, valid) : Value();
  }

  /// K^T as Transpose(K, [.., 3, 2]) or Reshape(Transpose(Reshape(K)))
  /// that merges the leading dims, swaps the last two and splits them back.
  Value stripLastTwoTranspose(Value kt) {
    if (auto t = kt.getDefiningOp<ox::TransposeOp>()) {
      if (t.getPerm() && ArrayRef<int64_t>(*t.getPerm()) == ArrayRef<int64_t>{0, 1, 3, 2})
        return t->getOperand(0);
      return {};
    }
    auto r2 = kt.getDefiningOp<ox::ReshapeOp>();
    auto t = r2 ? r2->getOperand(0).getDefiningOp<ox::TransposeOp>() : nullptr;
    auto r1 = t ? t->getOperand(0).getDefiningOp<ox::ReshapeOp>() : nullptr;
    if (!r1 || !t.getPerm() || ArrayRef<int64_t>(*t.getPerm()) != ArrayRef<int64_t>{0, 2, 1})
      return {};
    Value k = r1->getOperand(0);
    auto ks = eval.shapeOf(k), m = eval.shapeOf(r1->getResult(0)), out = eval.shapeOf(kt);
    if (!ks || !m || !out || ks->size() != 4 || m->size() != 3 || out->size() != 4)
      return {};
    const auto &K = *ks, &M = *m, &O = *out;
    if (!provablyEqual(M[0], symMul(K[0], K[1])) || !provablyEqual(M[1], K[2]) ||
        !provablyEqual(M[2], K[3]) || !provablyEqual(O[0], K[0]) || !provablyEqual(O[1], K[1]) ||
        !provablyEqual(O[2], K[3]) || !provablyEqual(O[3], K[2]))
      return {};
    return k;
  }

  /// `c * Tanh(t)` (either operand order, c a positive constant): the logit
  /// softcap of Gemma-2 (`softcap * tanh(scores / softcap)`, HF
  /// models/gemma2/modeling_gemma2.py) and of ONNX Attention-23's `softcap`.
  /// On a match, returns c and sets `val` to t.
  std::optional<double> peelSoftcap(Value &val) {
    auto mul = val.getDefiningOp<ox::MulOp>();
    if (!mul)
      return std::nullopt;
    std::optional<double> c;
    Value t = otherOperand(mul, [&](Value o) { return (c = constantScalar(o)).has_value(); });
    auto tanh = t ? t.getDefiningOp<ox::TanhOp>() : nullptr;
    if (!tanh || !c || !(*c > 0))
      return std::nullopt;
    val = tanh->getOperand(0);
    return c;
  }

  /// MatMul(P, V), P = [Where(IsNaN(sm), 0, sm)] of sm = Softmax(X, last),
  /// X = C [+ additive mask], C = S or c * Tanh(S) (softcap c),
  /// S = [Mul/Div const](MatMul(Q [* c], K^T [* c])).
  void raiseDecomposedAttention(Operation *pv) {
    Value p = pv->getOperand(0), v = pv->getOperand(1);
    if (auto w = p.getDefiningOp<ox::WhereOp>()) {
      auto nan = w->getOperand(0).getDefiningOp<ox::IsNaNOp>();
      if (!nan || w->getOperand(2) != nan->getOperand(0) ||
          constantScalar(w->getOperand(1)) != 0.0)
        return;
      p = w->getOperand(2);
    }
    auto sm = p.getDefiningOp<ox::SoftmaxOp>();
    if (!sm || !isLastAxis(sm.getAxis().value_or(-1), rankOf(p)) || rankOf(p) != 4)
      return;
    Value x = sm->getOperand(0);
    Value mask;
    double scale = 1.0;
    // The constants folded into `scale`, for snapScale.
    SmallVector<ScaleFactor> factors;
    auto peelScale = [&](Value &val) {
      while (true) {
        Operation *def = val.getDefiningOp();
        if (def && isa<ox::MulOp>(def)) {
          std::optional<double> c;
          Value cv;
          Value rest = otherOperand(
              def, [&](Value o) { return (c = constantScalar(o)).has_value(); }, &cv);
          if (!rest)
            return;
          scale *= *c;
          factors.push_back({*c, false, floatSemantics(cv.getType())});
          val = rest;
        } else if (def && isa<ox::DivOp>(def)) {
          auto c = constantScalar(def->getOperand(1));
          if (!c || *c == 0)
            return;
          scale /= *c;
          factors.push_back({*c, true, floatSemantics(def->getOperand(1).getType())});
          val = def->getOperand(0);
        } else {
          return;
        }
      }
    };
    if (auto add = x.getDefiningOp<ox::AddOp>()) {
      // The additive mask is the operand that is not a (scaled) Q.K^T.
      for (unsigned i = 0; i < 2; ++i) {
        Value s = add->getOperand(i);
        Value probe = s;
        double saved = scale;
        size_t savedFactors = factors.size();
        peelSoftcap(probe);
        peelScale(probe);
        scale = saved;
        factors.resize(savedFactors);
        if (probe.getDefiningOp<ox::MatMulOp>()) {
          mask = add->getOperand(1 - i);
          x = s;
          break;
        }
      }
      if (!mask)
        return;
    }
    std::optional<double> softcap = peelSoftcap(x);
    peelScale(x);
    auto qk = x.getDefiningOp<ox::MatMulOp>();
    if (!qk)
      return;
    Value q = qk->getOperand(0), kt = qk->getOperand(1);
    peelScale(q);
    peelScale(kt);
    Value k = stripLastTwoTranspose(kt);
    if (!k || rankOf(q) != 4)
      return;
    // Inside the tanh the product is s * scale' with scale' = scale / c;
    // attn.attention computes c * tanh(s * scale / c), so scale = scale' * c.
    if (softcap) {
      scale *= *softcap;
      // The division by c inside the tanh cancels against the outer c: it
      // is not part of the scale the exporter rounded.
      auto cancels = llvm::find_if(factors, [&](const ScaleFactor &f) {
        return f.divides ? f.value == *softcap : f.value * *softcap == 1.0;
      });
      if (cancels != factors.end())
        factors.erase(cancels);
    }
    if (auto qt = dyn_cast<RankedTensorType>(q.getType()); qt && !qt.isDynamicDim(3))
      scale = snapScale(scale, qt.getDimSize(3), factors);
    if (Value r = emitAttention(pv, q, k, v, chooseMask(mask, q, k), scale,
                                /*isCausal=*/false, softcap))
      replace(pv, r);
  }

  func::FuncOp func;
  SymbolicEvaluator eval;
  OpBuilder b;
};

struct RaiseToAttnPass : h20::impl::RaiseToAttnBase<RaiseToAttnPass> {
  void runOnOperation() override { Raiser(getOperation()).run(); }
};

} // namespace
