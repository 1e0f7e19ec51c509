//===- H20Dialect.cpp - target-level attributes of h20 -------------------===//
#include "h20/Dialect/H20/IR/H20Dialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace h20::hw;

#include "h20/Dialect/H20/IR/H20Dialect.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "h20/Dialect/H20/IR/H20Attrs.cpp.inc"

void H20Dialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "h20/Dialect/H20/IR/H20Attrs.cpp.inc"
      >();
}
