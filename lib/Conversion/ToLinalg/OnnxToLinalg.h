//===- OnnxToLinalg.h - onnx ops to linalg/tensor/arith/math ----*- C++ -*-===//
#ifndef H20_LIB_CONVERSION_TOLINALG_ONNXTOLINALG_H
#define H20_LIB_CONVERSION_TOLINALG_ONNXTOLINALG_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"

namespace h20::lowering {

/// Lowers one onnx op (operands already lowered) at `b`'s insertion point;
/// returns the values replacing its results, or failure after an error on
/// the op naming what is unsupported. onnx.Weight is handled by the caller.
/// `parallelForms` (the GPU target): TopK and ScatterElements as parallel
/// generics (OnnxIndexingToLinalg.h) instead of sequential loop nests.
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
lowerOnnxOp(mlir::OpBuilder &b, mlir::Operation *op, bool parallelForms = false);

} // namespace h20::lowering

#endif // H20_LIB_CONVERSION_TOLINALG_ONNXTOLINALG_H
