//===- OnnxDialect.h - the onnx dialect -------------------------*- C++ -*-===//
#ifndef H20_DIALECT_ONNX_IR_ONNXDIALECT_H
#define H20_DIALECT_ONNX_IR_ONNXDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "h20/Dialect/Onnx/IR/OnnxDialect.h.inc"

namespace h20::onnx {
/// Checks that `op` has between minIn and maxIn operands and between minOut
/// and maxOut results (-1: unbounded), with a message naming the counts.
llvm::LogicalResult verifyArity(mlir::Operation *op, int minIn, int maxIn,
                                int minOut, int maxOut);
} // namespace h20::onnx

#define GET_OP_CLASSES
#include "h20/Dialect/Onnx/IR/OnnxOps.h.inc"

#include "h20/Dialect/Onnx/IR/OnnxVerifiers.h"

#endif // H20_DIALECT_ONNX_IR_ONNXDIALECT_H
