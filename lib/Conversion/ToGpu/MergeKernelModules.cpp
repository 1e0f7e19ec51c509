//===- MergeKernelModules.cpp - one gpu.module for every generated kernel -===//
//
// gpu-kernel-outlining makes one gpu.module per kernel; the runtime loads
// one PTX module for all of them. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "h20/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"

namespace h20 {
#define GEN_PASS_DEF_MERGEKERNELMODULES
#include "h20/Conversion/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {

struct MergeKernelModulesPass : h20::impl::MergeKernelModulesBase<MergeKernelModulesPass> {
  using MergeKernelModulesBase::MergeKernelModulesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    OpBuilder b(module.getContext());
    SmallVector<gpu::GPUModuleOp> mods(module.getOps<gpu::GPUModuleOp>());
    if (mods.empty())
      return;
    for (gpu::GPUModuleOp m : mods)
      if (m.getName() == moduleName) {
        m.emitError("h20-merge-kernel-modules: a gpu.module is already named '")
            << moduleName << "'";
        return signalPassFailure();
      }
    b.setInsertionPointToEnd(module.getBody());
    auto merged = gpu::GPUModuleOp::create(b, module.getLoc(), moduleName);
    b.setInsertionPointToStart(merged.getBody());
    for (gpu::GPUModuleOp m : mods) {
      StringRef name = m.getName();
      for (Operation &op : llvm::make_early_inc_range(m.getBody()->getOperations())) {
        if (auto f = dyn_cast<gpu::GPUFuncOp>(op)) {
          f.setName(name);
          op.moveBefore(merged.getBody(), merged.getBody()->end());
        }
      }
      module.walk([&](gpu::LaunchFuncOp l) {
        if (l.getKernelModuleName() == name)
          l.setKernelAttr(SymbolRefAttr::get(b.getStringAttr(moduleName),
                                             {FlatSymbolRefAttr::get(b.getStringAttr(name))}));
      });
      m.erase();
    }
  }
};

} // namespace
