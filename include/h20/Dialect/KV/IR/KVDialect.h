//===- KVDialect.h - the kv dialect -----------------------------*- C++ -*-===//
#ifndef H20_DIALECT_KV_IR_KVDIALECT_H
#define H20_DIALECT_KV_IR_KVDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypeInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "h20/Dialect/KV/IR/KVDialect.h.inc"

namespace h20::kv {
/// Whether a KV cache may hold elements of `t`: f16, bf16, f32, f8E4M3FN,
/// or i32 / i64 (token values, e.g. DeepSeek-V4.1 Engram's ids).
inline bool isCacheElementType(mlir::Type t) {
  return mlir::isa<mlir::Float16Type, mlir::BFloat16Type, mlir::Float32Type,
                   mlir::Float8E4M3FNType>(t) ||
         t.isSignlessInteger(32) || t.isSignlessInteger(64);
}
} // namespace h20::kv

#define GET_ATTRDEF_CLASSES
#include "h20/Dialect/KV/IR/KVAttrs.h.inc"
#define GET_TYPEDEF_CLASSES
#include "h20/Dialect/KV/IR/KVTypes.h.inc"
#define GET_OP_CLASSES
#include "h20/Dialect/KV/IR/KVOps.h.inc"

#endif // H20_DIALECT_KV_IR_KVDIALECT_H
