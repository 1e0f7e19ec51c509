//===- OnnxIndexingToLinalg.h - element-indexed onnx ops to loops -*- C++ -*-===//
//
// GatherElements (a linalg.generic reading data at computed indices),
// ScatterElements and TopK (scf.for loop nests over tensors). The loop-nest
// lowerings run in order, one element at a time: the CPU target runs them;
// the GPU target refuses them before lowering (see GpuTarget.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef H20_LIB_CONVERSION_TOLINALG_ONNXINDEXINGTOLINALG_H
#define H20_LIB_CONVERSION_TOLINALG_ONNXINDEXINGTOLINALG_H

#include "h20/Dialect/Onnx/IR/OnnxDialect.h"

#include "mlir/IR/Builders.h"

namespace h20::lowering {

/// output[i] = data[i with i[axis] replaced by indices[i]] (ONNX
/// GatherElements; negative indices count from the end, out-of-range ones
/// are clamped into the tensor).
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
lowerGatherElements(mlir::OpBuilder &b, onnx::GatherElementsOp op);

/// data, then updates[i] written (or combined by the reduction) at i with
/// i[axis] replaced by indices[i], in row-major order of i (ONNX
/// ScatterElements).
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
lowerScatterElements(mlir::OpBuilder &b, onnx::ScatterElementsOp op);

/// Values and int64 Indices of the K best elements along the axis, best
/// first, ties to the lower index: per row, K scans of the row, scan j
/// picking the best element that ranks after pick j-1 (O(K * N) per row, no
/// scratch memory) (ONNX TopK).
mlir::FailureOr<llvm::SmallVector<mlir::Value>> lowerTopK(mlir::OpBuilder &b,
                                                          onnx::TopKOp op);

} // namespace h20::lowering

#endif // H20_LIB_CONVERSION_TOLINALG_ONNXINDEXINGTOLINALG_H
