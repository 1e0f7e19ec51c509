//===- RopeParams.h - rope::Params of attn.rope / attn.rope_table -*- C++ -*-===//
#ifndef H20_DIALECT_ATTN_IR_ROPEPARAMS_H
#define H20_DIALECT_ATTN_IR_ROPEPARAMS_H

#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/Attn/IR/RopeMath.h"

namespace h20::attn {

/// The frequency parameters carried by `op` (attn.rope or attn.rope_table).
template <typename OpT> rope::Params ropeParams(OpT op) {
  rope::Params p;
  p.theta = op.getTheta().convertToDouble();
  p.rotaryDim = static_cast<int64_t>(op.getRotaryDim());
  p.scaling = static_cast<rope::Scaling>(static_cast<int>(op.getScaling()));
  auto f = [](std::optional<llvm::APFloat> a) -> std::optional<double> {
    if (a)
      return a->convertToDouble();
    return std::nullopt;
  };
  p.factor = f(op.getFactor()).value_or(1.0);
  if (auto o = op.getOriginalMaxPositions())
    p.originalMaxPositions = static_cast<int64_t>(*o);
  p.betaFast = f(op.getBetaFast());
  p.betaSlow = f(op.getBetaSlow());
  p.mscale = f(op.getMscale());
  p.mscaleAllDim = f(op.getMscaleAllDim());
  p.attentionFactor = f(op.getAttentionFactor());
  p.lowFreqFactor = f(op.getLowFreqFactor());
  p.highFreqFactor = f(op.getHighFreqFactor());
  if (auto fr = op.getInvFreq())
    p.invFreq.assign(fr->begin(), fr->end());
  return p;
}

} // namespace h20::attn

#endif // H20_DIALECT_ATTN_IR_ROPEPARAMS_H
