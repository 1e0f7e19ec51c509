//===- ProvenMask.cpp - what h20-analyze-masks proved about a mask -------===//
#include "h20/Transforms/ProvenMask.h"

#include "mlir/IR/Builders.h"

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
