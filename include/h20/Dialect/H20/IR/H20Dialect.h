//===- H20Dialect.h - target-level attributes of h20 ------------*- C++ -*-===//
#ifndef H20_DIALECT_H20_IR_H20DIALECT_H
#define H20_DIALECT_H20_IR_H20DIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"

#include "h20/Dialect/H20/IR/H20Dialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "h20/Dialect/H20/IR/H20Attrs.h.inc"

#endif // H20_DIALECT_H20_IR_H20DIALECT_H
