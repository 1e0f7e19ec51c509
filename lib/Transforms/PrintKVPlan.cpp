//===- PrintKVPlan.cpp - test only: print KV cache byte-offset plans -----===//
#include "h20/Dialect/KV/IR/KVLayout.h"
#include "h20/Transforms/Passes.h"

#include "llvm/Support/raw_ostream.h"

namespace h20 {
#define GEN_PASS_DEF_PRINTKVPLAN
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {
struct PrintKVPlanPass : h20::impl::PrintKVPlanBase<PrintKVPlanPass> {
  using PrintKVPlanBase::PrintKVPlanBase;

  void runOnOperation() override {
    getOperation().walk([&](h20::kv::AllocOp alloc) {
      h20::kv::CacheType type = alloc.getCache().getType();
      std::optional<int64_t> cap;
      if (capacity > 0)
        cap = capacity;
      auto plan = h20::kv::planLayout(type, cap);
      llvm::raw_ostream &os = llvm::outs();
      os << "kv plan for " << type << "\n";
      if (!plan) {
        os << "  no plan (dynamic capacity without --capacity, or overflow)\n";
        return;
      }
      os << "  element_bytes " << plan->elementBytes << " row_bytes " << plan->rowBytes << "\n";
      os << "  strides_bytes [" << plan->strides[0] << ", " << plan->strides[1] << ", "
         << plan->strides[2] << ", " << plan->strides[3] << ", " << plan->strides[4] << "]\n";
      for (int64_t l = 0; l < type.numLayers(); ++l)
        for (int64_t k = 0; k < type.getShape()[1]; ++k)
          os << "  layer " << l << (k ? " V" : " K") << " offset " << plan->offset(l, k, 0, 0, 0)
             << "\n";
      os << "  total_bytes " << plan->totalBytes << " padding_bytes " << plan->paddingBytes
         << "\n";
    });
  }
};
} // namespace
