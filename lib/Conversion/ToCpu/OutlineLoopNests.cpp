//===- OutlineLoopNests.cpp - one function per top-level loop nest --------===//
//
// Keeps the CPU target's LLVM functions small: LLVM's optimisation and code
// generation are superlinear in the size of one function. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "h20/Conversion/Passes.h"
#include "h20/Conversion/StructuralKey.h"

#include "mlir/Dialect/LLVMIR/LLVMAttrs.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"

namespace h20 {
#define GEN_PASS_DEF_OUTLINELOOPNESTS
#include "h20/Conversion/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {

struct OutlineLoopNestsPass : h20::impl::OutlineLoopNestsBase<OutlineLoopNestsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    outlined.clear();
    for (func::FuncOp func : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (func.isExternal() || func.isPrivate())
        continue;
      int next = 0;
      for (Operation &op : llvm::make_early_inc_range(func.getBody().front()))
        if (isa<scf::ForOp, scf::ParallelOp>(op) && op.getNumResults() == 0 && large(&op))
          outline(&op, func, symbols, next);
    }
  }

  /// Outlined functions by structuralKey, module-wide.
  llvm::StringMap<func::FuncOp> outlined;

  bool large(Operation *nest) {
    int64_t n = 0;
    nest->walk([&](Operation *) { ++n; });
    return n >= minOps;
  }

  /// Replaces `nest` with a call of a new function that holds it.
  void outline(Operation *nest, func::FuncOp parent, SymbolTable &symbols, int &next) {
    MLIRContext *ctx = nest->getContext();
    // What the nest uses from above: in its regions and as its own
    // operands (bounds, steps). Constants are cloned, the rest passed.
    llvm::SetVector<Value> above;
    getUsedValuesDefinedAbove(nest->getRegions(), above);
    above.insert(nest->operand_begin(), nest->operand_end());
    SmallVector<Value> args;
    SmallVector<Operation *> constants;
    for (Value v : above) {
      Operation *def = v.getDefiningOp();
      if (def && def->hasTrait<OpTrait::ConstantLike>())
        constants.push_back(def);
      else
        args.push_back(v);
    }
    SmallVector<Type> types;
    for (Value v : args)
      types.push_back(v.getType());
    OpBuilder b(parent);
    b.setInsertionPointAfter(parent);
    auto fn = func::FuncOp::create(b, nest->getLoc(), "", b.getFunctionType(types, {}));
    Block *body = fn.addEntryBlock();
    OpBuilder inner = OpBuilder::atBlockBegin(body);
    IRMapping map;
    for (auto [v, a] : llvm::zip(args, body->getArguments()))
      map.map(v, a);
    for (Operation *c : constants)
      inner.clone(*c, map);
    inner.clone(*nest, map);
    func::ReturnOp::create(inner, nest->getLoc());
    // A nest equal to one outlined before (same argument types, same
    // operations: the layers and experts of a model repeat theirs) calls
    // that function: LLVM optimises and compiles each distinct nest once.
    // Keyed while still unnamed and without attributes.
    std::string key = h20::structuralKey(fn);
    auto [it, fresh] = outlined.try_emplace(key, fn);
    if (!fresh) {
      fn.erase();
      fn = it->second;
    } else {
      std::string name;
      do
        name = (parent.getName() + "_loop" + llvm::Twine(next++)).str();
      while (symbols.lookup(name));
      fn.setName(name);
      fn.setPrivate();
      // Internal: not exported from the shared object; noinline: LLVM
      // would fold it back into one huge function.
      fn->setAttr("llvm.linkage", LLVM::LinkageAttr::get(ctx, LLVM::Linkage::Internal));
      fn->setAttr("passthrough", b.getArrayAttr({b.getStringAttr("noinline")}));
      symbols.insert(fn);
    }
    OpBuilder call(nest);
    func::CallOp::create(call, nest->getLoc(), fn, args);
    nest->erase();
  }
};

} // namespace
