//===- NormScaleAfterMatMul.cpp - normalise a GEMM's narrow result --------===//
//
// See Passes.td (h20-norm-scale-after-matmul). With a unit gain, an RMS
// norm scales each row by one number, and a row's scale commutes with a
// linear map of that row:
//
//   rms_norm(x) W = (x W) / sqrt(mean(x^2) + eps) = attn.rms_scale(x W, x)
//
// When W is narrow (N << K: DeepSeek-V4.1's mHC maps the 4 x 5120
// hyper-connection streams to 24 mixing logits), the left side writes and
// reads back a normalised copy of x ([rows, K]) only to shrink it to N
// columns; the right side reads x twice (the sum of squares and the GEMM)
// and scales [rows, N]. DeepSeek's own reference computes the mHC mixes in
// this order (inference/model.py of DeepSeek-V4: hc_pre, F.linear(x, hc_fn)
// * rsqrt(x.square().mean(-1) + eps)).
//
//===----------------------------------------------------------------------===//
#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Transforms/Passes.h"
#include "h20/Transforms/WeightData.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

namespace h20 {
#define GEN_PASS_DEF_NORMSCALEAFTERMATMUL
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;
namespace at = h20::attn;
namespace ox = h20::onnx;

namespace {

/// Whether `gain` is a constant or weight whose every element is 1.0 (read
/// from the model; false when it cannot be read).
bool unitGain(Value gain) {
  auto t = dyn_cast<RankedTensorType>(gain.getType());
  if (!t || !t.hasStaticShape() || t.getNumElements() > (int64_t(1) << 20))
    return false;
  std::optional<std::vector<double>> v = h20::readFloatElements(gain, 0, t.getNumElements());
  return v && !v->empty() && llvm::all_of(*v, [](double e) { return e == 1.0; });
}

/// A MatMul reading the norm (of type `xt`, rows of K) as its left operand
/// only, by a 2-D weight [K, N] of x's element type with N <= K /
/// `minRatio`, its result ranked; null otherwise.
ox::MatMulOp narrowProjection(OpOperand &use, RankedTensorType xt, int64_t minRatio) {
  auto mm = dyn_cast<ox::MatMulOp>(use.getOwner());
  if (!mm || use.getOperandNumber() != 0 || mm->getOperand(1) == use.get() ||
      !mm->getOperand(1).getDefiningOp<ox::WeightOp>())
    return {};
  const int64_t k = xt.getDimSize(xt.getRank() - 1);
  auto w = dyn_cast<RankedTensorType>(mm->getOperand(1).getType());
  auto y = dyn_cast<RankedTensorType>(mm->getResult(0).getType());
  if (!w || !y || y.getRank() != xt.getRank() || w.getRank() != 2 || !w.hasStaticShape() ||
      w.getElementType() != xt.getElementType() || y.getElementType() != xt.getElementType() ||
      w.getDimSize(0) != k || w.getDimSize(1) > k / minRatio)
    return {};
  return mm;
}

/// Rewrites `norm` when every reader is a narrow projection; true if it did.
bool rewrite(at::RmsNormOp norm, int64_t minRatio) {
  Value x = norm.getInput();
  auto xt = dyn_cast<RankedTensorType>(x.getType());
  // x . W in f16 can overflow where the normalised x . W does not; f32
  // and bf16 have the range.
  if (!xt || xt.getRank() < 1 || xt.isDynamicDim(xt.getRank() - 1) ||
      !(xt.getElementType().isF32() || xt.getElementType().isBF16()))
    return false;
  const int64_t r = xt.getRank();
  int64_t axis = static_cast<int64_t>(norm.getAxis());
  if (axis < 0)
    axis += r;
  // Only a norm over the contracted dim alone commutes with the GEMM.
  if (axis != r - 1 || norm->use_empty() || !unitGain(norm.getWeight()))
    return false;
  SmallVector<ox::MatMulOp> gemms;
  for (OpOperand &use : norm->getUses()) {
    ox::MatMulOp mm = narrowProjection(use, xt, minRatio);
    if (!mm)
      return false;
    gemms.push_back(mm);
  }
  // Each GEMM reads x itself; attn.rms_scale divides its result by the
  // row's RMS, computed in the norm's compute type like the norm did. The
  // GEMM keeps its float32 sums ([rows, N], small): one rounding of the
  // scaled row, where the norm rounded the normalised x and the GEMM its
  // sums (h20-compute-type keeps them float32 for a 16-bit compute type).
  for (ox::MatMulOp mm : gemms) {
    OpBuilder b(mm);
    auto yt = cast<RankedTensorType>(mm->getResult(0).getType());
    auto sums = RankedTensorType::get(yt.getShape(), b.getF32Type(), yt.getEncoding());
    Value y =
        ox::MatMulOp::create(b, mm.getLoc(), TypeRange{sums}, ValueRange{x, mm->getOperand(1)})
            ->getResult(0);
    auto scaled = at::RmsScaleOp::create(b, mm.getLoc(), yt, y, x, norm.getEpsilonAttr(),
                                         norm.getComputeTypeAttr());
    mm->getResult(0).replaceAllUsesWith(scaled.getResult());
    mm->erase();
  }
  Operation *gain = norm.getWeight().getDefiningOp();
  norm->erase();
  if (gain && gain->use_empty())
    gain->erase();
  return true;
}

struct NormScaleAfterMatMulPass
    : h20::impl::NormScaleAfterMatMulBase<NormScaleAfterMatMulPass> {
  using NormScaleAfterMatMulBase::NormScaleAfterMatMulBase;
  void runOnOperation() override {
    if (minRatio < 1) {
      getOperation().emitError("h20-norm-scale-after-matmul: min-ratio must be >= 1, got ")
          << static_cast<int64_t>(minRatio);
      return signalPassFailure();
    }
    SmallVector<at::RmsNormOp> norms;
    getOperation().walk([&](at::RmsNormOp n) { norms.push_back(n); });
    for (at::RmsNormOp n : norms)
      rewrite(n, static_cast<int64_t>(minRatio));
  }
};

} // namespace
