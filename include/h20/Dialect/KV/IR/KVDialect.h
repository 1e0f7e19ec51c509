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

#define GET_ATTRDEF_CLASSES
#include "h20/Dialect/KV/IR/KVAttrs.h.inc"
#define GET_TYPEDEF_CLASSES
#include "h20/Dialect/KV/IR/KVTypes.h.inc"
#define GET_OP_CLASSES
#include "h20/Dialect/KV/IR/KVOps.h.inc"

#endif // H20_DIALECT_KV_IR_KVDIALECT_H
