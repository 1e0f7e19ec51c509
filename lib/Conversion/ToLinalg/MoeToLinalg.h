//===- MoeToLinalg.h - DeepSeek-V4.1's routed experts as a library call -*- C++ -*-===//
#ifndef H20_LIB_CONVERSION_TOLINALG_MOETOLINALG_H
#define H20_LIB_CONVERSION_TOLINALG_MOETOLINALG_H

#include "h20/Dialect/Onnx/IR/OnnxDialect.h"

#include "mlir/IR/Builders.h"

namespace h20::lowering {

/// `library_call` of the GPU target's routed-experts routine (routing and
/// permutation kernels of lib/Target/GPU/kernels/moe.cuh around grouped
/// GEMMs) and the attribute it carries: a dictionary of top_k (i64),
/// scaling, limit and temp (f32), the op's attributes, and weights
/// ("float" or "mxfp4").
inline constexpr llvm::StringLiteral kRoutedExpertsLibraryCall = "h20_routed_experts";
inline constexpr llvm::StringLiteral kRoutedExpertsAttrs = "h20.routed_experts";

/// onnx.h20.RoutedExperts (X [N, Dm], Router [Dm, E], Bias [E], W1 [E, Dm,
/// I], W3 [E, Dm, I], W2 [E, I, Dm] -> Y [N, Dm]; models/deepseek_v41/
/// h20_ops.py states the formula) as one `h20_routed_experts` carrier
/// generic (see carrierIndexing): ins the six operands, outs an empty Y.
/// onnx.h20.RoutedExpertsMxfp4 (W1/W3 [E, I, Dm / 2], W2 [E, Dm, I / 2]
/// packed e2m1 bytes, each followed by its ue8m0 scales [E, out, in / 32],
/// all i8) the same with its nine operands and "weights" = "mxfp4" in the
/// attribute dictionary (else "float"). Only for the GPU target; fails with
/// an error naming the node when the operands are not of those shapes, X,
/// Router, float expert weights and Y do not share one float type, the
/// MXFP4 bytes are not i8, Dm or I is not a multiple of 32, or top_k is not
/// in [1, E]. There is no CPU lowering: h20-opt imports the function body
/// for the CPU target instead.
mlir::FailureOr<mlir::Value> lowerRoutedExpertsToLibraryCall(mlir::OpBuilder &b,
                                                             mlir::Operation *op);

} // namespace h20::lowering

#endif // H20_LIB_CONVERSION_TOLINALG_MOETOLINALG_H
