//===- FuseElementwise.cpp - one kernel per chain of elementwise ops ------===//
//
// On linalg-on-tensors, before bufferization (GPU target): every
// elementwise producer with a single use fuses into its consumer (a data
// movement such as a transpose also when its uses are several inputs of one
// consumer), so a chain
// of elementwise ops (SiLU's sigmoid and products, a residual add into the
// next RMSNorm, a head transpose into RoPE) becomes one kernel and one pass
// over memory. Transposes take part: a tensor.extract from a linalg.transpose
// reads the transpose's input at the permuted indices instead (RoPE reads
// each element's rotation partner that way), and a transpose whose only
// use is a consumer's input is generalized so that the upstream
// elementwise-fusion patterns fold it into that consumer's indexing map.
// Library calls (GEMM, attention, indexer) neither fuse nor absorb a
// producer: the target implements them with routines of fixed operands.
// See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "KnownDim.h"

#include "h20/Conversion/Passes.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace h20 {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "h20/Conversion/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {

bool isLibraryCall(Operation *op) {
  auto g = dyn_cast_or_null<linalg::GenericOp>(op);
  return g && g.getLibraryCallAttr();
}

/// Whether `producer` may fuse into `consumer`: its only use, or, for a
/// pure data movement (linalg.transpose, or a one-result generic yielding
/// an input element unchanged), every use an input of `consumer`: fusing it
/// once per such input leaves nothing behind (RoPE reads its transposed
/// input twice, at a channel and at its rotation partner), and the fused op
/// only reads the source at remapped indices. A producer that computes
/// (e.g. RoPE's cos/sin per position) would be recomputed per input.
bool fusesInto(Operation *producer, Operation *consumer) {
  auto consumerInput = [&](OpOperand &use) {
    auto g = dyn_cast<linalg::GenericOp>(use.getOwner());
    return use.getOwner() == consumer && g && g.isDpsInput(&use);
  };
  if (producer->hasOneUse())
    return producer->getUses().begin()->getOwner() == consumer &&
           (!isa<linalg::TransposeOp>(producer) || consumerInput(*producer->getUses().begin()));
  bool moves = isa<linalg::TransposeOp>(producer);
  if (auto g = dyn_cast<linalg::GenericOp>(producer); g && g->getNumResults() == 1) {
    auto yield = cast<linalg::YieldOp>(g.getRegion().front().getTerminator());
    // The yielded value may be a block argument of an enclosing block.
    auto arg = dyn_cast<BlockArgument>(yield.getOperand(0));
    moves = arg && arg.getOwner() == g.getBody() && g.isDpsInput(g.getMatchingOpOperand(arg));
  }
  if (!moves || producer->use_empty())
    return false;
  return llvm::all_of(producer->getUses(), consumerInput);
}

/// tensor.extract %t[i...] with %t = linalg.transpose %x: result dim d is
/// input dim perm[d] (the op's definition), so the element is
/// %x[j...] with j[perm[d]] = i[d].
struct ExtractOfTranspose : OpRewritePattern<tensor::ExtractOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tensor::ExtractOp op, PatternRewriter &rw) const override {
    auto t = op.getTensor().getDefiningOp<linalg::TransposeOp>();
    if (!t || !t.hasPureTensorSemantics())
      return failure();
    ArrayRef<int64_t> perm = t.getPermutation();
    SmallVector<Value> idx(perm.size());
    for (auto [d, p] : llvm::enumerate(perm))
      idx[p] = op.getIndices()[d];
    rw.replaceOpWithNewOp<tensor::ExtractOp>(op, t.getInput(), idx);
    return success();
  }
};

/// A tensor linalg.transpose whose only uses are inputs of one generic that
/// is not a library call becomes a generic, which the elementwise-fusion
/// patterns then fold into that consumer.
struct GeneralizeFusableTranspose : OpRewritePattern<linalg::TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::TransposeOp op, PatternRewriter &rw) const override {
    if (!op.hasPureTensorSemantics() || op->getResult(0).use_empty())
      return failure();
    Operation *consumer = op->getResult(0).getUses().begin()->getOwner();
    if (!isa<linalg::GenericOp>(consumer) || isLibraryCall(consumer) ||
        !fusesInto(op, consumer))
      return failure();
    return linalg::generalizeNamedOp(rw, op);
  }
};

/// A generic input that is a tensor `x` with unit dims inserted
/// (tensor.reshape by a tensor.from_elements shape, or
/// tensor.expand_shape), read at index 0 along each inserted dim: the
/// generic reads `x` itself, those map results dropped. The reshape is
/// then no barrier between `x`'s producer and the generic (V4.1's Sinkhorn
/// steps divide [t, 4, 4] by a [t, 4] sum reshaped to [t, 1, 4]).
struct ReadThroughUnitReshape : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::GenericOp g, PatternRewriter &rw) const override {
    if (g.getLibraryCallAttr() || !g.hasPureTensorSemantics())
      return failure();
    for (OpOperand *in : g.getDpsInputOperands()) {
      Value r = in->get(), x;
      if (auto rs = r.getDefiningOp<tensor::ReshapeOp>())
        x = rs.getSource();
      else if (auto ex = r.getDefiningOp<tensor::ExpandShapeOp>())
        x = ex.getSrc();
      auto rt = dyn_cast<RankedTensorType>(r.getType());
      auto xt = x ? dyn_cast<RankedTensorType>(x.getType()) : RankedTensorType();
      if (!rt || !xt || xt.getRank() >= rt.getRank())
        continue;
      AffineMap map = g.getMatchingIndexingMap(in);
      SmallVector<AffineExpr> kept;
      int64_t k = 0;
      bool ok = true;
      for (int64_t i = 0; i < rt.getRank() && ok; ++i) {
        auto c = dyn_cast<AffineConstantExpr>(map.getResult(i));
        bool xUnit = k < xt.getRank() && xt.getDimSize(k) == 1;
        if (rt.getDimSize(i) == 1 && !xUnit) { // an inserted unit dim
          ok = c && c.getValue() == 0;
          continue;
        }
        std::optional<OpFoldResult> a = h20::knownDim(r, i), b;
        if (k < xt.getRank())
          b = h20::knownDim(x, k);
        ok = a && b && isEqualConstantIntOrValue(*a, *b);
        kept.push_back(map.getResult(i));
        ++k;
      }
      if (!ok || k != xt.getRank())
        continue;
      SmallVector<AffineMap> maps = g.getIndexingMapsArray();
      maps[in->getOperandNumber()] =
          AffineMap::get(map.getNumDims(), map.getNumSymbols(), kept, g.getContext());
      rw.modifyOpInPlace(g, [&] {
        in->set(x);
        g.setIndexingMapsAttr(rw.getAffineMapArrayAttr(maps));
      });
      return success();
    }
    return failure();
  }
};

struct FuseElementwisePass : h20::impl::FuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    patterns.add<ExtractOfTranspose, GeneralizeFusableTranspose, ReadThroughUnitReshape>(ctx);
    linalg::populateElementwiseOpsFusionPatterns(patterns, [](OpOperand *operand) {
      Operation *producer = operand->get().getDefiningOp();
      return producer && fusesInto(producer, operand->getOwner()) &&
             !isLibraryCall(producer) && !isLibraryCall(operand->getOwner());
    });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      getOperation().emitError("h20-fuse-elementwise: the fusion patterns did not converge");
      signalPassFailure();
    }
  }
};

} // namespace
