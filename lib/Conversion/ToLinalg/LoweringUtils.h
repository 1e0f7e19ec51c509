//===- LoweringUtils.h - shared helpers of the linalg lowerings -*- C++ -*-===//
#ifndef H20_LIB_CONVERSION_TOLINALG_LOWERINGUTILS_H
#define H20_LIB_CONVERSION_TOLINALG_LOWERINGUTILS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"

#include <string>

namespace h20::lowering {

using BodyFn = llvm::function_ref<mlir::Value(mlir::OpBuilder &, mlir::Location,
                                              mlir::ValueRange)>;

/// Runtime size (index) of dim `k` of ranked tensor `v`.
mlir::Value dimOf(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v, int64_t k);

/// tensor.empty of `type` whose dynamic dims are taken from `dims` (one index
/// value per dim of `type`; static dims are ignored).
mlir::Value emptyTensor(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::RankedTensorType type, mlir::ValueRange dims);

/// A tensor of `type` filled with `value` (dynamic dims from `dims`).
mlir::Value filledTensor(mlir::OpBuilder &b, mlir::Location loc,
                         mlir::RankedTensorType type, mlir::ValueRange dims,
                         mlir::Value value);

/// Numpy-broadcast elementwise map: result[i] = body(operands[bcast(i)]).
/// Result dims come from `dims` when given, else from the operands (a dim
/// not statically 1).
mlir::Value elementwise(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::RankedTensorType resultType, mlir::ValueRange operands,
                        BodyFn body, mlir::ArrayRef<mlir::Value> dims = {});

/// Whether every operand of `op` broadcasts into `resultType` as
/// elementwise() maps it: ranked, of at most the result's rank, each static
/// dim equal to the result's or 1. Otherwise (a model whose declared output
/// shape contradicts its inputs) an error naming the node, and failure.
mlir::LogicalResult checkBroadcastsInto(mlir::Operation *op, mlir::RankedTensorType resultType);

/// Casts scalar `v` to element type `to` (float/int/bool conversions with
/// ONNX Cast semantics: float -> int truncates, int -> bool is != 0).
/// f8E4M3FN sources are decoded from their bits (decodeF8E4M3FN).
mlir::Value castScalar(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                       mlir::Type to);

/// f8E4M3FN scalar `v` as f32, exactly (NaN for S.1111.111).
mlir::Value decodeF8E4M3FN(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v);

/// Float constant of type `t`.
mlir::Value floatConst(mlir::OpBuilder &b, mlir::Location loc, mlir::Type t, double v);

/// " (node 'NAME')" for an op imported from ONNX node NAME, else "".
std::string nodeSuffix(mlir::Operation *op);

/// Emits "<op name> (node 'NAME'): <why>" on `op` and returns failure: how
/// a lowering says what it does not support.
mlir::LogicalResult unsupported(mlir::Operation *op, const llvm::Twine &why);

/// Identity/parallel iterator helpers.
llvm::SmallVector<mlir::utils::IteratorType> parallel(unsigned n);
/// One iterator per loop dim: reduction where `reduce` is true.
llvm::SmallVector<mlir::utils::IteratorType> iterators(llvm::ArrayRef<bool> reduce);

/// The arithmetic type of the reference decompositions: f64 for f64
/// inputs, else f32.
mlir::Type computeTypeFor(mlir::Type elt);

/// Indexing maps and iterators of a library-call carrier generic (a
/// linalg.generic the GPU target replaces by a routine): every operand gets
/// its own loop dims (the generic only carries the operands, it computes
/// nothing), the last `parallelDims` of them parallel (the results'), the
/// rest reductions.
void carrierIndexing(mlir::MLIRContext *ctx, mlir::ArrayRef<mlir::Value> operands,
                     unsigned parallelDims, llvm::SmallVector<mlir::AffineMap> &maps,
                     llvm::SmallVector<mlir::utils::IteratorType> &its);

} // namespace h20::lowering

#endif // H20_LIB_CONVERSION_TOLINALG_LOWERINGUTILS_H
