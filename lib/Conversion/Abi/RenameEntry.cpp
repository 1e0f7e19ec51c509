//===- RenameEntry.cpp - the graph function as the target's entry point ---===//
//
// The manifest keeps the ONNX interface names; the code only needs a known
// entry symbol. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "h20/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace h20 {
#define GEN_PASS_DEF_RENAMEENTRY
#include "h20/Conversion/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {

struct RenameEntryPass : h20::impl::RenameEntryBase<RenameEntryPass> {
  using Base::Base;

  void runOnOperation() override {
    auto funcs = llvm::to_vector(getOperation().getOps<func::FuncOp>());
    if (funcs.size() != 1) {
      getOperation().emitError("h20-rename-entry: expected exactly one function (the graph), "
                               "found ")
          << funcs.size();
      return signalPassFailure();
    }
    func::FuncOp func = funcs.front();
    MLIRContext *ctx = func.getContext();
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      func.setArgAttrs(i, DictionaryAttr::get(ctx));
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      func.setResultAttrs(i, DictionaryAttr::get(ctx));
    func.setName(entryName);
  }
};

} // namespace
