//===- AttnToLinalg.h - reference decompositions of the attn ops -*- C++ -*-===//
#ifndef H20_LIB_CONVERSION_TOLINALG_ATTNTOLINALG_H
#define H20_LIB_CONVERSION_TOLINALG_ATTNTOLINALG_H

#include "h20/Dialect/Attn/IR/AttnDialect.h"

namespace h20::lowering {

/// Each returns the value replacing the op's result (built at `b`'s
/// insertion point), or failure after emitting an error on the op.
mlir::FailureOr<mlir::Value> lowerRmsNorm(mlir::OpBuilder &b, attn::RmsNormOp op);
mlir::FailureOr<mlir::Value> lowerRope(mlir::OpBuilder &b, attn::RopeOp op);
mlir::FailureOr<llvm::SmallVector<mlir::Value>> lowerRopeTable(mlir::OpBuilder &b,
                                                               attn::RopeTableOp op);
mlir::FailureOr<mlir::Value> lowerRopeApply(mlir::OpBuilder &b, attn::RopeApplyOp op);
mlir::FailureOr<mlir::Value> lowerAttention(mlir::OpBuilder &b, attn::AttentionOp op);

} // namespace h20::lowering

#endif // H20_LIB_CONVERSION_TOLINALG_ATTNTOLINALG_H
