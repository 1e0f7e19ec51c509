//===- ChooseParallelPlan.cpp - the multi-GPU plan, chosen once, in IR ----===//
//
// Before, h20-opt's driver priced and chose the plan itself and handed it
// to the GPU target beside the IR. This pass chooses and records it
// (`h20.parallel`); h20-opt applies it (h20-tensor-parallel for "tensor")
// and the GPU target writes it into the manifest. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "h20/Analysis/TargetDescription.h"
#include "h20/Transforms/Passes.h"
#include "h20/Transforms/PrefillCostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"

namespace h20 {
#define GEN_PASS_DEF_CHOOSEPARALLELPLAN
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {

struct ChooseParallelPlanPass : h20::impl::ChooseParallelPlanBase<ChooseParallelPlanPass> {
  using ChooseParallelPlanBase::ChooseParallelPlanBase;

  /// Why h20-run's context parallelism cannot run `module`, or "": its
  /// ring moves dense K/V of attn.attention layers; DeepSeek-V4.1's sparse
  /// attention and indexers read rows of their own caches it does not
  /// exchange (their tensor / expert-parallel plan splits the experts).
  static std::string contextWhy(ModuleOp module) {
    bool sparse = false;
    module.walk([&](Operation *op) {
      if (isa<h20::attn::SparseAttentionOp, h20::attn::IndexerTopKOp,
              h20::attn::IndexerCandidatesOp>(op))
        sparse = true;
    });
    return sparse ? "context parallelism does not run DeepSeek-V4.1's sparse attention and "
                    "indexers (their caches of rows are not exchanged between ranks)"
                  : "";
  }

  /// The cost model's predictions of both plans (< 0: not possible or not
  /// priced; context parallelism only where `contextRuns`), and why tensor
  /// parallelism is not possible when it is not.
  LogicalResult price(ModuleOp module, const h20::TargetDescription &t, bool contextRuns,
                      double &contextMs, double &tensorMs, h20::PrefillPrediction &tp,
                      std::string &why) {
    OwningOpRef<ModuleOp> priced(cast<ModuleOp>(module->clone()));
    // Priced as it will be compiled: the last position's logits only, and
    // unit-gain norms before narrow GEMMs applied after them (attn.rms_scale,
    // a row kernel; the split does not touch them).
    PassManager pm(module.getContext());
    if (logitsLast)
      pm.addPass(h20::createLogitsLast());
    if (normScales)
      pm.addNestedPass<func::FuncOp>(h20::createNormScaleAfterMatMul());
    if (failed(pm.run(*priced)))
      return module.emitError("h20-choose-parallel-plan: the cost model could not apply "
                              "--logits=last or h20-norm-scale-after-matmul to the model");
    h20::PrefillWork work = h20::collectPrefillWork(*priced, tokens, elementBytes);
    contextMs = t.nvlinkBytesPerS > 0 && contextRuns
                    ? h20::predictContextParallel(work, t, gpus).totalMs
                    : -1;
    tensorMs = h20::predictTensorParallelOf(*priced, t, gpus, tokens, elementBytes, tp, why, chunk,
                                            attentionRows)
                   ? tp.totalMs
                   : -1;
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (gpus <= 1)
      return;
    const h20::TargetDescription *t = h20::findTarget(target);
    if (!t || t->computeCapability == 0) {
      module.emitError("h20-choose-parallel-plan: unknown GPU target '") << target << "'";
      return signalPassFailure();
    }
    if (plan != "auto" && plan != "context" && plan != "tensor") {
      module.emitError("--parallel must be auto, context or tensor, got '") << plan << "'";
      return signalPassFailure();
    }
    double contextMs = -1, tensorMs = -1;
    h20::PrefillPrediction tp;
    std::string why;
    const std::string noContext = contextWhy(module);
    if (failed(price(module, *t, noContext.empty(), contextMs, tensorMs, tp, why)))
      return signalPassFailure();
    // h20-run's context parallelism cuts the prompt into 2N equal chunks.
    const bool contextRuns = (gpus & (gpus - 1)) == 0;
    const std::string n = std::to_string(gpus);
    std::string chosen, chosenBy = plan == "auto" ? "cost model" : "user", note;
    if (plan == "context") {
      if (!noContext.empty()) {
        module.emitError("--parallel context: ") << noContext;
        return signalPassFailure();
      }
      if (!contextRuns) {
        module.emitError("--parallel context needs a power of two for --gpus (h20-run cuts "
                         "the prompt into 2N equal chunks), got ")
            << n;
        return signalPassFailure();
      }
      chosen = "context";
    } else if (plan == "tensor") {
      if (tensorMs < 0) {
        module.emitError("--parallel tensor: ") << why;
        return signalPassFailure();
      }
      chosen = "tensor";
    } else if (!contextRuns || !noContext.empty()) {
      const std::string ctx =
          noContext.empty() ? "context parallelism needs a power of two" : noContext;
      if (tensorMs < 0) {
        module.emitError("--gpus ")
            << n << ": " << ctx << ", and tensor parallelism is not possible: " << why;
        return signalPassFailure();
      }
      chosen = "tensor";
      note = ctx;
    } else {
      if (tensorMs < 0)
        note = "tensor parallelism is not possible: " + why;
      chosen = tensorMs >= 0 && (contextMs < 0 || tensorMs < contextMs) ? "tensor" : "context";
    }
    Builder b(module.getContext());
    SmallVector<NamedAttribute> fields{
        b.getNamedAttr("attention_rows", b.getBoolAttr(attentionRows)),
        b.getNamedAttr("chosen_by", b.getStringAttr(chosenBy)),
        b.getNamedAttr("context_ms", b.getF64FloatAttr(contextMs)),
        b.getNamedAttr("gpus", b.getI64IntegerAttr(gpus)),
        b.getNamedAttr("plan", b.getStringAttr(chosen)),
        b.getNamedAttr("tensor_ms", b.getF64FloatAttr(tensorMs)),
        b.getNamedAttr("tokens", b.getI64IntegerAttr(tokens))};
    if (!note.empty())
      fields.push_back(b.getNamedAttr("note", b.getStringAttr(note)));
    // Where one rank's predicted time goes, so a user (and the next kernel
    // work) sees what bounds the plan: kernels by kind, and the
    // all-reduces, which the model does not overlap.
    if (tensorMs >= 0)
      fields.push_back(b.getNamedAttr(
          "tensor_breakdown_ms",
          b.getDictionaryAttr(
              {b.getNamedAttr("all_reduce", b.getF64FloatAttr(tp.exposedCommMs)),
               b.getNamedAttr("attention", b.getF64FloatAttr(tp.attentionMs)),
               b.getNamedAttr("gemm", b.getF64FloatAttr(tp.gemmMs)),
               b.getNamedAttr("memory_bound", b.getF64FloatAttr(tp.memoryMs)),
               b.getNamedAttr("rows", b.getF64FloatAttr(tp.rowsMs))})));
    module->setAttr("h20.parallel", b.getDictionaryAttr(fields));
  }
};

} // namespace
