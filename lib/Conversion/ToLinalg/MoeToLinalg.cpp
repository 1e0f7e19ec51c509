//===- MoeToLinalg.cpp - onnx.h20.RoutedExperts -> h20_routed_experts -----===//
//
// The GPU target replaces the carrier generic built here by the
// routed-experts step sequence (lib/Target/GPU/HostProgram.cpp): router
// GEMM, routing and permutation kernels, grouped GEMMs over only the picked
// experts' tokens, SwiGLU, the weighted combine. The generic's body is a
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

FailureOr<Value> lowerRoutedExpertsToLibraryCall(OpBuilder &b, onnx::H20RoutedExpertsOp op) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  ValueRange in = op->getOperands();
  SmallVector<RankedTensorType> t;
  for (Value v : in) {
    auto rt = dyn_cast<RankedTensorType>(v.getType());
    if (!rt)
      return unsupported(op, "operands must be ranked tensors");
    t.push_back(rt);
  }
  auto rt = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  const int64_t expectedRanks[6] = {2, 2, 1, 3, 3, 3};
  for (unsigned i = 0; i < 6; ++i)
    if (t[i].getRank() != expectedRanks[i])
      return unsupported(op, "operand " + std::to_string(i) + " has rank " +
                                 std::to_string(t[i].getRank()) + ", expected " +
                                 std::to_string(expectedRanks[i]) +
                                 " (X [N, Dm], Router [Dm, E], Bias [E], W1/W3 [E, Dm, I], "
                                 "W2 [E, I, Dm])");
  if (!rt || rt.getRank() != 2)
    return unsupported(op, "the result must be [N, Dm]");
  Type et = t[0].getElementType();
  if (!isa<FloatType>(et) || !(et.isF32() || et.isF16() || et.isBF16()))
    return unsupported(op, "X must be float32, float16 or bfloat16");
  for (unsigned i : {1u, 3u, 4u, 5u})
    if (t[i].getElementType() != et)
      return unsupported(op, "operand " + std::to_string(i) +
                                 " has another element type than X (the grouped GEMMs "
                                 "multiply equal types)");
  Type bt = t[2].getElementType();
  if (!(bt.isF32() || bt.isF16() || bt.isBF16()) || rt.getElementType() != et)
    return unsupported(op, "the bias must be float32/16-bit and Y of X's type");
  for (unsigned i = 1; i < 6; ++i)
    if (!t[i].hasStaticShape())
      return unsupported(op, "Router, Bias and the expert weights must have static shapes");
  const int64_t dm = t[1].getDimSize(0), e = t[1].getDimSize(1);
  const int64_t inter = t[3].getDimSize(2);
  auto same = [](RankedTensorType x, ArrayRef<int64_t> s) { return x.getShape() == s; };
  if (t[0].getDimSize(1) != dm || !same(t[2], {e}) || !same(t[3], {e, dm, inter}) ||
      !same(t[4], {e, dm, inter}) || !same(t[5], {e, inter, dm}) || rt.getDimSize(1) != dm)
    return unsupported(op, "operand shapes disagree: X [N, " + std::to_string(t[0].getDimSize(1)) +
                               "], Router [" + std::to_string(dm) + ", " + std::to_string(e) +
                               "], expected Bias [E], W1/W3 [E, Dm, I], W2 [E, I, Dm]");
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
  auto g = linalg::GenericOp::create(
      b, loc, TypeRange{rt}, in, ValueRange{init}, maps, its,
      [&](OpBuilder &nb, Location nl, ValueRange a) {
        // Placeholder that uses every operand; never run.
        Value f = a[0];
        for (unsigned i = 1; i < 6; ++i)
          f = arith::AddFOp::create(nb, nl, f, castScalar(nb, nl, a[i], et));
        linalg::YieldOp::create(nb, nl, ValueRange{arith::AddFOp::create(nb, nl, f, a[6])});
      });
  g.setLibraryCallAttr(b.getStringAttr(kRoutedExpertsLibraryCall));
  g->setAttr(kRoutedExpertsAttrs,
             b.getDictionaryAttr({b.getNamedAttr("top_k", topK),
                                  b.getNamedAttr("scaling", op->getAttr("scaling")),
                                  b.getNamedAttr("limit", op->getAttr("limit")),
                                  b.getNamedAttr("temp", op->getAttr("temp"))}));
  return g.getResult(0);
}

} // namespace h20::lowering
