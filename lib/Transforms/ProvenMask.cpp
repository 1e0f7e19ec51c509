//===- ProvenMask.cpp - what h20-analyze-masks proved about a mask -------===//
#include "h20/Transforms/ProvenMask.h"

#include "h20/Dialect/Onnx/IR/OnnxDialect.h"

#include "mlir/IR/Builders.h"

#include <cmath>

using namespace mlir;

void h20::ProvenMask::attachTo(Operation *op) const {
  Builder b(op->getContext());
  SmallVector<NamedAttribute> attrs{
      b.getNamedAttr("causal", b.getBoolAttr(causal)),
      b.getNamedAttr("alignment",
                     b.getStringAttr(attn::stringifyCausalAlignment(alignment)))};
  if (window)
    attrs.push_back(b.getNamedAttr("window", b.getI64IntegerAttr(*window)));
  op->setAttr(kAttrName, b.getDictionaryAttr(attrs));
}

std::optional<h20::ProvenMask> h20::ProvenMask::of(Value mask) {
  Operation *def = mask.getDefiningOp();
  if (!def)
    return std::nullopt;
  auto dict = def->getAttrOfType<DictionaryAttr>(kAttrName);
  if (!dict)
    return std::nullopt;
  ProvenMask m;
  auto causal = dict.getAs<BoolAttr>("causal");
  auto alignment = dict.getAs<StringAttr>("alignment");
  if (!causal || !alignment)
    return std::nullopt;
  m.causal = causal.getValue();
  auto a = attn::symbolizeCausalAlignment(alignment.getValue());
  if (!a)
    return std::nullopt;
  m.alignment = *a;
  if (auto w = dict.getAs<IntegerAttr>("window"))
    m.window = w.getInt();
  return m;
}

bool h20::isMinusInfinity(Value v) {
  auto c = v.getDefiningOp<onnx::ConstantOp>();
  if (!c)
    return false;
  auto attr = dyn_cast<DenseFPElementsAttr>(c.getValue());
  if (!attr || !attr.isSplat())
    return false;
  APFloat splat = attr.getSplatValue<APFloat>();
  double x = splat.convertToDouble();
  if (std::isinf(x))
    return x < 0;
  // transformers masks with torch.finfo(dtype).min: -65504 in float16,
  // about -3.4e38 in float32 and bfloat16.
  double lowest = APFloat::getLargest(splat.getSemantics(), /*Negative=*/true).convertToDouble();
  return x <= -3.0e38 || x <= lowest;
}

Value h20::visibleCondition(Value mask) {
  auto type = dyn_cast<ShapedType>(mask.getType());
  if (!type)
    return {};
  if (type.getElementType().isInteger(1))
    return mask;
  auto w = mask.getDefiningOp<onnx::WhereOp>();
  if (!w || !isMinusInfinity(w->getOperand(2)))
    return {};
  auto zero = w->getOperand(1).getDefiningOp<onnx::ConstantOp>();
  auto attr = zero ? dyn_cast<DenseFPElementsAttr>(zero.getValue()) : nullptr;
  if (!attr || !attr.isSplat() || !attr.getSplatValue<APFloat>().isZero())
    return {};
  return w->getOperand(0);
}
