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

/// The location the importer gives an op made from ONNX node `name` of type
/// `opType`: NameLoc(name, FusedLoc([file], metadata = opType)), so every
/// later diagnostic can name the node and its op type (describeNode).
mlir::Location nodeLocation(mlir::Location file, llvm::StringRef name, llvm::StringRef opType);

/// "node 'NAME' (op 'TYPE')" ("unnamed node (op 'TYPE')" when the ONNX node
/// has no name) for a location made by nodeLocation (found
/// through fused and call-site wrappers), "" for any other location.
std::string describeNode(mlir::Location loc);
} // namespace h20::onnx

#define GET_OP_CLASSES
#include "h20/Dialect/Onnx/IR/OnnxOps.h.inc"

#include "h20/Dialect/Onnx/IR/OnnxVerifiers.h"

#endif // H20_DIALECT_ONNX_IR_ONNXDIALECT_H
