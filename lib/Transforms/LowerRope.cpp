//===- LowerRope.cpp - attn.rope -> attn.rope_table + attn.rope_apply ----===//
#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/Attn/IR/RopeMath.h"
#include "h20/Transforms/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

namespace h20 {
#define GEN_PASS_DEF_LOWERROPE
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;
using namespace h20;

namespace {

struct LowerRopePass : h20::impl::LowerRopeBase<LowerRopePass> {
  using LowerRopeBase::LowerRopeBase;

  void runOnOperation() override {
    if (maxPositions <= 0) {
      getOperation().emitError("max-positions must be positive");
      return signalPassFailure();
    }
    SmallVector<attn::RopeOp> ropes;
    getOperation().walk([&](attn::RopeOp op) { ropes.push_back(op); });
    for (attn::RopeOp op : ropes) {
      OpBuilder b(op);
      Location loc = op.getLoc();
      int64_t rd = static_cast<int64_t>(op.getRotaryDim()), half = rd / 2;
      int64_t block = rope::tableBlock(maxPositions);
      int64_t rows = (maxPositions + block - 1) / block;
      auto f32 = b.getF32Type();
      auto coarseType = RankedTensorType::get({2, rows, half}, f32);
      auto fineType = RankedTensorType::get({2, block, half}, f32);
      // Dynamic NTK: the prompt length is the positions' sequence dim.
      Value seqLen;
      if (op.getScaling() == attn::RopeScaling::dynamic_ntk)
        seqLen = tensor::DimOp::create(b, loc, op.getPositions(), 1);
      auto table = attn::RopeTableOp::create(
          b, loc, coarseType, fineType, seqLen, op.getThetaAttr(), op.getRotaryDimAttr(),
          op.getScalingAttr(), op.getFactorAttr(), op.getOriginalMaxPositionsAttr(),
          op.getBetaFastAttr(), op.getBetaSlowAttr(), op.getMscaleAttr(),
          op.getMscaleAllDimAttr(), op.getAttentionFactorAttr(), op.getLowFreqFactorAttr(),
          op.getHighFreqFactorAttr(), b.getI64IntegerAttr(maxPositions),
          b.getI64IntegerAttr(block), b.getStringAttr("two_level"), op.getInvFreqAttr());
      auto apply = attn::RopeApplyOp::create(
          b, loc, op.getType(), op.getInput(), op.getPositions(), table.getCoarse(),
          table.getFine(), op.getRotaryDimAttr(), op.getInterleavedAttr(),
          b.getI64IntegerAttr(block));
      op.getResult().replaceAllUsesWith(apply.getResult());
      op.erase();
    }
  }
};

} // namespace
