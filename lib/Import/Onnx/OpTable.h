//===- OpTable.h - which ONNX ops h20 imports, keyed by version -*- C++ -*-===//
#ifndef H20_LIB_IMPORT_ONNX_OPTABLE_H
#define H20_LIB_IMPORT_ONNX_OPTABLE_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace h20::onnx_import {

/// One supported ONNX operator version: nodes of (domain, opType) in a model
/// whose opset for `domain` is >= sinceVersion (and below the next entry's
/// sinceVersion) import as the op `mlirName`.
struct OpEntry {
  llvm::StringRef domain; ///< "" (ai.onnx) or "com.microsoft"
  llvm::StringRef opType;
  int64_t sinceVersion;
  llvm::StringRef mlirName;
};

/// The entry for (domain, opType) at `opset`: the one with the largest
/// sinceVersion <= opset, or null when h20 does not support it.
const OpEntry *lookupOp(llvm::StringRef domain, llvm::StringRef opType,
                        int64_t opset);

} // namespace h20::onnx_import

#endif // H20_LIB_IMPORT_ONNX_OPTABLE_H
