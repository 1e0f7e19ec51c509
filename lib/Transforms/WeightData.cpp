//===- WeightData.cpp - read the values behind onnx.Constant/Weight ------===//
#include "h20/Transforms/WeightData.h"

#include "h20/Dialect/Onnx/IR/OnnxDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace mlir;

std::optional<std::vector<double>>
h20::readFloatElements(Value v, int64_t first, int64_t count) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape() || first < 0 || count < 0 ||
      first + count > type.getNumElements())
    return std::nullopt;
  auto ft = dyn_cast<FloatType>(type.getElementType());
  if (!ft)
    return std::nullopt;
  std::vector<double> out;
  if (auto c = v.getDefiningOp<onnx::ConstantOp>()) {
    auto attr = dyn_cast<DenseFPElementsAttr>(c.getValue());
    if (!attr)
      return std::nullopt;
    auto values = attr.getValues<APFloat>();
    for (int64_t i = first; i < first + count; ++i)
      out.push_back(attr.isSplat() ? values[0].convertToDouble()
                                   : values[i].convertToDouble());
    return out;
  }
  auto w = v.getDefiningOp<onnx::WeightOp>();
  // A tensor-parallel slice's elements are not the file's in order.
  if (!w || !w.getFile() || !w.getOffset() || w->hasAttr("h20.shard"))
    return std::nullopt;
  auto module = w->getParentOfType<ModuleOp>();
  auto dir = module ? module->getAttrOfType<StringAttr>("onnx.model_dir") : nullptr;
  if (!dir)
    return std::nullopt;
  SmallString<256> path(dir.getValue());
  llvm::sys::path::append(path, *w.getFile());
  unsigned width = ft.getWidth() / 8;
  auto file = llvm::MemoryBuffer::getFileSlice(
      path, count * width, static_cast<uint64_t>(*w.getOffset()) + first * width);
  if (!file || (*file)->getBufferSize() != static_cast<size_t>(count * width))
    return std::nullopt;
  const char *p = (*file)->getBufferStart();
  for (int64_t i = 0; i < count; ++i) {
    uint64_t bits = 0;
    std::memcpy(&bits, p + i * width, width);
    out.push_back(APFloat(ft.getFloatSemantics(), APInt(ft.getWidth(), bits))
                      .convertToDouble());
  }
  return out;
}
