//===- OnnxIndexingToLinalg.h - element-indexed onnx ops to loops -*- C++ -*-===//
//
// GatherElements (a linalg.generic reading data at computed indices),
// ScatterElements and TopK (scf.for loop nests over tensors, which the CPU
// target runs, and parallel generics, one output element each, which the
// GPU target maps onto threads).
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

/// ScatterElements as one parallel linalg.generic over the output (the GPU
/// target's form): output element p starts as data[p] and scans the index
/// positions that share p's other coordinates in ascending axis order,
/// applying every update whose (clamped) index is p's — the same result as
/// the row-major loop nest, one thread per element. Index positions beyond
/// data's dims on a non-axis dim (invalid ONNX) are dropped here, while
/// lowerScatterElements clamps them onto the last row.
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
lowerScatterElementsParallel(mlir::OpBuilder &b, onnx::ScatterElementsOp op);

/// TopK as one parallel linalg.generic over the outputs (the GPU target's
/// form): output j of a row makes picks 0..j by scans of the row, exactly
/// as lowerTopK does, so each element is independent (O(j * N) work for
/// output j; meant for small K, e.g. MoE routing).
mlir::FailureOr<llvm::SmallVector<mlir::Value>> lowerTopKParallel(mlir::OpBuilder &b,
                                                                  onnx::TopKOp op);

} // namespace h20::lowering

#endif // H20_LIB_CONVERSION_TOLINALG_ONNXINDEXINGTOLINALG_H
