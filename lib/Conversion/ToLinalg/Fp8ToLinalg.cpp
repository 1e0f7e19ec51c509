//===- Fp8ToLinalg.cpp - onnx.h20.BlockScaledMatMul -> FP8 library calls --===//
//
// The GPU target replaces the two carrier generics built here by a launch
// of the activation-quantising kernel (lib/Target/GPU/kernels/fp8_quant.cuh)
// and a block-scaled cuBLASLt FP8 GEMM step (LibraryCallSteps.cpp). Their
// bodies are placeholders that use every operand and are never run. The
// FP8 weight and its scales reach the GEMM as they are stored: W stays one
// byte per element on the device. Shapes that GEMM cannot take run on a
// dequantised copy of W (made every chunk) instead, with a warning.
//
//===----------------------------------------------------------------------===//
#include "Fp8ToLinalg.h"

#include "AttnToLinalg.h"
#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

namespace h20::lowering {
namespace {

constexpr int64_t kBlock = 128;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// A carrier generic `call` over `ins` and `outs` (see carrierIndexing)
/// whose placeholder body folds every operand into each result.
linalg::GenericOp carrier(OpBuilder &b, Location loc, StringRef call, ValueRange ins,
                          ValueRange outs, DictionaryAttr attrs) {
  SmallVector<Value> operands(ins);
  operands.append(outs.begin(), outs.end());
  SmallVector<AffineMap> maps;
  SmallVector<utils::IteratorType> its;
  carrierIndexing(b.getContext(), operands, /*parallelDims=*/2, maps, its);
  SmallVector<Type> types;
  for (Value v : outs)
    types.push_back(v.getType());
  auto g = linalg::GenericOp::create(
      b, loc, types, ins, outs, maps, its, [&](OpBuilder &nb, Location nl, ValueRange a) {
        Type f32 = nb.getF32Type();
        Value f = castScalar(nb, nl, a[0], f32);
        for (Value x : a.drop_front())
          f = arith::AddFOp::create(nb, nl, f, castScalar(nb, nl, x, f32));
        SmallVector<Value> results;
        for (Value x : a.drop_front(ins.size()))
          results.push_back(castScalar(nb, nl, f, x.getType()));
        linalg::YieldOp::create(nb, nl, results);
      });
  g.setLibraryCallAttr(b.getStringAttr(call));
  g->setAttr(kFp8Attrs, attrs);
  return g;
}

/// The FP8 path: h20_fp8_quantize of X2 [M, K], then h20_gemm_fp8 with W
/// [N, K] and its 128 x 128 scales (rows padded to 4 blocks); Y2 [M, N].
Value fp8Gemm(OpBuilder &b, Location loc, Value x2, Value w, Value scale, int64_t kb,
              RankedTensorType y2Type, ValueRange mDyn, DictionaryAttr attrs) {
  auto xt = cast<RankedTensorType>(x2.getType());
  const int64_t m = xt.getDimSize(0), k = xt.getDimSize(1);
  Type f8 = cast<RankedTensorType>(w.getType()).getElementType(), f32 = b.getF32Type();
  Value xq = tensor::EmptyOp::create(b, loc, RankedTensorType::get({m, k}, f8), mDyn);
  Value xs = tensor::EmptyOp::create(b, loc, RankedTensorType::get({kb, m}, f32), mDyn);
  auto quant = carrier(b, loc, kFp8QuantizeLibraryCall, ValueRange{x2}, ValueRange{xq, xs}, attrs);
  // cuBLASLt reads the 128 x 128 scales with each row of K blocks padded
  // to a multiple of 4 (gemm-fp8-check measures it at K = 640): a padded
  // copy when ceil(K / 128) is not one (NB x kp floats, made every chunk).
  const int64_t kp = (kb + 3) / 4 * 4;
  if (kp != kb) {
    const int64_t nb = cast<RankedTensorType>(scale.getType()).getDimSize(0);
    auto padded = RankedTensorType::get({nb, kp}, f32);
    Value zeros = filledTensor(b, loc, padded, {}, floatConst(b, loc, f32, 0.0));
    scale = tensor::InsertSliceOp::create(
        b, loc, scale, zeros, ArrayRef<OpFoldResult>{b.getIndexAttr(0), b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(nb), b.getIndexAttr(kb)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
  }
  Value y = tensor::EmptyOp::create(b, loc, y2Type, mDyn);
  return carrier(b, loc, kFp8GemmLibraryCall,
                 ValueRange{quant.getResult(0), quant.getResult(1), w, scale}, ValueRange{y}, attrs)
      .getResult(0);
}

/// The fallback: W dequantised (W[n, k] * Scale[n / bn, k / bk], rounded to
/// Y's type) into a temporary every chunk, then an ordinary h20_gemm (a
/// cuBLASLt GEMM of Y's type, float32 accumulation): Y2 = X2 . Wd^T.
Value dequantisedGemm(OpBuilder &b, Location loc, Value x2, Value w, Value scale, int64_t bn,
                      int64_t bk, RankedTensorType y2Type, ValueRange mDyn) {
  MLIRContext *ctx = b.getContext();
  Type et = y2Type.getElementType();
  auto wt = cast<RankedTensorType>(w.getType());
  auto wdType = RankedTensorType::get(wt.getShape(), et);
  AffineExpr n = getAffineDimExpr(0, ctx), k = getAffineDimExpr(1, ctx);
  AffineMap id = AffineMap::getMultiDimIdentityMap(2, ctx);
  AffineMap blocks = AffineMap::get(2, 0, {n.floorDiv(bn), k.floorDiv(bk)}, ctx);
  Value wd = linalg::GenericOp::create(
                 b, loc, TypeRange{wdType}, ValueRange{w, scale},
                 ValueRange{tensor::EmptyOp::create(b, loc, wdType, ValueRange{})},
                 ArrayRef<AffineMap>{id, blocks, id}, parallel(2),
                 [&](OpBuilder &nb, Location nl, ValueRange a) {
                   Value v = arith::MulFOp::create(nb, nl, decodeF8E4M3FN(nb, nl, a[0]), a[1]);
                   linalg::YieldOp::create(nb, nl, castScalar(nb, nl, v, et));
                 })
                 .getResult(0);
  // Loop dims (m, n, k): X2 (m, k), Wd (n, k), Y2 (m, n).
  AffineExpr dm = getAffineDimExpr(0, ctx), dn = getAffineDimExpr(1, ctx),
             dk = getAffineDimExpr(2, ctx);
  Value init = filledTensor(b, loc, y2Type, mDyn, floatConst(b, loc, et, 0.0));
  auto g = linalg::GenericOp::create(
      b, loc, TypeRange{y2Type}, ValueRange{x2, wd}, ValueRange{init},
      ArrayRef<AffineMap>{AffineMap::get(3, 0, {dm, dk}, ctx), AffineMap::get(3, 0, {dn, dk}, ctx),
                          AffineMap::get(3, 0, {dm, dn}, ctx)},
      {utils::IteratorType::parallel, utils::IteratorType::parallel,
       utils::IteratorType::reduction},
      [&](OpBuilder &nb, Location nl, ValueRange a) {
        Value p = arith::MulFOp::create(nb, nl, a[0], a[1]);
        linalg::YieldOp::create(nb, nl, ValueRange{arith::AddFOp::create(nb, nl, a[2], p)});
      });
  g.setLibraryCallAttr(b.getStringAttr(kGemmLibraryCall));
  return g.getResult(0);
}

} // namespace

FailureOr<Value> lowerBlockScaledMatMulToLibraryCalls(OpBuilder &b,
                                                      onnx::H20BlockScaledMatMulOp op,
                                                      bool dequantize) {
  Location loc = op.getLoc();
  auto xt = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  auto wt = dyn_cast<RankedTensorType>(op->getOperand(1).getType());
  auto st = dyn_cast<RankedTensorType>(op->getOperand(2).getType());
  auto rt = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!xt || !wt || !st || !rt)
    return unsupported(op, "operands and result must be ranked tensors");
  const int64_t bn = op->getAttrOfType<IntegerAttr>("block_n").getInt();
  const int64_t bk = op->getAttrOfType<IntegerAttr>("block_k").getInt();
  if (bn < 1 || bk < 1)
    return unsupported(op, "block_n and block_k must be positive");
  Type et = xt.getElementType();
  if (!(et.isF32() || et.isF16() || et.isBF16()) || rt.getElementType() != et)
    return unsupported(op, "X and Y must be float32, float16 or bfloat16 of one type");
  if (!isa<Float8E4M3FNType>(wt.getElementType()) || !st.getElementType().isF32())
    return unsupported(op, "W must be float8e4m3fn and Scale float32");
  if (xt.getRank() < 2 || wt.getRank() != 2 || st.getRank() != 2 || !wt.hasStaticShape() ||
      !st.hasStaticShape() || rt.getRank() != xt.getRank())
    return unsupported(op, "expected X [..., K] (rank >= 2), static W [N, K] and Scale "
                           "[ceil(N / block_n), ceil(K / block_k)]");
  const int64_t n = wt.getDimSize(0), k = wt.getDimSize(1), kb = ceilDiv(k, bk);
  if (xt.getDimSize(xt.getRank() - 1) != k || rt.getDimSize(rt.getRank() - 1) != n ||
      st.getDimSize(0) != ceilDiv(n, bn) || st.getDimSize(1) != kb)
    return unsupported(op, "operand shapes disagree: W [" + std::to_string(n) + ", " +
                               std::to_string(k) + "] needs X [..., " + std::to_string(k) +
                               "], Scale [" + std::to_string(ceilDiv(n, bn)) + ", " +
                               std::to_string(kb) + "], Y [..., " + std::to_string(n) + "]");
  // What keeps it off cuBLASLt's block-scaled FP8 GEMM.
  std::string why;
  if (bn != kBlock || bk != kBlock)
    why = "128 x 128 weight blocks, got " + std::to_string(bn) + " x " + std::to_string(bk);
  else if (k % 16 != 0 || n % 16 != 0)
    why = "K and N multiples of 16, got K " + std::to_string(k) + ", N " + std::to_string(n);

  // X [..., K] -> [M, K].
  Value x = op->getOperand(0);
  const int64_t lead = xt.getRank() - 1;
  SmallVector<ReassociationIndices> assoc;
  if (lead > 1) {
    ReassociationIndices rows;
    for (int64_t d = 0; d < lead; ++d)
      rows.push_back(d);
    assoc = {rows, {lead}};
    x = tensor::CollapseShapeOp::create(b, loc, x, assoc);
  }
  auto x2 = cast<RankedTensorType>(x.getType());
  // A query-row split (h20-tensor-parallel) of a [M, K] input: both calls
  // carry it (the GPU target quantises and multiplies the rank's rows).
  if (op->hasAttr(attn::kSplitRowsAttr) && lead > 1)
    return op->emitError("internal: a block-scaled FP8 linear split by query rows must take "
                         "X [M, K]");
  SmallVector<Value> mDyn;
  if (x2.isDynamicDim(0))
    mDyn.push_back(dimOf(b, loc, x, 0));
  auto y2Type = RankedTensorType::get({x2.getDimSize(0), n}, et);
  Value out;
  if (why.empty() && !dequantize) {
    DictionaryAttr attrs =
        b.getDictionaryAttr({b.getNamedAttr("block_n", b.getI64IntegerAttr(bn)),
                             b.getNamedAttr("block_k", b.getI64IntegerAttr(bk))});
    out = fp8Gemm(b, loc, x, op->getOperand(1), op->getOperand(2), kb, y2Type, mDyn, attrs);
    // Both calls carry the split: the GEMM's input is the quantising call's.
    auto gemm = out.getDefiningOp<linalg::GenericOp>();
    attn::copyRowSplit(op, gemm);
    attn::copyRowSplit(op, gemm.getDpsInputs()[0].getDefiningOp());
  } else if (dequantize) {
    out = dequantisedGemm(b, loc, x, op->getOperand(1), op->getOperand(2), bn, bk, y2Type, mDyn);
  } else {
    op->emitWarning() << op->getName() << nodeSuffix(op)
                      << ": runs as a GEMM on a dequantised copy of its FP8 weight (the FP8 "
                         "GEMM needs "
                      << why << ")";
    out = dequantisedGemm(b, loc, x, op->getOperand(1), op->getOperand(2), bn, bk, y2Type, mDyn);
  }
  // The dequantised path's GEMM is an ordinary h20_gemm: the split's marks
  // go on it, as on a split onnx.MatMul's.
  if (dequantize || !why.empty())
    attn::copyRowSplit(op, out.getDefiningOp());
  if (lead > 1) {
    SmallVector<OpFoldResult> shape;
    for (int64_t d = 0; d < rt.getRank(); ++d)
      shape.push_back(rt.isDynamicDim(d) ? OpFoldResult(dimOf(b, loc, op->getOperand(0), d))
                                         : OpFoldResult(b.getIndexAttr(rt.getDimSize(d))));
    out = tensor::ExpandShapeOp::create(b, loc, rt, out, assoc, shape);
  }
  return out;
}

} // namespace h20::lowering
