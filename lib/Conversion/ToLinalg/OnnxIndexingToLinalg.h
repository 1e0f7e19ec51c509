//===- OnnxIndexingToLinalg.h - element-indexed onnx ops to loops -*- C++ -*-===//
//
// GatherElements and GatherND (linalg.generics reading data at computed
// indices), ScatterElements and TopK (scf.for loop nests over tensors, which
// the CPU target runs, and parallel generics, one output element each, which
// the GPU target maps onto threads), and the position-dependent CumSum and
// Trilu (generics over output positions; one form for every target).
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

/// ONNX GatherND-13 (https://onnx.ai/onnx/operators/onnx__GatherND.html):
/// data of rank r (any dtype), int64 (or int32) indices of rank q >= 1
/// whose last dim m is static, 1 <= m <= r - b, with b = batch_dims
/// (default 0, b < min(q, r); the first b dims of indices and data match).
/// output (data's dtype) has shape indices.shape[:-1] + data.shape[b+m:]:
///   output[i_0..i_{q-2}, j...] =
///     data[i_0..i_{b-1}, indices[i_0..i_{q-2}, 0..m-1], j...]
/// A negative index counts from the end of its data dim; ONNX leaves
/// indices outside [-d, d) undefined and h20 clamps them into the dim.
/// One parallel generic over the output.
mlir::FailureOr<llvm::SmallVector<mlir::Value>> lowerGatherND(mlir::OpBuilder &b,
                                                              onnx::GatherNDOp op);

/// ONNX CumSum-14 (https://onnx.ai/onnx/operators/onnx__CumSum.html): x of
/// rank r >= 1 (float or signed integer), axis a constant 0-d or 1-element
/// int32/int64 tensor in [-r, r) (negative counts from the back). output
/// (x's shape and dtype): out[..i..] = sum over j along the axis of x[..j..]
/// for j <= i (exclusive = 1: j < i; reverse = 1: j >= i, resp. j > i).
/// Lowered as a masked reduction, quadratic along the axis: every output
/// element sums the whole axis with select(mask(j, i), x, 0), reduction dim
/// innermost. That is one independent row reduction per output element,
/// which the GPU target's loop mapping runs as is (a block per element);
/// a sequential scan would carry a dependence between output elements that
/// it cannot map. 16-bit floats accumulate in float32.
mlir::FailureOr<llvm::SmallVector<mlir::Value>> lowerCumSum(mlir::OpBuilder &b,
                                                            onnx::CumSumOp op);

/// ONNX Trilu-14 (https://onnx.ai/onnx/operators/onnx__Trilu.html): x of
/// rank >= 2 ([..., M, N], any M and N, any dtype), k an optional 0-d or
/// 1-element int64 tensor (default 0, read at run time, any value: beyond
/// the matrix it keeps everything or nothing). output (x's shape and
/// dtype): x[..., i, j] where j - i >= k (upper = 1, the default) or
/// j - i <= k (upper = 0), else 0. One parallel generic.
mlir::FailureOr<llvm::SmallVector<mlir::Value>> lowerTrilu(mlir::OpBuilder &b,
                                                           onnx::TriluOp op);

} // namespace h20::lowering

#endif // H20_LIB_CONVERSION_TOLINALG_ONNXINDEXINGTOLINALG_H
