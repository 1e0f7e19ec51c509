//===- RaiseH20Domain.cpp - ai.h20 nodes -> attn ops ----------------------===//
//
// The ai.h20 ONNX domain (models/deepseek_v41/h20_ops.py) states DeepSeek-V4.1's
// window + sparse attention and its lightning indexer as single nodes; here
// they become the attn ops with the same meaning, so no S x S (or S x T)
// intermediate of their standard-op function bodies ever exists:
//   SinkAttention(Q, KV, Sink)                    -> attn.sparse_attention
//   SparseSinkAttention(Q, KV, Sink, C, Idx)      -> attn.sparse_attention compressed(C, Idx)
//   IndexerTopK(Q, K, W)                          -> attn.indexer_topk
//   IndexerTopKCandidates(Q, K, W) -> (Idx, Blk)  -> attn.indexer_topk + attn.indexer_candidates
//   IndexerTopKInCandidates(Q, K, W, Blk)         -> attn.indexer_topk candidates(Blk)
// The node's operands already have the attn ops' layouts ([S, H, D], [S, D],
// [T, D], [S, K]); only attribute types change.
//
//===----------------------------------------------------------------------===//
#include "RaiseH20Domain.h"

#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
namespace ox = h20::onnx;

namespace h20 {
namespace {

/// The result type of `v` as a ranked tensor, or null after a warning
/// naming the node (the raising needs ranks; the node then stays and the
/// lowering reports it).
RankedTensorType rankedOrWarn(Operation *op, Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t)
    op->emitWarning("not raised: the shape of ") << op->getName() << "'s result is unknown";
  return t;
}

bool allRanked(Operation *op) {
  for (Value v : op->getOperands())
    if (!isa<RankedTensorType>(v.getType())) {
      op->emitWarning("not raised: an operand's rank is unknown");
      return false;
    }
  return true;
}

FloatAttr f64(OpBuilder &b, FloatAttr f) { return b.getF64FloatAttr(f.getValueAsDouble()); }

void raiseAttention(OpBuilder &b, Operation *op, FloatAttr scale, IntegerAttr window) {
  RankedTensorType rt = rankedOrWarn(op, op->getResult(0));
  if (!rt || !allRanked(op))
    return;
  Value c = op->getNumOperands() == 5 ? op->getOperand(3) : Value();
  Value idx = op->getNumOperands() == 5 ? op->getOperand(4) : Value();
  auto a = attn::SparseAttentionOp::create(
      b, op->getLoc(), rt, op->getOperand(0), op->getOperand(1), op->getOperand(2), c, idx,
      /*start=*/Value(), /*latentStart=*/Value(), f64(b, scale),
      b.getI64IntegerAttr(window.getInt()));
  op->getResult(0).replaceAllUsesWith(a.getResult());
}

Value indexerTopK(OpBuilder &b, Operation *op, RankedTensorType rt, IntegerAttr ratio, IntegerAttr topk,
                  FloatAttr scale, Value candidates, IntegerAttr blockSize) {
  return attn::IndexerTopKOp::create(b, op->getLoc(), rt, op->getOperand(0), op->getOperand(1),
                                     op->getOperand(2), candidates,
                                     /*start=*/Value(), b.getI64IntegerAttr(ratio.getInt()),
                                     b.getI64IntegerAttr(topk.getInt()), f64(b, scale),
                                     blockSize ? b.getI64IntegerAttr(blockSize.getInt())
                                               : IntegerAttr())
      .getResult();
}

} // namespace

void raiseH20DomainOp(OpBuilder &b, Operation *op) {
  b.setInsertionPoint(op);
  if (auto n = dyn_cast<ox::H20SinkAttentionOp>(op)) {
    raiseAttention(b, op, n.getScaleAttr(), n.getWindowAttr());
  } else if (auto n = dyn_cast<ox::H20SparseSinkAttentionOp>(op)) {
    raiseAttention(b, op, n.getScaleAttr(), n.getWindowAttr());
  } else if (auto n = dyn_cast<ox::H20IndexerTopKOp>(op)) {
    RankedTensorType rt = rankedOrWarn(op, op->getResult(0));
    if (!rt || !allRanked(op))
      return;
    op->getResult(0).replaceAllUsesWith(
        indexerTopK(b, op, rt, n.getRatioAttr(), n.getTopkAttr(), n.getScaleAttr(), Value(), IntegerAttr()));
  } else if (auto n = dyn_cast<ox::H20IndexerTopKInCandidatesOp>(op)) {
    RankedTensorType rt = rankedOrWarn(op, op->getResult(0));
    if (!rt || !allRanked(op))
      return;
    op->getResult(0).replaceAllUsesWith(indexerTopK(b, op, rt, n.getRatioAttr(), n.getTopkAttr(),
                                                    n.getScaleAttr(), op->getOperand(3),
                                                    n.getBlockSizeAttr()));
  } else if (auto n = dyn_cast<ox::H20IndexerTopKCandidatesOp>(op)) {
    RankedTensorType rt = rankedOrWarn(op, op->getResult(0));
    RankedTensorType ct = rt ? rankedOrWarn(op, op->getResult(1)) : RankedTensorType();
    if (!rt || !ct || !allRanked(op))
      return;
    op->getResult(0).replaceAllUsesWith(
        indexerTopK(b, op, rt, n.getRatioAttr(), n.getTopkAttr(), n.getScaleAttr(), Value(), IntegerAttr()));
    auto c = attn::IndexerCandidatesOp::create(
        b, op->getLoc(), ct, op->getOperand(0), op->getOperand(1), op->getOperand(2),
        /*start=*/Value(), b.getI64IntegerAttr(n.getRatioAttr().getInt()),
        b.getI64IntegerAttr(n.getBlocksAttr().getInt()),
        b.getI64IntegerAttr(n.getBlockSizeAttr().getInt()), f64(b, n.getScaleAttr()));
    op->getResult(1).replaceAllUsesWith(c.getResult());
  }
}

} // namespace h20
