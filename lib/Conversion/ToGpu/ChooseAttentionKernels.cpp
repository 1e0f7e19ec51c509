//===- ChooseAttentionKernels.cpp - one kernel choice per attention, in IR -===//
//
// Before, the GPU target decided an attention's route in several places:
// a walk that marked the ops to decompose, the host program (which chose
// the variant again, with the tile hint), and an environment variable
// (H20_ATTENTION_KERNEL). This pass decides once and records the decision;
// later code only reads it. See Passes.td.
//
//===----------------------------------------------------------------------===//
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

/// Whether the attention kernels can run `op` apart from its element type
/// and head dims (chooseAttentionVariant checks those): no mask or sink
/// operand, no window without causal masking, no top-left causal alignment
/// with S_q != S_kv (the kernels are bottom-right), static batch and head
/// counts of at most 65535, static head dims.
bool kernelsCanRun(h20::attn::AttentionOp op) {
  auto q = cast<RankedTensorType>(op.getQuery().getType());
  auto k = cast<RankedTensorType>(op.getKey().getType());
  auto v = cast<RankedTensorType>(op.getValue().getType());
  if (op.getMask() || op.getSink() || (op.getWindow() && !op.getCausal()))
    return false;
  if (op.getCausal() && op.getAlignment() == h20::attn::CausalAlignment::top_left &&
      (q.isDynamicDim(2) || k.isDynamicDim(2) || q.getDimSize(2) != k.getDimSize(2)))
    return false;
  for (int64_t d : {q.getDimSize(0), q.getDimSize(1)})
    if (ShapedType::isDynamic(d) || d > 65535)
      return false;
  return !q.isDynamicDim(3) && !v.isDynamicDim(3);
}

int dtypeOf(Type e) { return e.isF32() ? 0 : e.isF16() ? 1 : e.isBF16() ? 2 : -1; }

struct ChooseAttentionKernelsPass
    : h20::impl::ChooseAttentionKernelsBase<ChooseAttentionKernelsPass> {
  using ChooseAttentionKernelsBase::ChooseAttentionKernelsBase;

  void runOnOperation() override {
    if (kernel != "auto" && kernel != "mma") {
      getOperation().emitError("h20-choose-attention-kernels: kernel must be auto or mma, got '")
          << kernel << "'";
      return signalPassFailure();
    }
    auto family =
        kernel == "mma" ? h20::AttentionKernelFamily::Mma : h20::AttentionKernelFamily::Auto;
    getOperation().walk([&](h20::attn::AttentionOp op) {
      Builder b(op.getContext());
      auto q = cast<RankedTensorType>(op.getQuery().getType());
      auto v = cast<RankedTensorType>(op.getValue().getType());
      int dtype = dtypeOf(q.getElementType());
      std::optional<h20::AttentionVariant> variant;
      if (dtype >= 0 && kernelsCanRun(op)) {
        int64_t hintM = 0, hintN = 0;
        if (auto t = op->getAttrOfType<h20::hw::TilesAttr>("h20.tiles")) {
          hintM = t.getBlockM();
          hintN = t.getBlockN();
        }
        variant = h20::chooseAttentionVariant(dtype, q.getDimSize(3), v.getDimSize(3), hintM,
                                              hintN, nullptr, family);
      }
      if (!variant) {
        op->setAttr("h20.decompose", b.getUnitAttr());
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
