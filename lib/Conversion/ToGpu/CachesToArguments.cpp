//===- CachesToArguments.cpp - KV caches become kept function arguments ---===//
//
// A chunked prefill writes every chunk's K/V rows into caches that outlive
// the chunk: on the GPU target they are function arguments (state buffers
// of the step program), not temporaries of one call. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "h20/Conversion/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace h20 {
#define GEN_PASS_DEF_CACHESTOARGUMENTS
#include "h20/Conversion/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {

struct CachesToArgumentsPass : h20::impl::CachesToArgumentsBase<CachesToArgumentsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<tensor::EmptyOp> caches;
    func.walk([&](tensor::EmptyOp e) {
      if (e->hasAttr("h20.kv_cache"))
        caches.push_back(e);
    });
    if (caches.empty())
      return;
    Block &entry = func.getBody().front();
    for (tensor::EmptyOp e : caches) {
      BlockArgument arg = entry.addArgument(e.getType(), e.getLoc());
      e.getResult().replaceAllUsesWith(arg);
      e.erase();
    }
    func.setType(FunctionType::get(func.getContext(), entry.getArgumentTypes(),
                                   func.getResultTypes()));
    for (unsigned i = func.getNumArguments() - caches.size(); i < func.getNumArguments(); ++i)
    {
      func.setArgAttr(i, bufferization::BufferizationDialect::kWritableAttrName,
                      BoolAttr::get(func.getContext(), true));
      // What the host program binds as a state buffer.
      func.setArgAttr(i, "h20.kv_cache", UnitAttr::get(func.getContext()));
    }
  }
};

} // namespace
