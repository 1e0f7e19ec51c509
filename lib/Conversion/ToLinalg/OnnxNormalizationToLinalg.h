//===- OnnxNormalizationToLinalg.h - onnx normalizations to linalg -*- C++ -*-===//
#ifndef H20_LIB_CONVERSION_TOLINALG_ONNXNORMALIZATIONTOLINALG_H
#define H20_LIB_CONVERSION_TOLINALG_ONNXNORMALIZATIONTOLINALG_H

#include "h20/Dialect/Onnx/IR/OnnxDialect.h"

#include "mlir/IR/Builders.h"

namespace h20::lowering {

/// ONNX LayerNormalization-17 (X, Scale, B) -> (Y, Mean, InvStdDev), per
/// the operator spec (https://onnx.ai/onnx/operators/onnx__LayerNormalization.html;
/// onnx/reference/ops/op_layer_normalization.py).
/// X: rank r >= 1, float (f16, bf16, f32, f64); the normalized dims are
/// [axis, r) (`axis` default -1, negative counts from the back). Scale
/// (required) and B (optional) broadcast to X's shape, numpy-style from the
/// right (usually they are X.shape[axis:]).
///   Y (X's shape and dtype) = (X - mean) * InvStdDev * Scale + B
///   Mean = mean of X over the normalized dims
///   InvStdDev = 1 / sqrt(mean of (X - Mean)^2 + epsilon)  (epsilon 1e-5)
/// Mean and InvStdDev have X's shape with the normalized dims 1 (outputs 1
/// and 2, each optional) and their result's dtype. The variance takes two
/// passes (the mean first, then the squared deviations from it), over data
/// shifted by the first element of each group: x = 1e4 + noise keeps the
/// noise's digits, where E[x^2] - E[x]^2, or a mean rounded to float32 and
/// subtracted, lose them. Arithmetic is in float32 (float64 for float64
/// inputs or stash_type = 11; other stash types are refused).
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
lowerLayerNormalization(mlir::OpBuilder &b, onnx::LayerNormalizationOp op);

} // namespace h20::lowering

#endif // H20_LIB_CONVERSION_TOLINALG_ONNXNORMALIZATIONTOLINALG_H
