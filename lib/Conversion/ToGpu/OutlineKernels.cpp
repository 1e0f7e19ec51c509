//===- OutlineKernels.cpp - every gpu.launch into one gpu.module ----------===//
//
// Upstream gpu-kernel-outlining makes one gpu.module per kernel; the
// runtime loads one PTX module for all of them, and a 40-layer model has
// ~10^4 launches, so one module per kernel made every verification of the
// module quadratic (each launch's kernel is looked up by a linear scan of
// the module's symbols: a minute per verification). See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "h20/Conversion/Passes.h"
#include "h20/Conversion/StructuralKey.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Utils/GPUUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace h20 {
#define GEN_PASS_DEF_OUTLINEKERNELS
#include "h20/Conversion/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {

struct OutlineKernelsPass : h20::impl::OutlineKernelsBase<OutlineKernelsPass> {
  using OutlineKernelsBase::OutlineKernelsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::LaunchOp> launches;
    for (auto func : module.getOps<func::FuncOp>())
      func.walk([&](gpu::LaunchOp l) { launches.push_back(l); });
    if (launches.empty())
      return;
    SymbolTable symbols(module);
    if (Operation *taken = symbols.lookup(moduleName)) {
      taken->emitError("h20-outline-kernels: a symbol is already named '") << moduleName << "'";
      return signalPassFailure();
    }
    // Launches that name their own module or kernel (gpu.launch's
    // `module` / `function`) are not what this pass makes: refuse them
    // rather than rename them.
    for (gpu::LaunchOp l : launches)
      if (l.getModule() || l.getFunction()) {
        l.emitError("h20-outline-kernels: this launch names its own kernel module or "
                    "function; every kernel goes into '")
            << moduleName << "'";
        return signalPassFailure();
      }
    OpBuilder b(module.getContext());
    b.setInsertionPointToEnd(module.getBody());
    auto merged = gpu::GPUModuleOp::create(b, module.getLoc(), moduleName);
    // One symbol table for the kernel module (one per kernel would make the
    // pass quadratic in the number of distinct kernels).
    SymbolTable inMerged(merged);

    // Names as upstream outlining gives its modules: FUNC_kernel, then
    // FUNC_kernel_0, _1, ... (one counter), unique among the module's
    // symbols. Each launch takes a name, kept or not.
    llvm::StringSet<> used;
    for (Operation &op : module.getBody()->getOperations())
      if (auto name = op.getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName()))
        used.insert(name.getValue());
    unsigned counter = 0;
    auto uniqueName = [&](StringRef base) {
      std::string name = base.str();
      while (!used.insert(name).second)
        name = base.str() + "_" + std::to_string(counter++);
      return name;
    };

    // Kernels that print the same but for their name are kept once (the
    // first): the layers of one kind generate the same kernels, so the
    // module grows with the number of distinct layer kinds, not with depth.
    llvm::StringMap<gpu::GPUFuncOp> firstWithBody;
    for (gpu::LaunchOp launch : launches) {
      std::string name =
          uniqueName((launch->getParentOfType<func::FuncOp>().getName() + "_kernel").str());
      SmallVector<Value> operands;
      gpu::GPUFuncOp kernel = outlineKernelFunc(launch, "h20_kernel", operands);
      auto [it, inserted] = firstWithBody.try_emplace(h20::structuralKey(kernel), kernel);
      if (inserted) {
        kernel.setName(name);
        inMerged.insert(kernel);
        if (failed(cloneReferencedSymbols(kernel, symbols, inMerged)))
          return signalPassFailure();
      } else {
        kernel.erase();
        kernel = it->second;
      }
      OpBuilder at(launch);
      Value token = launch.getAsyncToken();
      auto call = gpu::LaunchFuncOp::create(
          at, launch.getLoc(), kernel, launch.getGridSizeOperandValues(),
          launch.getBlockSizeOperandValues(), launch.getDynamicSharedMemorySize(), operands,
          token ? token.getType() : Type(), launch.getAsyncDependencies(),
          launch.getClusterSizeOperandValues());
      launch.replaceAllUsesWith(call);
      launch.erase();
    }
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), b.getUnitAttr());
  }

  /// Copies the module-level symbols (`symbols`) that `kernel` uses, and
  /// those they use, into the kernel module (`inMerged`), as upstream
  /// outlining does into each kernel's own module.
  LogicalResult cloneReferencedSymbols(gpu::GPUFuncOp kernel, SymbolTable &symbols,
                                       SymbolTable &inMerged) {
    SmallVector<Operation *> worklist = {kernel};
    while (!worklist.empty()) {
      std::optional<SymbolTable::UseRange> uses =
          SymbolTable::getSymbolUses(worklist.pop_back_val());
      if (!uses)
        continue;
      for (SymbolTable::SymbolUse use : *uses) {
        StringRef name = use.getSymbolRef().getRootReference().getValue();
        // A launch inside a kernel already names the kernel module.
        if (name == moduleName || inMerged.lookup(name))
          continue;
        Operation *def = symbols.lookup(name);
        if (!def)
          return use.getUser()->emitError("h20-outline-kernels: a kernel uses '")
                 << name << "', which the module does not define";
        Operation *copy = def->clone();
        inMerged.insert(copy);
        worklist.push_back(copy);
      }
    }
    return success();
  }
};

} // namespace
