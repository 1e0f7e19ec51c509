//===- ChooseAttentionKernels.cpp - one kernel choice per attention, in IR -===//
//
// Before, the GPU target decided an attention's route in several places:
// a walk that marked the ops to decompose, the host program (which chose
// the variant again, with the tile hint), and an environment variable
// (H20_ATTENTION_KERNEL). This pass decides once and records the decision;
// later code only reads it. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "h20/Analysis/TargetDescription.h"
#include "h20/Conversion/Passes.h"
#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/H20/IR/H20Dialect.h"
#include "h20/Target/AttentionKernel.h"

#include "mlir/IR/Builders.h"

namespace h20 {
#define GEN_PASS_DEF_CHOOSEATTENTIONKERNELS
#include "h20/Conversion/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {

/// Why the attention kernels cannot run `op` apart from its element type
/// and head dims (chooseAttentionVariant checks those), or "" when they
/// can: they take no mask or sink operand, no window without causal
/// masking, no top-left causal alignment with S_q != S_kv (the kernels are
/// bottom-right), only static batch and head counts of at most 65535 and
/// static head dims.
std::string whyNoKernel(h20::attn::AttentionOp op) {
  auto q = cast<RankedTensorType>(op.getQuery().getType());
  auto k = cast<RankedTensorType>(op.getKey().getType());
  auto v = cast<RankedTensorType>(op.getValue().getType());
  if (op.getMask())
    return "a mask operand (the kernels take causal / window attributes only)";
  if (op.getSink())
    return "a sink operand";
  if (op.getWindow() && !op.getCausal())
    return "a window without causal masking";
  if (op.getCausal() && op.getAlignment() == h20::attn::CausalAlignment::top_left &&
      (q.isDynamicDim(2) || k.isDynamicDim(2) || q.getDimSize(2) != k.getDimSize(2)))
    return "top-left causal alignment with S_q != S_kv (the kernels are bottom-right)";
  for (int64_t d : {q.getDimSize(0), q.getDimSize(1)})
    if (ShapedType::isDynamic(d) || d > 65535)
      return "a dynamic or > 65535 batch or head count";
  if (q.isDynamicDim(3) || v.isDynamicDim(3))
    return "a dynamic head dim";
  return "";
}

int dtypeOf(Type e) { return e.isF32() ? 0 : e.isF16() ? 1 : e.isBF16() ? 2 : -1; }

std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

struct ChooseAttentionKernelsPass
    : h20::impl::ChooseAttentionKernelsBase<ChooseAttentionKernelsPass> {
  using ChooseAttentionKernelsBase::ChooseAttentionKernelsBase;

  void runOnOperation() override {
    if (kernel != "auto" && kernel != "mma") {
      getOperation().emitError("h20-choose-attention-kernels: kernel must be auto or mma, got '")
          << kernel << "'";
      return signalPassFailure();
    }
    const h20::TargetDescription *desc = h20::findTarget(target);
    if (!desc || desc->computeCapability <= 0) {
      getOperation().emitError("h20-choose-attention-kernels: unknown GPU target '")
          << target << "'";
      return signalPassFailure();
    }
    // The indexer's persistent grid: two CTAs per SM.
    getOperation().walk([&](Operation *op) {
      if (!isa<h20::attn::IndexerTopKOp, h20::attn::IndexerCandidatesOp>(op))
        return;
      Builder b(op->getContext());
      op->setAttr("h20.kernel", b.getDictionaryAttr({b.getNamedAttr(
                                    "ctas", b.getI64IntegerAttr(2 * desc->sms))}));
    });
    auto family =
        kernel == "mma" ? h20::AttentionKernelFamily::Mma : h20::AttentionKernelFamily::Auto;
    getOperation().walk([&](h20::attn::AttentionOp op) {
      Builder b(op.getContext());
      auto q = cast<RankedTensorType>(op.getQuery().getType());
      auto v = cast<RankedTensorType>(op.getValue().getType());
      int dtype = dtypeOf(q.getElementType());
      std::string why = dtype < 0 ? "element type " + typeName(q.getElementType()) +
                                        " (the kernels take f32, f16, bf16)"
                                  : whyNoKernel(op);
      std::optional<h20::AttentionVariant> variant;
      if (why.empty()) {
        int64_t hintM = 0, hintN = 0;
        if (auto t = op->getAttrOfType<h20::hw::TilesAttr>("h20.tiles")) {
          hintM = t.getBlockM();
          hintN = t.getBlockN();
        }
        std::string error;
        variant = h20::chooseAttentionVariant(dtype, q.getDimSize(3), v.getDimSize(3), hintM,
                                              hintN, &error, family);
        if (!variant)
          why = error.empty() ? "no kernel variant for these head dims" : error;
      }
      if (!variant) {
        // The reason stays in the IR: `--emit=linalg` and the compile log
        // say which attention left the fast path and why.
        op->setAttr("h20.decompose", b.getStringAttr(why));
        return;
      }
      const char *kind = variant->kind == 1 ? "wgmma" : variant->dtype == 0 ? "fma" : "mma";
      op->setAttr("h20.kernel",
                  b.getDictionaryAttr({b.getNamedAttr("kind", b.getStringAttr(kind)),
                                       b.getNamedAttr("block_m", b.getI64IntegerAttr(variant->blockM)),
                                       b.getNamedAttr("block_n", b.getI64IntegerAttr(variant->blockN)),
                                       b.getNamedAttr("threads", b.getI64IntegerAttr(variant->threads)),
                                       b.getNamedAttr("stages", b.getI64IntegerAttr(variant->stages)),
                                       b.getNamedAttr("schedule",
                                                      b.getI64IntegerAttr(variant->schedule))}));
    });
  }
};

} // namespace
