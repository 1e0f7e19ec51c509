//===- MergeKernelModules.cpp - one gpu.module for every generated kernel -===//
//
// gpu-kernel-outlining makes one gpu.module per kernel; the runtime loads
// one PTX module for all of them. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "h20/Conversion/Passes.h"
#include "h20/Conversion/StructuralKey.h"

#include "llvm/ADT/StringMap.h"


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
    // Kernel name (= its old module's) -> the kernel launches now use: the
    // first of the structurally identical ones. Layers of one kind produce
    // the same kernels, so the PTX (and ptxas' time) grows with the number
    // of distinct layer kinds, not with depth.
    llvm::StringMap<std::string> target;
    llvm::StringMap<std::string> firstWithBody;
    for (gpu::GPUModuleOp m : mods) {
      StringRef name = m.getName();
      for (Operation &op : llvm::make_early_inc_range(m.getBody()->getOperations())) {
        auto f = dyn_cast<gpu::GPUFuncOp>(op);
        if (!f)
          continue;
        f.setName("h20_kernel");
        std::string body = h20::structuralKey(f);
        auto [it, inserted] = firstWithBody.try_emplace(body, name.str());
        target[name] = it->second;
        if (!inserted) {
          f.erase();
          continue;
        }
        f.setName(name);
        op.moveBefore(merged.getBody(), merged.getBody()->end());
      }
    }
    // One walk for every launch (one per module would be quadratic in the
    // number of kernels: minutes for a 40-layer model).
    module.walk([&](gpu::LaunchFuncOp l) {
      auto it = target.find(l.getKernelModuleName().getValue());
      if (it != target.end())
        l.setKernelAttr(SymbolRefAttr::get(b.getStringAttr(moduleName),
                                           {FlatSymbolRefAttr::get(b.getStringAttr(it->second))}));
    });
    for (gpu::GPUModuleOp m : mods)
      m.erase();
  }
};

} // namespace
