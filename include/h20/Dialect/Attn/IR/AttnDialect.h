//===- AttnDialect.h - the attn dialect -------------------------*- C++ -*-===//
#ifndef H20_DIALECT_ATTN_IR_ATTNDIALECT_H
#define H20_DIALECT_ATTN_IR_ATTNDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "h20/Dialect/Attn/IR/AttnDialect.h.inc"
#include "h20/Dialect/Attn/IR/AttnEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "h20/Dialect/Attn/IR/AttnAttrs.h.inc"

#define GET_OP_CLASSES
#include "h20/Dialect/Attn/IR/AttnOps.h.inc"

#endif // H20_DIALECT_ATTN_IR_ATTNDIALECT_H
