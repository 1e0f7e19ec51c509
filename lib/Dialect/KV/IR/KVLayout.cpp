//===- KVLayout.cpp - byte strides and offsets of a KV cache -------------===//
#include "h20/Dialect/KV/IR/KVLayout.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;

std::optional<h20::kv::LayoutPlan>
h20::kv::planLayout(CacheType type, std::optional<int64_t> capacity) {
  SmallVector<int64_t> shape(type.getShape());
  if (ShapedType::isDynamic(shape[3])) {
    if (!capacity)
      return std::nullopt;
    shape[3] = *capacity;
  }
  unsigned bits = type.getElementType().getIntOrFloatBitWidth();
  if (bits % 8)
    return std::nullopt;
  LayoutPlan plan;
  plan.elementBytes = bits / 8;
  ArrayRef<int64_t> order = type.getLayout().getOrder();
  int64_t align = type.getLayout().getAlign();
  // Innermost row, padded to the alignment.
  int64_t inner = order[4];
  int64_t rowBytes;
  if (llvm::MulOverflow(shape[inner], plan.elementBytes, rowBytes))
    return std::nullopt;
  plan.rowBytes = llvm::alignTo(rowBytes, align);
  plan.strides[inner] = plan.elementBytes;
  int64_t step = plan.rowBytes; // bytes per step of the next-outer dim
  for (int k = 3; k >= 0; --k) {
    int64_t d = order[k];
    plan.strides[d] = step;
    if (llvm::MulOverflow(step, shape[d], step))
      return std::nullopt;
  }
  plan.totalBytes = step;
  int64_t elements = 1;
  for (int64_t s : shape)
    if (llvm::MulOverflow(elements, s, elements))
      return std::nullopt;
  plan.paddingBytes = plan.totalBytes - elements * plan.elementBytes;
  return plan;
}
