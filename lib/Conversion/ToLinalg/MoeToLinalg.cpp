//===- MoeToLinalg.cpp - onnx.h20.RoutedExperts[Mxfp4] -> h20_routed_experts ===//
//
// The GPU target replaces the carrier generic built here by the
// routed-experts step sequence (lib/Target/GPU/LibraryCallSteps.cpp): router
// GEMM, routing and permutation kernels, grouped GEMMs over only the picked
// experts' tokens (MXFP4 experts: a kernel that dequantises the weights in
// its load path), SwiGLU, the weighted combine. The generic's body is a
// placeholder that uses every operand and is never run.
//
//===----------------------------------------------------------------------===//
#include "MoeToLinalg.h"

#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

namespace h20::lowering {

namespace {

/// Why the operand types of a routed-experts op do not fit its form, or "".
/// `t` holds the operands' ranked types, `mxfp4` selects the form.
std::string checkOperands(ArrayRef<RankedTensorType> t, RankedTensorType y, bool mxfp4) {
  auto str = [](int64_t v) { return std::to_string(v); };
  const std::string form =
      mxfp4 ? " (X [N, Dm], Router [Dm, E], Bias [E], W1/W3 [E, I, Dm/2] and W2 [E, Dm, I/2] i8, "
              "each followed by its scales [E, out, in/32] i8)"
            : " (X [N, Dm], Router [Dm, E], Bias [E], W1/W3 [E, Dm, I], W2 [E, I, Dm])";
  const SmallVector<int64_t> ranks = mxfp4 ? SmallVector<int64_t>{2, 2, 1, 3, 3, 3, 3, 3, 3}
                                           : SmallVector<int64_t>{2, 2, 1, 3, 3, 3};
  for (auto [i, r] : llvm::enumerate(ranks))
    if (t[i].getRank() != r)
      return "operand " + str(i) + " has rank " + str(t[i].getRank()) + ", expected " + str(r) +
             form;
  if (!y || y.getRank() != 2)
    return "the result must be [N, Dm]";
  Type et = t[0].getElementType();
  if (!(et.isF32() || et.isF16() || et.isBF16()))
    return "X must be float32, float16 or bfloat16";
  // The float weights (and the router) meet X in GEMMs of one type.
  for (unsigned i : mxfp4 ? SmallVector<unsigned>{1} : SmallVector<unsigned>{1, 3, 4, 5})
    if (t[i].getElementType() != et)
      return "operand " + str(i) +
             " has another element type than X (the grouped GEMMs multiply equal types)";
  Type bt = t[2].getElementType();
  if (!(bt.isF32() || bt.isF16() || bt.isBF16()) || y.getElementType() != et)
    return "the bias must be float32/16-bit and Y of X's type";
  for (unsigned i = 1; i < t.size(); ++i)
    if (!t[i].hasStaticShape())
      return "Router, Bias and the expert weights must have static shapes";
  const int64_t dm = t[1].getDimSize(0), e = t[1].getDimSize(1);
  // The weights hold el experts: all e, or an expert-parallel rank's equal
  // share of them (h20-tensor-parallel); routing picks among all e.
  const int64_t el = t[3].getDimSize(0);
  if (el < 1 || e % el)
    return "the expert weights hold " + str(el) + " experts, not an equal share of the router's " +
           str(e);
  auto same = [](RankedTensorType x, ArrayRef<int64_t> s) { return x.getShape() == s; };
  const std::string disagree = "operand shapes disagree: X [N, " + str(t[0].getDimSize(1)) +
                               "], Router [" + str(dm) + ", " + str(e) + "], expected";
  if (!mxfp4) {
    const int64_t inter = t[3].getDimSize(2);
    if (t[0].getDimSize(1) != dm || !same(t[2], {e}) || !same(t[3], {el, dm, inter}) ||
        !same(t[4], {el, dm, inter}) || !same(t[5], {el, inter, dm}) || y.getDimSize(1) != dm)
      return disagree + " Bias [E], W1/W3 [El, Dm, I], W2 [El, I, Dm] (El: the experts held, " +
             str(el) + ")";
    return "";
  }
  for (unsigned i = 3; i < 9; ++i)
    if (!t[i].getElementType().isSignlessInteger(8))
      return "operand " + str(i) + " must be i8 (packed e2m1 pairs or ue8m0 scale bytes)";
  const int64_t inter = t[3].getDimSize(1);
  if (dm % 32 || inter % 32)
    return "MXFP4 experts need Dm and I multiples of 32 (one scale per 32 inputs), got Dm " +
           str(dm) + ", I " + str(inter);
  if (t[0].getDimSize(1) != dm || !same(t[2], {e}) || y.getDimSize(1) != dm ||
      !same(t[3], {el, inter, dm / 2}) || !same(t[4], {el, inter, dm / 32}) ||
      !same(t[5], {el, inter, dm / 2}) || !same(t[6], {el, inter, dm / 32}) ||
      !same(t[7], {el, dm, inter / 2}) || !same(t[8], {el, dm, inter / 32}))
    return disagree + " Bias [" + str(e) + "], W1/W3 [" + str(el) + ", I, " + str(dm / 2) +
           "] with scales [" + str(el) + ", I, " + str(dm / 32) + "], W2 [" + str(el) + ", " +
           str(dm) + ", I/2] with scales [" + str(el) + ", " + str(dm) + ", I/32]";
  return "";
}

} // namespace

FailureOr<Value> lowerRoutedExpertsToLibraryCall(OpBuilder &b, Operation *op) {
  Location loc = op->getLoc();
  MLIRContext *ctx = b.getContext();
  const bool mxfp4 = isa<onnx::H20RoutedExpertsMxfp4Op>(op);
  ValueRange in = op->getOperands();
  SmallVector<RankedTensorType> t;
  for (Value v : in) {
    auto rt = dyn_cast<RankedTensorType>(v.getType());
    if (!rt)
      return unsupported(op, "operands must be ranked tensors");
    t.push_back(rt);
  }
  auto rt = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (std::string why = checkOperands(t, rt, mxfp4); !why.empty())
    return unsupported(op, why);
  Type et = t[0].getElementType();
  const int64_t e = t[1].getDimSize(1);
  auto topK = op->getAttrOfType<IntegerAttr>("top_k");
  if (!topK || topK.getInt() < 1 || topK.getInt() > e)
    return unsupported(op, "top_k must be in [1, " + std::to_string(e) + "]");

  SmallVector<Value> dyn;
  if (rt.isDynamicDim(0))
    dyn.push_back(dimOf(b, loc, in[0], 0));
  Value init = tensor::EmptyOp::create(b, loc, rt, dyn);
  SmallVector<Value> operands(in.begin(), in.end());
  operands.push_back(init);
  SmallVector<AffineMap> maps;
  SmallVector<utils::IteratorType> its;
  carrierIndexing(ctx, operands, /*parallelDims=*/2, maps, its);
  const unsigned n = in.size();
  auto g = linalg::GenericOp::create(
      b, loc, TypeRange{rt}, in, ValueRange{init}, maps, its,
      [&](OpBuilder &nb, Location nl, ValueRange a) {
        // Placeholder that uses every operand; never run.
        Value f = a[0];
        for (unsigned i = 1; i < n; ++i)
          f = arith::AddFOp::create(nb, nl, f, castScalar(nb, nl, a[i], et));
        linalg::YieldOp::create(nb, nl, ValueRange{arith::AddFOp::create(nb, nl, f, a[n])});
      });
  g.setLibraryCallAttr(b.getStringAttr(kRoutedExpertsLibraryCall));
  g->setAttr(kRoutedExpertsAttrs,
             b.getDictionaryAttr(
                 {b.getNamedAttr("top_k", topK), b.getNamedAttr("scaling", op->getAttr("scaling")),
                  b.getNamedAttr("limit", op->getAttr("limit")),
                  b.getNamedAttr("temp", op->getAttr("temp")),
                  b.getNamedAttr("weights", b.getStringAttr(mxfp4 ? "mxfp4" : "float"))}));
  // h20-choose-attention-kernels' choice (GPU), read by the host program.
  if (Attribute kernel = op->getAttr("h20.kernel"))
    g->setAttr("h20.kernel", kernel);
  return g.getResult(0);
}

} // namespace h20::lowering
