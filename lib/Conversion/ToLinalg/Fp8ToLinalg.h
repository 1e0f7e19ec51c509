//===- Fp8ToLinalg.h - block-scaled FP8 linears as library calls -*- C++ -*-===//
#ifndef H20_LIB_CONVERSION_TOLINALG_FP8TOLINALG_H
#define H20_LIB_CONVERSION_TOLINALG_FP8TOLINALG_H

#include "h20/Dialect/Onnx/IR/OnnxDialect.h"

#include "mlir/IR/Builders.h"

namespace h20::lowering {

/// `library_call`s of the GPU target's block-scaled FP8 linear:
/// h20_fp8_quantize (ins X [M, K] of f32/f16/bf16; outs Xq [M, K]
/// f8E4M3FN and its scales Xs [ceil(K / 128), M] f32, M fastest: one per
/// 1 x 128 block of a row) and h20_gemm_fp8 (ins Xq, Xs, W [N, K] f8E4M3FN,
/// Scale [ceil(N / 128), kp] f32 with kp = ceil(K / 128) rounded up to a
/// multiple of 4, zero-padded; outs Y [M, N] of X's type).
/// Both carry kFp8Attrs: block_n, block_k (i64), and the marks of a query-row
/// split (attn::copyRowSplit).
inline constexpr llvm::StringLiteral kFp8QuantizeLibraryCall = "h20_fp8_quantize";
inline constexpr llvm::StringLiteral kFp8GemmLibraryCall = "h20_gemm_fp8";
inline constexpr llvm::StringLiteral kFp8Attrs = "h20.fp8";

/// onnx.h20.BlockScaledMatMul (X [..., K], W [N, K] f8E4M3FN, Scale
/// [ceil(N / 128), ceil(K / 128)] f32 -> Y [..., N]; formula in OnnxOps.td)
/// as the two carrier generics above, X's leading dims collapsed into M and
/// expanded again on Y. GPU target only (the CPU target imports the
/// function body). Scale rows whose K-block count is not a multiple of 4
/// are copied into zero-padded rows (a tensor.insert_slice into a filled
/// tensor), as cuBLASLt reads them. Blocks other than 128 x 128, or K or N
/// not multiples of 16 (FP8 rows of whole 16-byte units), keep it off the
/// FP8 GEMM: a warning naming the node, then W dequantised into a
/// temporary of Y's type and an ordinary h20_gemm; `dequantize` (h20-opt
/// --fp8-gemm=dequantize) takes that path for every op, without warning. Fails with an error
/// naming the node unless W and Scale are static of matching shapes and X
/// / Y are f32, f16 or bf16 of one type.
mlir::FailureOr<mlir::Value> lowerBlockScaledMatMulToLibraryCalls(mlir::OpBuilder &b,
                                                                  onnx::H20BlockScaledMatMulOp op,
                                                                  bool dequantize = false);

} // namespace h20::lowering

#endif // H20_LIB_CONVERSION_TOLINALG_FP8TOLINALG_H
