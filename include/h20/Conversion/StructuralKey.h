//===- StructuralKey.h - a print of an op that only equal ops share -*- C++ -*-===//
//
// h20-outline-loop-nests (CPU) and h20-outline-kernels (GPU) keep one
// copy of code the layers of a model repeat, comparing candidates by this
// print.
//
//===----------------------------------------------------------------------===//
#ifndef H20_CONVERSION_STRUCTURALKEY_H
#define H20_CONVERSION_STRUCTURALKEY_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/OperationSupport.h"

#include <limits>
#include <string>

namespace h20 {

/// `op` printed in generic form, regions included: two ops print alike only
/// when they are the same computation. The command line's printing options
/// must not reach it, so every flag that could make different ops print
/// alike (an elision limit for constants, --mlir-print-skip-regions) or
/// equal ones differently (locations, location-derived names) is set here.
/// Local scope: the printer does not walk the enclosing module for names.
inline std::string structuralKey(mlir::Operation *op) {
  std::string key;
  llvm::raw_string_ostream os(key);
  mlir::OpPrintingFlags flags;
  flags.printGenericOpForm()
      .elideLargeElementsAttrs(std::numeric_limits<int64_t>::max())
      .enableDebugInfo(false)
      .skipRegions(false)
      .printNameLocAsPrefix(false)
      .useLocalScope();
  op->print(os, flags);
  return key;
}

} // namespace h20

#endif // H20_CONVERSION_STRUCTURALKEY_H
