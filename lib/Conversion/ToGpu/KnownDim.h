//===- KnownDim.h - a tensor's dim size from its producer -------*- C++ -*-===//
#ifndef H20_LIB_CONVERSION_TOGPU_KNOWNDIM_H
#define H20_LIB_CONVERSION_TOGPU_KNOWNDIM_H

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"

#include <optional>

namespace h20 {

/// The size of dim `k` of `v` as an OpFoldResult when it can be read off
/// `v`'s producer without building IR (a static dim; tensor.empty's sizes;
/// tensor.reshape by a tensor.from_elements shape; tensor.expand_shape's
/// output shape; a destination-style op's init), else nothing.
inline std::optional<mlir::OpFoldResult> knownDim(mlir::Value v, int64_t k) {
  using namespace mlir;
  auto t = cast<RankedTensorType>(v.getType());
  if (!t.isDynamicDim(k))
    return OpFoldResult(IntegerAttr::get(IndexType::get(v.getContext()), t.getDimSize(k)));
  Operation *def = v.getDefiningOp();
  if (auto e = dyn_cast_or_null<tensor::EmptyOp>(def))
    return e.getMixedSizes()[k];
  if (auto r = dyn_cast_or_null<tensor::ReshapeOp>(def))
    if (auto shape = r.getShape().getDefiningOp<tensor::FromElementsOp>())
      return OpFoldResult(shape.getElements()[k]);
  if (auto x = dyn_cast_or_null<tensor::ExpandShapeOp>(def))
    return x.getMixedOutputShape()[k];
  if (auto d = dyn_cast_or_null<DestinationStyleOpInterface>(def))
    return knownDim(d.getDpsInitOperand(cast<OpResult>(v).getResultNumber())->get(), k);
  return std::nullopt;
}

} // namespace h20

#endif // H20_LIB_CONVERSION_TOGPU_KNOWNDIM_H
